"""Float32 rounding a model amplifies is told apart from a wrong export by running the model in
float64 (:mod:`exporter.verify.rounding`): onnxruntime as close to the exact outputs as eager
float32 is passes, with a finding that says so; an error beyond the rounding still fails."""

from __future__ import annotations

import torch

from exporter import ExportOptions, Session
from exporter.verify.rounding import Float64Reference, rounding_rejudged
from exporter.verify.tolerance import DEFAULT_TOLERANCES, compare


class Cancels(torch.nn.Module):
    """``x @ w1 - x @ w2`` with ``w2`` within 1e-3 of ``w1``: sums of 4096 products of ~10 that
    nearly cancel, so float32 rounding (summed in another order by onnxruntime) is ~1e-3 of
    outputs of ~1, far beyond rtol=1e-4. ``wrong_by``: the export adds that much to one element
    (a branch on ``torch.compiler.is_exporting()``)."""

    def __init__(self, wrong_by: float = 0.0) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        w = torch.randn(4096, 16, generator=generator)
        self.w1 = torch.nn.Parameter(w)
        self.w2 = torch.nn.Parameter(w + 1e-3 * torch.randn(4096, 16, generator=generator))
        self.wrong_by = wrong_by

    def forward(self, x):
        y = x @ self.w1 - x @ self.w2
        if self.wrong_by and torch.compiler.is_exporting():
            y = y + torch.nn.functional.one_hot(torch.tensor(3), 16) * self.wrong_by
        return y


def _x(batch: int = 4) -> torch.Tensor:
    return torch.randn(batch, 4096, generator=torch.Generator().manual_seed(1)) * 10


def _verify(model: torch.nn.Module, **options):
    session = Session(model.eval(), (_x(),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert session.run().ok
    return session.verify(edge_values=False, **options)


def test_rounding_the_model_amplifies_passes_with_a_finding_naming_both_distances_from_float64():
    result = _verify(Cancels())
    assert result.status == "passed", str(result)
    (finding,) = [f for f in result.findings if f.kind == "rounding"]
    assert "eager float32 is" in finding.message and "rounding, not the export" in finding.message
    checks = [o for c in result.cases for o in c.outputs]
    assert any(o.rounding for o in checks)
    assert all(o.max_abs > o.atol_applied for o in checks if o.rounding)  # beyond the tolerance: passed as rounding


def test_tolerances_given_are_applied_as_given_without_the_rounding_allowance():
    result = _verify(Cancels(), tolerances={"float32": DEFAULT_TOLERANCES["float32"]})
    assert result.status == "failed"
    assert not any(o.rounding for c in result.cases for o in c.outputs)


def test_an_export_wrong_by_several_times_the_rounding_at_one_element_still_fails():
    result = _verify(Cancels(wrong_by=0.02))  # eager float32's own error is at most ~0.003 here
    assert result.status == "failed"
    assert not [f for f in result.findings if f.kind == "rounding"]


def test_one_element_off_by_far_more_than_eager_rounding_there_is_not_rounding_however_small():
    model = torch.nn.Linear(16, 16).eval()  # eager float32 within ~1e-7 of float64
    x = torch.randn(4, 16, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        expected = [model(x)]
    off = expected[0].clone()
    off[1, 3] += 1e-3  # 0.1% of the outputs: "near", but 1000x the rounding
    check = compare("example", "y", off, expected[0])
    assert check.status == "fail"
    (rejudged,) = rounding_rejudged([check], [off], expected, Float64Reference(model), (x,), {})
    assert rejudged.status == "fail" and rejudged.rounding is None


def test_a_model_that_cannot_run_in_float64_keeps_its_comparison():
    class Float32Only(torch.nn.Module):  # makes a float32 tensor that meets its float64 weight
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            return torch.ones(2, 4) @ self.w + x

    model = Float32Only()
    reference = Float64Reference(model)
    assert reference.outputs((torch.randn(2, 4),), {}) is None and reference.failed
    assert model.w.dtype == torch.float32  # the module itself was never changed
