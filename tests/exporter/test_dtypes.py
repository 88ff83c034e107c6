"""Every dtype end to end: feeds built through torch (bfloat16, float8 as bits in an OrtValue,
complex as torch.onnx's real tensor), verify passes on correct models, and a dtype onnxruntime
has no kernel for is said plainly instead of calling the model wrong."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from exporter import Dim, ExportOptions, Session
from exporter.ort_values import feeds, to_feed


class Upcast(torch.nn.Module):
    def forward(self, x):
        return x.float() * 2


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


class ComplexIn(torch.nn.Module):
    def forward(self, x):
        return torch.view_as_real(x * 2)


FLOAT8 = (torch.float8_e4m3fn, torch.float8_e4m3fnuz, torch.float8_e5m2, torch.float8_e5m2fnuz)
CASES = [
    ("bfloat16 in", Upcast(), torch.randn(3, 4).bfloat16()),
    ("float16 in and out", Double(), torch.randn(3, 4).half()),
    ("complex64 in", ComplexIn(), torch.randn(3, 4, dtype=torch.complex64)),
] + [(f"{str(d).removeprefix('torch.')} in", Upcast(), torch.randn(3, 4).to(d)) for d in FLOAT8]


def session_of(model, x):
    return Session(model, (x,), None, ExportOptions(dynamic_shapes={"x": {0: Dim("b")}}))


@pytest.mark.parametrize("model, x", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_onnxruntime_runs_each_dtype_fed_through_torch_and_matches_eager(model, x):
    session = session_of(model, x)
    assert session.run().status == "ok"
    got = session.ort_session.run(None, feeds(session, session.onnx_model, (x,), {}))
    want = model(x)
    np.testing.assert_allclose(np.asarray(got[0], dtype=np.float64), want.double().numpy(), rtol=1e-2, atol=1e-2)
    result = session.verify()
    assert result.ok, result.summary()


def test_a_feed_is_a_copy_the_module_cannot_change():
    x = torch.ones(2)
    feed = to_feed(x)
    x.add_(1)
    assert feed.tolist() == [1.0, 1.0]


def test_a_dtype_onnxruntime_has_no_kernel_for_is_said_plainly_not_called_wrong():
    result = session_of(Double(), torch.randn(3, 4).bfloat16()).verify()
    assert result.status == "error"  # not "failed": nothing was found wrong
    assert "onnxruntime has no CPU kernel for Mul(14)" in result.error
    assert "not a wrong model" in result.error
