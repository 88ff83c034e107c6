"""Each rule of verify's judgement, pinned: every test here fails when its rule is removed or
loosened (the mutation each one catches is named in its docstring).

The ONNX models are built by hand (``onnx.helper``) and verified with ``exporter.verify_onnx``
against a tiny module, so each breaks exactly one promise: an output of another shape, of
another dtype, missing; the rounding allowance is driven directly with outputs made wrong by
a chosen amount against a model whose float32 rounding is known."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from onnx import TensorProto, helper

from exporter import verify_onnx
from exporter.verify import compare
from exporter.verify.rounding import ELEMENT_FACTOR, NEAR, RMS_FACTOR, Float64Reference, rounding_rejudged

BATCH = {"x": {0: "batch"}}


class TwoOutputs(torch.nn.Module):
    def forward(self, x):
        return x * 2, x + 1


def _onnx(second: list[onnx.NodeProto], second_type: int = TensorProto.FLOAT, second_shape=("batch", 4),
          outputs: int = 2) -> onnx.ModelProto:
    """``x * 2`` and a second output made by ``second`` (its last node writes ``y1``)."""
    two = helper.make_tensor("two", TensorProto.FLOAT, [], [2.0])
    one = helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])
    nodes = [helper.make_node("Mul", ["x", "two"], ["y0"]), *second]
    outs = [helper.make_tensor_value_info("y0", TensorProto.FLOAT, ["batch", 4]),
            helper.make_tensor_value_info("y1", second_type, list(second_shape))][:outputs]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])], outs,
                              [two, one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


PLUS_ONE = [helper.make_node("Add", ["x", "one"], ["y1"])]


def _verify(proto: onnx.ModelProto):
    return verify_onnx(TwoOutputs(), proto, torch.randn(3, 4), dynamic_shapes=BATCH)


def test_the_hand_built_model_computing_the_same_passes():
    result = _verify(_onnx(PLUS_ONE))
    assert result.status == "passed", result.summary()


def test_an_output_of_another_shape_fails_its_case():
    """Catches: ``OutputCheck.ok`` true for ``shape_mismatch``."""
    concat = [helper.make_node("Add", ["x", "one"], ["p"]), helper.make_node("Concat", ["p", "p"], ["y1"], axis=1)]
    result = _verify(_onnx(concat, second_shape=("batch", 8)))
    check = result.case("example").outputs[1]
    assert check.status == "shape_mismatch" and not check.ok
    assert result.case("example").status == "fail" and result.status == "failed", result.summary()
    assert "shape [3, 8] instead of [3, 4]" in result.verdict


def test_an_output_of_another_dtype_fails_its_case_though_its_values_are_equal():
    """Catches: ``OutputCheck.ok`` true for ``dtype_mismatch``, and removing the dtype rule of
    ``compare`` (float64 ones equal float32 ones as numbers)."""
    cast = [helper.make_node("Add", ["x", "one"], ["p"]), helper.make_node("Cast", ["p"], ["y1"], to=TensorProto.DOUBLE)]
    result = _verify(_onnx(cast, second_type=TensorProto.DOUBLE))
    check = result.case("example").outputs[1]
    assert check.status == "dtype_mismatch" and not check.ok
    assert result.status == "failed", result.summary()
    assert "onnxruntime gives float64, eager PyTorch float32" in result.verdict


def test_a_missing_output_fails_its_case():
    """Catches: ``OutputCheck.ok`` true for ``missing``."""
    result = _verify(_onnx([], outputs=1))
    check = result.case("example").outputs[1]
    assert check.status == "missing" and not check.ok
    assert result.case("example").status == "fail" and result.status == "failed", result.summary()


def test_an_output_that_cannot_be_compared_is_not_a_pass():
    """Catches: ``OutputCheck.ok`` true for ``error`` (could not compare)."""
    check = compare("example", "y", torch.empty(2, device="meta"), torch.ones(2))
    assert check.status == "error" and not check.ok
    assert "could not compare" in check.describe()


@pytest.mark.parametrize("pair, status", [
    ((np.ones(3, np.float64), torch.ones(3)), "dtype_mismatch"),
    ((np.ones(3, np.int32), torch.ones(3, dtype=torch.int64)), "dtype_mismatch"),
    ((np.ones(3, np.float32), torch.ones(3, dtype=torch.bfloat16)), "pass"),  # read through a float32 cast
    ((np.ones((3, 2), np.float32), torch.ones(3, dtype=torch.complex64) * (1 + 1j)), "pass"),  # real + imaginary
])
def test_the_dtype_rule_accepts_only_eager_dtype_as_onnxruntime_hands_it_over(pair, status):
    assert compare("c", "y", *pair).status == status


# -- tolerance ---------------------------------------------------------------------------------------
def test_the_default_float32_tolerance_is_held_on_both_sides():
    """Catches: loosening or tightening ``DEFAULT_TOLERANCES['float32']`` (rtol 1e-4, atol 1e-5)
    by 2x either way: an element 0.6x its allowance passes, one 1.6x fails (values of 10 and
    of 0, in a 2-D output whose channels all have magnitude 10)."""
    expected = torch.full((4, 4), 10.0)
    expected[0, 0] = 0.0
    allowed_at_10 = 1e-5 + 1e-4 * 10 + 1e-4 * 10  # atol + rtol*|10| + scale*channel(10)
    for factor, ok in ((0.6, True), (1.6, False)):
        actual = expected.numpy().astype(np.float64)
        actual[1, 1] += factor * allowed_at_10
        assert compare("c", "y", actual.astype(np.float32), expected).ok is ok, factor


def test_an_element_near_zero_gets_the_slack_of_its_own_channel_not_of_a_large_one():
    """Catches: scaling the tolerance by the whole output's largest value (class 3), and
    dropping the channel term (the noise near zero of Helium then fails)."""
    rng = np.random.default_rng(0)
    expected = torch.from_numpy(rng.standard_normal((6, 8)).astype(np.float32))
    expected[:, 0] *= 1e4
    off = expected.numpy().copy()
    off[:, 1:] += 0.05  # 5% of the small channels: hidden by 1e-4 * 1e4
    assert not compare("c", "y", off, expected).ok
    expected[2, 3] = 0.0
    noise = expected.numpy().copy()
    noise[2, 3] = 6e-5  # an element at zero off by 6e-5 in channels of magnitude ~1: float noise
    check = compare("c", "y", noise, expected)
    assert check.ok and check.scaled_only == 1


def test_an_output_smaller_than_one_is_compared_at_its_own_scale_with_the_default_tolerance():
    """Catches: an absolute atol for small outputs (a 5% error on an output of 1e-4 passed
    under atol=1e-5); tolerances given keep their absolute atol."""
    expected = torch.linspace(-1e-4, 1e-4, 16).reshape(2, 8)
    off = expected.numpy() * 1.05
    assert not compare("c", "y", off, expected).ok
    assert compare("c", "y", off, expected, {"float32": (1e-4, 1e-5)}).ok


# -- vacuous -----------------------------------------------------------------------------------------
class Tiny(torch.nn.Module):
    def forward(self, x):
        return torch.tanh(x), torch.tanh(x) * 1e-7


def test_an_output_within_atol_of_zero_is_named_and_the_result_is_not_verified_the_others_verified():
    """Catches: removing the per-output vacuous rule (the old rule fired only when every
    output was near zero), and counting a vacuous output as verified."""
    result = verify_onnx(Tiny(), _tiny_onnx(1e-7), torch.randn(3, 4), dynamic_shapes=BATCH)
    assert result.status == "not_verified", result.summary()
    assert result.unverified_outputs == ("y1",)
    (finding,) = [f for f in result.findings if f.kind == "vacuous"]
    assert finding.outputs == ("y1",) and "'y1'" in finding.message
    assert "they match: largest difference" in result.verdict  # what it saw, and why it cannot judge it


def test_a_wrong_output_within_atol_of_zero_fails_compared_at_its_own_scale():
    """Catches: judging a vacuous output at the absolute atol (a 50% error of 1e-7 passed)."""
    result = verify_onnx(Tiny(), _tiny_onnx(1.5e-7), torch.randn(3, 4), dynamic_shapes=BATCH)
    assert result.status == "failed", result.summary()
    assert [o.output for o in result.case("example").outputs if not o.ok] == ["y1"]


def _tiny_onnx(scale: float) -> onnx.ModelProto:
    k = helper.make_tensor("k", TensorProto.FLOAT, [], [scale])
    nodes = [helper.make_node("Tanh", ["x"], ["y0"]), helper.make_node("Mul", ["y0", "k"], ["y1"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 4])],
                              [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 4]) for n in ("y0", "y1")], [k])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


# -- rounding ----------------------------------------------------------------------------------------
class Rounds(torch.nn.Module):
    """Columns 0-7 lose precision in float32 (``(a + 3e5) - 3e5``: eager within 0.0156 of
    float64), columns 8-15 less so (``(b + 3e3) - 3e3``: within 1.2e-4, on values of ~0.04
    whose tolerance is ~2e-5)."""

    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        self.a = torch.nn.Parameter(torch.randn(16, 8, generator=generator))
        self.b = torch.nn.Parameter(torch.randn(16, 8, generator=generator) * 0.01)

    def forward(self, x):
        return torch.cat([(x @ self.a + 3e5) - 3e5, (x @ self.b + 3e3) - 3e3], dim=-1)


def _rounding(model: torch.nn.Module, x: torch.Tensor, shift) -> tuple[object, object]:
    """The check of ``model(x)`` against eager + ``shift(eager, exact)``, before and after the
    rounding rule."""
    with torch.no_grad():
        expected = model(x)
        exact = model.double()(x.double())
        model.float()
    actual = (expected.double() + shift(expected.double(), exact)).float().numpy()
    check = compare("example", "y", actual, expected)
    (rejudged,) = rounding_rejudged([check], [actual], [expected], Float64Reference(model), (x,), {})
    return check, rejudged


def _x(batch: int = 16) -> torch.Tensor:
    return torch.randn(batch, 16, generator=torch.Generator().manual_seed(1))


def test_onnxruntime_as_close_to_float64_as_eager_passes_as_rounding():
    """The control of the rounding tests below: onnxruntime on the float64 result, rounded."""
    check, rejudged = _rounding(Rounds(), _x(), lambda eager, exact: exact - eager)
    assert not check.ok and rejudged.ok and rejudged.rounding is not None


def test_an_element_eight_times_beyond_its_channels_rounding_is_not_rounding():
    """Catches: raising ``ELEMENT_FACTOR`` (8) to 16 or more, or judging an element against the
    output's largest rounding (the 0.0156 of columns 0-7) instead of its own channel's."""
    def shift(eager, exact):
        out = exact - eager
        own = (eager - exact).abs()
        out[3, 12] += 10 * float(own[:, 12].max())  # 10x the rounding of its column, < 0.0156 (columns 0-7)
        return out

    check, rejudged = _rounding(Rounds(), _x(), shift)
    assert not check.ok and not rejudged.ok
    assert ELEMENT_FACTOR < 10
    _, control = _rounding(Rounds(), _x(), lambda eager, exact: exact - eager + (torch.arange(16) == 12) * 1e-5)
    assert control.ok  # the same element off by less than its column's rounding passes


def test_every_element_shifted_by_one_and_a_half_times_its_rounding_is_not_rounding():
    """Catches: removing the root-mean-square condition, or raising ``RMS_FACTOR`` (2) to 4:
    each element is 1.5x its column's largest rounding from float64 (within 8x), but all of
    them are (2.6x eager's root-mean-square distance)."""
    def shift(eager, exact):
        own = (eager - exact).abs()
        scale = own.max(dim=0).values  # per column
        sign = torch.sign(torch.randn(exact.shape, generator=torch.Generator().manual_seed(3), dtype=torch.float64))
        return (exact - eager) + 1.5 * scale * sign

    check, rejudged = _rounding(Rounds(), _x(), shift)
    assert not check.ok and not rejudged.ok
    assert RMS_FACTOR < 2.6


class Coarse(torch.nn.Module):
    """Outputs of ~0.1 that float32 cannot hold closer than 0.0156: ``(a + 3e5) - 3e5``."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(16, 8, generator=torch.Generator().manual_seed(0)) * 0.03)

    def forward(self, x):
        return (x @ self.a + 3e5) - 3e5


def test_a_difference_beyond_near_of_the_output_is_never_called_rounding():
    """Catches: raising ``NEAR`` (1e-2) to 1.0. onnxruntime exactly on float64 differs from
    eager by up to 0.0156 on outputs of ~0.3: beyond 1% of them, so not judged as rounding
    (an output float32 holds this coarsely is not verified by a float64 run)."""
    check, rejudged = _rounding(Coarse(), _x(), lambda eager, exact: exact - eager)
    assert (check.max_abs or 0) > NEAR * float(check.peak or 0)
    assert not check.ok and not rejudged.ok


# -- a model that draws random numbers -------------------------------------------------------------
class Noisy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        h = self.linear(x)
        return h + 1e-3 * torch.randn_like(h)


@pytest.mark.parametrize("wrong_by", [0.0, 1.0])
def test_a_random_model_is_not_verified_saying_how_far_onnxruntime_is_beside_two_eager_runs(wrong_by):
    """The verdict of a sampling model gives the largest difference seen and why it cannot
    judge it: an export off by 1.0 against noise of 1e-3 reads with that gap (hundreds of
    times what two eager runs differ by) and "likely a wrong export"; the right one does not."""
    from onnx import numpy_helper

    from exporter import ExportOptions, export

    torch.manual_seed(0)
    model, x = Noisy().eval(), torch.randn(3, 4)
    proto = export(model, x, options=ExportOptions(dynamic_shapes=BATCH)).model_proto
    bias = model.linear.bias.detach().numpy()
    for i, tensor in enumerate(proto.graph.initializer):
        array = numpy_helper.to_array(tensor)
        if array.shape == bias.shape and np.array_equal(array, bias):
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(array + np.float32(wrong_by), tensor.name))
    result = verify_onnx(model, proto, x, dynamic_shapes=BATCH, verify_options={"edge_values": False})
    assert result.status == "not_verified", result.summary()
    verdict = result.verdict
    assert "two runs differ by up to" in verdict and "onnxruntime differs from eager by up to" in verdict
    gap = float(verdict.split(" (output ")[1].split(", ")[1].split("x that")[0])
    if wrong_by:
        assert gap > 100 and "likely a wrong export" in verdict
    else:
        assert gap < 10 and "likely a wrong export" not in verdict
