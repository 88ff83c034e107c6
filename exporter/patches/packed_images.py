"""Images packed into one sequence by a Python loop over the batch, packed with tensor ops.

Pixtral's vision tower (Pixtral, Mistral3, LightOnOCR) takes images of any sizes, so it loops
over them in Python: it crops each image's patches, flattens them into one sequence, builds
each one's positions, and a block-diagonal attention mask, image by image::

    patch_embeds_list = [embed[..., : (size[0] // p), : (size[1] // p)] for embed, size in zip(patch_embeds, image_sizes)]
    for patch in patch_embeds_list: ... position_ids.append(...)

The loop runs once per image of the example, so ``torch.export`` makes the batch the
example's ("the model's code makes it the constant 2"). Called without ``image_sizes`` every
image has the input's size; the replacement then packs the batch with a reshape, repeats one
image's positions and builds the block mask from the image index of each position, all
symbolic in the batch, height and width. With ``image_sizes``, or with flash attention, it
runs the original.
"""

from __future__ import annotations

import ast
import inspect
import sys
from typing import Any

from .base import Patch, PatchTarget, model_classes, source_of, unpatched

__all__ = ["PackedImages"]

METHOD = "forward"
_MARKS = ("for embed, size in zip(patch_embeds, image_sizes)", "generate_block_attention_mask(",
          "self.patch_positional_embedding(patch_embeds, position_ids)")
_DOCUMENTING = {"auto_docstring"}  # decorators that only write docs: not needed on the replacement


def packed_forward(original: Any, is_flash_attention_requested: Any) -> Any:
    """Pixtral's vision forward for a batch of images of one size (no ``image_sizes``): the
    same sequence, positions and block mask as the loop over the images, from tensor ops;
    ``original`` (undecorated) for the rest."""

    def forward(self: Any, pixel_values: Any, image_sizes: Any = None, **kwargs: Any) -> Any:
        import torch

        if image_sizes is not None or is_flash_attention_requested(self.config):
            return original(self, pixel_values, image_sizes, **kwargs)
        patch_embeds = self.patch_conv(pixel_values.to(dtype=self.patch_conv.weight.dtype))
        batch, channels, rows, cols = patch_embeds.shape  # whole patches: the crop to size // patch is the identity
        patch_embeds = patch_embeds.flatten(2).transpose(1, 2).reshape(1, batch * rows * cols, channels)
        patch_embeds = self.ln_pre(patch_embeds)
        device = patch_embeds.device
        hpos_ids, wpos_ids = torch.meshgrid(torch.arange(rows, device=device), torch.arange(cols, device=device),
                                            indexing="ij")
        position_ids = torch.stack([hpos_ids.flatten(), wpos_ids.flatten()], dim=-1).repeat(batch, 1)
        position_embeddings = self.patch_positional_embedding(patch_embeds, position_ids)
        image = torch.arange(batch * rows * cols, device=device) // (rows * cols)  # the image of each position
        blocked = torch.tensor(torch.finfo(patch_embeds.dtype).min, dtype=patch_embeds.dtype, device=device)
        attention_mask = torch.where(image[:, None] == image[None, :], torch.zeros_like(blocked), blocked)
        attention_mask = attention_mask[None, None, :, :].expand(patch_embeds.shape[0], 1, -1, -1)
        return self.transformer(patch_embeds, attention_mask=attention_mask, position_embeddings=position_embeddings,
                                **kwargs)

    return forward


def _decorated_like(original: Any, cls: type) -> Any | None:
    """:func:`packed_forward` wrapped in the original's decorators (transformers' config
    defaults and output capture), read from its source and its module; None when one of them
    (or the flash-attention check) cannot be found."""
    try:
        definition = ast.parse(source_of(original)).body[0]
    except (SyntaxError, IndexError):
        return None
    module = vars(sys.modules[cls.__module__])
    if not isinstance(definition, ast.FunctionDef) or "is_flash_attention_requested" not in module:
        return None
    function = packed_forward(inspect.unwrap(original), module["is_flash_attention_requested"])
    for decorator in reversed(definition.decorator_list):
        name = ast.unparse(decorator)
        if name in _DOCUMENTING:
            continue
        if not isinstance(decorator, ast.Name) or name not in module:
            return None
        function = module[name](function)
    return function


class PackedImages(Patch):
    name = "packed_images"
    idiom = ("images of one size packed into one sequence by a Python loop over the batch "
             "(Pixtral's vision tower: `for embed, size in zip(patch_embeds, image_sizes)`)")
    symptom = "the loop runs once per image of the example: the batch is made static"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        found = []
        for cls in model_classes(model):
            original = unpatched(cls, METHOD)
            source = source_of(original) if callable(original) else ""
            if not all(mark in source for mark in _MARKS):
                continue
            replacement = _decorated_like(original, cls)
            if replacement is not None:
                found.append(PatchTarget(cls, METHOD, replacement, source, source_of(inspect.unwrap(replacement)),
                                         f"{cls.__module__}.{cls.__qualname__}"))
        return tuple(found)
