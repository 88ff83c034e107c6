"""The public API exports the issue's model zoo, each checked against eager in onnxruntime."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from exporter import Dim, ExportOptions, TranslateError, export


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


class ThreeKwargs(torch.nn.Module):
    def forward(self, a, b, c):
        return a * 2 + b - c * c


class DictInput(torch.nn.Module):
    def forward(self, inputs: dict):
        return inputs["x"] @ inputs["w"] + inputs["bias"]


@dataclasses.dataclass
class KeyValue:
    key: torch.Tensor
    value: torch.Tensor


torch.export.register_dataclass(KeyValue)


class DataclassInput(torch.nn.Module):
    def forward(self, query, cache: KeyValue):
        scores = query @ cache.key.transpose(-1, -2)
        return torch.softmax(scores, dim=-1) @ cache.value


class OptionalMask(torch.nn.Module):
    def forward(self, x, mask=None, scale: float = 1.0):
        out = x * scale
        if mask is not None:
            out = out.masked_fill(mask, 0.0)
        return out


class DataDependentBranch(torch.nn.Module):
    """torch.export cannot branch on a value; draft_export specializes on the example."""

    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_mlp_with_dynamic_batch_matches_eager_at_other_batch(assert_matches_eager):
    model = MLP().eval()
    session = export(model, torch.randn(3, 8), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    assert [d.dim_param or d.dim_value for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim] == ["batch", 8]
    assert_matches_eager(session, torch.randn(3, 8))
    assert_matches_eager(session, torch.randn(7, 8))


def test_kwargs_in_any_order_give_signature_ordered_inputs(assert_matches_eager):
    model = ThreeKwargs()
    a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    session = export(model, c=c, a=a, b=b)
    assert [i.name for i in session.model_proto.graph.input] == ["a", "b", "c"]
    assert_matches_eager(session, a=a, b=b, c=c)
    assert_matches_eager(session, b=b, c=c, a=a)
    assert_matches_eager(session, a, c=c, b=b)


def test_exported_program_called_with_reordered_kwargs_matches_eager():
    model = ThreeKwargs()
    a, b, c = torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3)
    session = export(model, b=b, c=c, a=a)
    module = session.exported_program.module()
    torch.testing.assert_close(module(c=c, a=a, b=b), model(a, b, c))


def test_dict_input_gets_pytree_path_names(assert_matches_eager):
    inputs = {"x": torch.randn(4, 5), "w": torch.randn(5, 3), "bias": torch.randn(3)}
    session = export(DictInput(), inputs, options=ExportOptions(dynamic_shapes={"inputs": {"x": {0: "rows"}}}))
    names = [i.name for i in session.model_proto.graph.input]
    assert names == ["inputs.x", "inputs.w", "inputs.bias"]
    assert session.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "rows"
    assert_matches_eager(session, {"x": torch.randn(9, 5), "w": inputs["w"], "bias": inputs["bias"]})


def test_dataclass_input_exports_with_field_names(assert_matches_eager):
    query = torch.randn(2, 4, 8)
    cache = KeyValue(torch.randn(2, 6, 8), torch.randn(2, 6, 8))
    seq = Dim("past", min=2)  # torch guards past != 1 in this model
    session = export(
        DataclassInput(), query, cache,
        options=ExportOptions(dynamic_shapes={"cache": {"key": {1: seq}, "value": {1: seq}}}),
    )
    names = [i.name for i in session.model_proto.graph.input]
    assert names == ["query", "cache.key", "cache.value"]
    dims = [[d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in session.model_proto.graph.input]
    assert dims[1][1] == dims[2][1] == "past"
    assert_matches_eager(session, query, KeyValue(torch.randn(2, 11, 8), torch.randn(2, 11, 8)))


def test_optional_none_input_is_not_an_onnx_input(assert_matches_eager):
    x = torch.randn(2, 3)
    session = export(OptionalMask(), x, mask=None, scale=3.0)
    assert [i.name for i in session.model_proto.graph.input] == ["x"]
    assert_matches_eager(session, x, mask=None, scale=3.0)


def test_optional_input_given_becomes_an_onnx_input(assert_matches_eager):
    x, mask = torch.randn(2, 3), torch.rand(2, 3) > 0.5
    session = export(OptionalMask(), x, mask=mask)
    assert [i.name for i in session.model_proto.graph.input] == ["x", "mask"]
    assert_matches_eager(session, x, mask=mask)


def test_capture_falls_back_to_draft_export_when_torch_export_fails(assert_matches_eager):
    x = torch.ones(2, 3)
    session = export(DataDependentBranch(), x)
    outcomes = [(a.strategy, a.outcome) for a in session.attempts]
    assert outcomes == [("nonstrict", "failed"), ("strict", "failed"), ("draft", "ok")]
    assert session.strategy == "draft"
    assert "data-dependent" in session.attempts[0].first_error_line
    assert_matches_eager(session, x)


@pytest.mark.parametrize("optimize", [True, False])
def test_optimize_flag_controls_the_optimize_stage(optimize, assert_matches_eager):
    session = export(MLP().eval(), torch.randn(2, 8), options=ExportOptions(optimize=optimize))
    assert session.stages[-1].status == ("ok" if optimize else "skipped")
    assert_matches_eager(session, torch.randn(2, 8))


def test_opset_version_is_recorded_in_the_model():
    session = export(MLP().eval(), torch.randn(2, 8), options=ExportOptions(opset_version=18))
    default = {o.domain: o.version for o in session.model_proto.opset_import}[""]
    assert default == 18


def test_tuple_output_gets_indexed_names_and_dict_output_its_keys():
    class Two(torch.nn.Module):
        def forward(self, x):
            return x + 1, x * 2

    class Named(torch.nn.Module):
        def forward(self, x):
            return {"logits": x + 1, "probs": torch.softmax(x, -1)}

    assert [o.name for o in export(Two(), torch.randn(2)).model_proto.graph.output] == ["output.0", "output.1"]
    assert [o.name for o in export(Named(), torch.randn(2)).model_proto.graph.output] == ["logits", "probs"]


class PassThrough(torch.nn.Module):
    def forward(self, inp, y):
        return inp, y * 2


class SameTensorTwice(torch.nn.Module):
    def forward(self, x):
        y = x + 1
        return {"a": y, "b": y}


@pytest.mark.parametrize("optimize", [True, False])
def test_an_input_returned_as_is_keeps_its_input_name_and_gets_its_output_name(optimize, assert_matches_eager):
    batch = Dim("batch")
    session = export(
        PassThrough(), torch.randn(2, 3), torch.randn(2, 3),
        options=ExportOptions(optimize=optimize, dynamic_shapes={"inp": {0: batch}, "y": {0: batch}}),
    )
    assert [i.name for i in session.model_proto.graph.input] == ["inp", "y"]
    assert [o.name for o in session.model_proto.graph.output] == ["output.0", "output.1"]
    assert session.model_proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert_matches_eager(session, torch.randn(5, 3), torch.randn(5, 3))


@pytest.mark.parametrize("optimize", [True, False])
def test_one_tensor_returned_twice_gives_two_named_outputs(optimize, assert_matches_eager):
    session = export(SameTensorTwice(), torch.randn(3), options=ExportOptions(optimize=optimize))
    assert [o.name for o in session.model_proto.graph.output] == ["a", "b"]
    assert_matches_eager(session, torch.randn(3))


def test_a_python_number_among_the_outputs_fails_translation_with_a_hint_that_names_it():
    class ReturnsNumber(torch.nn.Module):
        def forward(self, x):
            return x + 1, 3

    with pytest.raises(TranslateError) as info:
        export(ReturnsNumber(), torch.randn(2))
    assert "output.1 = 3" in info.value.hint and "torch.tensor" in info.value.hint
