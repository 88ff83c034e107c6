"""Tiny models for the sweep tests, declared as the user zoo ``tests``: the sweep's worker
processes import this file by its path, as they do a user's ``--zoo models.py``."""

from __future__ import annotations

import os
import time

import torch

from exporter.sweep import SweepCase, zoo_entry

#: Where ``hang`` writes its process id (set by a test that checks the process is killed).
PID_FILE_VARIABLE = "SWEEP_TEST_PID_FILE"


class Baked(torch.nn.Module):
    """Reads a size into a Python int and branches on its parity: a dim asked dynamic cannot
    stay dynamic (the strict capture keeps it symbolic but guards the parity, so its program
    fails at an odd size where the model runs)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = int(x.shape[1])
        if n % 2:
            x = x[:, :-1]
        return x.reshape(x.shape[0], -1, 2).sum(-1) * 2


class Sleeper(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(3600)
        return x


@zoo_entry("tests")
def mlp() -> SweepCase:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    return SweepCase(model, (torch.randn(2, 8),), dynamic_shapes=({0: "batch"},))


@zoo_entry("tests")
def conv() -> SweepCase:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1)).eval()
    return SweepCase(model, (torch.randn(2, 3, 8, 8),), dynamic_shapes=({0: "batch"},))


@zoo_entry("tests")
def baked() -> SweepCase:
    return SweepCase(Baked(), (torch.randn(2, 6),), dynamic_shapes=({0: "batch", 1: "n"},))


@zoo_entry("tests")
def vanishing() -> SweepCase:
    """Outputs around 1e-12, as a classifier whose head starts at zero (torchvision's ViT):
    no comparison can tell a right model from one returning zeros."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.Tanh())
    with torch.no_grad():
        model[0].weight.mul_(1e-12)
        model[0].bias.zero_()
    return SweepCase(model.eval(), (torch.randn(2, 8),), dynamic_shapes=({0: "batch"},))


@zoo_entry("tests")
def hang() -> SweepCase:
    """Never returns from its forward (the build step calls it)."""
    pid_file = os.environ.get(PID_FILE_VARIABLE)
    if pid_file:
        with open(pid_file, "w") as out:
            out.write(str(os.getpid()))
    return SweepCase(Sleeper(), (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},))


@zoo_entry("tests")
def oom() -> SweepCase:
    """Allocates 16 GiB while building: past any cap the tests set."""
    weights = torch.ones(1 << 34, dtype=torch.uint8)
    return SweepCase(torch.nn.Identity(), (weights[:8].float(),))


@zoo_entry("tests")
def grows() -> SweepCase:
    """Touches 64 MiB more every 20 ms while building, up to 6 GiB: resident memory that
    passes a small cap long before the address-space backstop would stop it."""
    held = []
    for _ in range(96):
        held.append(torch.ones(1 << 26, dtype=torch.uint8))
        time.sleep(0.02)
    return SweepCase(torch.nn.Identity(), (torch.randn(2, 4),))


@zoo_entry("tests")
def focalnet() -> SweepCase:
    """transformers' FocalNet, tiny: its patch embedding drops the pixels past a multiple of the
    patch size with the padding chosen in Python, so the export is wrong at any image size that
    is not a multiple of 4 until the model patch ``pad_to_patch_multiple`` its session offers is
    applied."""
    from transformers import FocalNetConfig, FocalNetModel

    torch.manual_seed(0)
    config = FocalNetConfig(image_size=32, patch_size=4, embed_dim=8, depths=[1, 1], focal_levels=[2, 2],
                            hidden_sizes=[8, 16])
    return SweepCase(FocalNetModel(config).eval(), (), {"pixel_values": torch.randn(2, 3, 32, 32)},
                     dynamic_shapes={"pixel_values": {0: "batch", 2: "height", 3: "width"}})
