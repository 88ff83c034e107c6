"""Sizes on both sides of the strides a program divides a dim by (:func:`with_stride_sizes`).

A size swept at the example, the example + 1 and multiples of it keeps every size the program
computes by a floor division at the same parity: SEW's frame count is ``((((s//80) - 3)//2) -
1)//2 + 1``, 8 at a raw-audio length of 2640, 8 at 2641 and 16 at 5280, so a branch on the
frame count's parity (``if hidden.shape[1] < n_input_timesteps: pad``) is never taken. The
program's own sizes and torch's guards say where those divisions are (``s//80``, ``Mod(s, 4)``,
a conv's ``(h - 1)//2 + 1``): for each such size, the nearest input size above and below the
example where it has the other parity is found by
stepping the input by the divisors the program applies to it, and the farthest of them (the
coarsest division: the frame count, not the first conv's output) becomes a case on each side.
The divisors also choose the offset the sweep adds to the example (:func:`offset_prime`): a
prime that divides none of them, so the size has another residue modulo every stride.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from typing import Any

from ..guards import Guard
from ..shapes.evaluate import evaluate
from .chunk_sizes import shape_expressions
from .groups import DimGroup

__all__ = ["KIND_ABOVE", "KIND_BELOW", "divided_expressions", "offset_prime", "stride_sizes", "with_stride_sizes"]

KIND_ABOVE = "stride above"
KIND_BELOW = "stride below"
_DIVIDING = frozenset({"FloorDiv", "CleanDiv", "Mod", "PythonMod", "floor", "ceiling", "FloorToInt", "CeilToInt"})
_MAX_EXPRESSIONS = 48  # per group: the evaluations stay a few thousand
_STEPS = 24  # multiples of each divisor tried on each side
_LARGEST = 4096
OFFSET_PRIMES = (3, 7, 5, 11, 13)


def _name(node: Any) -> str:
    return getattr(getattr(node, "func", None), "__name__", "")


def _divisors(expr: Any, symbols: set[str] | None = None) -> set[int]:
    """The integer divisors of the floor divisions and remainders in ``expr`` (of those whose
    dividend holds one of ``symbols``, when given)."""
    import sympy

    found: set[int] = set()
    for term in sympy.preorder_traversal(expr):
        if _name(term) in _DIVIDING and len(term.args) == 2:
            dividend, divisor = term.args
            if symbols is not None and not symbols & {s.name for s in dividend.free_symbols}:
                continue
            if getattr(divisor, "is_Integer", False) and 1 < int(divisor) <= _LARGEST:
                found.add(int(divisor))
    return found


def divided_expressions(program: Any, guards: Sequence[Guard]) -> list[Any]:
    """The sizes the program computes and the sides of torch's guards that divide an input
    size (``s//80``, ``Mod(s, 4)``), each once: the program's sizes first."""
    out: list[Any] = []
    seen: set[Any] = set()

    def candidates() -> Iterator[Any]:
        if program is not None:
            yield from shape_expressions(program)
        for guard in guards:
            if guard.expr is not None:
                yield guard.expr

    for expr in candidates():
        if getattr(expr, "is_Relational", False):  # its sides: a bound's truth flips only at the range's end
            sides: Iterable[Any] = expr.args
        elif getattr(expr, "is_Boolean", False):
            sides = ()
        else:
            sides = (expr,)
        for side in sides:
            if side not in seen and not getattr(side, "is_number", True) and _divisors(side):
                seen.add(side)
                out.append(side)
    return out


def offset_prime(divisors: Iterable[int]) -> int:
    """The first of :data:`OFFSET_PRIMES` that divides none of ``divisors`` (3 unless a stride is
    a multiple of 3, then 7): an offset that gives the example another residue modulo each."""
    found = tuple(divisors)
    return next((p for p in OFFSET_PRIMES if all(d % p for d in found)), OFFSET_PRIMES[-1])


def _flipped(before: int, after: int) -> bool:
    """A divided size of the other parity."""
    return (after - before) % 2 == 1


def _steps(example: int, divisors: Sequence[int], sign: int, inside: Any) -> list[int]:
    """Sizes on one side of the example, nearest first: the example moved by 1, 2, 3 and by
    up to :data:`_STEPS` multiples of each divisor (a floor division by d changes value once
    every d), inside the ranges."""
    deltas = {1, 2, 3, *(j * d for d in divisors for j in range(1, _STEPS + 1))}
    return [n for n in (example + sign * d for d in sorted(deltas)) if inside(n)]


def stride_sizes(group: DimGroup, groups: Sequence[DimGroup], expressions: Sequence[Any],
                 per_side: int = 2) -> tuple[tuple[int, ...], tuple[tuple[str, int, str], ...]]:
    """``(divisors, sizes)`` for ``group``: the divisors the program and guards apply to its
    size, and up to ``per_side`` sizes ``(kind, size, why)`` above the example and as many
    below it: for each divided size, the nearest input size where it has the other parity;
    the farthest of those first (the coarsest division: SEW's frame count, not its first
    conv's output); other groups at their example. Inside the requested range (and a cap)
    only: eager PyTorch judges the rest."""
    if group.specialized or group.derived is not None or not group.symbols:
        return (), ()
    mine = set(group.symbols)
    base = {sym: g.example for g in groups for sym in g.symbols}
    if any(sym not in base for sym in mine):
        return (), ()
    relevant = [e for e in expressions if _divisors(e, mine) and {s.name for s in e.free_symbols} <= set(base)]
    relevant = relevant[:_MAX_EXPRESSIONS]
    divisors = sorted({d for e in relevant for d in _divisors(e, mine)})
    if not divisors:
        return (), ()
    lo, hi = group.requested_range
    tops = [h for h in (hi, group.cap) if h is not None]

    def inside(n: int) -> bool:
        return n >= max(lo, 1) and (not tops or n <= min(tops))

    def at(size: int) -> dict[str, int]:
        return {**base, **{sym: size for sym in mine}}

    found: list[tuple[str, int, str]] = []
    for kind, sign in ((KIND_ABOVE, 1), (KIND_BELOW, -1)):
        steps = _steps(group.example, divisors, sign, inside)
        first: dict[int, Any] = {}  # size -> the first expression whose parity flips there
        for expr in relevant:
            before = evaluate(expr, base)
            if before is None or isinstance(before, bool):
                continue
            for n in steps:
                after = evaluate(expr, at(n))
                if after is not None and not isinstance(after, bool) and _flipped(before, after):
                    first.setdefault(n, expr)
                    break
        for size in sorted(first, key=lambda n: -abs(n - group.example))[:per_side]:
            text = str(first[size])
            text = text if len(text) <= 70 else text[:67] + "..."
            found.append((kind, size, f"{text} has the other parity there"))
    return tuple(divisors), tuple(found)


def with_stride_sizes(groups: Sequence[DimGroup], program: Any, guards: Sequence[Guard]) -> list[DimGroup]:
    """``groups`` with :attr:`DimGroup.divisors` and :attr:`DimGroup.stride_sizes` set where the
    program or the guards divide their size (see the module docstring)."""
    try:
        expressions = divided_expressions(program, guards)
    except Exception:  # noqa: BLE001 - extra cases, never a failure
        return list(groups)
    out = []
    for group in groups:
        try:
            divisors, sizes = stride_sizes(group, groups, expressions)
        except Exception:  # noqa: BLE001
            divisors, sizes = (), ()
        out.append(replace(group, divisors=divisors, stride_sizes=sizes) if divisors else group)
    return out
