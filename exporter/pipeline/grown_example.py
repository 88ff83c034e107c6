"""Capture again at a larger example when the example makes an intermediate size 1.

torch treats a size that is 1 at the example as a constant: a broadcast or a stride check on
it adds the guard ``Eq(<size>, 1)``, and the program holds only while that size stays 1. A
small example image does this to the last stage of a downsampling backbone (64×64 through
FocalNet's 32× reduction leaves 1×1): the exported model then gives ``[2, 1, 256]`` where the
model gives ``[2, 4, 256]`` at 128×128, in torch.onnx.export as here.

So when a capture's guards pin such a size, the same strategy runs again with the dims it
depends on grown until every pinned size is at least 2, and that program replaces the first
one when it matches the model at the user's example and at other sizes (:mod:`.size_check`).
Otherwise the first program stands, with its narrow range, as before.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..frames import source_label
from ..guards import guards_from_events
from .records import CaptureAttempt

if TYPE_CHECKING:
    from ..dims import DimSpec
    from ..inputs import BoundInputs

__all__ = ["GrownCapture", "capture_at_grown_example", "grown_assignment", "pinned_sizes"]

FACTORS = (2, 4, 8)  # how much the involved dims are grown, tried in turn


@dataclass(frozen=True)
class GrownCapture:
    """The capture at a larger example that replaces one whose program held only while an
    intermediate size stayed 1: the new attempt, the first one set aside, and the note that
    says so in the user's terms."""

    attempt: CaptureAttempt
    set_aside: CaptureAttempt
    note: str


def pinned_sizes(attempt: CaptureAttempt, symbols: set[str]) -> list[tuple[Any, Any]]:
    """``(size expression, guard event)`` for every guard of ``attempt`` that says an
    intermediate size computed from the input symbols ``symbols`` equals 1 (not an input dim
    itself: a size-1 input is the user's example, said elsewhere)."""
    import sympy

    found: list[tuple[Any, Any]] = []
    for event in attempt.guards:
        expr = event.expr
        if event.prefix != "eval" or not isinstance(expr, sympy.Eq):
            continue
        size = expr.lhs if expr.rhs == 1 else expr.rhs if expr.lhs == 1 else None
        if size is None or size.is_Symbol or not size.free_symbols:
            continue
        if {str(s) for s in size.free_symbols} <= symbols and all(e is not size for e, _ in found):
            found.append((size, event))
    return found


def grown_assignment(sizes: list[Any], examples: dict[str, int],
                     ranges: dict[str, tuple[int, int | None]]) -> dict[str, int] | None:
    """The input symbol sizes with every symbol the pinned ``sizes`` depend on multiplied by
    the smallest of :data:`FACTORS` that makes each of them at least 2, inside ``ranges``;
    None when no factor does."""
    involved = {s for size in sizes for s in size.free_symbols}
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
            if all(int(size.subs(values)) >= 2 for size in sizes):
                return assignment
        except (TypeError, ValueError):
            return None
    return None


def capture_at_grown_example(strategy: Any, model: Any, inputs: BoundInputs, spec: DimSpec,
                             attempt: CaptureAttempt) -> GrownCapture | None:
    """When ``attempt``'s program holds only while an intermediate size stays 1, the capture
    by ``strategy`` (a configured :class:`~.capture.CaptureStrategy`) at an example grown so
    that it does not, checked against the model; None when there is no such size, or the
    larger example does not give a program that matches the model."""
    from .. import compat
    from ..inputs import bind_inputs
    from ..program_symbols import symbol_of
    from .size_check import differs_from_model, example_sizes, inputs_at

    symbols = symbol_of(attempt.program, inputs)
    examples = example_sizes(symbols, inputs)
    pinned = pinned_sizes(attempt, set(examples))
    if not pinned:
        return None
    assignment = grown_assignment([size for size, _ in pinned], examples, compat.program_ranges(attempt.program))
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
    grown = strategy(model, grown_inputs.args, grown_inputs.kwargs, dynamic_shapes)
    if not grown.success:
        return None
    grown_symbols = symbol_of(grown.program, grown_inputs)
    if pinned_sizes(grown, {e for e in grown_symbols.values() if e.isidentifier()}):
        return None
    at_example = example_sizes(grown_symbols, inputs)
    try:
        difference = differs_from_model(model, grown.program, grown_inputs, also=(at_example,),
                                        what="capture at a larger example", guarded=False)
    except Exception:  # noqa: BLE001 - a check that cannot run keeps the first program
        return None
    if difference is not None:
        return None
    grown = replace(grown, seconds=grown.seconds + time.perf_counter() - began)
    size = _pinned_words(pinned, inputs, attempt)
    set_aside = replace(attempt, program=None, skipped_reason=f"set aside: its program holds only while {size} stays 1")
    where = ", ".join(f"{path}.shape[{axis}]={value}" for (path, axis), value in _grown_axes(symbols, inputs, grown_inputs))
    note = (f"the example makes {size} 1, and torch treats a size 1 as a constant, so that program held only "
            f"while it stayed 1; captured again at {where}, which matches the model at the example and at "
            "other sizes")
    return GrownCapture(grown, set_aside, note)


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


def _pinned_words(pinned: list[tuple[Any, Any]], inputs: BoundInputs, attempt: CaptureAttempt) -> str:
    """The first pinned size in the user's terms: where it is computed, else its expression."""
    guards = guards_from_events(tuple(event for _, event in pinned), inputs, attempt.strategy)
    for guard in guards:
        if guard.file and guard.line:
            code = f" (`{guard.code.strip()}`)" if guard.code else ""
            return f"the size computed at {source_label(guard.file, guard.line, short=True)}{code}"
    return f"the size {pinned[0][0]}"


def _grown_axes(symbols: dict[tuple[str, int], str], inputs: BoundInputs,
                grown: BoundInputs) -> list[tuple[tuple[str, int], int]]:
    return [((path, axis), grown.leaf(path).shape[axis]) for (path, axis) in symbols
            if grown.leaf(path).shape[axis] != inputs.leaf(path).shape[axis]]
