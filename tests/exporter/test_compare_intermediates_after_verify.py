"""``compare_intermediates`` on a case verify ran: the very inputs verify used, and eager
PyTorch's outputs there reused (not computed again) while the module and those inputs are
unchanged; verify keeps the failing cases first, within its memory budget."""

from __future__ import annotations

import torch

import exporter
from exporter.model_twin import user_module_of
from exporter.verify import case_runs


# Outside the module (an eager run puts the module's own state back), by the user's module (eager
# runs call a twin of it).
EAGER_CALLS: dict[int, int] = {}


class CountingBlock(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.fc2 = torch.nn.Linear(8, 3)

    @property
    def calls(self) -> int:
        return EAGER_CALLS.get(id(user_module_of(self)), 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        EAGER_CALLS[id(user_module_of(self))] = self.calls + 1
        return torch.tanh(self.fc2(torch.relu(self.fc1(x))))


def _verified() -> tuple[exporter.Session, CountingBlock]:
    torch.manual_seed(0)
    model = CountingBlock().eval()
    session = exporter.export(model, torch.randn(2, 4),
                              options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert session.verify(edge_values=False).ok
    return session, model


def test_a_case_verify_ran_reuses_its_eager_outputs_instead_of_calling_the_model_again():
    session, model = _verified()
    other = next(c for c in session.last_verify.cases if c.name != "example")
    before = model.calls

    example = session.compare_intermediates()
    at_other_size = session.compare_intermediates(other.name)

    assert model.calls == before  # eager PyTorch did not run
    assert example.eager_from == at_other_size.eager_from == "verify"
    assert example.ok and at_other_size.ok
    fresh = session.compare_intermediates(args=session.last_verify.case_runs.get(other.name).args)
    assert fresh.eager_from == "this call" and model.calls == before + 1
    assert fresh.values() == at_other_size.values()  # the same inputs, the same numbers


def test_a_weight_written_after_verify_makes_the_comparison_run_eager_again():
    session, model = _verified()
    with torch.no_grad():
        model.fc2.bias.add_(0.5)
    before = model.calls

    result = session.compare_intermediates()

    assert result.eager_from == "this call" and model.calls == before + 1


def test_example_inputs_written_in_place_after_verify_make_the_comparison_run_eager_again():
    session, model = _verified()
    session.inputs.args[0].mul_(2.0)  # the caller's own tensor

    assert session.compare_intermediates().eager_from == "this call"


def test_a_verify_hooks_inputs_are_the_ones_compared_not_a_rebuild():
    torch.manual_seed(0)
    model = CountingBlock().eval()
    session = exporter.export(model, torch.randn(2, 4),
                              options=exporter.ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    sevens = {}

    def hook(case):
        sevens[case.name] = torch.full_like(case.args[0], 7.0)
        return (sevens[case.name],), {}

    verified = session.verify(edge_values=False, make_inputs=hook)
    name = next(iter(sevens))
    result = session.compare_intermediates(name)

    assert verified.case_runs.get(name).args[0] is sevens[name]
    assert result.eager_from == "verify" and result.ok


def test_past_the_memory_budget_a_case_is_rebuilt_and_run_as_before(monkeypatch):
    monkeypatch.setattr(case_runs, "MAX_KEPT_BYTES", 0)
    session, model = _verified()
    assert not session.last_verify.case_runs.runs
    other = next(c for c in session.last_verify.cases if c.name != "example")

    result = session.compare_intermediates(other.name)

    assert result.eager_from == "this call" and result.ok
    assert {r.fx_shape[0] for r in result.rows if r.fx_shape} == {dict(other.sizes)["batch"]}


def test_the_failing_cases_are_kept_first_within_the_budget():
    small = (torch.zeros(4),), {}, [torch.zeros(4)]  # 32 bytes a case
    runs = {"example": small, "batch=3": small, "batch=5": small}

    kept = case_runs.keep_case_runs(torch.nn.Linear(1, 1), runs, first=["batch=5"], max_bytes=64)

    assert list(kept.runs) == ["batch=5", "example"]
