"""What a stage hands back, as plain records: :class:`StageResult` (any stage) and
:class:`CaptureAttempt` (one capture strategy's try).

They sit below the stages and the observer (:mod:`exporter.events` names them in its hooks),
so this module imports neither.
"""

from __future__ import annotations

import functools
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..compat import formats
from ..errors import ExportError, Failure, Status, first_line

if TYPE_CHECKING:
    from .pass_records import OptimizerPasses

__all__ = ["CaptureAttempt", "StageResult"]


@dataclass(frozen=True)
class CaptureAttempt:
    """One try of one strategy."""

    strategy: str
    seconds: float
    program: Any = None  # torch.export.ExportedProgram on success
    error: BaseException | None = None
    skipped_reason: str | None = None
    guards: tuple[Any, ...] = ()  # _torch_compat.ShapeGuardEvent: shape guards torch added, in order
    # On failure: (model, args, kwargs, dynamic_shapes) as given to torch.
    context: Any = field(default=None, compare=False, repr=False)
    # model_state.StateReport: what the trace changed on the model (put back when it ended).
    model_state: Any = field(default=None, compare=False, repr=False)
    # Constraints torch's dim-constraint solver could not solve (sympy gave up), left as they were.
    unsolved: tuple[str, ...] = ()

    @property
    def success(self) -> bool:
        return self.program is not None

    @property
    def outcome(self) -> str:
        if self.skipped_reason:
            return "skipped"
        return "ok" if self.success else "failed"

    @property
    def first_error_line(self) -> str | None:
        if self.skipped_reason:
            return self.skipped_reason
        if self.error is not None and formats.is_data_dependent(self.error):  # "4*u1 < s70": torch's symbols
            return f"{type(self.error).__name__}: could not decide a data-dependent condition (on a value read from a tensor)"
        if self.error is not None and formats.is_constraint_violation(self.error):
            # torch's first line is "Constraints violated (seq)! For more information, run with
            # TORCH_LOGS=...": the capture error says what is violated, in the user's terms.
            return f"{type(self.error).__name__}: the dim spec was rejected (the capture error says why)"
        unflattenable = formats.unflattenable_text(self.error) if self.error is not None else None
        if unflattenable is not None:  # torch's line asks for a GitHub comment
            return f"{type(self.error).__name__}: {unflattenable}"
        return first_line(self.error) if self.error is not None else None

    @property
    def full_error(self) -> str | None:
        if self.error is None:
            return None
        return "".join(traceback.format_exception(self.error))

    def to_dict(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy,
            "outcome": self.outcome,
            "seconds": round(self.seconds, 4),
            "error": self.first_error_line,
        }


@dataclass(frozen=True)
class StageResult:
    """What one stage produced: its :class:`~exporter.errors.Status` (``ok``, ``failed``,
    ``skipped``, ``cancelled``), timing, output, and on failure the error to raise and its
    :class:`~exporter.errors.Failure` record. ``strategy`` is the capture strategy that
    produced a capture result."""

    name: str
    status: Status
    seconds: float
    output: Any = None
    error: ExportError | None = None
    attempts: tuple[CaptureAttempt, ...] = ()
    cached: bool = False
    detail: str = ""
    strategy: str | None = None
    # What torch / onnxscript printed or logged while the stage ran (a failed capture's partial
    # FX graph, draft export's banner): kept here instead of filling the notebook cell.
    library_output: str = ""
    # What the user should know about a stage that gave its output: the trace changed the
    # model (put back), the optimizer failed and the unoptimized model is used.
    warnings: tuple[str, ...] = ()
    # The optimize stage pass by pass, when it ran.
    passes: OptimizerPasses | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))

    @property
    def ok(self) -> bool:
        return self.status in (Status.OK, Status.SKIPPED, Status.WARNING)

    @functools.cached_property
    def failure(self) -> Failure | None:
        return Failure.from_exception(self.error, self.name) if self.error is not None else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "status": self.status.value,
            "seconds": round(self.seconds, 4),
            "cached": self.cached,
            "strategy": self.strategy,
            "detail": self.detail or (self.failure.first_line if self.failure else ""),
        }
