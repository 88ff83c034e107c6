"""A position range built as a Python list, then made a tensor, computed as an ``arange``.

CPM-Ant's attention mask counts the positions back from the end of the sequence with
``torch.tensor(list(range(seqlen - self.prompt_length))[::-1])``: the list is built in
Python, so torch.export turns the sequence length into the example's (the capture refuses a
dynamic sequence, "the model's code makes it the constant 16", as torch.onnx.export does).
The replacement is the same int64 values, ``torch.arange(n - 1, -1, -1)``, symbolic in ``n``.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, method_targets, replacing_marked

__all__ = ["RangeListTensor"]

METHOD = "_prepare_attention_mask"


def _prepare_attention_mask(self: Any, input_ids: Any, span: Any, context: Any, length: Any) -> Any:
    """CPM-Ant's attention mask, the left-padding positions an ``arange`` instead of a list."""
    import torch

    batch = input_ids.size(0)
    seqlen = input_ids.size(1)
    device = input_ids.device
    directional_mask_2d = torch.arange(seqlen, device=device) <= torch.arange(seqlen, device=device).view(-1, 1)
    attention_mask = context[:, None, :] | (
        context[:, :, None].logical_not() & directional_mask_2d.view(1, seqlen, seqlen)
    )
    attention_mask = attention_mask & (span[:, None, :] == span[:, :, None])
    positions = torch.arange(seqlen - self.prompt_length - 1, -1, -1, device=device)  # the list, reversed
    mask_1d = positions[None, :].repeat(batch, 1) < length[:, None]
    mask_1d = torch.cat((torch.ones(batch, self.prompt_length, device=device).bool(), mask_1d), dim=1)
    return mask_1d.view(batch, seqlen, 1) & mask_1d.view(batch, 1, seqlen) & attention_mask


_MARKS = ("torch.tensor(list(range(seqlen - self.prompt_length))[::-1], device=device)",
          "mask_1d = torch.cat((torch.ones(batch, self.prompt_length, device=device).bool(), mask_1d), dim=1)")


class RangeListTensor(Patch):
    name = "range_list_tensor"
    idiom = ("a position range built as a Python list and made a tensor "
             "(`torch.tensor(list(range(seqlen - self.prompt_length))[::-1])` in CPM-Ant's attention mask)")
    symptom = "the list is as long as the example: the sequence length is made static"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, replacing_marked((_MARKS, _prepare_attention_mask)))
