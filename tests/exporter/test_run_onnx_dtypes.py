"""``run_onnx`` returns what the ONNX model computed for outputs numpy holds badly or not at all:
complex (a complex numpy array), bfloat16 and float8 (torch tensors of their dtype). The
conversion (``exporter.ort_values.from_outputs``) also reads what onnxruntime hands over
without the session's float32 cast: float8 e4m3fn as raw uint8 bits, ``OrtValue`` outputs of
every type (``run_with_ort_values``), ``ml_dtypes`` arrays."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper
from torch import nn

from exporter import ExportOptions, export
from exporter.ort_values import from_outputs, ort_value_to_torch

BITS_DTYPES = {
    "BFLOAT16": torch.bfloat16,
    "FLOAT8E4M3FN": torch.float8_e4m3fn,
    "FLOAT8E4M3FNUZ": torch.float8_e4m3fnuz,
    "FLOAT8E5M2": torch.float8_e5m2,
    "FLOAT8E5M2FNUZ": torch.float8_e5m2fnuz,
}
X = torch.tensor([[1.5, -2.0, 0.25, 0.1], [3.3, -0.07, 100.0, 0.0]])


class EveryOddDtype(nn.Module):
    def forward(self, x):
        return {
            "e4m3fn": (x * 2).to(torch.float8_e4m3fn),
            "e4m3fnuz": x.to(torch.float8_e4m3fnuz),
            "e5m2": (x - 1).to(torch.float8_e5m2),
            "e5m2fnuz": x.to(torch.float8_e5m2fnuz),
            "bf16": (x + 1).to(torch.bfloat16),
            "c64": torch.complex(x, -2 * x),
            "c128": torch.complex(x.double(), x.double() + 1),
            "plain": x * 3,
        }


@pytest.fixture(scope="module")
def odd_dtypes():
    session = export(EveryOddDtype().eval(), torch.randn(3, 4),
                     options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    session.run()
    session.raise_for_status()
    return session


def test_run_onnx_returns_each_odd_dtype_as_the_model_computes_it(odd_dtypes):
    x = torch.randn(5, 4) * 3  # another batch size than the export's example
    got = odd_dtypes.run_onnx(x)
    expected = list(EveryOddDtype()(x).values())
    assert len(got) == len(expected)
    for value, want in zip(got, expected):
        if want.dtype in BITS_DTYPES.values():
            assert isinstance(value, torch.Tensor) and value.dtype == want.dtype
            assert torch.equal(value.float(), want.float())  # the same rounding, bit for bit
        else:
            assert isinstance(value, np.ndarray) and value.dtype == want.numpy().dtype
            torch.testing.assert_close(torch.from_numpy(value), want)


def cast_model(*types: str) -> bytes:
    """float32 x → one Cast output per ONNX element type."""
    nodes = [helper.make_node("Cast", ["x"], [name], to=getattr(TensorProto, name)) for name in types]
    outputs = [helper.make_tensor_value_info(name, getattr(TensorProto, name), ["n"]) for name in types]
    graph = helper.make_graph(nodes, "casts", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])], outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    onnx.checker.check_model(model)
    return model.SerializeToString()


@pytest.fixture(scope="module")
def casts():
    return ort.InferenceSession(cast_model(*BITS_DTYPES), providers=["CPUExecutionProvider"])


def test_ort_values_of_bfloat16_and_float8_come_back_as_torch_tensors_of_their_dtype(casts):
    x = X.flatten()
    values = casts.run_with_ort_values(list(BITS_DTYPES), {"x": ort.OrtValue.ortvalue_from_numpy(x.numpy())})
    got = from_outputs(values, list(BITS_DTYPES.values()))
    for value, dtype in zip(got, BITS_DTYPES.values()):
        assert isinstance(value, torch.Tensor) and value.dtype == dtype and value.shape == x.shape
        assert torch.equal(value.float(), x.to(dtype).float())


def test_an_ort_value_is_read_as_its_own_dtype_when_the_users_is_unknown(casts):
    x = X.flatten()
    values = casts.run_with_ort_values(["FLOAT8E5M2", "BFLOAT16"], {"x": ort.OrtValue.ortvalue_from_numpy(x.numpy())})
    e5m2, bf16 = from_outputs(values, [])
    assert e5m2.dtype == torch.float8_e5m2 and torch.equal(e5m2.float(), x.to(torch.float8_e5m2).float())
    assert bf16.dtype == torch.bfloat16 and torch.equal(bf16.float(), x.to(torch.bfloat16).float())


def test_float8_e4m3fn_raw_bits_from_onnxruntime_are_reinterpreted_not_converted():
    session = ort.InferenceSession(cast_model("FLOAT8E4M3FN"), providers=["CPUExecutionProvider"])
    x = X.flatten()
    (bits,) = session.run(None, {"x": x.numpy()})
    assert bits.dtype == np.uint8  # what onnxruntime hands numpy for this type
    (value,) = from_outputs([bits], [torch.float8_e4m3fn])
    assert value.dtype == torch.float8_e4m3fn
    assert torch.equal(value.float(), x.to(torch.float8_e4m3fn).float())


@pytest.mark.parametrize(("dtype", "numpy_dtype"), [
    (torch.float8_e4m3fn, ml_dtypes.float8_e4m3fn),
    (torch.float8_e5m2, ml_dtypes.float8_e5m2),
    (torch.bfloat16, ml_dtypes.bfloat16),
])
def test_ml_dtypes_arrays_become_torch_tensors_of_the_same_values(dtype, numpy_dtype):
    array = X.numpy().astype(numpy_dtype)
    (value,) = from_outputs([array], [dtype])
    assert value.dtype == dtype and value.shape == X.shape
    assert torch.equal(value.float(), torch.from_numpy(array.astype(np.float32)))


def test_complex_outputs_are_complex_arrays_of_the_users_width():
    z = torch.complex(X, X * 0.5)
    real_pairs = torch.view_as_real(z).numpy()  # torch.onnx's form of a complex output
    native = z.numpy()  # already complex
    got64, got128, from_native = from_outputs([real_pairs, real_pairs.astype(np.float64), native],
                                              [torch.complex64, torch.complex128, torch.complex128])
    assert got64.dtype == np.complex64 and np.array_equal(got64, native)
    assert got128.dtype == np.complex128 and np.array_equal(got128, native.astype(np.complex128))
    assert from_native.dtype == np.complex128 and np.array_equal(from_native, native.astype(np.complex128))


def test_ort_values_numpy_holds_come_back_as_numpy_arrays():
    value = ort.OrtValue.ortvalue_from_numpy(np.arange(6, dtype=np.int64).reshape(2, 3))
    (got,) = from_outputs([value], [torch.int64])
    assert isinstance(got, np.ndarray) and got.dtype == np.int64 and got.tolist() == [[0, 1, 2], [3, 4, 5]]


def test_an_empty_float8_ort_value_is_an_empty_tensor(casts):
    values = casts.run_with_ort_values(["FLOAT8E4M3FN"], {"x": ort.OrtValue.ortvalue_from_numpy(np.zeros(0, np.float32))})
    value = ort_value_to_torch(values[0])
    assert value.dtype == torch.float8_e4m3fn and value.shape == (0,)
