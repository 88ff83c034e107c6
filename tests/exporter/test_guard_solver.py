"""The guard → fix solver: real torch guards of small modules, solved into Dim ranges, and fixes
that export in one round (``exporter.shapes.solve``, ``exporter.shapes.fixes``)."""

from __future__ import annotations

import pytest
import torch
from shape_models import BranchOnOne

from exporter import STATIC, Dim, ExportOptions, Session
from exporter.shapes.solve import axis_ranges, solve_size


class PositionTable(torch.nn.Module):
    """Position embeddings sliced to the sequence: guard ``seq == Min(128, seq)``."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(128, 4))

    def forward(self, x):
        return x + self.table[: x.shape[1]]


class AtMost64(torch.nn.Module):
    """An explicit bound: guard ``seq <= 64``."""

    def forward(self, x):
        if x.shape[1] > 64:
            raise ValueError("too long")
        return x.cumsum(1)


class StridedThenNotOne(torch.nn.Module):
    """Two stride-2 convs, then a path that needs more than one frame: guard
    ``1 + (t - 1) // 4 != 1``."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv1d(2, 4, 3, stride=2, padding=1)
        self.c2 = torch.nn.Conv1d(4, 4, 3, stride=2, padding=1)

    def forward(self, x):
        h = self.c2(self.c1(x))
        if h.shape[-1] == 1:
            return h * 0
        return h


class PinsAndBounds(torch.nn.Module):
    """Two guards on two dims at once: ``seq == 8`` (a reshape to a constant) and ``b != 1``."""

    def forward(self, x):
        y = x.reshape(x.shape[0], 8 * 4)
        if x.shape[0] == 1:
            return y * 2
        return y + 1


class AddTwo(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def failed_session(model, args, dynamic_shapes):
    session = Session(model, args, None, ExportOptions(dynamic_shapes=dynamic_shapes))
    assert session.run("capture").status == "failed"
    return session


def only_guard(session, axis):
    guards = [g for g in session.guards.for_axis(axis) if g.expr is not None and len(g.expr.free_symbols) == 1]
    assert guards, session.guards
    return guards


SOLVED = [
    ("not one", BranchOnOne(), (torch.randn(4, 3),), {"x": {0: Dim("b")}}, ("x", 0), 4, (2, None)),
    ("Min cap", PositionTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}}, ("x", 1), 16, (0, 128)),
    ("<= bound", AtMost64(), (torch.randn(2, 10),), {"x": {1: Dim("seq")}}, ("x", 1), 10, (0, 64)),
    ("strided convs", StridedThenNotOne(), (torch.randn(1, 2, 40),), {"x": {2: Dim("time")}}, ("x", 2), 40, (5, None)),
]


@pytest.mark.parametrize("model, args, spec, axis, example, expected", [c[1:] for c in SOLVED], ids=[c[0] for c in SOLVED])
def test_each_real_guard_shape_solves_to_the_widest_range_around_the_example(model, args, spec, axis, example, expected):
    session = failed_session(model, args, spec)
    ranges = []
    for guard in only_guard(session, axis):
        (symbol,) = guard.expr.free_symbols
        ranges.append(solve_size(guard.expr, symbol, example))
    lo = max(r[0] for r in ranges)
    his = [r[1] for r in ranges if r[1] is not None]
    assert (lo, min(his) if his else None) == expected


def test_solve_size_refuses_a_guard_that_does_not_hold_at_the_example():
    import sympy

    s = sympy.Symbol("s", integer=True, positive=True)
    assert solve_size(sympy.Ne(s, 4), s, 4) is None
    assert solve_size(sympy.Eq(s, 8), s, 8) == (8, 8)


FIXED = [
    ("not one", BranchOnOne(), (torch.randn(4, 3),), {"x": {0: Dim("b")}}, {("x", 0): Dim("b", min=2)}),
    ("Min cap", PositionTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}}, {("x", 1): Dim("seq", max=128)}),
    ("<= bound", AtMost64(), (torch.randn(2, 10),), {"x": {1: Dim("seq", max=4096)}}, {("x", 1): Dim("seq", max=64)}),
    ("strided convs", StridedThenNotOne(), (torch.randn(1, 2, 40),), {"x": {2: Dim("time")}}, {("x", 2): Dim("time", min=5)}),
]


@pytest.mark.parametrize("model, args, spec, expected", [c[1:] for c in FIXED], ids=[c[0] for c in FIXED])
def test_a_bound_guard_gives_the_exact_dim_range_and_one_round_of_fixes_exports(model, args, spec, expected):
    session = failed_session(model, args, spec)
    fixes = session.suggested_fixes
    for (path, axis), dim in expected.items():
        assert fixes.after.policy(path, axis) == dim
        assert f"fix: {dim!r}" in session.dims[path, axis].reason
    fixed = session.apply_suggested_fixes()
    assert fixed.run("capture").status == "ok"
    assert len(fixed.applied_fixes) == 1


def test_every_guard_on_every_dim_is_fixed_at_once():
    session = failed_session(PinsAndBounds(), (torch.randn(3, 8, 4),), {"x": {0: Dim("b"), 1: Dim("seq")}})
    fixes = session.suggested_fixes
    assert fixes.after.policy("x", 0) == Dim("b", min=2)
    assert fixes.after.policy("x", 1) is STATIC  # torch's own fix: the reshape pins it to 8
    fixed = session.apply_suggested_fixes()
    assert fixed.run("capture").status == "ok" and len(fixed.applied_fixes) == 1


def test_equal_dims_with_two_names_are_merged_in_one_round():
    session = failed_session(AddTwo(), (torch.randn(3, 4), torch.randn(3, 4)), {"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    fixed = session.apply_suggested_fixes()
    assert fixed.run("capture").status == "ok" and len(fixed.applied_fixes) == 1
    assert fixed.spec.policy("x", 0) == fixed.spec.policy("y", 0)


def test_the_capture_error_names_the_exact_new_spec():
    session = failed_session(PositionTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}})
    text = str(session.result("capture").error)
    assert "fix: change these dims (session.apply_suggested_fixes() applies them):" in text
    assert "x.shape[1]: Dim('seq', max=128)" in text
    assert "pins a dim" not in text


def test_without_its_inputs_the_capture_error_says_a_guard_bounds_the_dim_not_that_it_pins_it():
    import dataclasses

    from exporter.diagnose import capture_error

    session = failed_session(PositionTable(), (torch.randn(2, 16, 4),), {"x": {1: Dim("seq")}})
    bare = tuple(dataclasses.replace(a, context=None) for a in session.attempts)
    text = str(capture_error(bare))
    assert "bounds a dim" in text and "pins a dim" not in text


def test_a_string_name_takes_the_guards_range_instead_of_failing():
    session = Session(PositionTable(), (torch.randn(2, 16, 4),), None, ExportOptions(dynamic_shapes={"x": {1: "seq"}}))
    assert session.run("capture").status == "ok"
    outcome = session.dims["x", 1]
    assert outcome.dynamic and (outcome.min, outcome.max) == (0, 128)
    # the reason in words with the user's line, as the Dims tab says it; torch's text stays in the guards
    assert outcome.reason.startswith("narrowed to [1, 128]: at most 128: ") and "test_guard_solver.py:22" in outcome.reason
    assert "[0, inf]" not in outcome.reason and outcome.symbol not in outcome.reason
    assert axis_ranges(session.guards, session.inputs)[("x", 1)].max == 128


def test_the_dim_ranges_chart_draws_the_capped_range():
    from workbench.render.dim_charts import dim_ranges_chart

    session = Session(PositionTable(), (torch.randn(2, 16, 4),), None, ExportOptions(dynamic_shapes={"x": {1: "seq"}}))
    figure = dim_ranges_chart(session.dims)
    texts = [t.get_text() for axes in figure.axes for t in axes.texts]
    assert "seq [1, 128]" in texts, texts  # torch's 0 is shown as 1: outcomes.ZERO_MIN_NOTE says why


class Pairs(torch.nn.Module):
    """Rows folded in pairs: a divisibility guard (``Mod(3*n, 6) == 0``), no range."""

    def forward(self, x):
        return x.reshape(-1, 2, x.shape[1]).sum(1)


def test_a_divisibility_guard_is_no_range_and_torch_derived_fix_exports_in_one_round():
    session = failed_session(Pairs(), (torch.randn(8, 3),), {"x": {0: Dim("n")}})
    for guard in only_guard(session, ("x", 0)):
        (symbol,) = guard.expr.free_symbols
        assert solve_size(guard.expr, symbol, 8) is None  # holds at 10, 12...: not [8, 8]
    fixes = session.suggested_fixes
    assert repr(fixes.after.policy("x", 0)) == "2*_n" and not fixes.unapplied
    fixed = session.apply_suggested_fixes()
    assert fixed.run().status == "ok" and len(fixed.applied_fixes) == 1
