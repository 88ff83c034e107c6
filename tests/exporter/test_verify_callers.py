"""verify() sweeps what callers send: axes that belong together move together (one name, a torch
equality, AUTO axes of the same role and example size), ``independent=True`` sweeps each torch
symbol alone; Python-number, complex and float8 outputs are compared as what they are."""

from __future__ import annotations

import pytest
import torch
from shape_models import GatheredMask

from exporter import AUTO, Dim, ExportOptions, Session


def gathered(spec):
    ids = torch.randint(0, 20, (2, 6))
    mask = torch.ones(2, 6, dtype=torch.long)
    return Session(GatheredMask().eval(), (ids, mask), None, ExportOptions(dynamic_shapes=spec))


AUTO_BOTH = {"input_ids": {0: AUTO, 1: AUTO}, "attention_mask": {0: AUTO, 1: AUTO}}


def case_shapes(result, session):
    """Per case, the (input_ids batch, attention_mask batch) it fed."""
    out = []
    for case in result.cases:
        sizes = dict(case.sizes)
        group_of = {axis: g.label for g in result.groups for axis in g.axes}
        out.append((sizes.get(group_of[("input_ids", 0)]), sizes.get(group_of[("attention_mask", 0)])))
    return out


def test_auto_axes_of_one_role_and_example_size_move_together_so_no_case_pairs_batch_6_with_2():
    session = gathered(AUTO_BOTH)
    symbols = session.dims
    assert symbols["input_ids", 0].symbol != symbols["attention_mask", 0].symbol  # torch keeps them apart
    result = session.verify()
    assert result.ok, result.summary()
    batch = next(g for g in result.groups if ("input_ids", 0) in g.axes)
    assert ("attention_mask", 0) in batch.axes and len(batch.symbols) == 2
    assert all(ids == mask for ids, mask in case_shapes(result, session))


def test_independent_sweeps_each_torch_symbol_alone():
    result = gathered(AUTO_BOTH).verify(independent=True)
    pairs = case_shapes(result, None)
    assert any(ids != mask for ids, mask in pairs)
    unequal = [c for c in result.cases if len(set(dict(c.sizes).values())) > 1 and c.status == "eager_error"]
    assert unequal and result.status == "passed"  # eager refuses those: not checked, not wrong


def test_axes_sharing_a_string_name_move_together_though_torch_gave_them_two_symbols():
    session = gathered({"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}})
    assert session.dims["input_ids", 0].symbol != session.dims["attention_mask", 0].symbol
    result = session.verify(independent=True)  # names tie axes even then
    assert [g.label for g in result.groups] == ["batch", "seq"]
    assert result.ok, result.summary()
    onnx_inputs = {v.name: [d.value if hasattr(d, "value") else d for d in v.shape] for v in session.onnx_model.graph.inputs}
    assert onnx_inputs == {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}


class ShapePlusOne(torch.nn.Module):
    """ExportDB's scalar_output: a Python number out."""

    def forward(self, x):
        return x.shape[1] + 1


class ComplexOut(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_complex(x) * 2


class Float8Out(torch.nn.Module):
    def __init__(self, dtype):
        super().__init__()
        self.dtype = dtype

    def forward(self, x):
        return (x * 2).to(self.dtype)


@pytest.mark.parametrize(
    "model, x",
    [(ShapePlusOne(), torch.randn(3, 2)), (ComplexOut(), torch.randn(3, 4, 2))]
    + [(Float8Out(d), torch.randn(3, 4)) for d in (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)],
    ids=["python number", "complex", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz"],
)
def test_outputs_numpy_cannot_hold_are_compared_as_what_they_are(model, x):
    axis = 1 if isinstance(model, ShapePlusOne) else 0
    session = Session(model, (x,), None, ExportOptions(dynamic_shapes={"x": {axis: Dim("d")}}))
    result = session.verify()
    assert result.ok, result.summary()
    assert all(check.status == "pass" for case in result.cases for check in case.outputs)
