"""The timm zoo: small timm image models (``pretrained=False``, random weights), a batch of
two images at the model's default input size, with a dynamic ``batch``.

timm imports ``torchvision``; where torchvision does not import (a CUDA build of it beside a
CPU torch: ``operator torchvision::nms does not exist``), each entry is recorded as
``skipped`` with that reason."""

from __future__ import annotations

from collections.abc import Callable

from ..case import SweepCase
from ..zoo import Zoo, ZooEntry
from ._optional import import_problem

__all__ = ["MODELS", "ZOO", "TimmZoo"]

#: Small variants, one per family.
MODELS = ("resnet10t", "resnet18", "mobilenetv3_small_050", "efficientnet_b0", "convnext_atto", "regnetx_002",
          "ghostnet_050", "vit_tiny_patch16_224", "deit_tiny_patch16_224", "levit_128s", "mobilevitv2_050",
          "efficientvit_b0")


def timm_model(name: str) -> SweepCase:
    """A timm model with random weights and its example input."""
    import timm
    import torch

    model = timm.create_model(name, pretrained=False).eval()
    channels, height, width = model.pretrained_cfg.get("input_size", (3, 224, 224))
    pixels = torch.randn(2, channels, height, width, generator=torch.Generator().manual_seed(0))
    return SweepCase(model, (pixels,), {}, ({0: "batch"},))


class TimmZoo(Zoo):
    name = "timm"
    source = __name__

    def entries(self) -> tuple[ZooEntry, ...]:
        problem = import_problem("timm", "pip install timm")
        return tuple(ZooEntry(self.name, model, self.source, None if problem else _factory(model), problem)
                     for model in MODELS)


def _factory(name: str) -> Callable[[], SweepCase]:
    def build() -> SweepCase:
        return timm_model(name)

    build.__name__ = build.__qualname__ = name
    return build


ZOO = TimmZoo()
