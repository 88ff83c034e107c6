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
