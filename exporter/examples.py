"""Built-in example models, ready to export.

Each factory returns ``(model, args, kwargs, dynamic_shapes)``: a module in eval mode with
seeded random weights, example inputs, and a dim spec naming the dynamic axes. They are what
``onnx-workbench demo`` exports and what the benchmarks time::

    from exporter import ExportOptions, export
    from exporter.examples import demo_block

    model, args, kwargs, dims = demo_block()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims), **kwargs)

This module imports torch; ``import exporter`` does not import it.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .dims import Dim

__all__ = ["MLP", "TransformerBlock", "block_inputs", "demo_block", "mlp"]

D_MODEL = 64
N_HEADS = 4


class SelfAttention(nn.Module):
    """Multi-head self-attention with ``F.scaled_dot_product_attention``."""

    def __init__(self, d_model: int, n_heads: int) -> None:
        super().__init__()
        self.n_heads = n_heads
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        batch, seq, d_model = x.shape
        q, k, v = (
            t.view(batch, seq, self.n_heads, -1).transpose(1, 2)
            for t in self.qkv(x).split(d_model, dim=-1)
        )
        # Expanded, not broadcast: broadcasting a [batch, 1, 1, seq] mask makes torch guard
        # seq != 1, which a Dim('seq') without min=2 rejects (see test_capture_settings.py).
        mask = None if attention_mask is None else attention_mask[:, None, None, :].expand(batch, 1, seq, seq)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(out.transpose(1, 2).reshape(batch, seq, d_model))


class TransformerBlock(nn.Module):
    """A pre-norm transformer block: ``x + attn(norm(x))``, then ``x + mlp(norm(x))``.

    ``attention_mask`` (optional, bool, ``[batch, seq]``) marks the key positions each
    sequence may attend to; ``True`` = attend.
    """

    def __init__(self, d_model: int = D_MODEL, n_heads: int = N_HEADS, mlp_ratio: int = 4) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = SelfAttention(d_model, n_heads)
        self.norm2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, mlp_ratio * d_model),
            nn.GELU(),
            nn.Linear(mlp_ratio * d_model, d_model),
        )

    def forward(self, x: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm1(x), attention_mask=attention_mask)
        return x + self.mlp(self.norm2(x))


class MLP(nn.Module):
    """Two linear layers with a ReLU between them."""

    def __init__(self, d_in: int = 16, d_hidden: int = 32, d_out: int = 8) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_hidden)
        self.fc2 = nn.Linear(d_hidden, d_out)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def block_inputs(batch: int, seq: int, *, seed: int = 1) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Inputs for :class:`TransformerBlock` at any size: ``((x,), {"attention_mask": mask})``.

    Sequence ``i`` of the batch has its last ``i`` positions masked out (never all of them),
    as in a padded batch of sequences of different lengths.
    """
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, seq, D_MODEL, generator=generator)
    mask = torch.ones(batch, seq, dtype=torch.bool)
    for i in range(batch):
        padding = min(i, seq - 1)
        if padding:
            mask[i, seq - padding :] = False
    return (x,), {"attention_mask": mask}


def demo_block(batch: int = 2, seq: int = 7, *, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """A pre-norm transformer block (d_model 64, 4 heads) with an attention mask keyword.

    Returns ``(model, args, kwargs, dynamic_shapes)``; the batch and sequence axes of ``x``
    and ``attention_mask`` are the named dims ``batch`` and ``seq``.
    """
    torch.manual_seed(seed)
    model = TransformerBlock().eval()
    args, kwargs = block_inputs(batch, seq)
    batch_dim, seq_dim = Dim("batch"), Dim("seq")
    dynamic_shapes = {"x": {0: batch_dim, 1: seq_dim}, "attention_mask": {0: batch_dim, 1: seq_dim}}
    return model, args, kwargs, dynamic_shapes


def mlp(batch: int = 4, *, seed: int = 0) -> tuple[nn.Module, tuple[Any, ...], dict[str, Any], dict[str, Any]]:
    """A two-layer MLP (16 → 32 → 8) with a dynamic ``batch`` axis.

    Returns ``(model, args, kwargs, dynamic_shapes)``.
    """
    torch.manual_seed(seed)
    model = MLP().eval()
    x = torch.randn(batch, 16, generator=torch.Generator().manual_seed(seed + 1))
    return model, (x,), {}, {"x": {0: Dim("batch")}}
