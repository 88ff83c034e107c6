"""Sizes near the example that keep and that break the remainder/divisibility guards torch
recorded for a dim group (:func:`guard_sizes`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from ..guards import Guard
from ..shapes.solve import holds_at
from .groups import DimGroup

__all__ = ["guard_sizes", "with_guard_sizes"]


_MAX_GUARDS = 24  # remainder guards read per group (each is evaluated at up to 16 sizes)
_MODULAR = frozenset({"Mod", "PythonMod", "FloorDiv", "CleanDiv", "floor", "ceiling"})


def _modular_divisors(expr: Any) -> set[int]:
    """The integer divisors of the remainder / floor-division terms of a guard (``Mod(s, 4)``,
    ``s//4``), empty when it has none."""
    import sympy

    found: set[int] = set()
    for node in sympy.preorder_traversal(expr):
        if getattr(getattr(node, "func", None), "__name__", "") in _MODULAR:
            for arg in getattr(node, "args", ())[1:]:
                if getattr(arg, "is_Integer", False) and 1 < int(arg) <= 1024:
                    found.add(int(arg))
            if not found and getattr(node, "func", None) is not None:
                found.add(2)  # floor(s/2): a rounding term; try both parities
    return found


def _guard_text(guard: Guard) -> str:
    expression = guard.expression if len(guard.expression) <= 70 else guard.expression[:67] + "..."
    return f"{expression}" + (f" at {guard.location}" if guard.location else "")


def guard_sizes(group: DimGroup, groups: Sequence[DimGroup], guards: Sequence[Guard], limit: int = 3) -> tuple[tuple[str, int, str], ...]:
    """Sizes near the example that keep and that break the remainder/divisibility guards torch
    recorded for ``group`` (Swin's window partition: ``Mod(h, 4) == 0``, no padding when
    ``(h//4) % 4 == 0``). torch checked the program only where those guards hold: the ONNX
    model keeps the branch the example took, so a size in range that breaks one (height 40 with
    a window of 4 patches of 4) is where it is wrong while eager pads and runs. Returns
    ``(kind, size, guard)``: ``guards hold`` (the nearest size other than the example where
    every guard of the group holds) and up to ``limit`` ``breaks guard`` sizes, one per guard,
    each inside the requested and obtained ranges. Other groups stay at their example."""
    if group.specialized or group.derived is not None or not group.symbols:
        return ()
    mine = set(group.symbols)
    relevant = [g for g in guards if g.expr is not None
                and mine & {s.name for s in g.expr.free_symbols}]
    modular = [(g, _modular_divisors(g.expr)) for g in relevant]
    modular = [(g, d) for g, d in modular if d][:_MAX_GUARDS]
    if not modular:
        return ()
    if len(relevant) > 2 * _MAX_GUARDS:  # a model with hundreds of guards: keep the cost bounded
        relevant = [g for g, _ in modular]
    divisors = sorted({d for _, ds in modular for d in ds})
    product = 1
    for d in divisors:
        product = min(product * d, 256)
    deltas = sorted({1, 2, 3, *(j * d for d in {*divisors, product} for j in (1, 2, 3))})
    pool = sorted({group.example + sign * d for d in deltas for sign in (1, -1)},
                  key=lambda n: (abs(n - group.example), -n))
    pool = [n for n in pool if group.in_both_ranges(n) and n != group.example][:16]
    base = {sym: g.example for g in groups for sym in g.symbols}

    def at(size: int) -> dict[str, int]:
        return {**base, **{sym: size for sym in group.symbols}}

    out: list[tuple[str, int, str]] = []
    for size in pool:
        if all(holds_at(g.expr, at(size)) is not False for g in relevant):
            out.append(("guards hold", size, "every guard of the group"))
            break
    used = {size for _, size, _ in out}
    for guard, _ in modular:
        if len(out) >= limit + 1:
            break
        if holds_at(guard.expr, base) is not True:
            continue
        breaking = next((n for n in pool if holds_at(guard.expr, at(n)) is False), None)
        if breaking is not None and breaking not in used:
            used.add(breaking)
            out.append(("breaks guard", breaking, _guard_text(guard)))
    return tuple(out)


def with_guard_sizes(groups: Sequence[DimGroup], guards: Sequence[Guard]) -> list[DimGroup]:
    """``groups`` with :attr:`DimGroup.guard_sizes` set where :func:`guard_sizes` finds some."""
    out = []
    for group in groups:
        try:
            found = guard_sizes(group, groups, guards)
        except Exception:  # noqa: BLE001 - guard sizes are extra cases, never a failure
            found = ()
        out.append(replace(group, guard_sizes=found) if found else group)
    return out
