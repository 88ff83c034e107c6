"""``compare_intermediates().first_bad`` names a node that has no FX value of its own (the
sigmoid inside SiLU's translation ``Mul(x, Sigmoid(x))``) when the fault is there: the first
bad compared node's subgraph runs in onnxruntime on FX values, and its inner nodes are held
against the steps of torch's own decomposition of the FX node (``silu`` → ``sigmoid``, ``mul``)."""

from __future__ import annotations

import pytest
import torch

import exporter
from exporter import masked_attention
from exporter.pipeline import stages


class SiluBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.nn.functional.silu(self.fc1(x)))


def _silu_with_a_hard_sigmoid(x):
    """A wrong translation of aten.silu, wrong in its sigmoid part: x * HardSigmoid(x)."""
    from onnxscript import opset18 as op

    return op.Mul(x, op.HardSigmoid(x))


def _silu_added_not_multiplied(x):
    """A wrong translation of aten.silu, right in its sigmoid part: x + Sigmoid(x)."""
    from onnxscript import opset18 as op

    return op.Add(x, op.Sigmoid(x))


def _export(monkeypatch: pytest.MonkeyPatch | None = None, silu=None) -> exporter.Session:
    if silu is not None:
        # The session's registration path for custom translations (as test_compare_intermediates does for relu).
        original = masked_attention.translations
        monkeypatch.setattr(stages, "translations", lambda *a: original(*a) + ((torch.ops.aten.silu.default, silu),))
    torch.manual_seed(0)
    return exporter.export(SiluBlock().eval(), torch.randn(2, 4),
                           options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}))


def _node(session: exporter.Session, op_type: str):
    return next(n for n in session.stage_output("optimize").graph if n.op_type == op_type)


def test_a_wrong_sigmoid_inside_silus_translation_is_the_first_bad_node(monkeypatch):
    session = _export(monkeypatch, _silu_with_a_hard_sigmoid)
    hard_sigmoid = _node(session, "HardSigmoid")
    assert not any(v.name == "silu" for v in hard_sigmoid.outputs)  # no FX value of its own

    result = session.compare_intermediates()

    bad = result.first_bad
    assert bad.onnx_node == hard_sigmoid.name and bad.onnx_op == "HardSigmoid" and bad.status == "fail"
    assert bad.fx_value == "silu" and bad.max_abs > bad.atol_applied
    assert "sigmoid" in bad.reason and "decomposition" in bad.reason
    carrier = result.row(next(r.onnx_node for r in result.rows if r.fx_value == "silu" and r is not bad))
    assert carrier.status == "fail" and carrier.onnx_op == "Mul"  # still wrong, but after the node named
    assert result.inside.culprit == hard_sigmoid.name and result.inside.bad_on_fx_inputs
    assert hard_sigmoid.name in result.summary()
    # verify's first-divergence search names it too
    assert session.verify(edge_values=False).divergence.onnx_node == hard_sigmoid.name


def test_a_sigmoid_edited_in_the_onnx_model_after_translation_is_named_by_its_node(monkeypatch):
    session = _export()
    sigmoid = _node(session, "Sigmoid")
    sigmoid.op_type = "HardSigmoid"  # the model edited in place, before onnxruntime first sees it

    bad = session.compare_intermediates().first_bad

    assert bad.onnx_node == sigmoid.name and bad.status == "fail" and bad.fx_value == "silu"


def test_a_right_sigmoid_is_not_blamed_for_a_wrong_combining_step(monkeypatch):
    session = _export(monkeypatch, _silu_added_not_multiplied)
    sigmoid = _node(session, "Sigmoid")

    result = session.compare_intermediates()

    bad = result.first_bad
    assert bad.onnx_op == "Add" and bad.fx_value == "silu"  # the node carrying silu's value
    assert result.row(sigmoid.name).status == "not compared"
    assert result.inside.culprit == bad.onnx_node and "combining" in result.inside.reason


def test_a_correct_silu_leaves_its_sigmoid_not_compared_and_searches_nothing():
    session = _export()
    result = session.compare_intermediates()

    assert result.ok and result.inside is None
    assert result.row(_node(session, "Sigmoid").name).status == "not compared"
