"""``exporter.verify_onnx``: verify an ONNX model you edited or got elsewhere against the
PyTorch model, and the three classes of wrong exports issue 53 found verify passing, each made
wrong on purpose in the ONNX initializers (as a translation bug would) and each failing now,
with its unmodified export as the control that passes."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import numpy_helper

from exporter import ExportOptions, export, verify_onnx

BATCH = {"x": {0: "batch"}}


def _proto(model: torch.nn.Module, x: torch.Tensor) -> onnx.ModelProto:
    return export(model, x, options=ExportOptions(dynamic_shapes=BATCH)).model_proto


def _edited(proto: onnx.ModelProto, edit) -> onnx.ModelProto:
    """A copy of ``proto`` with ``edit(name, array)`` applied to every initializer (it returns
    the new array, or None to keep it)."""
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    touched = 0
    for i, tensor in enumerate(out.graph.initializer):
        array = numpy_helper.to_array(tensor)
        new = edit(tensor.name, array)
        if new is not None:
            out.graph.initializer[i].CopyFrom(numpy_helper.from_array(new.astype(array.dtype), tensor.name))
            touched += 1
    assert touched == 1, f"the edit must change exactly one initializer, changed {touched}"
    return out


def _named(model: torch.nn.Module, tensor: torch.Tensor):
    """``edit`` helper: matches an initializer holding exactly ``tensor``'s values."""
    want = tensor.detach().numpy()

    def matches(array: np.ndarray) -> bool:
        return array.shape == want.shape and np.array_equal(array, want)

    return matches


class HalfIllConditioned(torch.nn.Module):
    """Class 1: one output whose first 8 columns lose precision in float32 (eager is 0.0156
    from float64 there) and whose other 8 are a plain ``Linear`` (eager 1e-7 from float64)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 8)
        self.b = torch.nn.Linear(16, 8)

    def forward(self, x):
        return torch.cat([(self.a(x) + 3e5) - 3e5, self.b(x)], dim=-1)


@pytest.fixture(scope="module")
def class1():
    torch.manual_seed(0)
    model = HalfIllConditioned().eval()
    x = torch.randn(8, 16)
    return model, x, _proto(model, x)


def test_class1_the_unmodified_export_passes_its_ill_conditioned_columns_as_rounding(class1):
    model, x, proto = class1
    result = verify_onnx(model, proto, x, dynamic_shapes=BATCH, verify_options={"edge_values": False})
    assert result.status == "passed", result.summary()


@pytest.mark.parametrize("how", ["bias + 0.006", "weight * 1.005"])
def test_class1_an_error_on_the_well_conditioned_columns_is_not_excused_by_the_others_rounding(class1, how):
    model, x, proto = class1
    bias, weight, weight_t = _named(model, model.b.bias), _named(model, model.b.weight), _named(model, model.b.weight.T)

    def edit(name, array):
        if how.startswith("bias") and bias(array):
            return array + 0.006
        if how.startswith("weight") and (weight(array) or weight_t(array)):
            return array * 1.005
        return None

    result = verify_onnx(model, _edited(proto, edit), x, dynamic_shapes=BATCH, verify_options={"edge_values": False})
    assert result.status == "failed", result.summary()
    wrong = result.case("example").outputs[0]
    assert not wrong.ok and wrong.rounding is None
    # The failing elements are the Linear's columns (8..15), not the ill-conditioned ones.
    assert all(index[-1] >= 8 for index, *_ in wrong.worst)


class SmallSecondOutput(torch.nn.Module):
    """Class 2: a second output of ~1e-6, within float32's atol of 0 everywhere."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.a(x), self.b(x) * 1e-6


@pytest.fixture(scope="module")
def class2():
    torch.manual_seed(0)
    model = SmallSecondOutput().eval()
    x = torch.randn(3, 4)
    return model, x, _proto(model, x)


def test_class2_an_output_near_zero_with_every_sign_flipped_fails_compared_at_its_own_scale(class2):
    model, x, proto = class2
    weight = _named(model, model.b.weight)
    weight_t = _named(model, model.b.weight.T)
    result = verify_onnx(model, _edited(proto, lambda name, a: -a if weight(a) or weight_t(a) else None), x,
                         dynamic_shapes=BATCH)
    assert result.status == "failed", result.summary()
    (bad,) = [o for o in result.case("example").outputs if not o.ok]
    assert bad.output == result.case("example").outputs[1].output  # the small output, named
    assert bad.relative_atol and bad.peak < 1e-5


def test_class2_control_the_small_output_is_named_not_verified_and_passes_with_tolerances_given(class2):
    model, x, proto = class2
    result = verify_onnx(model, proto, x, dynamic_shapes=BATCH)
    assert result.status == "not_verified", result.summary()
    small = result.case("example").outputs[1].output
    assert result.unverified_outputs == (small,)
    (finding,) = [f for f in result.findings if f.kind == "vacuous"]
    assert f"output(s) {small!r} not verified: every value is within atol of 0" in finding.message
    assert "the other outputs are verified" in finding.message
    assert result.verdict.startswith(f"Verification NOT VERIFIED: output(s) {small!r}")
    given = verify_onnx(model, proto, x, dynamic_shapes=BATCH,
                        verify_options={"tolerances": {"float32": (1e-4, 1e-5)}})
    assert given.status == "passed" and not given.unverified_outputs, given.summary()


class OneLargeChannel(torch.nn.Module):
    """Class 3: ``fc(x) * [1e4, 1, 1, 1, 1, 1, 1, 1]``."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 8)
        self.register_buffer("gain", torch.tensor([1e4, 1, 1, 1, 1, 1, 1, 1]))

    def forward(self, x):
        return self.fc(x) * self.gain


@pytest.fixture(scope="module")
def class3():
    torch.manual_seed(0)
    model = OneLargeChannel().eval()
    x = torch.randn(4, 4)
    return model, x, _proto(model, x)


def test_class3_control_passes(class3):
    model, x, proto = class3
    result = verify_onnx(model, proto, x, dynamic_shapes=BATCH)
    assert result.status == "passed", result.summary()


def test_class3_a_half_unit_error_on_the_small_channels_is_not_hidden_by_the_large_one(class3):
    model, x, proto = class3
    bias = _named(model, model.fc.bias)

    def edit(name, array):
        if bias(array):
            out = array.copy()
            out[1:] += 0.5
            return out
        return None

    result = verify_onnx(model, _edited(proto, edit), x, dynamic_shapes=BATCH)
    assert result.status == "failed", result.summary()
    assert not [f for f in result.findings if f.kind == "tolerance"]  # no "float noise near zero" about it
    wrong = result.case("example").outputs[0]
    assert wrong.mismatched == 4 * 7 and all(index[-1] >= 1 for index, *_ in wrong.worst)


class TwoInputs(torch.nn.Module):
    def forward(self, x, y):
        return x * 2 + y


def test_a_correct_model_from_bytes_or_a_path_passes_over_the_same_sizes_verify_uses(tmp_path):
    model, x, y = TwoInputs(), torch.randn(3, 4), torch.randn(3, 4)
    dims = {"x": {0: "batch"}, "y": {0: "batch"}}
    session = export(model, x, y, options=ExportOptions(dynamic_shapes=dims))
    path = tmp_path / "model.onnx"
    session.save(path)
    by_path = verify_onnx(model, path, x, y, dynamic_shapes=dims)
    by_bytes = verify_onnx(model, session.model_bytes, x, y, dynamic_shapes=dims)
    assert by_path.status == by_bytes.status == "passed", by_path.summary()
    assert by_path.compared_sizes() == session.verify().compared_sizes()


def test_an_onnx_model_whose_inputs_are_named_otherwise_is_refused_naming_both(tmp_path):
    model, x, y = TwoInputs(), torch.randn(3, 4), torch.randn(3, 4)
    dims = {"x": {0: "batch"}, "y": {0: "batch"}}
    proto = export(model, x, y, options=ExportOptions(dynamic_shapes=dims)).model_proto
    for value in proto.graph.input:
        value.name = {"x": "input_0", "y": "input_1"}[value.name]
    for node in proto.graph.node:
        node.input[:] = [{"x": "input_0", "y": "input_1"}.get(name, name) for name in node.input]
    with pytest.raises(ValueError) as raised:
        verify_onnx(model, proto, x, y, dynamic_shapes=dims)
    text = str(raised.value)
    assert "['input_0', 'input_1']" in text and "x -> 'x'" in text and "y -> 'y'" in text
    assert "input_names=" in text
    renamed = verify_onnx(model, proto, x, y, options=ExportOptions(dynamic_shapes=dims, input_names=("input_0", "input_1")))
    assert renamed.status == "passed", renamed.summary()
