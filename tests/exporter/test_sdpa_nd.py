"""scaled_dot_product_attention on 5-D tensors (timm's Twins and Hiera idioms): exported with
the extra leading dims folded into the batch (exporter/pipeline/sdpa_nd.py), verified against
eager with dynamic dims; 4-D attention translated exactly as before."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from exporter import Dim, ExportOptions, Session, compat, export
from exporter.masked_attention import translations as masked_translations
from exporter.pipeline import translations
from exporter.pipeline.decompose import decompose
from exporter.pipeline.sdpa_nd import fold_leading_dims


class LocallyGroupedAttn(nn.Module):
    """timm ``twins.LocallyGroupedAttn`` (fused path): the image padded to whole windows, q/k/v
    ``[B, groups, heads, ws*ws, d]``."""

    def __init__(self, dim: int = 16, heads: int = 2, ws: int = 2):
        super().__init__()
        self.heads, self.ws = heads, ws
        self.qkv = nn.Linear(dim, dim * 3)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x, size: tuple[int, int]):
        B, N, C = x.shape
        H, W = size
        x = x.view(B, H, W, C)
        pad_r = (self.ws - W % self.ws) % self.ws
        pad_b = (self.ws - H % self.ws) % self.ws
        x = F.pad(x, (0, 0, 0, pad_r, 0, pad_b))
        _, Hp, Wp, _ = x.shape
        _h, _w = Hp // self.ws, Wp // self.ws
        x = x.reshape(B, _h, self.ws, _w, self.ws, C).transpose(2, 3)
        qkv = self.qkv(x).reshape(B, _h * _w, self.ws * self.ws, 3, self.heads, C // self.heads).permute(3, 0, 1, 4, 2, 5)
        q, k, v = qkv.unbind(0)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.transpose(2, 3).reshape(B, _h, _w, self.ws, self.ws, C)
        x = x.transpose(2, 3).reshape(B, _h * self.ws, _w * self.ws, C)
        x = x[:, :H, :W, :].contiguous()  # timm: under `if pad_r > 0 or pad_b > 0`
        return self.proj(x.reshape(B, N, C))


class TwinsBlock(nn.Module):
    """An image ``[B, C, H, W]`` through Twins' locally grouped attention."""

    def __init__(self):
        super().__init__()
        self.attn = LocallyGroupedAttn()

    def forward(self, image):
        B, C, H, W = image.shape
        return self.attn(image.flatten(2).transpose(1, 2), (H, W))


class MaskUnitAttention(nn.Module):
    """timm ``hiera.MaskUnitAttention`` (fused path, mask units on, q pooled by ``q_stride``):
    q ``[B, heads, windows, N / stride, d]``, k/v ``[B, heads, windows, N, d]``."""

    def __init__(self, dim: int = 16, heads: int = 2, q_stride: int = 2, window_size: int = 4):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.q_stride, self.window_size = q_stride, window_size
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x):
        B, N, _ = x.shape
        num_windows = N // (self.q_stride * self.window_size)
        qkv = self.qkv(x).reshape(B, -1, num_windows, 3, self.heads, self.head_dim).permute(3, 0, 4, 2, 1, 5)
        q, k, v = qkv.unbind(0)
        q = q.view(B, self.heads, num_windows, self.q_stride, -1, self.head_dim).amax(dim=3)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.transpose(1, 3).reshape(B, -1, self.heads * self.head_dim)
        return self.proj(x)


class MaskedAttention5D(nn.Module):
    """5-D attention with a bool mask ``[B, 1, 1, L, S]`` broadcast over groups and heads."""

    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


class Attention4D(nn.Module):
    def forward(self, q, k, v, mask):
        return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def verified(session: Session):
    result = session.verify(edge_values=False)
    assert result.ok, result.summary()
    return result


def swept(result, label: str) -> set[int]:
    """The sizes of dim group ``label`` at which verify compared ONNX with eager."""
    return {size for case in result.cases if case.ok for name, size in case.sizes if name == label}


@pytest.fixture(autouse=True)
def seeded():
    torch.manual_seed(0)


def test_twins_5d_attention_exports_with_a_dynamic_batch_and_matches_eager_at_other_batches():
    session = export(TwinsBlock().eval(), torch.randn(2, 16, 4, 4),
                     options=ExportOptions(dynamic_shapes={"image": {0: Dim("batch")}}))
    result = verified(session)
    assert len(swept(result, "batch")) >= 3


def test_twins_5d_attention_exports_with_dynamic_batch_height_and_width_padded_to_windows():
    """Odd heights and widths are padded to whole windows inside the model, as timm does. Named
    by strings: the dims take the ranges torch's guards allow (the crop after the padding)."""
    session = export(TwinsBlock().eval(), torch.randn(2, 16, 6, 4),
                     options=ExportOptions(dynamic_shapes={"image": {0: "batch", 2: "h", 3: "w"}}))
    dims = [d.dim_param or d.dim_value for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", 16, "h", "w"]
    result = verified(session)
    assert {3, 7} <= swept(result, "h") and {3, 5} <= swept(result, "w")


def test_hiera_5d_attention_with_pooled_queries_exports_with_a_dynamic_batch():
    session = export(MaskUnitAttention().eval(), torch.randn(2, 32, 16),
                     options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    result = verified(session)
    assert len(swept(result, "batch")) >= 3


def test_hiera_5d_attention_exports_with_dynamic_batch_and_tokens_the_window_count_staying_dynamic():
    """``num_windows = tokens // 8`` (q_stride 2 × window 4) is computed from the token count,
    so the folded batch ``B * windows`` changes with both dims at run time."""
    session = export(MaskUnitAttention().eval(), torch.randn(2, 32, 16),
                     options=ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "tokens"}}))
    dims = [d.dim_param or d.dim_value for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "tokens", 16]
    result = verified(session)
    assert {30, 64} <= swept(result, "tokens") and len(swept(result, "batch")) >= 3


@pytest.mark.parametrize("fully_masked_rows", ["zero", "mean"])
def test_5d_attention_with_a_broadcast_bool_mask_matches_eager(fully_masked_rows):
    q, k, v = torch.randn(2, 3, 2, 4, 8), torch.randn(2, 3, 2, 5, 8), torch.randn(2, 3, 2, 5, 8)
    mask = torch.rand(2, 1, 1, 4, 5) > 0.3
    mask[..., 0] = True  # every query sees a key: both fully_masked_rows choices agree with eager
    batch = Dim("batch")
    session = export(MaskedAttention5D(), q, k, v, mask, options=ExportOptions(
        dynamic_shapes={"q": {0: batch}, "k": {0: batch}, "v": {0: batch}, "mask": {0: batch}},
        fully_masked_rows=fully_masked_rows))
    for size in (1, 2, 5):
        args = (torch.randn(size, 3, 2, 4, 8), torch.randn(size, 3, 2, 5, 8), torch.randn(size, 3, 2, 5, 8),
                torch.rand(size, 1, 1, 4, 5) > 0.3)
        args[3][..., 0] = True
        np.testing.assert_allclose(session.run_onnx(*args)[0], MaskedAttention5D()(*args).numpy(), rtol=1e-4, atol=1e-5)


def test_5d_attention_with_a_fully_masked_row_returns_zero_for_it_as_pytorch_does():
    q, k, v = torch.randn(1, 2, 2, 3, 4), torch.randn(1, 2, 2, 5, 4), torch.randn(1, 2, 2, 5, 4)
    mask = torch.ones(1, 2, 1, 3, 5, dtype=torch.bool)
    mask[0, 1, 0, 2] = False  # group 1, query 2: no key
    session = export(MaskedAttention5D(), q, k, v, mask)
    (got,) = session.run_onnx(q, k, v, mask)
    expected = MaskedAttention5D()(q, k, v, mask).numpy()
    assert np.all(expected[0, 1, :, 2] == 0)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kv_shape", [(2, 1, 2, 5, 8), (3, 2, 5, 8)], ids=["size_1_group", "4d_key_value"])
def test_5d_attention_broadcasting_key_and_value_over_the_leading_dims_matches_eager(kv_shape):
    """Eager broadcasts the leading dims of q, k, v and the mask (k/v with a group dim of 1, or
    4-D k/v and a 4-D mask against a 5-D query); the translation expands them before folding."""
    q, k, v = torch.randn(2, 3, 2, 4, 8), torch.randn(kv_shape), torch.randn(kv_shape)
    mask = torch.randn(3, 1, 4, 5)
    session = export(MaskedAttention5D(), q, k, v, mask)
    np.testing.assert_allclose(session.run_onnx(q, k, v, mask)[0], MaskedAttention5D()(q, k, v, mask).numpy(),
                               rtol=1e-4, atol=1e-5)


def test_5d_attention_exports_at_opset_23_through_onnx_attention():
    """From opset 23 torchlib translates 4-D attention to ONNX ``Attention``, which also takes 4-D only."""
    session = export(MaskUnitAttention().eval(), torch.randn(2, 32, 16),
                     options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}, opset_version=23))
    assert "Attention" in {node.op_type for node in session.model_proto.graph.node}
    verified(session)


def test_the_registry_wraps_whichever_attention_translation_wins_and_keeps_one_function_per_table():
    target = torch.ops.aten.scaled_dot_product_attention.default
    plain = translations.onnx_registry(20).get_decomps(target)[0].onnx_function
    assert plain.__wrapped__ is compat.registered_translation(20, target)
    extra = masked_translations("zero", 20)
    masked = translations.onnx_registry(20, extra).get_decomps(target)[0].onnx_function
    assert masked.__wrapped__ is extra[0][1]
    assert translations.onnx_registry(20, extra) is translations.onnx_registry(20, extra)
    assert fold_leading_dims(extra[0][1]) is masked


@pytest.mark.parametrize(("opset", "fully_masked_rows"), [(20, "zero"), (20, "mean"), (23, "zero")])
def test_4d_attention_translates_to_the_same_onnx_bytes_with_the_nd_entry_as_without(opset, fully_masked_rows):
    q, k, v = torch.randn(2, 2, 4, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)
    mask = torch.rand(2, 1, 4, 5) > 0.3
    program = decompose(torch.export.export(Attention4D(), (q, k, v, mask)), opset)
    extra = masked_translations(fully_masked_rows, opset)
    without = compat.onnx_registry_with(opset, translations.project_translations() + extra)
    with_nd = translations.onnx_registry(opset, extra)
    assert with_nd is not without
    before, after = (_bytes(program, registry) for registry in (without, with_nd))
    assert onnx.load_from_string(after).graph.node  # a real model
    assert after == before


def _bytes(program, registry) -> bytes:
    import onnx_ir as ir

    return ir.serde.serialize_model(compat.translate_to_onnx_ir(program, registry)).SerializeToString()
