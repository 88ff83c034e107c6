"""No export reports ``ok`` for ONNX that onnxruntime cannot load: an input dtype eager PyTorch
refuses, or a forward with no tensor output, fails translate in one line naming the input or
output and the fix; models that run stay ``ok``."""

from __future__ import annotations

import onnxruntime
import pytest
import torch

from exporter import ExportOptions, Session, TranslateError, export


class Scaled(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x) * 2


class ReturnsNone(torch.nn.Module):
    def forward(self, x):
        x.mul(2)
        return None


class ReturnsAConstant(torch.nn.Module):
    def forward(self, x):
        return None, 3


class ReturnsATensorAndNone(torch.nn.Module):
    def forward(self, x):
        return x + 1, None


class CastsItself(torch.nn.Module):
    """float64 in, float32 weights: the model casts, so eager and ONNX both run."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(x.float())


def test_a_float64_input_to_float32_weights_fails_translate_naming_the_input_the_line_and_the_fix():
    model, x = Scaled().eval(), torch.randn(2, 4, dtype=torch.float64)
    with pytest.raises(RuntimeError):
        model(x)  # eager PyTorch refuses it too
    with pytest.raises(TranslateError) as raised:
        export(model, x)
    error = raised.value
    assert error.stage == "translate"
    assert error.reason == ("linear (FX node 'linear') multiplies float64 and float32 operands: eager PyTorch "
                            "refuses this call, and onnxruntime would refuse the model")
    assert "self.linear(x) * 2" in error.source  # the user's line, not torch's
    assert error.hint == ("the input 'x' is float64 while the model's weights are float32 (eager PyTorch refuses "
                          "this call too): pass x.float() as the example")
    assert error.session.stages[0].status == "ok" and error.session.failed_stage.name == "translate"


def test_a_forward_that_returns_none_fails_translate_saying_there_is_no_output():
    with pytest.raises(TranslateError, match=r"forward returned no tensor \(it returned None\)") as raised:
        export(ReturnsNone(), torch.randn(2, 3))
    assert "return the tensor(s) to export from forward" in raised.value.hint


def test_a_forward_that_returns_only_constants_fails_translate_listing_them():
    with pytest.raises(TranslateError, match=r"forward returned no tensor \(it returned None, 3\)"):
        export(ReturnsAConstant(), torch.randn(2, 3))


@pytest.mark.parametrize("model, dtype", [(ReturnsATensorAndNone(), torch.float32), (CastsItself(), torch.float64)])
def test_models_that_run_in_onnxruntime_stay_ok(model, dtype):
    x = torch.randn(2, 4, dtype=dtype)
    session = export(model.eval(), x, options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert [s.status for s in session.stages] == ["ok"] * 4
    onnxruntime.InferenceSession(session.model_bytes)  # loads
    (expected,) = [t for t in (model(x) if isinstance(model(x), tuple) else (model(x),)) if t is not None]
    (actual,) = session.run_onnx(x)
    torch.testing.assert_close(torch.as_tensor(actual), expected, rtol=1e-5, atol=1e-5)


def test_a_failed_translate_leaves_capture_usable_and_says_so_in_the_session():
    session = Session(ReturnsNone(), (torch.randn(2, 3),))
    result = session.run()
    assert result.status == "failed"
    assert session.stages[0].status == "ok"
    assert session.failed_stage.failure.message.startswith("forward returned no tensor")


class PassFloat4(torch.nn.Module):
    def forward(self, x, y):
        return x, y * 2


@pytest.mark.parametrize("optimize", [True, False])
def test_a_model_onnxruntime_cannot_run_for_lack_of_a_kernel_is_kept_with_a_warning_not_reported_ok(optimize):
    # torch.onnx.export writes this model too (a FLOAT4E2M1 input and output): it is kept, but
    # the last stage says onnxruntime refuses it instead of "ok".
    packed = torch.randint(0, 255, (3, 4), dtype=torch.uint8).view(torch.float4_e2m1fn_x2)
    session = Session(PassFloat4(), (packed, torch.randn(2)), options=ExportOptions(optimize=optimize))
    session.run()
    last = session.result("optimize")
    assert last.status == "warning" and last.output is not None
    assert "onnxruntime cannot load this model (" in last.detail and "float4e2m1" in last.detail
    assert session.failed_stage is None and session.result("translate").status == "ok"


def test_an_intermediate_model_onnxruntime_would_refuse_is_not_a_warning_when_the_final_one_loads():
    # ExportDB's "dictionary": the translated model defines a name twice until the optimizer
    # cleans it up; only the model the user gets is judged.
    from torch._export.db.examples import all_examples

    example = all_examples()["dictionary"]
    session = Session(example.model, example.example_args, example.example_kwargs)
    session.run()
    assert [s.status for s in session.stages] == ["ok"] * 4


def test_the_onnxruntime_check_infers_types_without_copying_weights_and_leaves_the_model_as_it_was():
    """Type inference reads a weight's type and shape only: the proto it checks refers to the
    weights instead of holding them (ResNet-50: 0.49 s of copying), keeps small constants
    whole, and the model keeps its own tensors."""
    import onnx

    from exporter.pipeline.runnable import WEIGHT_BYTES, _proto_without_weight_bytes, onnxruntime_refusal

    model = Session(torch.nn.Linear(64, 64).eval(), (torch.randn(2, 64),), {}).onnx_model
    before = {name: value.const_value for name, value in model.graph.initializers.items()}
    proto = _proto_without_weight_bytes(model)
    placed = {t.name: t.data_location for t in proto.graph.initializer}
    sizes = {name: tensor.nbytes for name, tensor in before.items()}
    assert {n for n, where in placed.items() if where == onnx.TensorProto.EXTERNAL} == \
        {n for n, size in sizes.items() if size > WEIGHT_BYTES} != set()
    assert all(value.const_value is before[name] for name, value in model.graph.initializers.items())
    assert onnxruntime_refusal(model) is None


def test_a_meta_tensor_left_as_a_weight_is_still_found_unserializable_by_the_onnxruntime_check():
    """Any tracing leftover stays in the checked proto and fails there, not only a FakeTensor:
    a plain-typed meta tensor used to pass as a real weight."""
    from torch.onnx._internal.exporter._core import TorchTensor  # how translation wraps a weight

    from exporter.pipeline.runnable import onnxruntime_refusal

    model = Session(torch.nn.Linear(64, 64).eval(), (torch.randn(2, 64),), {}).onnx_model
    name, value = max(model.graph.initializers.items(), key=lambda item: item[1].const_value.nbytes)
    value.const_value = TorchTensor(torch.empty(64, 64, device="meta"), name=name)
    assert onnxruntime_refusal(model).startswith("the model cannot be serialized, so onnxruntime cannot load it")
