"""SEW from a tiny config, raw audio, batch and length dynamic (issue 53 item 4).

The export keeps the branch the example took in ``if hidden_states.shape[1] <
n_input_timesteps: pad``: at 2640 samples the frame count is 8 (even), and so it is at 2641
and 5280, the sizes verify used to compare; at 4240 (13 frames) onnxruntime returns one frame
fewer than eager PyTorch. The size on the other side of the coarsest stride (2960 samples,
9 frames) shows it: verify fails and offers ``pad_when_shorter``, which then passes."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from exporter import ExportOptions, Session

pytestmark = pytest.mark.slow
transformers = pytest.importorskip("transformers")

SPEC = {"input_values": {0: "batch", 1: "audio"}}


@pytest.fixture(scope="module")
def sew():
    torch.manual_seed(0)
    config = transformers.SEWConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                                    conv_dim=(16,) * 13)
    return transformers.SEWModel(config).eval()


def test_sew_fails_verify_by_default_at_an_odd_frame_count_and_offers_pad_when_shorter(sew):
    session = Session(sew, (torch.randn(2, 2640),), {}, ExportOptions(dynamic_shapes=SPEC))
    result = session.verify(edge_values=False)
    assert result.status == "failed", result.summary()
    wrong = {dict(c.sizes)["audio"] for c in result.failed_cases}
    assert 2960 in wrong  # 9 frames
    assert "shape [2, 8, 32] instead of [2, 9, 32]" in result.summary()
    assert "pad_when_shorter" in session.suggested_fixes.patch_names


@pytest.mark.parametrize("length", [2640, 4240, 9360, 4241])
def test_sew_with_the_patch_matches_eager_pytorch_in_onnxruntime(sew, patched, length):
    values = torch.randn(3, length, generator=torch.Generator().manual_seed(length))
    with torch.no_grad():
        expected = sew(input_values=values).last_hidden_state
    (actual, *_) = patched.run_onnx(values)
    assert tuple(np.shape(actual)) == tuple(expected.shape)
    torch.testing.assert_close(torch.as_tensor(actual), expected, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def patched(sew):
    session = Session(sew, (torch.randn(2, 2640),), {}, ExportOptions(dynamic_shapes=SPEC, patches=("pad_when_shorter",)))
    result = session.verify(edge_values=False)
    assert result.status == "passed", result.summary()
    return session
