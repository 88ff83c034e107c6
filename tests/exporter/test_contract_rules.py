"""Each declared contract check on the facts it reads: the axis rules answer only their own
case (None otherwise), and the whole-contract checks report inputs, shared names and outputs."""

from __future__ import annotations

import pytest
import torch

from exporter.dims import AUTO, Dim
from exporter.inputs import bind_inputs
from exporter.verify.contract import (
    AXIS_RULES,
    AxisFacts,
    ContractFacts,
    derived_axis,
    expression_axis,
    input_checks,
    output_names,
    pinned_axis,
    renamed_axis,
    shared_names,
    static_axis,
    symbolic_axis,
    unnamed_axis,
)


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


def facts(requested=None, dims=None, symbols=None, onnx_inputs=("x", "y"), outputs=("output",),
          output_paths=("output",), fx_names=("add",)):
    inputs = bind_inputs(Add(), (torch.ones(2, 3), torch.ones(2, 3)), {})
    return ContractFacts(inputs=inputs, requested=requested or {}, onnx_name={"x": "x", "y": "y"},
                         onnx_inputs=frozenset(onnx_inputs), dims=dims or {"x": [2, 3], "y": [2, 3]},
                         symbols=symbols or {}, outputs=tuple(outputs), output_paths=tuple(output_paths),
                         fx_names=frozenset(fx_names))


def statuses(checks):
    return [(c.check, c.status) for c in checks]


batch = Dim("batch")


def test_a_static_axis_that_stayed_a_number_reports_nothing_and_one_that_became_a_name_warns():
    assert static_axis(facts(), AxisFacts("x", 0, 2, None, "")) == ()
    assert statuses(static_axis(facts(), AxisFacts("x", 0, "s0", None, "s0"))) == [("static kept static", "warning")]
    assert static_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0")) is None  # requested: not its case


def test_a_derived_axis_must_carry_its_roots_expression():
    assert derived_axis(facts(), AxisFacts("x", 0, "batch + 1", batch + 1, "s0 + 1")) == ()
    wrong = derived_axis(facts(), AxisFacts("x", 0, "2*batch", batch + 1, "2*s0"))
    assert statuses(wrong) == [("user's dim name", "error")] and "'2*batch'" in wrong[0].message
    assert derived_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0")) is None


def test_a_requested_axis_fixed_to_a_number_is_an_error_but_only_a_warning_under_auto():
    assert statuses(pinned_axis(facts(), AxisFacts("x", 0, 2, batch, "2"))) == [("dynamic is symbolic", "error")]
    auto = pinned_axis(facts(), AxisFacts("x", 0, 2, AUTO, "2"))
    assert statuses(auto) == [("dynamic is symbolic", "warning")] and "STATIC" in auto[0].hint
    assert pinned_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0")) is None


@pytest.mark.parametrize(("dim", "said"), [(None, "has no name"), ("4", "computes as if it were 4"),
                                           ("s0 + 1", "the expression 's0 + 1'")])
def test_a_requested_axis_whose_onnx_dim_is_not_a_name_is_an_error_saying_which(dim, said):
    found = unnamed_axis(facts(), AxisFacts("x", 0, dim, batch, "s0"))
    assert statuses(found) == [("dynamic is symbolic", "error")] and said in found[0].message
    assert unnamed_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0")) is None


def test_an_axis_the_program_made_an_expression_passes_only_with_the_name_asked_for():
    kept = expression_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0 + s1"))
    assert statuses(kept) == [("dynamic is symbolic", "ok")]
    lost = expression_axis(facts(), AxisFacts("x", 0, "s2", batch, "s0 + s1"))
    assert statuses(lost) == [("dynamic is symbolic", "error")]
    assert expression_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0")) is None


def test_another_name_is_fine_when_torch_unified_the_axes_and_an_error_otherwise():
    rows = Dim("rows")
    unified = facts(requested={("x", 0): batch, ("y", 0): rows}, symbols={("x", 0): "s0", ("y", 0): "s0"})
    found = renamed_axis(unified, AxisFacts("y", 0, "batch", rows, "s0"))
    assert statuses(found) == [("unified dims", "ok")] and "x.shape[0], y.shape[0]" in found[0].message
    apart = facts(requested={("x", 0): batch}, symbols={("x", 0): "s0"})
    assert statuses(renamed_axis(apart, AxisFacts("x", 0, "n", batch, "s0"))) == [("user's dim name", "error")]
    assert renamed_axis(apart, AxisFacts("x", 0, "batch", batch, "s0")) is None


def test_what_no_other_rule_takes_is_a_symbolic_dim_with_its_name():
    assert statuses(symbolic_axis(facts(), AxisFacts("x", 0, "batch", batch, "s0"))) == [("dynamic is symbolic", "ok")]
    assert AXIS_RULES[-1] is symbolic_axis


def test_input_checks_report_a_dropped_input_a_wrong_rank_and_each_axis():
    dropped = list(input_checks(facts(requested={("y", 0): batch}, onnx_inputs=("x",))))
    assert ("input kept", "error") in statuses(dropped)
    unused = list(input_checks(facts(onnx_inputs=("x",))))
    assert ("input kept", "warning") in statuses(unused)
    rank = list(input_checks(facts(dims={"x": [2], "y": [2, 3]})))
    assert statuses(rank)[0] == ("input rank", "error")
    axes = list(input_checks(facts(requested={("x", 0): batch}, dims={"x": ["batch", 3], "y": [2, 3]},
                                   symbols={("x", 0): "s0"})))
    assert statuses(axes) == [("dynamic is symbolic", "ok")]


def test_axes_of_one_symbol_under_two_onnx_names_warn():
    split = facts(requested={("x", 0): batch, ("y", 0): Dim("rows")}, dims={"x": ["batch", 3], "y": ["rows", 3]},
                  symbols={("x", 0): "s0", ("y", 0): "s0"})
    assert statuses(shared_names(split)) == [("equal dims share a name", "warning")]
    together = facts(requested={("x", 0): batch, ("y", 0): batch}, dims={"x": ["batch", 3], "y": ["batch", 3]},
                     symbols={("x", 0): "s0", ("y", 0): "s0"})
    assert list(shared_names(together)) == []


def test_outputs_must_be_unique_named_and_not_fx_node_names():
    assert statuses(output_names(facts())) == [("output names", "ok")]
    assert statuses(output_names(facts(outputs=("a", "a")))) == [("output names", "error")] * 2
    assert statuses(output_names(facts(outputs=("",)))) == [("output names", "error")]
    assert statuses(output_names(facts(outputs=("add",), output_paths=()))) == [("output names", "warning")]
