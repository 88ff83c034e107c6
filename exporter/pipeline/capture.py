"""The capture stage: the ways to turn an ``nn.Module`` into an ``ExportedProgram``.

Each strategy is a :class:`CaptureStrategy` subclass; :data:`STRATEGIES` is the ordered
registry ``strategy="auto"`` walks. Every call returns a :class:`CaptureAttempt` (success or
failure, with timing) so the session can show what was tried; :func:`capture` tries them in
turn. A failed capture's error names the first failure; the error a person can act on (the
exact new spec, the user's terms) is built by :mod:`exporter.diagnose`, which has the spec.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar

from ..compat import (
    clear_dim_marks,
    formats,
    onnx_capture_patches,
    record_shape_guards,
    size_oblivious_capture,
    tolerant_constraint_solver,
    unchanging_module_to,
)
from ..compat.compileable_vars import private_compileable_vars, slot_for_dynamo
from ..compat.shared_patch import choices_for_dynamo, compile_flags_in_this_job
from ..model_state import preserved
from ..model_twin import twin_of
from ..patches import applied
from ..errors import CaptureError, ExportError, Status, first_line, user_source_line
from .grown_example import capture_at_grown_example
from .records import CaptureAttempt, StageResult

if TYPE_CHECKING:
    from ..dims import DimSpec
    from ..events import CancelToken, Observer
    from ..inputs import BoundInputs

__all__ = [
    "CaptureAttempt",
    "CaptureStrategy",
    "NonStrictStrategy",
    "StrictStrategy",
    "DraftExportStrategy",
    "FxSymbolicTraceStrategy",
    "STRATEGIES",
    "get_strategy",
    "strategy_names",
    "capture",
    "suggested_fixes",
]


class CaptureStrategy(abc.ABC):
    """One way of capturing the FX graph. Subclasses implement :meth:`_capture`."""

    name: ClassVar[str]
    description: ClassVar[str]
    experimental: ClassVar[bool] = False
    strict: ClassVar[bool] = False  # traces bytecode with TorchDynamo (patched as torch.onnx does)
    rnn_while_loop: ClassVar[bool] = True  # LSTM/GRU traced as a while_loop under dynamic shapes

    def __init__(self, *, runtime_asserts: bool = False, patches: tuple[str, ...] = ()) -> None:
        self.runtime_asserts = runtime_asserts
        self.patches = patches  # exporter.patches names, entered around the capture

    @property
    def settings(self) -> dict[str, Any]:
        """Keyword arguments for torch.export. ``runtime_asserts`` is what torch.onnx.export
        does: a guard that narrows a dynamic dim (``seq != 1``, ``x.shape[0] == 3``) becomes a
        runtime assert, later dropped from the ONNX model, instead of rejecting the spec."""
        return {"prefer_deferred_runtime_asserts_over_guards": self.runtime_asserts}

    def __call__(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any) -> CaptureAttempt:
        from ..program_model import program_of  # imports torch

        start = time.perf_counter()
        given = program_of(model)
        if given is not None:  # an ExportedProgram given as the model: it is the capture
            return CaptureAttempt(self.name, time.perf_counter() - start, program=given)
        error: Exception | None = None
        unsolved: list[str] = []
        # The trace runs on a twin: a non-strict trace swaps the parameters and buffers for fake
        # tensors on the module objects, which a cell calling the user's module meanwhile would see.
        twin = twin_of(model)
        with record_shape_guards() as guards:
            # A trace can leave state on the module (transformers' longrope stores a FakeTensor
            # ``long_inv_freq``, which breaks the next export and eager run): put it back. One an
            # earlier trace left (torch.onnx.export's) is hidden from this one and put back.
            with preserved(twin, what=f"during capture ({self.name})", set_aside_trace_leftovers=True) as state:
                try:
                    # torch.onnx.export's capture patches: LSTM/GRU as a while_loop (a dynamic
                    # sequence stays dynamic), torch.jit.isinstance for dynamo; undone on exit.
                    # The model patches asked for replace idioms on the model's classes.
                    # A constraint sympy cannot solve stops torch's solver, not the export.
                    # A forward's ``submodule.to(dtype)`` that changes nothing does nothing.
                    # torch's is_compiling()/is_exporting() flags answer True in this job only, and
                    # transformers' CompileableContextVars keep the job's values apart.
                    with size_oblivious_capture(), tolerant_constraint_solver() as unsolved, onnx_capture_patches(
                        dynamic_shapes, strict=self.strict, rnn=self.rnn_while_loop
                    ), unchanging_module_to(), compile_flags_in_this_job(), private_compileable_vars(), \
                            applied(twin, self.patches):
                        program = self._capture(twin, args, kwargs, dynamic_shapes)
                except Exception as exc:  # noqa: BLE001 - every failure becomes data
                    program, error = None, exc
                finally:
                    clear_dim_marks(args, kwargs)  # a failed export leaves them on the inputs
        if error is not None:
            return CaptureAttempt(
                self.name, time.perf_counter() - start, error=error, guards=tuple(guards),
                context=(model, args, kwargs, dynamic_shapes), model_state=state, unsolved=tuple(unsolved),
            )
        return CaptureAttempt(self.name, time.perf_counter() - start, program=program, guards=tuple(guards),
                              model_state=state, unsolved=tuple(unsolved))

    @abc.abstractmethod
    def _capture(self, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], dynamic_shapes: Any) -> Any:
        """Return a ``torch.export.ExportedProgram`` or raise."""


class NonStrictStrategy(CaptureStrategy):
    name = "nonstrict"
    description = "torch.export.export(strict=False): runs forward in Python with fake tensors"

    def _capture(self, model, args, kwargs, dynamic_shapes):
        import torch

        return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False, **self.settings)


class StrictStrategy(CaptureStrategy):
    name = "strict"
    description = "torch.export.export(strict=True): traces forward's bytecode with TorchDynamo"
    strict = True

    def _capture(self, model, args, kwargs, dynamic_shapes):
        import torch

        # TorchDynamo traces the patches' switches with this job's choices, not another thread's.
        with choices_for_dynamo(), slot_for_dynamo():
            return torch.export.export(model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=True, **self.settings)


class DraftExportStrategy(CaptureStrategy):
    name = "draft"
    description = (
        "torch.export.draft_export: specializes data-dependent branches on the example values "
        "and reports what it had to assume"
    )
    # As in torch.onnx.export: draft export specializes the sequence anyway, and fails
    # inside dynamo on the while_loop of an LSTM.
    rnn_while_loop = False

    def _capture(self, model, args, kwargs, dynamic_shapes):
        import torch

        return torch.export.draft_export(
            model, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False, **self.settings
        )


class FxSymbolicTraceStrategy(CaptureStrategy):
    name = "fx_symbolic"
    description = (
        "experimental: torch.fx.symbolic_trace, then torch.export of the traced GraphModule; "
        "control flow is frozen at trace time"
    )
    experimental = True

    def _capture(self, model, args, kwargs, dynamic_shapes):
        import torch

        traced = torch.fx.symbolic_trace(model)
        return torch.export.export(traced, args, kwargs, dynamic_shapes=dynamic_shapes, strict=False, **self.settings)


STRATEGIES: tuple[type[CaptureStrategy], ...] = (
    NonStrictStrategy,
    StrictStrategy,
    DraftExportStrategy,
    FxSymbolicTraceStrategy,
)


def strategy_names() -> tuple[str, ...]:
    return tuple(cls.name for cls in STRATEGIES)


def get_strategy(name: str) -> type[CaptureStrategy]:
    for cls in STRATEGIES:
        if cls.name == name:
            return cls
    raise KeyError(name)


def is_constraint_violation(exc: BaseException) -> bool:
    """torch rejected the dim spec itself; other strategies would hide that, not fix it."""
    return formats.is_constraint_violation(exc)


def suggested_fixes(exc: BaseException) -> tuple[str, ...]:
    """The ``Suggested fixes:`` lines of a torch constraint violation, e.g. ``b = Dim('b', min=3)``."""
    return formats.suggested_fix_lines(exc)


def capture(model: Any, inputs: BoundInputs, spec: DimSpec, *, strategy: str = "auto",
            runtime_asserts: bool = False, patches: tuple[str, ...] = (), observer: Observer,
            cancel: CancelToken | None = None) -> StageResult:
    """The capture stage: ``strategy`` (or each of :data:`STRATEGIES` in turn for ``"auto"``)
    until one succeeds, telling ``observer`` of every attempt and stopping at the next one once
    ``cancel`` is set. A spec torch rejects is not tried with the others: they would only hide
    it; but when the default capture rejected it because the code read a dim into a Python
    int, the strict capture torch.onnx.export falls back to is tried, and kept only when its
    program matches the model at other sizes (:mod:`.size_check`). A program that holds only
    while the example keeps an intermediate size at a constant (or a spec refused for such a
    size) is captured again at a larger example (:mod:`.grown_example`). ``patches``
    (:mod:`exporter.patches` names) are applied around each try. Never raises for a failure."""
    start = time.perf_counter()
    try:
        dynamic_shapes = spec.to_torch(inputs)
    except ExportError as exc:
        return StageResult("capture", Status.FAILED, time.perf_counter() - start, error=exc)
    except (TypeError, ValueError, AssertionError) as exc:  # torch's own checks on a Dim
        error = CaptureError(f"torch refused the dim spec: {first_line(exc)}", hint="check the Dim ranges in the spec")
        error.__cause__ = exc
        return StageResult("capture", Status.FAILED, time.perf_counter() - start, error=error)
    attempts: list[CaptureAttempt] = []
    strategies = STRATEGIES if strategy == "auto" else (get_strategy(strategy),)
    for i, cls in enumerate(strategies):
        if cancel is not None and cancel.cancelled:
            return StageResult("capture", Status.CANCELLED, time.perf_counter() - start, attempts=tuple(attempts),
                               detail=f"cancelled before strategy {cls.name}")
        attempt = cls(runtime_asserts=runtime_asserts, patches=patches)(model, inputs.args, inputs.kwargs,
                                                                         dynamic_shapes)
        if attempt.success and cls is DraftExportStrategy:
            attempt = _draft_checked(attempt, model, inputs)
        attempts.append(attempt)
        observer.on_attempt(attempt)
        refused = attempt.error is not None and is_constraint_violation(attempt.error)
        if attempt.success or refused:
            grown = None if cancel is not None and cancel.cancelled else capture_at_grown_example(
                cls(runtime_asserts=runtime_asserts, patches=patches), model, inputs, spec, attempt)
            if grown is not None:
                attempts[-1] = grown.set_aside
                attempts.append(grown.attempt)
                observer.on_attempt(grown.attempt)
                if grown.attempt.success:
                    return _captured(grown.attempt, attempts, patches, start, (grown.note,))
                break  # refused at the larger example for ranges only: its fixes keep the dims dynamic
            if attempt.success:
                return _captured(attempt, attempts, patches, start)
        unflattenable = formats.unflattenable_text(attempt.error) if attempt.error is not None else None
        if unflattenable is not None:  # torch.export flattens inputs and outputs the same way in every strategy
            _skip(strategies[i + 1 :], f"skipped: {unflattenable}, whatever the strategy", attempts, observer)
            break
        if refused and attempt.error is not None:  # (narrows the type for what follows)
            tried = {a.strategy for a in attempts}
            # A dim the default capture read into a Python int may stay symbolic under
            # TorchDynamo; a guard that narrows a range is the same guard there: not tried.
            if strategy == "auto" and StrictStrategy.name not in tried and formats.marked_static(attempt.error) \
                    and not (cancel is not None and cancel.cancelled):
                rescue = _strict_after_rejection(model, inputs, dynamic_shapes, runtime_asserts, patches)
                attempts.append(rescue)
                observer.on_attempt(rescue)
                tried.add(rescue.strategy)
                if rescue.success:
                    return _captured(rescue, attempts, patches, start, (_rescue_note(attempt, spec, inputs, model),))
            reason = "skipped: the dim spec was rejected, another strategy would only hide it"
            if formats.is_data_dependent(attempt.error):  # TorchDynamo's data-dependent guard: the same error type
                reason = ("skipped: a condition on a value read from a tensor stops every strategy; strategy='draft' "
                          "would fix it at the example's value (slow, and right only for inputs taking the same branch)")
            _skip([s for s in strategies[i + 1 :] if s.name not in tried], reason, attempts, observer)
            break
    return StageResult("capture", Status.FAILED, time.perf_counter() - start, error=_first_failure(attempts),
                       attempts=tuple(attempts))


def _skip(strategies: Sequence[type[CaptureStrategy]], reason: str, attempts: list[CaptureAttempt],
          observer: Any) -> None:
    """Record each of ``strategies`` as skipped for ``reason`` (and tell the observer)."""
    for skipped in strategies:
        attempts.append(CaptureAttempt(skipped.name, 0.0, skipped_reason=reason))
        observer.on_attempt(attempts[-1])


def _captured(attempt: CaptureAttempt, attempts: list[CaptureAttempt], patches: tuple[str, ...], start: float,
              notes: tuple[str, ...] = ()) -> StageResult:
    state = attempt.model_state
    notes = (*notes, *_draft_notes(attempt), *(note for note in (
        state.message if state is not None else "",
        f"torch's dim-constraint solver could not solve {attempt.unsolved[0]!r} (sympy gave up) and left it "
        "unsimplified: verify checks the sizes" if attempt.unsolved else "",
        "an earlier trace left tracing tensors on the model, set aside for this capture and put back: "
        + ", ".join(state.set_aside) if state is not None and state.set_aside else "",
    ) if note))
    return StageResult(
        "capture", Status.OK, time.perf_counter() - start, attempt.program,
        attempts=tuple(attempts), strategy=attempt.strategy,
        detail="; ".join((f"strategy {attempt.strategy}", *_patch_notes(patches), *notes)), warnings=notes,
    )


def _draft_checked(attempt: CaptureAttempt, model: Any, inputs: BoundInputs) -> CaptureAttempt:
    """A draft program that fixed data-dependent values, kept only when it reproduces the
    model at the example itself (values fixed from fake tensors need not be the example's);
    otherwise a failed attempt that says how it differs."""
    from ..compat import draft_export_assumptions
    from .size_check import differs_at_example

    if not draft_export_assumptions(attempt.program):
        return attempt
    try:
        difference = differs_at_example(model, attempt.program, inputs)
    except Exception as exc:  # noqa: BLE001 - a program that cannot run at its example is not kept
        difference = f"it fails there ({type(exc).__name__}: {first_line(exc)})"
    if difference is None:
        return attempt
    error = CaptureError(f"draft export fixed data-dependent values, and its program is not the model even at the "
                         f"example: {difference}", hint="not used: the values it fixed do not hold at the example")
    return CaptureAttempt(attempt.strategy, attempt.seconds, error=error, guards=attempt.guards)


def _draft_notes(attempt: CaptureAttempt) -> tuple[str, ...]:
    """What draft export fixed at the example's values, in the user's lines: its program (and
    the ONNX model) hold only for inputs that take the same data-dependent branches."""
    from ..compat import draft_export_assumptions
    from ..frames import source_label

    if attempt.strategy != DraftExportStrategy.name:
        return ()
    fixed = draft_export_assumptions(attempt.program)
    if not fixed:
        return ()
    where = "; ".join(f"`{expr}` at {source_label(file, line, short=True)}" + (f" (`{code}`)" if code else "")
                      for expr, file, line, code in fixed[:3])
    more = f"; and {len(fixed) - 3} more" if len(fixed) > 3 else ""
    return (f"draft export fixed {len(fixed)} data-dependent value(s) at the example's: {where}{more}. The ONNX "
            "model holds only for inputs that take the same branches (torch's checks for them are not in ONNX); "
            "verify() tries other values",)


def _rescue_note(rejected: CaptureAttempt, spec: DimSpec, inputs: BoundInputs, model: Any) -> str:
    """What the default capture rejected, in the user's terms, and why the strict program is kept."""
    from ..diagnose import capture_error

    error = capture_error((rejected,), spec, inputs, model)
    why = (error.reason.splitlines() or [""])[0].removeprefix(f"could not capture the model ({rejected.strategy}): ")
    why = why.removeprefix("the dim spec does not hold: ")
    where = f" ({error.source})" if error.source else ""
    return (f"the default capture refused the spec, {why}{where}; the strict capture (TorchDynamo, which "
            "torch.onnx.export falls back to) kept it dynamic, and its program matches the model at other sizes")


def _strict_after_rejection(model: Any, inputs: BoundInputs, dynamic_shapes: Any, runtime_asserts: bool,
                            patches: tuple[str, ...]) -> CaptureAttempt:
    """The strict capture torch.onnx.export would fall back to, once the default capture
    rejected the spec: kept only when its program matches the model at other sizes
    (:mod:`.size_check`); otherwise a failed attempt that says where it differs."""
    from .size_check import differs_from_model

    attempt = StrictStrategy(runtime_asserts=runtime_asserts, patches=patches)(model, inputs.args, inputs.kwargs,
                                                                               dynamic_shapes)
    if not attempt.success:
        return attempt
    began = time.perf_counter()
    try:
        difference = differs_from_model(model, attempt.program, inputs)
    except Exception as exc:  # noqa: BLE001 - a check that cannot run keeps the rejection
        difference = f"it could not be checked at other sizes ({type(exc).__name__}: {first_line(exc)})"
    seconds = attempt.seconds + time.perf_counter() - began
    if difference is None:
        return replace(attempt, seconds=seconds)
    error = CaptureError(f"the strict capture kept the dims dynamic, but its program is not the model's: {difference}",
                         hint="not used: the dim spec's rejection above stands, with its fix")
    return CaptureAttempt(attempt.strategy, seconds, error=error, guards=attempt.guards)


def _patch_notes(patches: tuple[str, ...]) -> tuple[str, ...]:
    return (f"model patches {', '.join(patches)}",) if patches else ()


def _first_failure(attempts: list[CaptureAttempt]) -> CaptureError:
    """The first failure as it is, before :func:`exporter.diagnose.capture_error` explains it."""
    first, cause = next((a, a.error) for a in attempts if a.error is not None)
    error = CaptureError(f"could not capture the model ({first.strategy}): {first.first_error_line}",
                         source=user_source_line(cause))
    error.__cause__ = cause
    return error
