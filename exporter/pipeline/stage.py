"""What a stage is: a small declared object, in the style of onnx-ir's passes.

A :class:`Stage` declares its ``name``, the stage whose output it ``consumes`` (``None``: the
user's model), what it ``produces``, and its cache ``key``: what, in the session's model,
spec and options (a :class:`StageContext`), its result depends on beyond the stage it
consumes. :meth:`Stage.run` never raises for a failure: success or failure it returns a
:class:`StageResult`. The stages, in order, are :data:`exporter.pipeline.stages.PIPELINE`.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import ExportError, Status, first_line, user_source_line
from .records import StageResult

if TYPE_CHECKING:
    from ..dims import DimSpec
    from ..events import CancelToken, Observer
    from ..inputs import BoundInputs
    from ..options import ExportOptions

__all__ = ["Stage", "StageContext", "StageResult", "run_guarded", "run_stage_guarded", "stage_error_type"]


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


# What to try when a stage stops on an error nothing in it expected, by stage.
_UNEXPECTED_HINTS = {
    "capture": "try another capture strategy (ExportOptions(strategy='strict') or 'draft')",
    "decompose": "try another opset (ExportOptions(opset_version=...))",
    "translate": "try another opset (ExportOptions(opset_version=...))",
    "optimize": "export with ExportOptions(optimize=False) to get the unoptimized model",
}


def stage_error_type(stage: str) -> type[ExportError]:
    """The :class:`~exporter.errors.ExportError` subclass of ``stage`` (``CaptureError`` for
    ``capture``...); ``ExportError`` itself for a stage without its own."""
    pending: list[type[ExportError]] = [ExportError]
    while pending:
        cls = pending.pop(0)
        if cls.__dict__.get("stage") == stage:
            return cls
        pending.extend(cls.__subclasses__())
    return ExportError


def run_stage_guarded(stage: str, work: Callable[[], StageResult]) -> StageResult:
    """``work()``: a stage's run. Whatever escapes it (an error outside the stage's own guard,
    a bug) becomes the stage's failure, never an exception out of ``Session.run``: an
    ExportError as it is, anything else as the stage's error type naming the cause, chained
    ``from`` it."""
    start = time.perf_counter()
    try:
        return work()
    except Exception as exc:  # noqa: BLE001 - a stage always returns a result (DESIGN principle 2)
        if isinstance(exc, ExportError):
            error = exc
        else:
            error = stage_error_type(stage)(
                f"stopped on an error it does not handle: {first_line(exc)}",
                source=user_source_line(exc),
                hint=f"{_UNEXPECTED_HINTS.get(stage, 'see the cause below')}; the whole traceback is the "
                     "error's __cause__ (report it if it is the exporter's own)",
                stage=stage,
            )
            error.__cause__ = exc
        return StageResult(stage, Status.FAILED, time.perf_counter() - start, error=error)


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
