"""Messages for failures torch words unhelpfully: a **kwargs forward given dynamic_shapes, a
decomposition that loses a lifted constant. (A transformers DynamicCache, which used to fail
both ways, now exports: tests/exporter/test_kv_cache.py.)"""

from __future__ import annotations

import torch

from exporter import Dim, ExportOptions, Session
from exporter.compat import formats
from exporter.hints import decompose_hint


class CacheThroughKwargs(torch.nn.Module):
    def forward(self, x, **extra):
        return x + extra["past_key_values"]


def kwargs_session():
    b = Dim("b")
    return Session(
        CacheThroughKwargs(), (torch.randn(3, 4),), {"past_key_values": torch.randn(3, 4)},
        ExportOptions(dynamic_shapes={"x": {0: b}, "past_key_values": {0: b}}, strategy="nonstrict"),
    )


def test_a_kwargs_forward_is_told_the_keys_torch_expected_and_how_to_pass_the_cache():
    session = kwargs_session()
    capture = session.run("capture")
    assert capture.status == "failed"
    cause = session.attempts[0].error
    assert formats.is_tree_name_mismatch(cause)
    assert "pass a KV cache as a named argument (past_key_values=...)" in str(capture.error)
    named = str(capture.error)
    assert "forward takes 'past_key_values' through **extra" in named
    assert "expects the top-level keys 'x', 'extra'" in named
    assert "def forward(self, ..., past_key_values=None, **extra)" in named


def test_decompose_hint_names_the_lifted_constant_or_the_operator():
    lost = RuntimeError("Constant tensor lifted_tensor_3 is not in the constants dictionary.")
    assert formats.lifted_constant(lost) == "lifted_tensor_3"
    assert "torch lost 'lifted_tensor_3' while decomposing" in decompose_hint(lost)
    assert "the error names the operator" not in decompose_hint(lost)
    op = RuntimeError("no decomposition for aten.unfold_backward.default")
    assert decompose_hint(op).startswith("decomposing aten.unfold_backward.default for ONNX failed")
