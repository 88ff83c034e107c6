"""Size ranges from guard expressions: the guard → range solver behind fixes and obtained ranges.

torch states what a model needs of a size as a sympy boolean over its symbols (``Ne(s, 1)``,
``Eq(s, Min(128, s))``, ``Ne(1 + FloorDiv(s - 1, 4), 1)``, ``s <= 64``). Its "Suggested fixes"
often leave such a bound out (``seq = Dim('seq')``, unchanged). Here a guard on one symbol is
solved for the widest range of integer sizes around the example size in which it holds:

* below the example, every size is evaluated (sizes are small there) down to the first one
  that fails: ``Ne(s, 1)`` gives min 2, ``Ne(1 + (s - 1) // 4, 1)`` min 5;
* above it, sympy evaluates the guard at probes (doublings, and every constant of the
  expression and its neighbours) and bisects between the last size that holds and the first
  that fails: ``Eq(s, Min(128, s))`` gives max 128;
* torch's value-range analysis (``bound_sympy``, through ``exporter.compat``) confirms the
  range when it can prove it.

Only sympy evaluation and torch's value ranges are used, never the guard's text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..axis import Axis
from ..compat import condition_holds_on
from .evaluate import evaluate

if TYPE_CHECKING:
    from ..guards import Guard
    from ..inputs import BoundInputs

_SCAN_DOWN = 4096  # sizes evaluated one by one below the example
_PROBE_TOP = 1 << 40  # the largest size probed above the example
_RECHECK = 16  # sizes checked just outside a solved range, to tell a range from a lattice


@dataclass(frozen=True)
class SizeRange:
    """The sizes ``[min, max]`` (``max`` None: unbounded) a set of guards allows for the axes
    of one torch symbol, and the guards that narrowed it."""

    symbol: str
    axes: tuple[Axis, ...]
    min: int
    max: int | None
    guards: tuple[Guard, ...] = ()

    def contains(self, size: int) -> bool:
        return size >= self.min and (self.max is None or size <= self.max)

    @property
    def is_static(self) -> bool:
        return self.max is not None and self.max == self.min


def holds(expr: Any, symbol: Any, size: int) -> bool | None:
    """Whether the sympy boolean ``expr`` holds with ``symbol = size`` (None: undecided)."""
    return holds_at(expr, {symbol.name: size})


def holds_at(expr: Any, sizes: Mapping[str, int]) -> bool | None:
    """Whether the sympy boolean ``expr`` holds with its symbols at ``sizes`` (by symbol
    name); None when a symbol has no size or sympy cannot decide."""
    import sympy

    fast = evaluate(expr, sizes)  # Python ints: sympy's own evaluation costs ~100x more
    if isinstance(fast, bool):
        return fast
    try:
        if any(sym.name not in sizes for sym in expr.free_symbols):
            return None
        value = expr.xreplace({sym: sympy.Integer(sizes[sym.name]) for sym in expr.free_symbols})
    except Exception:  # noqa: BLE001 - an expression sympy cannot evaluate
        return None
    if value is sympy.true or value is True:
        return True
    if value is sympy.false or value is False:
        return False
    return None


def _probes(expr: Any, example: int, hi: int | None) -> list[int]:
    import sympy

    top = _PROBE_TOP if hi is None else hi
    points = {example + 1, top}
    size = max(example, 1)
    while size < top:
        size *= 2
        points.add(min(size, top))
    for atom in expr.atoms(sympy.Integer):
        c = abs(int(atom))
        points.update({c - 1, c, c + 1, 2 * c})
    return sorted(p for p in points if example < p <= top)


def solve_size(expr: Any, symbol: Any, example: int, lo: int = 0, hi: int | None = None) -> tuple[int, int | None] | None:
    """The widest range ``[a, b]`` inside ``[lo, hi]`` that contains ``example`` and in which
    the guard ``expr`` (a sympy boolean in ``symbol`` alone) holds at every integer size; ``b``
    None when no upper bound was found. None when the guard does not hold at the example,
    cannot be evaluated there, or holds again just outside the range (not a range)."""
    if holds(expr, symbol, example) is not True:
        return None
    a = example
    while a - 1 >= max(lo, example - _SCAN_DOWN) and holds(expr, symbol, a - 1) is True:
        a -= 1
    b: int | None = None if hi is None else hi
    good = example
    for probe in _probes(expr, example, hi):
        verdict = holds(expr, symbol, probe)
        if verdict is True:
            good = probe
            continue
        # The first probe that fails: the bound is between ``good`` and ``probe``.
        left, right = good, probe
        while right - left > 1:
            mid = (left + right) // 2
            if holds(expr, symbol, mid) is True:
                left = mid
            else:
                right = mid
        b = left
        break
    else:
        if hi is None:
            b = None
    # A guard that holds again just outside [a, b] is no range (a divisibility such as
    # Mod(s, 2) == 0): torch's own fix (a derived dim) is the right one, not a range.
    outside = [n for n in range(max(a - _RECHECK, 2), a) if n >= lo]
    if b is not None:
        outside += [n for n in range(b + 1, b + 1 + _RECHECK) if hi is None or n <= hi]
    if any(holds(expr, symbol, n) is True for n in outside):
        return None
    return a, b


def _single_symbol(guard: Guard) -> Any | None:
    expr = guard.expr
    if expr is None:
        return None
    free: set[Any] = getattr(expr, "free_symbols", set())
    return next(iter(free)) if len(free) == 1 else None


def _example(axes: Iterable[Axis], bound: BoundInputs) -> int | None:
    for axis in axes:
        try:
            return int(bound.leaf(axis.path).shape[axis.index])
        except (KeyError, IndexError, AttributeError):
            continue
    return None


def guard_ranges(guards: Iterable[Guard], bound: BoundInputs, base: Mapping[str, tuple[int, int | None]] | None = None) -> dict[str, SizeRange]:
    """Per torch symbol of the inputs, the range every guard on that symbol alone allows
    (intersected with ``base``, e.g. the program's ``range_constraints``). Guards on several
    symbols (equalities, products) are left to torch."""
    out: dict[str, SizeRange] = {}
    for guard in guards:
        symbol = _single_symbol(guard)
        if symbol is None or not guard.axes:
            continue
        example = _example(guard.axes, bound)
        if example is None:
            continue
        name = str(symbol)
        current = out.get(name)
        lo, hi = (current.min, current.max) if current else (base or {}).get(name, (0, None))
        solved = solve_size(guard.expr, symbol, example, lo, hi)
        if solved is None:
            continue
        a, b = max(solved[0], lo), solved[1] if hi is None else (hi if solved[1] is None else min(hi, solved[1]))
        narrowed = a > lo or (b is not None and (hi is None or b < hi))
        if narrowed and condition_holds_on(guard.expr, symbol, a, b) is False:
            continue  # torch's value ranges refute it: keep what torch knows
        cited = (current.guards if current else ()) + ((guard,) if narrowed else ())
        axes = tuple(dict.fromkeys((current.axes if current else ()) + tuple(guard.axes)))
        out[name] = SizeRange(name, axes, a, b, cited)
    return out


def axis_ranges(guards: Iterable[Guard], bound: BoundInputs) -> dict[Axis, SizeRange]:
    """:func:`guard_ranges` keyed by every input axis of each symbol."""
    out: dict[Axis, SizeRange] = {}
    for size_range in guard_ranges(guards, bound).values():
        for axis in size_range.axes:
            out[axis] = size_range
    return out
