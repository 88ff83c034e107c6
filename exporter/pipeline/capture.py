"""Capture strategies: the ways to turn an ``nn.Module`` into an ``ExportedProgram``.

Each strategy is a :class:`CaptureStrategy` subclass; :data:`STRATEGIES` is the ordered
registry ``strategy="auto"`` walks. Every call returns a :class:`CaptureAttempt` (success or
failure, with timing) so the session can show what was tried.
"""

from __future__ import annotations

import abc
import time
import traceback
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..compat import formats
from ..errors import CaptureError, first_line, user_source_line
from ..frames import source_label

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
    "capture_error",
    "suggested_fixes",
]


@dataclass(frozen=True)
class CaptureAttempt:
    """One try of one strategy."""

    strategy: str
    seconds: float
    program: Any = None  # torch.export.ExportedProgram on success
    error: BaseException | None = None
    skipped_reason: str | None = None
    guards: tuple[Any, ...] = ()  # _torch_compat.ShapeGuardEvent: shape guards torch added, in order
    # On failure: (model, args, kwargs, dynamic_shapes) as given, so the error can name the
    # exact fix (the solved Dim ranges, the keys torch expected) without the session.
    context: Any = field(default=None, compare=False, repr=False)
    # model_state.StateReport: what the trace changed on the model (put back when it ended).
    model_state: Any = field(default=None, compare=False, repr=False)

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
        if self.error is not None and formats.is_constraint_violation(self.error):
            # torch's first line is "Constraints violated (seq)! For more information, run with
            # TORCH_LOGS=...": the capture error says what is violated, in the user's terms.
            return f"{type(self.error).__name__}: the dim spec was rejected (the capture error says why)"
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


class CaptureStrategy(abc.ABC):
    """One way of capturing the FX graph. Subclasses implement :meth:`_capture`."""

    name: ClassVar[str]
    description: ClassVar[str]
    experimental: ClassVar[bool] = False
    strict: ClassVar[bool] = False  # traces bytecode with TorchDynamo (patched as torch.onnx does)
    rnn_while_loop: ClassVar[bool] = True  # LSTM/GRU traced as a while_loop under dynamic shapes

    def __init__(self, *, runtime_asserts: bool = False) -> None:
        self.runtime_asserts = runtime_asserts

    @property
    def settings(self) -> dict[str, Any]:
        """Keyword arguments for torch.export. ``runtime_asserts`` is what torch.onnx.export
        does: a guard that narrows a dynamic dim (``seq != 1``, ``x.shape[0] == 3``) becomes a
        runtime assert, later dropped from the ONNX model, instead of rejecting the spec."""
        return {"prefer_deferred_runtime_asserts_over_guards": self.runtime_asserts}

    def __call__(self, model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any) -> CaptureAttempt:
        from ..compat import clear_dim_marks, onnx_capture_patches, record_shape_guards, size_oblivious_capture
        from ..model_state import preserved

        start = time.perf_counter()
        given = getattr(model, "program", None) if type(model).__name__ == "ProgramModel" else None
        if given is not None:  # an ExportedProgram given as the model: it is the capture
            return CaptureAttempt(self.name, time.perf_counter() - start, program=given)
        with record_shape_guards() as guards:
            # A trace can leave state on the module (transformers' longrope stores a FakeTensor
            # ``long_inv_freq``, which breaks the next export and eager run): put it back. One an
            # earlier trace left (torch.onnx.export's) is hidden from this one and put back.
            with preserved(model, what=f"during capture ({self.name})", set_aside_trace_leftovers=True) as state:
                try:
                    # torch.onnx.export's capture patches: LSTM/GRU as a while_loop (a dynamic
                    # sequence stays dynamic), torch.jit.isinstance for dynamo; undone on exit.
                    with size_oblivious_capture(), onnx_capture_patches(
                        dynamic_shapes, strict=self.strict, rnn=self.rnn_while_loop
                    ):
                        program = self._capture(model, args, kwargs, dynamic_shapes)
                except Exception as exc:  # noqa: BLE001 - every failure becomes data
                    program, error = None, exc
                else:
                    error = None
                finally:
                    clear_dim_marks(args, kwargs)  # a failed export leaves them on the inputs
        if error is not None:
            return CaptureAttempt(
                self.name, time.perf_counter() - start, error=error, guards=tuple(guards),
                context=(model, args, kwargs, dynamic_shapes), model_state=state,
            )
        return CaptureAttempt(self.name, time.perf_counter() - start, program=program, guards=tuple(guards),
                              model_state=state)

    @abc.abstractmethod
    def _capture(self, model: Any, args: tuple, kwargs: dict, dynamic_shapes: Any) -> Any:
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


def _kwargs_hint(bound: Any) -> str:
    """What to do when torch.export cannot match ``dynamic_shapes`` to a ``**kwargs`` forward."""
    from ..hints import kv_cache_kwarg_hint

    cache_hint = kv_cache_kwarg_hint(bound)
    if cache_hint:
        return cache_hint
    var = getattr(bound, "var_keyword", None) if bound is not None else None
    if var:
        keys = ", ".join(repr(k) for k in bound.by_signature().get(var, {})) or "(none)"
        top = ", ".join(repr(k) for k in bound.by_signature())
        where = (
            f"forward takes {keys} through **{var}; torch.export expects the top-level keys {top} "
            f"(with {var!r} as one dict), and torch 2.13 still cannot apply a dim to a **kwargs entry"
        )
        first = next(iter(bound.by_signature().get(var, {})), "past_key_values")
        fix = f"make it a parameter of forward (def forward(self, ..., {first}=None, **{var})) or wrap the model"
    else:
        where = "torch.export could not match dynamic_shapes to forward's parameters (a **kwargs forward)"
        fix = "make every dynamic input a named parameter of forward, or wrap the model"
    return (
        f"{where}: {fix}; pass a KV cache as a named argument (past_key_values=...), "
        "not through **kwargs"
    )


def _hint_for(exc: BaseException, bound: Any = None) -> str:
    if formats.is_tree_name_mismatch(exc):
        return _kwargs_hint(bound)
    unknown = formats.unknown_pytree_type(exc)
    if unknown is not None:
        cls, where = unknown
        if cls.endswith("DynamicCache") or ".cache_utils." in cls:
            return (
                f"the model {'returns' if where == 'output' else 'takes'} a {cls}, which torch cannot flatten: call "
                "transformers.integrations.executorch.register_dynamic_cache_export_support() before exporting, "
                "or export with use_cache=False"
            )
        return (
            f"the model {'returns' if where == 'output' else 'takes'} a {cls}, which torch cannot flatten: register it "
            "(torch.export.register_dataclass, or torch.utils._pytree.register_pytree_node)"
        )
    fixes = suggested_fixes(exc)
    if fixes:
        return "torch suggests these dims (apply them to dynamic_shapes):\n" + "\n".join(fixes)
    if formats.is_data_dependent(exc):
        return (
            "a Python branch or size depends on tensor values; rewrite it with torch.cond / "
            "torch.where, or try strategy='draft' to specialize it on the example values"
        )
    if formats.is_constraint_violation(exc):
        if formats.range_violations(exc) and not formats.marked_static(exc):
            return (
                "the model's code bounds a dim whose Dim range is wider: narrow the range to what "
                "the guard allows (session.apply_suggested_fixes() solves the guards and does it), "
                "or name the axis with a string, which takes the guards' range"
            )
        return "the model's code pins a dim you asked to be dynamic: make it STATIC or AUTO"
    return "check the line above; strategy='auto' tries every capture strategy in turn"


def _diagnosis(attempt: CaptureAttempt, spec: Any, bound: Any) -> tuple[Any, tuple[Any, ...]]:
    """The suggested fixes of a rejected spec, solved from the guards (``exporter.shapes``),
    and its rejected ranges in the user's terms; ``(None, ())`` when they cannot be built."""
    from ..guards import guards_from_events
    from ..shapes.fixes import build_fixes
    from ..shapes.violations import rejected_ranges

    try:
        guards = guards_from_events(attempt.guards, bound, attempt.strategy)
        fixes = build_fixes(attempt.error, spec, bound, guards)
        return fixes, rejected_ranges(fixes, guards, bound)
    except Exception:  # noqa: BLE001 - the generic hint and torch's lines are still right
        return None, ()


def _solved_hint(fixes: Any) -> str | None:
    """The exact new spec for a rejected one: every axis the fixes change."""
    changes = fixes.changes() if fixes is not None else []
    if not changes or fixes.error:
        return None
    from ..axis import Axis

    lines = [f"{Axis(path, axis).label}: {after}" for path, axis, _, after in changes]
    return "change these dims (session.apply_suggested_fixes() applies them):\n" + "\n".join(lines)


def _spec_of_attempt(attempt: CaptureAttempt) -> tuple[Any, Any]:
    """The spec and bound inputs an attempt was given, rebuilt from its torch form (names
    given as strings come back as DYNAMIC: only strict Dims need solved fixes)."""
    from ..dims import DimSpec
    from ..inputs import bind_inputs

    model, args, kwargs, dynamic_shapes = attempt.context
    try:
        bound = bind_inputs(model, args, kwargs)
    except Exception:  # noqa: BLE001 - the generic hint is still right
        return None, None
    try:
        return DimSpec.parse(dynamic_shapes, bound), bound
    except Exception:  # noqa: BLE001 - e.g. torch's form for a **kwargs forward
        return None, bound


def _rnn_reason(attempt: CaptureAttempt) -> str | None:
    """Why an ``nn.RNN`` pins a dynamic sequence, when the model has one and torch pinned a
    dim: torch's while_loop decompositions (applied during capture, as torch.onnx.export
    does) exist for ``nn.LSTM`` and ``nn.GRU`` only."""
    model = attempt.context[0] if attempt.context is not None else None
    if model is None or not formats.marked_static(attempt.error) or not hasattr(model, "named_modules"):
        return None
    import torch

    plain = [
        name or type(model).__name__
        for name, module in model.named_modules()
        if isinstance(module, torch.nn.RNNBase) and getattr(module, "mode", "") in ("RNN_TANH", "RNN_RELU")
    ]
    if not plain:
        return None
    where = ", ".join(repr(name) for name in plain[:3])
    return (
        f"nn.RNN {where} loops in Python over the example's time steps under torch.export, so "
        "its sequence length is fixed at the example's (torch's while_loop decompositions, "
        "applied here as torch.onnx.export applies them, cover nn.LSTM and nn.GRU only): "
        "make the sequence dim STATIC, or use nn.GRU / nn.LSTM"
    )


def _guard_line(guard: Any) -> str:
    """``file:line in function: code`` of a guard's user line, as other sources read."""
    return f"{source_label(guard.file, guard.line)} in {guard.function}: {guard.code}"


def _last_guard_line(attempt: CaptureAttempt) -> str | None:
    """The user line of the last shape guard torch added: for a rejected spec, the line whose
    guard the spec contradicts (torch's error itself points into torch)."""
    for event in reversed(attempt.guards):
        if event.frames:
            filename, line, function, code = event.frames[-1]
            return f"{source_label(filename, line)} in {function}: {code}"
    return None


def capture_error(attempts: tuple[CaptureAttempt, ...], spec: Any = None, bound: Any = None) -> CaptureError:
    """One error that names the first real failure and lists every attempt. With the session's
    ``spec`` and ``bound`` inputs, a rejected spec's hint is the exact new spec, solved from
    the guards."""
    failed = [a for a in attempts if a.error is not None]
    first = failed[0]
    if (spec is None or bound is None) and first.context is not None:
        spec, bound = _spec_of_attempt(first)
    from ..shapes.violations import plain_violation

    rejected = formats.is_constraint_violation(first.error)
    fixes, ranges = _diagnosis(first, spec, bound) if rejected and spec is not None and bound is not None else (None, ())
    # A range said in the user's terms replaces torch's sentence about it ("Not all values of
    # seq ... satisfy the generated guard ..."); torch's text stays, whole, in library_text.
    said = {r.name for r in ranges}
    violations = [
        plain_violation(line, bound, spec) for line in formats.violation_lines(first.error)
        if not any(name in said for name, _ in formats.range_violations(line))
    ]
    problems = [r.problem for r in ranges] + violations
    # torch's first line of a rejected spec is generic ("Constraints violated (seq)! For more
    # information..."): the headline names the first problem instead.
    if rejected and problems:
        headline = problems[0] if ranges else f"the dim spec does not hold: {problems[0]}"
    else:
        headline = first.first_error_line
    details = ["- " + line for line in (problems[1:] if rejected and problems else violations)][:6]
    # Other strategies skipped because the spec was rejected add nothing to say.
    tried = "; ".join(f"{a.strategy}: {a.first_error_line}" for a in attempts)
    show_tried = len(attempts) > 1 and not (rejected and all(a.skipped_reason for a in attempts if a is not first))
    hint = (_solved_hint(fixes) if rejected else None) or _hint_for(first.error, bound)
    rnn = _rnn_reason(first)
    error = CaptureError(
        (headline if ranges else f"could not capture the model ({first.strategy}): {headline}")
        + "".join(f"\n  {line}" for line in details)
        + (f"\n  tried: {tried}" if show_tried else ""),
        source=_guard_line(ranges[0].guard) if ranges and ranges[0].guard.file else (
            user_source_line(first.error) or (_last_guard_line(first) if rejected else None)),
        hint=f"{rnn};\n{hint}" if rnn else hint,
    )
    error.library_text = str(first.error).strip()  # torch's own words ("torch said"), kept whole
    error.rejected_ranges = ranges
    error.suggested_fixes = suggested_fixes(first.error)  # torch's lines; exporter.shapes parses them
    error.__cause__ = first.error
    return error
