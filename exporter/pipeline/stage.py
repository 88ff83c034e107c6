"""What a stage is: a small declared object, in the style of onnx-ir's passes.

A :class:`Stage` declares its ``name``, the stage whose output it ``consumes`` (``None``: the
user's model), what it ``produces``, and its cache ``key``: what, in the session's model,
spec and options (a :class:`StageContext`), its result depends on beyond the stage it
consumes. :meth:`Stage.run` never raises for a failure: success or failure it returns a
:class:`StageResult`. The stages, in order, are :data:`exporter.pipeline.stages.PIPELINE`.
"""

from __future__ import annotations

import abc
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ExportError, Failure, Status, first_line, user_source_line

if TYPE_CHECKING:
    from ..dims import DimSpec
    from ..events import CancelToken, Observer
    from ..inputs import BoundInputs
    from ..options import ExportOptions
    from .capture import CaptureAttempt
    from .pass_records import OptimizerPasses

__all__ = ["Stage", "StageContext", "StageResult", "run_guarded"]


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


@dataclass(frozen=True)
class StageContext:
    """What a stage may read besides the previous stage's output: the user's model (never
    changed), the example inputs bound to ``forward``, the dim spec and the export options."""

    model: Any
    inputs: BoundInputs
    spec: DimSpec
    options: ExportOptions


class Stage(abc.ABC):
    """One step of the pipeline. Subclasses declare the class attributes and implement
    :meth:`key` and :meth:`run`."""

    name: ClassVar[str]
    consumes: ClassVar[str | None]  # the stage whose output run() takes; None: the user's model
    produces: ClassVar[str]  # what the output is, in words

    @abc.abstractmethod
    def key(self, context: StageContext) -> tuple[Any, ...]:
        """What this stage's result depends on beyond the output it consumes (hashable)."""

    @abc.abstractmethod
    def run(self, context: StageContext, previous: Any, observer: Observer,
            cancel: CancelToken | None) -> StageResult:
        """This stage on ``previous`` (the consumed stage's output); never raises for a failure."""

    def __repr__(self) -> str:
        return f"<stage {self.name}: {self.consumes or 'model'} -> {self.produces}>"


def run_guarded(stage: str, error_type: type[ExportError], hint: str | Callable[[BaseException], str],
                work: Callable[[], Any]) -> StageResult:
    """Run ``work`` as ``stage``; a failure becomes ``error_type`` with ``hint`` (or the hint
    ``hint(exception)`` builds from what failed), unless it is an ExportError already."""
    start = time.perf_counter()
    try:
        output = work()
    except Exception as exc:  # noqa: BLE001 - any failure inside torch/onnxscript is data
        if isinstance(exc, ExportError):
            error = exc
        else:
            text = hint if isinstance(hint, str) else hint(exc)
            error = error_type(first_line(exc), source=user_source_line(exc), hint=text)
            error.__cause__ = exc
        return StageResult(stage, Status.FAILED, time.perf_counter() - start, error=error)
    return StageResult(stage, Status.OK, time.perf_counter() - start, output)
