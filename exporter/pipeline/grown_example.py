"""Capture again at a larger example when the example pins an intermediate size to a constant.

torch treats a size that is 1 at the example as a constant: a broadcast or a stride check on
it adds the guard ``Eq(<size>, 1)``, and the program holds only while that size stays 1. A
small example image does this to the last stage of a downsampling backbone (64×64 through
FocalNet's 32× reduction leaves 1×1): the exported model then gives ``[2, 1, 256]`` where the
model gives ``[2, 4, 256]`` at 128×128, in torch.onnx.export as here. A shortcut taken at one
size does the same: a ViT's ``interpolate_pos_encoding`` returns its stored table unchanged
when the image has as many patches as the table (``Eq((height//16)**2 + 1, 197)``), so a
ViT exported at its training size adds that table to every other size too, and onnxruntime
refuses them.

So when a capture's guards pin such a size, the same strategy runs again with the dims it
depends on grown until no pinned size keeps its constant, and that program replaces the first
one when it matches the model at the user's example and at other sizes (:mod:`.size_check`):
a model that really computes something else at that size keeps the first program, with its
narrow range, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..frames import source_label
from ..guards import guards_from_events, symbols_of_axes
from .records import CaptureAttempt

if TYPE_CHECKING:
    from ..dims import DimSpec
    from ..inputs import BoundInputs

__all__ = ["GrownCapture", "PinnedSize", "capture_at_grown_example", "grown_assignment", "pinned_sizes"]

FACTORS = (2, 4, 8)  # how much the involved dims are grown, tried in turn


@dataclass(frozen=True)
class GrownCapture:
    """The capture at a larger example that replaces one whose program held only while an
    intermediate size kept its value (or that torch refused for it): the new attempt (a refusal
    asking only for ranges, when that is what torch says there), the first one set aside, and
    the note that says so in the user's terms."""

    attempt: CaptureAttempt
    set_aside: CaptureAttempt
    note: str


@dataclass(frozen=True)
class PinnedSize:
    """A guard of a capture saying that an intermediate size, computed from the input dims,
    equals ``value``: ``size`` is the sympy expression, ``event`` the guard as torch logged it."""

    size: Any
    value: int
    event: Any


def pinned_sizes(attempt: CaptureAttempt, symbols: set[str]) -> list[PinnedSize]:
    """Every guard of ``attempt`` that says an intermediate size computed from the input
    symbols ``symbols`` equals a constant (not an input dim itself: torch makes such a dim
    static, which the dim outcomes say elsewhere)."""
    import sympy

    found: list[PinnedSize] = []
    for event in attempt.guards:
        expr = event.expr
        if event.prefix != "eval" or not isinstance(expr, sympy.Eq):
            continue
        size, value = (expr.lhs, expr.rhs) if expr.rhs.is_Integer else (expr.rhs, expr.lhs)
        if not value.is_Integer or size.is_Symbol or not size.free_symbols:
            continue
        if {str(s) for s in size.free_symbols} <= symbols and all(p.size is not size for p in found):
            found.append(PinnedSize(size, int(value), event))
    return found


def grown_assignment(pinned: list[PinnedSize], examples: dict[str, int],
                     ranges: dict[str, tuple[int, int | None]]) -> dict[str, int] | None:
    """The input symbol sizes with every symbol the ``pinned`` sizes depend on multiplied by
    the smallest of :data:`FACTORS` that moves each of them off its constant to at least 2,
    inside ``ranges``; None when no factor does (a multiple of the example keeps
    ``Mod(height, 2)`` at 0, whatever the factor)."""
    involved = {s for p in pinned for s in p.size.free_symbols}
    for factor in FACTORS:
        assignment = dict(examples)
        for symbol in involved:
            grown = examples[str(symbol)] * factor
            high = ranges.get(str(symbol), (0, None))[1]
            if high is not None and grown > high:
                return None
            assignment[str(symbol)] = grown
        values = {symbol: assignment[str(symbol)] for symbol in involved}
        try:
            if all(_moved_off(int(p.size.subs(values)), p.value) for p in pinned):
                return assignment
        except (TypeError, ValueError):
            return None
    return None


def _moved_off(size: int, value: int) -> bool:
    return size != value and size >= 2


def _movable(pinned: list[PinnedSize], examples: dict[str, int],
             ranges: dict[str, tuple[int, int | None]]) -> list[PinnedSize]:
    """The pinned sizes a larger example moves off their constant: not ``Mod(height, 8) == 0``,
    which every multiple of the example keeps (a real requirement of the model, not a shortcut)."""
    return [p for p in pinned if grown_assignment([p], examples, ranges) is not None]


def capture_at_grown_example(strategy: Any, model: Any, inputs: BoundInputs, spec: DimSpec,
                             attempt: CaptureAttempt) -> GrownCapture | None:
    """When ``attempt``'s program holds only while an intermediate size keeps its value at the
    example (or torch refused the spec for such a size: named ``Dim``s that the shortcut would
    make static), the capture by ``strategy`` (a configured :class:`~.capture.CaptureStrategy`)
    at an example grown so that it does not, checked against the model; None when there is no
    such size, or the larger example does not give a program that matches the model."""
    from .. import compat
    from ..inputs import bind_inputs
    from ..program_symbols import symbol_of
    from .size_check import differs_from_model, example_sizes, inputs_at

    if attempt.success:
        symbols, ranges = symbol_of(attempt.program, inputs), compat.program_ranges(attempt.program)
    else:  # refused: the guards' sources name the input axes, the spec their ranges
        symbols = symbols_of_axes(attempt.guards, inputs)
        ranges = _spec_ranges(spec, symbols)
    examples = example_sizes(symbols, inputs)
    pinned = _movable(pinned_sizes(attempt, set(examples)), examples, ranges)
    assignment = grown_assignment(pinned, examples, ranges) if pinned else None
    if assignment is None:
        return None
    assignment = _named_alike(assignment, examples, symbols, spec)
    began = time.perf_counter()
    try:
        args, kwargs = inputs_at(symbols, inputs, assignment)
        grown_inputs = bind_inputs(model, args, kwargs)
        dynamic_shapes = spec.to_torch(grown_inputs)
    except Exception:  # noqa: BLE001 - no larger example to capture at: the first program stands
        return None
    size, value = _pinned_words(pinned, inputs, attempt), pinned[0].value
    where = ", ".join(f"{path}.shape[{axis}]={new}" for (path, axis), new in _grown_axes(symbols, inputs, grown_inputs))
    grown = strategy(model, grown_inputs.args, grown_inputs.kwargs, dynamic_shapes)
    if not grown.success:
        return _narrowed_there(grown, attempt, f"the example makes {size} {value}", where)
    grown_symbols = symbol_of(grown.program, grown_inputs)
    grown_examples = example_sizes(grown_symbols, grown_inputs)
    if _movable(pinned_sizes(grown, set(grown_examples)), grown_examples, compat.program_ranges(grown.program)):
        return None  # pinned again, by another shortcut: no better than the first
    at_example = example_sizes(grown_symbols, inputs)
    try:
        difference = differs_from_model(model, grown.program, grown_inputs, also=(at_example,),
                                        what="capture at a larger example", guarded=False)
    except Exception:  # noqa: BLE001 - a check that cannot run keeps the first program
        return None
    if difference is not None:
        return None
    grown = replace(grown, seconds=grown.seconds + time.perf_counter() - began)
    why = "torch treats a size 1 as a constant" if value == 1 else "torch traces only the path the model takes there"
    if attempt.success:
        set_aside = replace(attempt, program=None, skipped_reason=f"set aside: its program holds only while {size} stays {value}")
        held = f"so that program held only while it stayed {value}"
    else:
        set_aside, held = attempt, "so it refused the dims that size is computed from"
    note = (f"the example makes {size} {value}, and {why}, {held}; "
            f"captured again at {where}, which matches the model at the example and at other sizes")
    return GrownCapture(grown, set_aside, note)


def _narrowed_there(grown: CaptureAttempt, attempt: CaptureAttempt, pinned_words: str, where: str) -> GrownCapture | None:
    """A spec refused at the example for a pinned size, and at the larger example only for ranges
    (``Dim('height', min=8, max=128)``): that refusal, whose fixes keep the dims dynamic, is the
    one to report (applied, the next capture passes the example's shortcut the same way). None for
    any other failure there."""
    from ..compat import formats

    error = grown.error
    fixes = formats.suggested_fix_lines(error) if error is not None and formats.is_constraint_violation(error) else ()
    if attempt.success or not fixes or any(formats.dim_call(line.split("=", 1)[1].strip()) is None for line in fixes):
        return None
    set_aside = replace(attempt, error=None, skipped_reason=(
        f"set aside: {pinned_words}, and torch traces only the path the model takes there; "
        f"at {where} torch asks only for the ranges below"))
    return GrownCapture(grown, set_aside, "")


def _spec_ranges(spec: DimSpec, symbols: dict[tuple[str, int], str]) -> dict[str, tuple[int, int | None]]:
    """Each symbol's range as the spec asks it (a named ``Dim``'s min and max)."""
    from ..dims import Dim

    ranges: dict[str, tuple[int, int | None]] = {}
    for entry in spec:
        symbol = symbols.get((entry.path, entry.axis))
        if symbol is not None and isinstance(entry.policy, Dim):
            ranges[symbol] = (entry.policy.min or 0, entry.policy.max)
    return ranges


def _named_alike(assignment: dict[str, int], examples: dict[str, int], symbols: dict[tuple[str, int], str],
                 spec: DimSpec) -> dict[str, int]:
    """``assignment`` with every axis the spec names like a grown one grown alike: ``input_ids``
    and ``attention_mask`` both ``seq`` are one length to the model, though the program may hold
    them as two symbols that its guards make equal."""
    named = {(entry.path, entry.axis): entry.policy.name for entry in spec if isinstance(getattr(entry.policy, "name", None), str)}
    grown = {named[axis]: assignment[expr] for axis, expr in symbols.items()
             if axis in named and expr in assignment and assignment[expr] != examples[expr]}
    return {**assignment, **{expr: grown[named[axis]] for axis, expr in symbols.items()
                             if expr in assignment and named.get(axis) in grown}}


def _pinned_words(pinned: list[PinnedSize], inputs: BoundInputs, attempt: CaptureAttempt) -> str:
    """The first pinned size in the user's terms: where it is computed, else its expression."""
    guards = guards_from_events(tuple(p.event for p in pinned), inputs, attempt.strategy)
    for guard in guards:
        if guard.file and guard.line:
            code = f" (`{guard.code.strip()}`)" if guard.code else ""
            return f"the size computed at {source_label(guard.file, guard.line, short=True)}{code}"
    return f"the size {pinned[0].size}"


def _grown_axes(symbols: dict[tuple[str, int], str], inputs: BoundInputs,
                grown: BoundInputs) -> list[tuple[tuple[str, int], int]]:
    return [((path, axis), grown.leaf(path).shape[axis]) for (path, axis) in symbols
            if grown.leaf(path).shape[axis] != inputs.leaf(path).shape[axis]]
