"""``session.compare_intermediates()``: every ONNX node's output against the FX value it came
from, on one case; the first node whose error exceeds verify's tolerance is found, and a case
PyTorch refuses or an export that failed are reported, not crashed on."""

from __future__ import annotations

import itertools

import pytest
import torch

import exporter
from exporter import masked_attention
from exporter.events import CancelToken
from exporter.pipeline import stages
from exporter.graphs import IntermediateComparison


class Block(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.fc2(torch.relu(self.fc1(x))))


class BatchOfTwoOnly(Block):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[0] != 2:
            raise ValueError("this block takes a batch of 2")
        return super().forward(x)


class EightPositions(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.positions = torch.nn.Embedding(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.positions(torch.arange(x.shape[1]))


def _relu_plus_a_hundredth(x):
    """A wrong translation of aten.relu: Relu(x) + 0.01."""
    from onnxscript import opset18 as op

    return op.Add(op.Relu(x), op.CastLike(op.Constant(value_float=0.01), x))


def _relu_over_zero(x):
    """A wrong translation of aten.relu: Relu(x) / 0 (inf, and NaN where relu is 0)."""
    from onnxscript import opset18 as op

    return op.Div(op.Relu(x), op.CastLike(op.Constant(value_float=0.0), x))


def _refuse_relu(x):
    raise RuntimeError("no translation for relu here")


def _export(model: torch.nn.Module, **options) -> exporter.Session:
    torch.manual_seed(0)
    return exporter.export(model.eval(), torch.randn(2, 4),
                           options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}, **options))


def _with_relu_translation(monkeypatch: pytest.MonkeyPatch, translation) -> None:
    # The session's registration path for custom translations (masked_attention.translations, which
    # the translate stage in exporter/pipeline/stages.py passes to translate(translations=...)), with
    # one more entry for aten.relu.
    original = masked_attention.translations
    monkeypatch.setattr(stages, "translations",
                        lambda *a: original(*a) + ((torch.ops.aten.relu.default, translation),))


def test_a_node_translated_wrong_on_purpose_is_the_first_bad_node_and_the_nodes_before_it_pass(monkeypatch):
    _with_relu_translation(monkeypatch, _relu_plus_a_hundredth)
    session = _export(Block())
    result = session.compare_intermediates()

    assert isinstance(result, IntermediateComparison) and result.status == "failed"
    bad = result.first_bad
    assert bad is not None and bad.status == "fail"
    assert bad.fx_value == "relu" and bad.onnx_op == "Add"  # the Add that carries relu's value
    assert bad.max_abs == pytest.approx(1e-2, rel=1e-3)
    before = result.rows[: result.rows.index(bad)]
    assert [r.fx_value for r in before if r.status != "not compared"] == ["linear"]
    assert all(r.status in ("pass", "not compared") for r in before)
    assert "first bad node" in result.summary() and bad.onnx_node in result.summary()
    assert bad.onnx_node in result._repr_html_()
    assert session.analyses["compare_intermediates"] is result

    # verify's own first-divergence search names the same node
    verified = session.verify(edge_values=False)
    assert verified.status == "failed" and verified.divergence.onnx_node == bad.onnx_node


def test_nan_and_inf_in_onnx_only_are_counted_and_the_overlay_values_stay_finite(monkeypatch):
    _with_relu_translation(monkeypatch, _relu_over_zero)
    result = _export(Block()).compare_intermediates()

    bad = result.first_bad
    assert bad.fx_value == "relu" and bad.status == "fail"
    assert bad.nonfinite_onnx == 2 * 8 and bad.nonfinite_fx == 0  # every element: inf or NaN
    assert bad.max_abs == float("inf")  # the frame keeps the true number
    values = result.values()
    assert all(v == v and v != float("inf") for v in values.values())
    assert values[bad.onnx_node] == max(values.values())  # painted as the worst


def test_a_correct_model_passes_at_every_compared_node_and_its_values_are_onnx_node_names():
    session = _export(Block())
    result = session.compare_intermediates()

    assert result.status == "passed" and result.first_bad is None and result.error is None
    assert {r.status for r in result.rows} <= {"pass", "not compared"}
    assert result.compared >= 4  # linear, relu, linear_1 and the output
    names = set(session.graphs.onnx_optimized.names)
    values = result.values()
    assert values and set(values) <= names
    assert set(result.values("max_rel")) == set(values)
    assert len(result.to_frame()) == len(session.graphs.onnx_optimized)
    assert set(result.fx_values()) <= {n.name for n in session.graphs.fx_decomposed}


def test_a_verify_case_at_another_size_compares_at_that_size():
    session = _export(Block())
    generated = {}

    def keep(case):  # verify's own inputs for each case, to compare with the rebuilt ones
        generated[case.name] = (case.args, dict(case.kwargs))

    case = next(c for c in session.verify(edge_values=False, make_inputs=keep).cases if not c.is_example)
    by_object = session.compare_intermediates(case)
    by_name = session.compare_intermediates(case.name)
    as_verify_ran = session.compare_intermediates(case.name, args=generated[case.name][0],
                                                  kwargs=generated[case.name][1])

    size = dict(case.sizes)["batch"]
    assert by_object.case == case.name and by_object.status == "passed"
    assert {r.fx_shape[0] for r in by_object.rows if r.fx_shape} == {size}
    assert by_name.values() == by_object.values() == as_verify_ran.values()  # the inputs verify built
    with pytest.raises(ValueError, match="no verify case"):
        session.compare_intermediates("no such case")


def test_streaming_in_small_chunks_gives_the_same_numbers_as_one_run():
    session = _export(Block())
    whole = session.compare_intermediates()
    streamed = session.compare_intermediates(max_bytes=64)

    assert whole.chunks == 1 and whole.fx_runs == 1
    assert streamed.chunks > 1 and streamed.fx_runs == streamed.chunks + 1
    assert streamed.values() == whole.values()
    assert streamed.peak_bytes < whole.peak_bytes


def test_weights_written_once_beside_the_chunk_models_give_the_same_numbers(monkeypatch, tmp_path):
    from exporter.verify.intermediates import ort_side

    session = _export(Block())
    inline = session.compare_intermediates(max_bytes=64)
    monkeypatch.setattr(ort_side, "_INLINE_WEIGHTS", 0)  # as for a model with large weights
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    beside = session.compare_intermediates(max_bytes=64)

    assert beside.chunks == inline.chunks > 1 and beside.values() == inline.values()
    assert list(tmp_path.iterdir()) == []  # the weights and chunk models are removed


def test_a_case_eager_pytorch_refuses_is_a_failed_result_with_the_reason():
    session = exporter.export(BatchOfTwoOnly().eval(), torch.randn(2, 4))
    result = session.compare_intermediates(args=(torch.randn(5, 4),))

    assert result.status == "failed" and result.rows == ()
    assert "eager PyTorch raised" in result.error and "batch of 2" in result.error
    assert result.error_at == "eager"
    assert "batch of 2" in result.summary()


def test_a_verify_case_eager_pytorch_refused_is_a_failed_result_with_the_reason():
    session = exporter.export(EightPositions().eval(), torch.randn(2, 5, 4),
                              options=exporter.ExportOptions(dynamic_shapes={"x": {1: "seq"}}))
    refused = next(c for c in session.verify(edge_values=False).cases if c.status == "eager_error")
    result = session.compare_intermediates(refused)

    assert result.status == "failed" and result.case == refused.name
    assert result.error.startswith("eager PyTorch raised") and "index out of range" in result.error


def test_an_export_whose_translation_failed_raises_its_stage_error(monkeypatch):
    _with_relu_translation(monkeypatch, _refuse_relu)
    session = exporter.Session(Block().eval(), (torch.randn(2, 4),), {}, exporter.ExportOptions())
    with pytest.raises(exporter.ExportError) as caught:
        session.compare_intermediates()
    assert caught.value.stage == "translate"


class _CancelAfter(CancelToken):
    """A CancelToken set on its ``checks``-th check: a Cancel pressed mid-run."""

    def __init__(self, checks: int) -> None:
        super().__init__()
        self.left = checks

    def check(self) -> None:
        self.left -= 1
        if self.left <= 0:
            self.cancel()
        super().check()


def test_a_cancel_before_or_during_the_run_gives_a_cancelled_result_that_is_not_kept():
    session = _export(Block())
    session.run()
    token = CancelToken()
    token.cancel()
    before = session.compare_intermediates(cancel=token)
    during = session.compare_intermediates(cancel=_CancelAfter(4))  # inside the FX interpreter's run

    for result in (before, during):
        assert result.status == "cancelled" and result.rows == () and not result.ok
        assert "cancelled" in result.summary()
    assert "compare_intermediates" not in session.analyses
    assert session.compare_intermediates().ok  # the next call runs whole


def test_after_verify_the_model_is_not_serialized_again(monkeypatch):
    import onnx_ir

    session = _export(Block())
    assert session.verify(edge_values=False).ok  # builds the session's OrtModel proto
    monkeypatch.setattr(onnx_ir, "to_proto", lambda *a, **k: pytest.fail("serialized the model again"))
    assert session.compare_intermediates().ok


def test_run_program_returns_the_programs_outputs_and_every_nodes_value():
    from exporter.verify import run_program

    session = _export(Block())
    x = torch.randn(3, 4)
    outputs, values = run_program(session.stage_output("decompose"), session, (x,), {})

    with torch.no_grad():
        assert torch.allclose(outputs[0], session.model(x))
    assert {n.name for n in session.stage_output("decompose").graph.nodes} == set(values)
    assert torch.equal(values["x"], x)  # the input placeholder, then every node after it



def test_the_pairs_judged_together_give_the_rows_judged_one_at_a_time():
    import numpy as np

    from exporter.verify.intermediates.judge import node_row, node_rows
    from exporter.verify.intermediates.ort_side import OrtRunner
    from exporter.verify.intermediates.plan import pair_names, plan_of
    from exporter.verify.program_run import program_inputs

    session = _export(Block())
    program, model = session.stage_output("decompose"), session.stage_output("optimize")
    plan = plan_of(session.graphs, program, model)
    x = torch.randn(5, 4)
    _, _, fx_values = plan.fx.run(program_inputs(program, session, (x,), {}), plan.wanted, None)
    nodes = [n for n in plan.nodes if n.pairs]
    onnx_values = OrtRunner(model, session.ort_model).run(pair_names(nodes), session.feeds(x), keep=False)
    first, second = (value for node in nodes[:2] for value, _ in node.pairs)
    onnx_values[first] = onnx_values[first] + np.float32(0.5)  # a failing pair
    onnx_values[second] = np.full_like(onnx_values[second], np.nan)  # a NaN pair

    together = node_rows("c", nodes, onnx_values, fx_values, None)
    alone = {n.name: node_row("c", n, onnx_values, fx_values, None) for n in nodes}

    assert together == alone
    assert {r.status for r in together.values()} == {"pass", "fail"}



class CausalOnlyWhenExporting(torch.nn.Module):
    """Asks torch.compiler.is_exporting(), as transformers' masking utilities do."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_exporting():  # the line the explanation names
            return x.cumsum(-1)
        return x * 3


_CALLS = itertools.count(1)


class CountsItsCalls(torch.nn.Module):
    """Multiplies by how often any of them was called (a count outside the module, which
    verify's state check cannot put back): the program keeps the count of its capture."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * next(_CALLS)


def test_a_model_branching_on_the_exporting_flag_is_said_to_take_another_path_under_export_at_its_line():
    import inspect

    line = next(i for i, text in enumerate(inspect.getsourcelines(CausalOnlyWhenExporting.forward)[0])
                if "the line the explanation names" in text) + CausalOnlyWhenExporting.forward.__code__.co_firstlineno
    result = _export(CausalOnlyWhenExporting()).compare_intermediates()
    assert result.status == "failed" and result.program_differs is not None
    assert "takes another path while torch exports" in result.program_differs
    assert f"test_compare_intermediates.py:{line}" in result.program_differs
    assert "baked in behaviour of the example" not in result.program_differs
    assert torch.compiler.is_exporting() is False and torch.compiler.is_compiling() is False  # restored


def test_a_program_that_differs_for_another_reason_keeps_the_baked_example_explanation():
    session = _export(CountsItsCalls())
    result = session.compare_intermediates()
    assert result.program_differs is not None, result.summary()
    assert "baked in behaviour of the example" in result.program_differs
    assert "another path while torch exports" not in result.program_differs
