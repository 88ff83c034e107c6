"""Tiny models shared by the guard and dim-outcome tests, and where their lines are."""

from __future__ import annotations

import inspect

import torch

STRATEGIES = ["nonstrict", "strict"]


def line_of(obj, text: str) -> int:
    """The line number of the first line of ``obj``'s source that contains ``text``."""
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, line in enumerate(lines) if text in line)


class BranchOnBatch(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return x * 2
        return x


class PinnedWidth(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] == 4:
            return x * 2
        return x


class BranchOnOne(torch.nn.Module):
    """A fast path for size 1, as nn.MultiheadAttention has: guard ``x.shape[0] != 1``."""

    def forward(self, x):
        if x.shape[0] == 1:
            return x * 2
        return x + 1


class GatheredMask(torch.nn.Module):
    """Indexes the mask by the ids' batch, as transformers' mask functions do: no guard equates
    the two batch axes, so torch keeps two symbols for them."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 4)

    def forward(self, input_ids, attention_mask):
        rows = attention_mask[torch.arange(input_ids.shape[0])]
        return self.emb(input_ids) * rows[..., None]
