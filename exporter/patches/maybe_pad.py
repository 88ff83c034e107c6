"""Padding to a multiple of the patch size without asking first whether it is needed.

Swin-family patch embeddings in transformers (FocalNet, Swin, Swinv2, Donut-Swin,
MaskFormer-Swin, Swin2SR, CLAP, DiNAT) pad the image to a multiple of the patch size, and
their patch merging to an even size, only when the size needs it::

    def maybe_pad(self, pixel_values, height, width):
        if width % self.patch_size[1] != 0:
            pad_values = (0, self.patch_size[1] - width % self.patch_size[1])
            ...

The export keeps the branch the example took (no padding at a multiple of the patch size):
at a size that needs padding the ONNX model gives fewer patches than eager PyTorch (FocalNet:
16 tokens instead of 25 at 33x33) or fails in a ``Reshape``. The replacement always pads, by
``(patch - size % patch) % patch`` (0 when the size is a multiple), a symbolic amount.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, method_targets, replacing_marked

__all__ = ["PadToPatchMultiple"]

METHOD = "maybe_pad"


def maybe_pad(self: Any, pixel_values: Any, height: Any, width: Any) -> Any:
    """Pad ``pixel_values`` on the right and bottom to a multiple of ``self.patch_size``, by 0
    when it is one already: no branch on the size."""
    import torch

    patch_height, patch_width = self.patch_size
    pad_width = (patch_width - width % patch_width) % patch_width
    pad_height = (patch_height - height % patch_height) % patch_height
    return torch.nn.functional.pad(pixel_values, (0, pad_width, 0, pad_height))


def maybe_pad_to_even(self: Any, input_feature: Any, height: Any, width: Any) -> Any:
    """Pad ``input_feature`` (batch, height, width, channels) to an even height and width, by 0
    when they are even already: no branch on the size."""
    import torch

    return torch.nn.functional.pad(input_feature, (0, 0, 0, width % 2, 0, height % 2))


# (what the original's source says, the replacement)
_VARIANTS = (
    (("if width % self.patch_size[1] != 0:", "if height % self.patch_size[0] != 0:"), maybe_pad),
    (("should_pad = (height % 2 == 1) or (width % 2 == 1)", "pad_values = (0, 0, 0, width % 2, 0, height % 2)"),
     maybe_pad_to_even),
)


class PadToPatchMultiple(Patch):
    name = "pad_to_patch_multiple"
    idiom = ("padding to a multiple of the patch size (or to an even size) only when the size needs it "
             "(`maybe_pad`: `if width % self.patch_size[1] != 0: pad`)")
    symptom = ("the example's branch is kept: fewer patches than eager or a Reshape failure at a size that "
               "needs padding")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, replacing_marked(*_VARIANTS))
