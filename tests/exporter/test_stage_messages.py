"""Messages for failures torch words unhelpfully: a **kwargs forward given dynamic_shapes, a
transformers cache torch cannot flatten, a decomposition that loses a lifted constant."""

from __future__ import annotations

import pytest
import torch

from exporter import Dim, ExportOptions, Session
from exporter import _torch_formats as formats
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


@pytest.mark.slow
def test_gpt2_with_a_cache_is_told_to_register_it_then_which_lifted_constant_decomposition_lost():
    pytest.importorskip("transformers")
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=96, n_embd=32, n_layer=2, n_head=2, n_positions=128, use_cache=True,
                        bos_token_id=0, eos_token_id=0)
    model = GPT2Model(config).eval()
    ids = torch.randint(3, 96, (2, 8))
    options = ExportOptions(dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}}, strategy="nonstrict")
    session = Session(model, (), {"input_ids": ids}, options)
    assert session.run("capture").status == "failed"
    assert formats.unknown_pytree_type(session.attempts[0].error) == ("transformers.cache_utils.DynamicCache", "output")
    assert "register_dynamic_cache_export_support()" in str(session.result("capture").error)

    from transformers.integrations.executorch import register_dynamic_cache_export_support

    register_dynamic_cache_export_support()
    session = Session(model, (), {"input_ids": ids}, options)
    assert session.run().status == "failed" and session.failed_stage.name == "decompose"
    cause = session.failed_stage.error.__cause__
    name = formats.lifted_constant(cause)
    assert name and name.startswith("lifted_tensor")
    hint = decompose_hint(cause, session.exported_program)
    assert f"torch lost {name!r} while decomposing" in hint and "use_cache=False" in hint
