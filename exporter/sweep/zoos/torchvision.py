"""The torchvision zoo: classification models of ``torchvision.models`` with random weights,
two 224×224 images with a dynamic ``batch``.

torchvision's compiled operators must load for it to import: the registry's torchvision
wheel for Linux is a CUDA build, which fails beside a CPU torch (``operator torchvision::nms
does not exist``). Then every entry is recorded as ``skipped`` with that reason."""

from __future__ import annotations

from collections.abc import Callable

from ..case import SweepCase
from ..zoo import Zoo, ZooEntry
from ._optional import import_problem

__all__ = ["MODELS", "ZOO", "TorchvisionZoo"]

MODELS = ("resnet18", "mobilenet_v3_small", "efficientnet_b0", "squeezenet1_0", "shufflenet_v2_x0_5", "regnet_y_400mf",
          "convnext_tiny", "vit_b_16")


def torchvision_model(name: str) -> SweepCase:
    """A torchvision classification model with random weights and its example input."""
    import torch
    import torchvision

    model = torchvision.models.get_model(name, weights=None).eval()
    pixels = torch.randn(2, 3, 224, 224, generator=torch.Generator().manual_seed(0))
    return SweepCase(model, (pixels,), {}, ({0: "batch"},))


class TorchvisionZoo(Zoo):
    name = "torchvision"
    source = __name__

    def entries(self) -> tuple[ZooEntry, ...]:
        problem = import_problem("torchvision", "pip install torchvision, the build matching your torch")
        return tuple(ZooEntry(self.name, model, self.source, None if problem else _factory(model), problem)
                     for model in MODELS)


def _factory(name: str) -> Callable[[], SweepCase]:
    def build() -> SweepCase:
        return torchvision_model(name)

    build.__name__ = build.__qualname__ = name
    return build


ZOO = TorchvisionZoo()
