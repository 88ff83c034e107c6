"""exporter.shapes.evaluate computes torch's size expressions as sympy does, in Python ints."""

from __future__ import annotations

import sympy
from torch.utils._sympy.functions import CleanDiv, FloorDiv, Mod, PythonMod

from exporter.shapes.evaluate import evaluate
from exporter.shapes.solve import holds_at

s, t = sympy.Symbol("s0", integer=True, positive=True), sympy.Symbol("s1", integer=True, positive=True)
FRAMES = FloorDiv(FloorDiv(FloorDiv(s, 80) - 3, 2) - 1, 2) + 1  # SEW's frame count


def _sympy_value(expr, sizes):
    return expr.xreplace({sym: sympy.Integer(sizes[sym.name]) for sym in expr.free_symbols})


def test_every_head_torch_writes_evaluates_as_sympy_does():
    expressions = [
        FRAMES, 2 * sympy.Min(FloorDiv(FRAMES + 1, 2), FRAMES) - FRAMES, PythonMod(s, 7), Mod(s + t, 4),
        CleanDiv(4 * s, 4), sympy.Max(s, 3 * t) ** 2, s * t - 5,
        sympy.Eq(PythonMod(s, 4), 0), sympy.Ne(FloorDiv(s - 1, 4) + 1, 1), sympy.Lt(s, t), sympy.Le(s, 64),
        sympy.Gt(s, t + 1), sympy.Ge(2 * FloorDiv(FRAMES, 2), FRAMES),
        sympy.And(sympy.Ge(s, 2), sympy.Le(s, 9)), sympy.Or(sympy.Eq(s, 1), sympy.Eq(t, 1)), sympy.Not(sympy.Eq(s, t)),
    ]
    for expr in expressions:
        for sizes in ({"s0": 2640, "s1": 3}, {"s0": 2961, "s1": 7}, {"s0": 1, "s1": 1}, {"s0": 9, "s1": 2}):
            want = _sympy_value(expr, sizes)
            got = evaluate(expr, sizes)
            assert got is not None, expr
            assert (bool(want) if isinstance(got, bool) else int(want)) == got, (expr, sizes)


def test_what_it_does_not_read_is_none_and_holds_at_falls_back_to_sympy():
    assert evaluate(s / 2, {"s0": 3}) is None  # a Rational: not an integer head
    assert evaluate(FRAMES, {}) is None  # no size for the symbol
    assert holds_at(sympy.Eq(s / 2, 3), {"s0": 6}) is True  # sympy decides it
    assert holds_at(sympy.Eq(s, t), {"s0": 6}) is None
