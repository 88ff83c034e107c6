"""One exception hierarchy for everything the exporter can refuse or fail at.

Every error carries, as data, the stage that failed, the input and axis it concerns, the
user's source line when torch reported one, and what to do next. The message is built from
those fields so it reads the same in a terminal, a log and a notebook.
"""

from __future__ import annotations

import copy
import enum
import traceback
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .axis import Axis
from .compat.formats import traceback_frames
from .frames import source_label, user_frame
from .presentation import Presentable

__all__ = [
    "ErrorSession",
    "ExportError",
    "SpecError",
    "CaptureError",
    "DecomposeError",
    "TranslateError",
    "OptimizeError",
    "SerializeError",
    "AnalysisOutcome",
    "Failure",
    "Outcome",
    "Status",
    "user_source_line",
    "first_line",
]


class Status(str, enum.Enum):
    """The one status vocabulary: every word a stage, an analysis or a check writes is a member.
    A ``str`` (``status == "ok"`` works, and tables show the plain word).

    - Where a piece of work is, or how it ended: ``ok``, ``failed``, ``skipped``, ``cancelled``,
      ``running``, ``not run``.
    - A check's verdict (a verified case, a contract check, a compared node): ``pass``,
      ``fail``, ``warning``; ``error`` (a contract check that fails; a case whose inputs
      could not be built; verification that could not run).
    - Verification as a whole (:class:`~exporter.verify.VerifyResult`): ``passed``,
      ``failed`` (the ONNX model is wrong), ``not_verified`` (nothing was wrong, but not every
      dim group was compared at another size), ``error``, ``cancelled``.
    - Why a case or an output did not pass: ``ort_error`` (onnxruntime refused the input or
      crashed), ``eager_error`` (PyTorch refused the input: nothing was checked),
      ``shape_mismatch``, ``dtype_mismatch``, ``missing``, ``mismatch`` (another shape or
      dtype), ``not compared``.
    - What an optimizer pass did: ``changed``, ``no change``, ``broken`` (its checks failed),
      ``skipped``, ``failed``.

    :meth:`of` reads a word as its member."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    RUNNING = "running"
    NOT_RUN = "not run"
    PASS = "pass"
    FAIL = "fail"
    WARNING = "warning"
    ERROR = "error"
    PASSED = "passed"
    NOT_VERIFIED = "not_verified"
    ORT_ERROR = "ort_error"
    EAGER_ERROR = "eager_error"
    SHAPE_MISMATCH = "shape_mismatch"
    DTYPE_MISMATCH = "dtype_mismatch"
    MISSING = "missing"
    MISMATCH = "mismatch"
    NOT_COMPARED = "not compared"
    CHANGED = "changed"
    NO_CHANGE = "no change"
    BROKEN = "broken"

    def __str__(self) -> str:
        return self.value

    @classmethod
    def of(cls, word: Any) -> Status | None:
        """The member a status word is (``"passed"`` → ``PASSED``); None for a word that is
        not a status."""
        try:
            return cls(str(getattr(word, "value", word)).strip().lower())
        except ValueError:
            return None


class AnalysisOutcome:
    """The :class:`Outcome` of an analysis that fails or is cancelled as a whole: a result with
    ``error`` (the first line, None when it ran), ``failure`` (the :class:`Failure`),
    ``cancelled`` and ``seconds`` gets its :attr:`status` from them here."""

    __slots__ = ()

    error: str | None
    failure: Failure | None
    cancelled: bool
    seconds: float

    @property
    def status(self) -> Status:
        """``cancelled``, ``failed`` (see ``error`` and ``failure``) or ``ok``."""
        return Status.CANCELLED if self.cancelled else Status.FAILED if self.error else Status.OK


class ErrorSession(Protocol):
    """What :attr:`ExportError.session` is: the :class:`~exporter.Session` of the failed export
    (every stage that ran, the failed one, the fixes torch suggests, and
    ``apply_suggested_fixes()``). Named here by what a
    handler reads, so the error module stays below the session."""

    @property
    def stages(self) -> tuple[Any, ...]: ...

    @property
    def failed_stage(self) -> Any: ...

    @property
    def suggested_fixes(self) -> Any: ...


class ExportError(Exception):
    """Base of every error raised by the exporter.

    Attributes:
        stage: pipeline stage that failed ("spec", "capture", "decompose", ...).
        input: the input path concerned (``x``, ``cache.0.key``), if any.
        axis: the axis of that input, if any.
        source: the user's ``file:line`` (and code text) that caused it, if known.
        hint: what to do next, often the exact code to write.
        session: the :class:`~exporter.Session` with every stage that ran, when there was one.
    """

    stage: str = "export"

    def __init__(
        self,
        message: str,
        *,
        input: str | None = None,
        axis: int | None = None,
        source: str | None = None,
        hint: str | None = None,
        session: ErrorSession | None = None,
        stage: str | None = None,
    ) -> None:
        if stage is not None:
            self.stage = stage
        self.reason = message
        self.input = input
        self.axis = axis
        self.source = source
        self.hint = hint
        self.session = session
        super().__init__(self._format())

    @property
    def where(self) -> str | None:
        if self.input is None:
            return None
        return self.input if self.axis_key is None else self.axis_key.label

    @property
    def axis_key(self) -> Axis | None:
        """The :class:`~exporter.axis.Axis` concerned, when both input and axis are known."""
        return None if self.input is None or self.axis is None else Axis(self.input, self.axis)

    def _format(self) -> str:
        return _report_text(self.stage, self.reason, where=self.where, source=self.source, hint=self.hint)

    def with_session(self, session: ErrorSession) -> ExportError:
        """A copy of this error that carries ``session``: a stage's error is cached and shared
        by derived sessions, so raising it must not change (or lengthen the traceback of) the
        stored one."""
        clone = copy.copy(self)
        clone.args = self.args  # copy.copy rebuilds from args, which would format the message twice
        clone.session = session
        clone.__cause__ = self.__cause__
        clone.__traceback__ = None
        return clone


class SpecError(ExportError, ValueError):
    """The dim spec or the inputs are invalid; raised before any export starts."""

    stage = "spec"


class CaptureError(ExportError):
    """Every capture strategy failed to turn the model into an FX graph.

    Attributes:
        library_text: torch's own error text, whole (the message is the exporter's reading of it).
        rejected_ranges: when torch rejected the dim spec, the ranges of strict dims its fixes
            narrow, each citing its guard (``exporter.shapes.violations.RejectedRange``).
        suggested_fixes: torch's lines under "Suggested fixes:", as it wrote them.
    """

    stage = "capture"
    library_text: str = ""
    rejected_ranges: tuple[Any, ...] = ()
    suggested_fixes: tuple[str, ...] = ()


class DecomposeError(ExportError):
    stage = "decompose"


class TranslateError(ExportError):
    stage = "translate"


class OptimizeError(ExportError):
    stage = "optimize"


class SerializeError(ExportError, OSError):
    stage = "save"


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's message, prefixed by its type."""
    text = str(exc).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def user_source_line(exc: BaseException) -> str | None:
    """Best guess of the user's ``file:line in func: code`` that raised ``exc``.

    torch often names the user frame in the message ("File x.py, line 12, in forward");
    otherwise the innermost traceback frame (cause chain included) that is the user's, by
    :func:`exporter.compat.frames.is_user_file` (installed model code such as transformers counts)."""
    named = user_frame(traceback_frames(str(exc)))
    if named is not None:
        filename, line, func, code = named
        return f"{source_label(filename, line)} in {func}: {code}"
    cause: BaseException | None = exc
    frames: list[traceback.FrameSummary] = []
    while cause is not None:
        frames.extend(traceback.extract_tb(cause.__traceback__))  # the cause's frames count as inner
        cause = cause.__cause__ or cause.__context__
    frame = user_frame(frames)
    if frame is None:
        return None
    return f"{source_label(frame.filename, frame.lineno)} in {frame.name}: {(frame.line or '').strip()}"


@dataclass(frozen=True, repr=False)
class Failure(Presentable):
    """Why something failed, as data: the one record every result uses (stages, verify and its
    cases, benchmark, profile).

    Attributes:
        stage: where it failed (``capture``, ``verify``, ``benchmark``...).
        type: the exception's class name (``TorchRuntimeError``, ``InvalidArgument``).
        message: the exception's message (the reason alone for an :class:`ExportError`).
        hint: what to do next, when known.
        source: the user's ``file:line in func: code`` that caused it, when known.
        traceback: the formatted traceback, cause chain included ("" when not kept).
        library_text: the library's own error text, whole, when ``message`` is written by the
            exporter (a capture error: torch's "Not all values of seq = L['x'].size()[1] ..."
            said as "x.shape[1] (seq): sizes 1–4 take another branch ..."): what "torch
            said", to show folded; "" when there is none.
    """

    stage: str
    type: str
    message: str
    hint: str | None = None
    source: str | None = None
    traceback: str = ""
    library_text: str = ""

    @classmethod
    def from_exception(cls, exc: BaseException, stage: str | None = None, *, hint: str | None = None) -> Failure:
        """The record of ``exc``; an :class:`ExportError` keeps its own stage (a verification
        of a failed export fails at ``capture``), anything else is placed at ``stage``."""
        if isinstance(exc, ExportError):
            return cls(
                exc.stage, type(exc).__name__, exc.reason, hint or exc.hint, exc.source,
                "".join(traceback.format_exception(exc)), exc.library_text if isinstance(exc, CaptureError) else "",
            )
        return cls(
            stage or "export", type(exc).__name__, str(exc).strip(), hint, user_source_line(exc),
            "".join(traceback.format_exception(exc)),
        )

    @property
    def first_line(self) -> str:
        """``Type: first line of the message``: what a table cell shows."""
        line = next((ln.strip() for ln in self.message.splitlines() if ln.strip()), "")
        return f"{self.type}: {line}" if line else self.type

    def __str__(self) -> str:
        # An ExportError's message is already written for the user; another one's type matters.
        headline = self.message if self.type in _export_error_names() else self.first_line
        return _report_text(self.stage, headline, source=self.source, hint=self.hint)


@runtime_checkable
class Outcome(Protocol):
    """The envelope every stage and analysis result shares, so a front end shows any of them the
    same way: what happened (one :class:`Status`), why it failed (a :class:`Failure`, or None),
    and how long it took."""

    @property
    def status(self) -> Status: ...

    @property
    def failure(self) -> Failure | None: ...

    @property
    def seconds(self) -> float: ...


def _export_error_names() -> set[str]:
    names, pending = set(), [ExportError]
    while pending:
        cls = pending.pop()
        names.add(cls.__name__)
        pending.extend(cls.__subclasses__())
    return names


def _report_text(stage: str, headline: str, *, where: str | None = None, source: str | None = None,
                 hint: str | None = None) -> str:
    """How an error and a failure read: ``[stage] headline`` then input, location and fix lines."""
    lines = [f"[{stage}] {headline}"]
    if where:
        lines.append(f"  input: {where}")
    if source:
        lines.append(f"  at: {source}")
    if hint:
        lines.append("  fix: " + hint.replace("\n", "\n       "))
    return "\n".join(lines)
