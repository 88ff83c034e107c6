"""The diagnosis of a failed capture: the error a person can act on, built from every
attempt, the guards torch recorded, and the spec and inputs the session holds.

A rejected spec's hint is the exact new spec, solved from the guards (:mod:`exporter.shapes`);
its ranges are said in the user's terms (``x.shape[1]``, their ``Dim`` names) instead of torch's
sentence; other failures get the hint for their kind (an unflattenable type, a data-dependent
branch, a ``**kwargs`` forward, an ``nn.RNN`` that pins the sequence). The capture stage
(:mod:`exporter.pipeline.capture`) only tries the strategies; the session hands its failed
result here with what it holds (:func:`diagnosed`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .axis import Axis
from .compat import formats
from .errors import CaptureError, Status, user_source_line
from .frames import source_label
from .guards import guards_from_events, symbols_of_axes
from .hints import kv_cache_kwarg_hint
from .shapes.fixes import build_fixes
from .shapes.violations import plain_violation, rejected_ranges

if TYPE_CHECKING:
    from .dims import DimSpec
    from .guards import Guard
    from .inputs import BoundInputs
    from .pipeline.records import CaptureAttempt, StageResult
    from .shapes.fixes import SuggestedFixes
    from .shapes.violations import RejectedRange

__all__ = ["capture_error", "diagnosed"]


def diagnosed(result: StageResult, spec: DimSpec, bound: BoundInputs, model: Any = None) -> StageResult:
    """``result`` with the error a person can act on: a failed capture's, rebuilt from its
    attempts with the session's ``spec``, ``bound`` inputs and ``model``; any other result
    as it is."""
    if result.name != "capture" or result.status != Status.FAILED or not any(a.error for a in result.attempts):
        return result
    return replace(result, error=capture_error(result.attempts, spec, bound, model))


def _kwargs_hint(bound: BoundInputs | None) -> str:
    """What to do when torch.export cannot match ``dynamic_shapes`` to a ``**kwargs`` forward."""
    cache_hint = kv_cache_kwarg_hint(bound)
    if cache_hint:
        return cache_hint
    var = bound.var_keyword if bound is not None else None
    if bound is not None and var:
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


def _takes(model: Any, parameter: str) -> bool:
    """Whether ``model``'s forward has a parameter named ``parameter``."""
    import inspect

    try:
        return parameter in inspect.signature(model.forward).parameters
    except (AttributeError, TypeError, ValueError):
        return False


def _hint_for(exc: BaseException, bound: BoundInputs | None = None, model: Any = None) -> str:
    if formats.is_tree_name_mismatch(exc):
        return _kwargs_hint(bound)
    unknown = formats.unknown_pytree_type(exc)
    if unknown is not None:
        cls, where = unknown
        if cls.endswith("DynamicCache") or ".cache_utils." in cls:
            register = ("call transformers.integrations.executorch.register_dynamic_cache_export_support() "
                        "before exporting")
            if where == "output" and _takes(model, "use_cache"):  # the call change that works, first
                return (f"call the model with use_cache=False (add it to the call you export): its outputs then "
                        f"hold no {cls.rpartition('.')[2]}; or {register}")
            return f"the model {'returns' if where == 'output' else 'takes'} a {cls}, which torch cannot flatten: " \
                   f"{register}, or export with use_cache=False"
        return (
            f"the model {'returns' if where == 'output' else 'takes'} a {cls}, which torch cannot flatten: register it "
            "(torch.export.register_dataclass, or torch.utils._pytree.register_pytree_node)"
        )
    fixes = formats.suggested_fix_lines(exc)
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


def _data_dependent_dims(attempt: CaptureAttempt, spec: DimSpec, bound: BoundInputs) -> str:
    """The dims a data-dependent guard's expression names, in the user's words: ``seq
    (input_ids.shape[1], attention_mask.shape[1])`` for torch's ``4*u1 < s70``; its symbols are
    mapped to input axes through the guards recorded before it. Empty for another failure."""
    if attempt.error is None or not formats.is_data_dependent(attempt.error):
        return ""
    symbols = set(formats.data_dependent_symbols(attempt.error))
    axes = [Axis(*key) for key, symbol in symbols_of_axes(attempt.guards, bound).items() if symbol in symbols]
    named: dict[str, list[str]] = {}
    for axis in axes:
        name = getattr(spec.policy(*axis), "name", None) or axis.label
        named.setdefault(name, []).append(axis.label)
    for entry in spec:  # the other axes of each name
        name = getattr(entry.policy, "name", None)
        if name in named and Axis(entry.path, entry.axis).label not in named[name]:
            named[name].append(Axis(entry.path, entry.axis).label)
    return ", ".join(name if labels == [name] else f"{name} ({', '.join(labels)})" for name, labels in named.items())


def _solved(attempt: CaptureAttempt, spec: DimSpec, bound: BoundInputs) -> tuple[SuggestedFixes | None,
                                                                              tuple[RejectedRange, ...]]:
    """The suggested fixes of a rejected spec, solved from the guards (``exporter.shapes``),
    and its rejected ranges in the user's terms; ``(None, ())`` when they cannot be built."""
    try:
        guards = guards_from_events(attempt.guards, bound, attempt.strategy)
        fixes = build_fixes(attempt.error, spec, bound, guards)
        return fixes, rejected_ranges(fixes, guards, bound)
    except Exception:  # noqa: BLE001 - the generic hint and torch's lines are still right
        return None, ()


def _solved_hint(fixes: SuggestedFixes | None) -> str | None:
    """The exact new spec for a rejected one: every axis the fixes change."""
    changes = fixes.changes() if fixes is not None else []
    if fixes is None or not changes or fixes.error:
        return None
    lines = [f"{Axis(path, axis).label}: {after}" for path, axis, _, after in changes]
    return "change these dims (session.apply_suggested_fixes() applies them):\n" + "\n".join(lines)


def _rnn_reason(error: BaseException, model: Any) -> str | None:
    """Why an ``nn.RNN`` pins a dynamic sequence, when the model has one and torch pinned a
    dim: torch's while_loop decompositions (applied during capture, as torch.onnx.export
    does) exist for ``nn.LSTM`` and ``nn.GRU`` only."""
    if model is None or not formats.marked_static(error) or not hasattr(model, "named_modules"):
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


def _interpolation_reason(error: BaseException, model: Any, bound: BoundInputs | None) -> str | None:
    """A pinned image size on a model whose forward takes ``interpolate_pos_encoding`` (ViT,
    DeiT, CLIP's vision tower...) left off: without it the model accepts its training size only."""
    import inspect

    if model is None or bound is None or not formats.marked_static(error):
        return None
    try:
        parameters = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return None
    if "interpolate_pos_encoding" not in parameters or bound.by_parameter().get("interpolate_pos_encoding") is True:
        return None
    return ("the model's forward takes interpolate_pos_encoding: pass interpolate_pos_encoding=True to keep the "
            "image size dynamic (without it the model checks the image against its training size)")


def _guard_line(guard: Guard) -> str:
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


def capture_error(attempts: tuple[CaptureAttempt, ...], spec: DimSpec | None = None,
                  bound: BoundInputs | None = None, model: Any = None) -> CaptureError:
    """One error that names the first real failure and lists every attempt. With the
    session's ``spec`` and ``bound`` inputs, a rejected spec's hint is the exact new spec,
    solved from the guards, and a data-dependent guard names the dims it involves; with its
    ``model``, a pinned sequence names the ``nn.RNN`` that pins it."""
    first, cause = next((a, a.error) for a in attempts if a.error is not None)
    rejected = formats.is_constraint_violation(cause)
    fixes, ranges = _solved(first, spec, bound) if rejected and spec is not None and bound is not None else (None, ())
    # A range said in the user's terms replaces torch's sentence about it ("Not all values of
    # seq ... satisfy the generated guard ..."); torch's text stays, whole, in library_text.
    said = {r.name for r in ranges}
    violations = [
        plain_violation(line, bound, spec) for line in formats.violation_lines(cause)
        if not any(name in said for name, _ in formats.range_violations(line))
    ]
    problems = [r.problem for r in ranges] + violations
    # torch's first line of a rejected spec is generic ("Constraints violated (seq)! For more
    # information..."): the headline names the first problem instead.
    if rejected and problems:
        headline = problems[0] if ranges else f"the dim spec does not hold: {problems[0]}"
    else:
        headline = first.first_error_line or ""
    details = ["- " + line for line in (problems[1:] if rejected and problems else violations)][:6]
    involved = _data_dependent_dims(first, spec, bound) if spec is not None and bound is not None else ""
    if involved:  # torch's "4*u1 < s70" in the user's words; torch's text stays in library_text
        headline = (f"{type(cause).__name__}: a size or branch depends on a value read from a tensor together with "
                    f"{involved}, and torch cannot decide it for every size")
    # Other strategies skipped because the spec was rejected add nothing to say.
    tried = "; ".join(f"{a.strategy}: {a.first_error_line}" for a in attempts)
    # Strategies skipped for the first one's reason (a rejected spec, a type no strategy flattens) add nothing.
    show_tried = len(attempts) > 1 and not all(a.skipped_reason for a in attempts if a is not first)
    hint = (_solved_hint(fixes) if rejected else None) or _hint_for(cause, bound, model)
    rnn = _rnn_reason(cause, model) or _interpolation_reason(cause, model, bound)
    error = CaptureError(
        (headline if ranges else f"could not capture the model ({first.strategy}): {headline}")
        + "".join(f"\n  {line}" for line in details)
        + (f"\n  tried: {tried}" if show_tried else ""),
        source=_guard_line(ranges[0].guard) if ranges and ranges[0].guard.file else (
            user_source_line(cause) or (_last_guard_line(first) if rejected else None)),
        hint=f"{rnn};\n{hint}" if rnn else hint,
    )
    error.library_text = str(cause).strip()  # torch's own words ("torch said"), kept whole
    error.rejected_ranges = ranges
    error.suggested_fixes = formats.suggested_fix_lines(cause)  # torch's lines; exporter.shapes parses them
    error.__cause__ = cause
    return error
