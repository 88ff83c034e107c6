"""The optimize stage pass by pass (issue 26): the recorded passes are onnxscript's optimizer
(byte-identical result), a pass that changes the numbers is found by bisect_passes() in at most
log2(passes)+1 verify runs, a pass that raises is named and skippable, bad names are refused."""

from __future__ import annotations

import math

import onnx_ir as ir
import pytest
import torch

from exporter import ExportOptions, export
from exporter import compat
from exporter.errors import Status
from exporter.examples import demo_block, mlp
from exporter.pipeline.names import PASS_NAMES


class ReluMLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 16)
        self.b = torch.nn.Linear(16, 4)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _relu(op, x):
    return op.Relu(x)


def _leaky(op, x):  # wrong on purpose: negative inputs no longer become 0
    return op.LeakyRelu(x, alpha=0.1)


def _raises(op, x):
    raise RuntimeError("this rewrite is broken")


def _rule(replacement):
    from onnxscript.rewriter import pattern

    return pattern.RewriteRule(_relu, replacement)


def _bytes(model) -> bytes:
    return ir.to_proto(model).SerializeToString()


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])  # static: most shapes known to folding
@pytest.mark.parametrize("example", [demo_block, mlp], ids=["demo_block", "mlp"])
def test_recorded_passes_give_the_same_model_byte_for_byte_as_onnxscripts_optimizer(example, static):
    model, args, kwargs, dims = example()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=None if static else dims), **kwargs)
    plain = compat.optimize_onnx_ir(session.stage_output("translate").clone())
    assert _bytes(session.stage_output("optimize")) == _bytes(plain)

    passes = session.passes
    assert passes.names[0] == "InlinePass" and passes.names[-1] == "NameFixPass"
    assert "FoldConstantsPass (round 0)" in passes.names and "RewritePass (round 0)" in passes.names
    assert all(r.ran and r.checks and r.seconds >= 0 for r in passes)
    assert passes[0].nodes_before == len(list(ir.traversal.RecursiveGraphIterator(session.stage_output("translate").graph)))
    assert passes[-1].nodes_after == len(list(ir.traversal.RecursiveGraphIterator(plain.graph)))
    for before, after in zip(passes.records, passes.records[1:]):
        assert after.nodes_before == before.nodes_after
    frame = passes.to_frame()
    assert list(frame["pass"]) == list(passes.names)
    assert frame["nodes after"].iloc[-1] == passes[-1].nodes_after


def test_a_pass_diff_names_the_nodes_it_added_removed_and_changed():
    model, args, kwargs, dims = demo_block()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims), **kwargs)
    fold = next(r for r in session.passes if r.name == "FoldConstantsPass" and r.removed)
    diff = fold.diff()
    assert len(diff.removed) == len(fold.removed) and diff.nodes_after == fold.nodes_after
    assert fold.nodes_after == fold.nodes_before + len(fold.added) - len(fold.removed)
    text = diff.summary()
    assert "FoldConstantsPass (round 0)" in text and diff.removed[0].name in text
    assert "<table" in diff._repr_html_()
    assert set(diff.to_frame()["change"]) >= {"removed"}
    assert "FoldConstantsPass (round 0)" in session.passes.summary()


def test_a_rewrite_rule_that_changes_the_numbers_is_found_by_bisect_within_log2_plus_one_verify_runs():
    torch.manual_seed(0)
    model = ReluMLP().eval()
    session = export(model, torch.randn(3, 8), options=ExportOptions(extra_rewrite_rules=(_rule(_leaky),)))
    assert not session.verify(edge_values=False, locate=False).ok
    bisection = session.bisect_passes()
    n = len(session.passes)
    assert bisection.culprit is not None and bisection.culprit.name == "ExtraRewritePass"
    assert bisection.culprit.label == "ExtraRewritePass (round 0)"
    assert bisection.verify_runs <= math.log2(n) + 1
    assert bisection.fix == "ExportOptions(skip_passes=['ExtraRewritePass'])"
    assert "disagrees with PyTorch" in bisection.verdict and bisection.status == "fail"
    assert "ExtraRewritePass" in bisection.summary()

    fixed = session.with_options(skip_passes=["ExtraRewritePass"])
    assert [r.label for r in fixed.passes if r.skipped] == ["ExtraRewritePass (round 0)"]
    assert fixed.verify(edge_values=False, locate=False).ok
    assert fixed.bisect_passes().culprit is None


def test_a_pass_that_raises_is_named_with_its_fix_and_the_unoptimized_model_verifies():
    torch.manual_seed(0)
    model = ReluMLP().eval()
    session = export(model, torch.randn(3, 8), options=ExportOptions(extra_rewrite_rules=(_rule(_raises),)))
    optimize = session.stages[-1]
    assert optimize.status == Status.WARNING
    (warning,) = optimize.warnings
    assert "the ONNX optimizer's ExtraRewritePass (" in warning and "RuntimeError: this rewrite is broken" in warning
    assert "ExportOptions(skip_passes=['ExtraRewritePass'])" in warning
    failed = session.passes.failed
    assert failed is not None and failed.name == "ExtraRewritePass" and failed.status == "failed"
    assert session.stage_output("optimize") is session.stage_output("translate")
    assert session.verify(edge_values=False, locate=False).ok

    skipped = session.with_options(skip_passes=("ExtraRewritePass",))
    assert skipped.passes.failed is None and skipped.stages[-1].status == Status.OK
    assert _bytes(skipped.stage_output("optimize")) == _bytes(compat.optimize_onnx_ir(session.stage_output("translate").clone()))


def test_an_unknown_pass_name_is_a_value_error_listing_the_pass_names():
    with pytest.raises(ValueError) as info:
        ExportOptions(skip_passes=["FoldConstants"])
    text = str(info.value)
    assert "'FoldConstants'" in text and "did you mean 'FoldConstantsPass'" in text
    assert all(name in text for name in PASS_NAMES)
    assert ExportOptions(skip_passes="NameFixPass").skip_passes == ("NameFixPass",)


def test_optimize_false_has_no_passes():
    model, args, kwargs, dims = mlp()
    session = export(model, *args, options=ExportOptions(optimize=False), **kwargs)
    assert len(session.passes) == 0 and "optimize=False" in session.passes.summary()


def test_cli_skip_pass_is_repeatable_and_an_unknown_name_exits_1_listing_the_names(tmp_path, capsys):
    from exporter.cli import main

    output = tmp_path / "mlp.onnx"
    assert main(["export", "exporter.examples:mlp", "--skip-pass", "NameFixPass", "--skip-pass",
                 "CommonSubexpressionEliminationPass", "-o", str(output)]) == 0
    assert output.exists()
    capsys.readouterr()
    assert main(["export", "exporter.examples:mlp", "--skip-pass", "NoSuchPass", "-o", str(tmp_path / "x.onnx")]) == 1
    err = capsys.readouterr().err
    assert "NoSuchPass" in err and "FoldConstantsPass" in err


def test_magic_skip_pass_reaches_the_export_options():
    from workbench.magics import ExportMagics

    parser = ExportMagics.onnx_export.parser
    options = parser.parse_args(["--skip-pass", "NameFixPass", "--skip-pass", "RewritePass", "model(x)"])
    assert options.skip_passes == ["NameFixPass", "RewritePass"]


def test_the_report_has_a_pass_table_and_the_bisection_when_it_was_asked(tmp_path):
    from exporter.report import report_html

    torch.manual_seed(0)
    session = export(ReluMLP().eval(), torch.randn(3, 8), options=ExportOptions(extra_rewrite_rules=(_rule(_leaky),)))
    session.bisect_passes()
    page = report_html(session, graphs=False)
    assert 'id="passes"' in page and "ExtraRewritePass (round 0)" in page
    assert "Which pass broke it" in page and "skip_passes=[&#x27;ExtraRewritePass&#x27;]" in page


def test_the_widgets_stages_tab_shows_the_passes_folded_under_their_verdict():
    from exporter import Session
    from workbench.app import Workbench

    model, args, kwargs, dims = mlp()
    wb = Workbench(Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims)), run=True, follow="optimize").wait()
    html = wb.stages_view.passes.value
    assert "optimizer passes: " in html and "<details" in html
    assert "FoldConstantsPass (round 0)" in html and "NameFixPass" in html


def test_at_opset_17_bisect_names_the_pass_that_leaves_a_node_onnxruntime_cannot_load_and_skipping_it_optimizes():
    # The optimize stage falls back to the unoptimized model there (Split(num_outputs) at opset 17).
    model, args, kwargs, dims = demo_block()
    session = export(model, *args, options=ExportOptions(opset_version=17, dynamic_shapes=dims), **kwargs)
    assert session.stages[-1].status == Status.WARNING
    assert "session.bisect_passes() names the pass that leaves it" in session.stages[-1].warnings[0]
    bisection = session.bisect_passes()
    assert bisection.culprit is not None and bisection.culprit.label == "FoldConstantsPass (round 0)"
    assert "cannot load the model" in bisection.verdict and "num_outputs" in bisection.verdict
    assert bisection.verify_runs <= math.log2(len(session.passes)) + 1

    fixed = session.with_options(skip_passes=["FoldConstantsPass"])
    assert fixed.passes.failed is None and fixed.stages[-1].status == Status.OK
    assert len(list(fixed.stage_output("optimize").graph)) < len(list(session.stage_output("translate").graph))
    assert fixed.verify(edge_values=False, locate=False).ok


def _three_nodes():
    """x -> Relu 'a' -> Add 'b' (with a graph input) -> LeakyRelu 'c' (alpha) -> output."""
    x, y = ir.Value(name="x"), ir.Value(name="y")
    a = ir.node("Relu", [x], name="a")
    b = ir.node("Add", [a.outputs[0], y], name="b")
    c = ir.node("LeakyRelu", [b.outputs[0]], attributes={"alpha": 0.1}, name="c")
    graph = ir.Graph([x, y], [c.outputs[0]], nodes=[a, b, c], opset_imports={"": 18})
    return ir.Model(graph, ir_version=10), a, b, c, y


def test_a_snapshot_sees_renames_new_inputs_and_attribute_values_but_not_an_equal_attribute_rebuilt():
    from exporter.pipeline.pass_records import Snapshot, diff

    model, a, b, c, y = _three_nodes()
    start = Snapshot.of(model)
    c.attributes["alpha"] = ir.Attr("alpha", ir.AttributeType.FLOAT, 0.1)  # a new Attr, the same value
    assert diff(start, Snapshot.of(model))[:3] == ((), (), ())

    b.name = "b2"
    a.outputs[0].name = "a_out"
    c.attributes["alpha"] = ir.Attr("alpha", ir.AttributeType.FLOAT, 0.2)
    b.replace_input_with(1, a.outputs[0])
    added, removed, changed, _, _ = diff(start, Snapshot.of(model))
    assert not added and not removed
    assert {(n.name, n.what) for n in changed} == {
        ("a", "outputs renamed"), ("b2", "renamed from 'b', inputs"), ("c", "attributes")}


def test_the_structural_check_names_an_input_nothing_produces_and_an_output_no_node_produces():
    from exporter.pipeline.pass_records import structure_problem

    model, a, b, c, y = _three_nodes()
    assert structure_problem(model) == ""
    model.graph.inputs.remove(y)  # 'b' still reads it
    assert structure_problem(model) == "node 'b' (Add) reads 'y', which nothing before it produces"
    model.graph.inputs.append(y)
    model.graph.outputs.append(ir.Value(name="lost"))
    assert structure_problem(model) == "graph output 'lost' is produced by no node"
