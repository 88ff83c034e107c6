"""A model that draws random numbers in eval mode (VITS samples with ``torch.randn_like``) is
``not_verified`` with the lines that draw, not FAILED: eager PyTorch itself gives other outputs
at each run, and onnxruntime's draws cannot be torch's."""

from __future__ import annotations

from pathlib import Path

import torch

from exporter import ExportOptions, Session


class Noisy(torch.nn.Module):
    def __init__(self, scale: float = 1.0) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.linear(x)
        return h + self.scale * torch.randn_like(h)  # the line that draws


def _verify(model: torch.nn.Module):
    session = Session(model.eval(), (torch.randn(2, 4),), {}, ExportOptions(dynamic_shapes=({0: "batch"},)))
    assert session.run().ok
    return session.verify(edge_values=False)


def test_a_model_drawing_random_numbers_is_not_verified_with_the_line_that_draws_not_failed():
    result = _verify(Noisy())
    assert result.status == "not_verified", result.verdict
    assert result.verdict.startswith("Verification NOT VERIFIED: the model draws random numbers")
    line = next(i for i, text in enumerate(Path(__file__).read_text().splitlines(), 1) if "# the line that draws" in text)
    assert f"test_verify_random.py:{line}" in result.verdict and "randn_like" in result.verdict
    [finding] = [f for f in result.findings if f.kind == "random"]
    assert "noise scale of 0" in (finding.fix or "")
    assert not [f for f in result.findings if f.fails]


def test_with_its_noise_scaled_to_zero_the_same_model_passes():
    assert _verify(Noisy(scale=0.0)).status == "passed"
