"""Resizing to a multiple of the patch size only when the size is not one already.

transformers' MobileViT (and DeepLabV3/MobileViT) cut a feature map into patches in
``unfolding``, first resizing it to a multiple of the patch size, computed with Python's
``math.ceil`` on the example's sizes, and only when it is not one already::

    new_height = int(math.ceil(orig_height / patch_height) * patch_height)
    if new_width != orig_width or new_height != orig_height:
        features = interpolate(features, size=(new_height, new_width), ...)
        interpolate = True

The export keeps the example's numbers (the patch grid baked into a ``Reshape``: onnxruntime
fails at the next size, "cannot reshape {1,16,1,1} to {-1,8,1,8}"). The replacement computes
the multiple from the symbolic size (``(size + patch - 1) // patch * patch``, the same integer)
and always resizes, as ``folding`` then resizes back: a bilinear resize to the same size (half
pixel centres) reads every value at its own position, so it returns the map unchanged.
"""

from __future__ import annotations

from typing import Any

from .base import Patch, PatchTarget, method_targets, replacing_marked

__all__ = ["UnfoldResize"]

METHOD = "unfolding"
_MARKS = ("int(math.ceil(orig_height / patch_height) * patch_height)",
          "if new_width != orig_width or new_height != orig_height:", '"interpolate": interpolate,')


def unfolding(self: Any, features: Any) -> tuple[Any, dict[str, Any]]:
    """MobileViT's ``unfolding``: the feature map resized to a multiple of the patch size (the
    identity when it is one) and cut into patches, with sizes computed from the tensor's shape."""
    import torch

    patch_width, patch_height = self.patch_width, self.patch_height
    patch_area = int(patch_width * patch_height)
    batch_size, channels, orig_height, orig_width = features.shape
    new_height = (orig_height + patch_height - 1) // patch_height * patch_height
    new_width = (orig_width + patch_width - 1) // patch_width * patch_width
    features = torch.nn.functional.interpolate(features, size=(new_height, new_width), mode="bilinear",
                                               align_corners=False)
    num_patch_width = new_width // patch_width
    num_patch_height = new_height // patch_height
    num_patches = num_patch_height * num_patch_width
    patches = features.reshape(batch_size * channels * num_patch_height, patch_height, num_patch_width, patch_width)
    patches = patches.transpose(1, 2)
    patches = patches.reshape(batch_size, channels, num_patches, patch_area)
    patches = patches.transpose(1, 3)
    patches = patches.reshape(batch_size * patch_area, num_patches, -1)
    info_dict = {
        "orig_size": (orig_height, orig_width),
        "batch_size": batch_size,
        "channels": channels,
        "interpolate": True,  # folding resizes back: the identity at a multiple of the patch size
        "num_patches": num_patches,
        "num_patches_width": num_patch_width,
        "num_patches_height": num_patch_height,
    }
    return patches, info_dict


class UnfoldResize(Patch):
    name = "unfold_resize"
    idiom = ("resizing a feature map to a multiple of the patch size only when it is not one, with "
             "`math.ceil` on the sizes (MobileViT's `unfolding`)")
    symptom = "the example's patch grid is baked into a Reshape: onnxruntime fails at the next size"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, replacing_marked((_MARKS, unfolding)))
