"""Real models that change themselves: export leaves them as they were, and exports again.

Phi3 (longrope rotary) stores a ``long_inv_freq`` attribute during torch's trace, where it is a
FakeTensor: torch.onnx.export fails on a second call with the same module object. Swin rebinds
``window_size`` for good when called at a tiny size. Tiny configs, random weights, no hub.
"""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import transformers  # noqa: F401 - the test extra installs it: missing, this fails instead of skipping

from exporter import ExportOptions, export
from exporter.model_state import preserved

HEAD_DIM = 16


def _phi3_longrope() -> torch.nn.Module:
    from transformers import Phi3Config, Phi3ForCausalLM

    torch.manual_seed(0)
    config = Phi3Config(
        vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
        num_key_value_heads=2, max_position_embeddings=64, original_max_position_embeddings=16,
        pad_token_id=0, bos_token_id=1, eos_token_id=2, use_cache=False,
        rope_scaling={"type": "longrope", "short_factor": [1.0] * (HEAD_DIM // 2),
                      "long_factor": [2.0] * (HEAD_DIM // 2)},
    )
    return Phi3ForCausalLM(config).eval()


def _ids(batch: int, seq: int, seed: int) -> torch.Tensor:
    return torch.randint(3, 96, (batch, seq), generator=torch.Generator().manual_seed(seed))


def test_phi3_longrope_exports_twice_in_one_process_and_both_models_match_eager():
    model = _phi3_longrope()
    rotary = model.model.rotary_emb
    options = ExportOptions(dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}})
    first = export(model, _ids(2, 8, 0), options=options)
    assert not hasattr(rotary, "long_inv_freq")  # torch's trace left a FakeTensor there
    (warning,) = first.stages[0].warnings
    assert "`model.rotary_emb.long_inv_freq` (absent) → FakeTensor(" in warning
    second = export(model, _ids(2, 8, 1), options=options)  # torch.onnx.export fails here
    assert second.succeeded and not hasattr(rotary, "long_inv_freq")
    # seq 20 is past original_max_position_embeddings (16): the long factors; 5 uses the short ones
    for session in (first, second):
        for ids in (_ids(3, 20, 2), _ids(1, 5, 3)):
            with torch.no_grad(), preserved(model):
                expected = model(ids).logits
            (logits,) = session.run_onnx(ids)
            torch.testing.assert_close(torch.from_numpy(logits), expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def swin():
    from transformers import SwinConfig, SwinModel

    torch.manual_seed(0)
    config = SwinConfig(image_size=32, patch_size=2, num_channels=3, embed_dim=16, depths=[1, 1],
                        num_heads=[1, 2], window_size=4, mlp_ratio=2.0)
    return SwinModel(config).eval()


def test_swin_called_at_1x1_inside_preserved_keeps_its_window_and_names_the_change(swin):
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = swin(pixels).last_hidden_state
    with preserved(swin, what="when called at 1×1") as report, torch.no_grad():
        try:
            swin(torch.ones(2, 3, 1, 1))
        except RuntimeError:
            pass  # Swin refuses 1×1 after shrinking its window: the shrink must not stay
    assert report.message.startswith(
        "this model changes itself when called at 1×1: `encoder.layers.0.blocks.0.window_size` 4 → 1"
    )
    assert swin.encoder.layers[0].blocks[0].window_size == 4
    with torch.no_grad():
        assert torch.equal(swin(pixels).last_hidden_state, before)


def test_swin_export_with_dynamic_height_width_leaves_the_eager_output_identical(swin):
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    windows = [(b.window_size, b.shift_size) for layer in swin.encoder.layers for b in layer.blocks]
    with torch.no_grad():
        before = swin(pixels).last_hidden_state
    session = export(swin, pixels, options=ExportOptions(
        dynamic_shapes={"pixel_values": {0: "batch", 2: "height", 3: "width"}}))
    assert session.succeeded
    assert [(b.window_size, b.shift_size) for layer in swin.encoder.layers for b in layer.blocks] == windows
    with torch.no_grad():
        assert torch.equal(swin(pixels).last_hidden_state, before)
    last_hidden_state = session.run_onnx(pixels)[0]
    torch.testing.assert_close(torch.from_numpy(last_hidden_state), before, rtol=1e-4, atol=1e-4)
