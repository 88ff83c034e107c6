"""Dim groups the model's code ties to other groups, read from torch's shape guards.

GPT-2 with a KV cache and an attention mask reads the mask over the cached and the new
tokens: torch records ``total <= past_seq + seq`` and ``past_seq + seq - total <= 0`` (in
input-axis terms), so no caller ever sends a ``total`` other than ``past_seq + seq``. A sweep
that sizes ``total`` on its own feeds inputs no caller sends and reports the model wrong.
:func:`derive_groups` finds such groups, so the sweep sizes them from the others instead.

How. Every guard's ``expression`` (written in input-axis labels) is read with each axis
replaced by its group's symbol (an integer, positive sympy symbol named by the group label;
an axis of no dynamic group by its example size) and simplified (``(b*t)//b`` is ``t``). An
``==`` guard, or a pair ``A <= B`` and ``B <= A`` in any written form (``A - B <= 0``), is an
equation. A group is derived when the equation solves to ``group = expression`` with the
group's coefficient 1 and an expression over other dynamic groups that is positive for every
positive size (``past_seq + seq``, ``2*n``; never ``total - seq``). A group the user gave a
``Dim`` range to, or that capture specialized, is never derived; a derived group's expression
never uses another derived group.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from ..guards import Guard
from ..inputs import BoundInputs
from .groups import DimGroup, guard_words

_RELATION = re.compile(r"\s*(==|!=|<=|>=|<|>)\s*")


def _symbol(label: str) -> Any:
    import sympy

    return sympy.Symbol(label, integer=True, positive=True)


def _side(text: str, pattern: re.Pattern[str], values: Mapping[str, Any]) -> Any:
    """One side of a guard as a sympy expression: axis labels replaced by ``values``."""
    import sympy

    names: dict[str, Any] = {}

    def placeholder(match: re.Match[str]) -> str:
        name = f"_axis{len(names)}"
        names[name] = values[match.group(0)]
        return name

    replaced = pattern.sub(placeholder, text)
    if ".shape[" in replaced:  # an axis of no input: nothing to substitute
        raise ValueError(text)
    return sympy.sympify(replaced, locals=names)  # evaluated as read: (b*t)//b is already t


def _relations(expression: str, pattern: re.Pattern[str], values: Mapping[str, Any]) -> tuple[str, Any, Any] | None:
    """``(op, lhs, rhs)`` of a guard written ``lhs op rhs``, or None when it reads otherwise."""
    parts = _RELATION.split(expression)
    if len(parts) != 3:
        return None
    lhs, op, rhs = parts
    try:
        return op, _side(lhs, pattern, values), _side(rhs, pattern, values)
    except Exception:  # noqa: BLE001 - a torch function sympy cannot read: not an equation here
        return None


def _equations(guards: Sequence[Any], pattern: re.Pattern[str], values: Mapping[str, Any]) -> list[tuple[Any, frozenset[Any], tuple[Any, ...]]]:
    """``(difference, symbols written alone on one side, guards)``: each equation
    ``difference == 0`` the guards state, by an ``==`` or by a pair of opposite ``<=``."""
    import sympy

    equations: list[tuple[Any, frozenset[Any], tuple[Any, ...]]] = []
    bounds: list[tuple[Any, frozenset[Any], Any]] = []  # difference <= 0
    for guard in guards:
        found = _relations(guard.expression, pattern, values)
        if found is None:
            continue
        op, lhs, rhs = found
        alone = frozenset(s for s in (lhs, rhs) if isinstance(s, sympy.Symbol))
        difference = sympy.expand(lhs - rhs)
        if difference == 0 or not difference.free_symbols:
            continue
        if op == "==":
            equations.append((difference, alone, (guard,)))
        elif op in ("<=", ">="):
            bound = difference if op == "<=" else -difference
            for other, other_alone, other_guard in bounds:
                if sympy.expand(bound + other) == 0:
                    equations.append((bound, alone | other_alone, (other_guard, guard)))
                    break
            else:
                bounds.append((bound, alone, guard))
    return equations


def _solved(difference: Any, symbol: Any) -> Any | None:
    """``expression`` with ``symbol == expression`` when ``difference == 0`` is linear in
    ``symbol`` with coefficient +-1, else None."""
    import sympy

    coefficient = sympy.diff(difference, symbol)
    if coefficient not in (1, -1):
        return None
    rest = sympy.expand(difference - coefficient * symbol)
    if rest.has(symbol):
        return None
    return sympy.expand(-rest / coefficient)


def derive_groups(groups: Sequence[DimGroup], guards: Sequence[Guard], bound: BoundInputs) -> tuple[DimGroup, ...]:
    """``groups`` with ``derived`` set on every group the guards tie to other groups (see the
    module docstring); the others unchanged. Never raises: a guard it cannot read is skipped."""
    try:
        return _derive(groups, guards, bound)
    except Exception:  # noqa: BLE001 - no derivation is better than no verification
        return tuple(groups)


def _derive(groups: Sequence[DimGroup], guards: Sequence[Guard], bound: BoundInputs) -> tuple[DimGroup, ...]:
    import sympy

    dynamic = {g.label: g for g in groups if not g.specialized}
    if len(dynamic) < 2 or not guards:
        return tuple(groups)
    values: dict[str, Any] = {}
    for leaf in bound.leaves:
        for index, size in enumerate(leaf.shape):
            values[f"{leaf.path}.shape[{index}]"] = sympy.Integer(int(size))
    symbols: dict[str, Any] = {}
    for group in dynamic.values():
        symbols[group.label] = _symbol(group.label)
        for axis in group.axes:
            values[axis.label] = symbols[group.label]
    labels = sorted(values, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w.])(?:" + "|".join(re.escape(label) for label in labels) + ")")
    group_of = {symbol: label for label, symbol in symbols.items()}
    examples = {symbols[label]: g.example for label, g in dynamic.items()}

    derived: dict[str, tuple[Any, tuple[Any, ...]]] = {}
    for difference, alone, sources in _equations(guards, pattern, values):
        if not difference.free_symbols <= set(group_of):
            continue
        used = {s for expr, _ in derived.values() for s in expr.free_symbols}
        # The group written alone on one side first (``total <= past_seq + seq``), then the
        # later groups (a mask after the ids it covers).
        order = sorted(difference.free_symbols, key=lambda s: (s not in alone, -list(dynamic).index(group_of[s])))
        for symbol in order:
            label = group_of[symbol]
            group = dynamic[label]
            if label in derived or symbol in used or group.requested_range != (1, None):
                continue
            expr = _solved(difference, symbol)
            if expr is None or not expr.free_symbols or expr.is_positive is not True:
                continue
            if any(group_of[s] in derived for s in expr.free_symbols):
                continue
            if expr.subs(examples) != group.example:  # read wrong: the guard held at the example
                continue
            derived[label] = (expr, sources)
            break
    if not derived:
        return tuple(groups)
    out = []
    for group in groups:
        if group.label in derived:
            expr, sources = derived[group.label]
            texts = tuple(guard_words(g.expression) + (f" at {g.source}" if g.source else "") for g in sources)
            group = replace(group, derived_expr=expr, derived_guards=texts)
        out.append(group)
    return tuple(out)
