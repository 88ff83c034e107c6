"""Indices picked among equal values: verify names the tie as the likely cause of a divergence,
and only when the picked values really tie (no false cause on a model that is simply wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporter import ExportOptions, Session
from exporter.verify.ties import Selection, selection_of, tied_rows


class TopKRouter(torch.nn.Module):
    """A sigmoid router choosing 2 of 4 experts per token, as AFMoE's does; ``zero_gate`` is
    how transformers initialises such a gate, so every score is 0.5 and every row ties."""

    def __init__(self, zero_gate: bool):
        super().__init__()
        self.gate = torch.nn.Linear(8, 4, bias=False)
        if zero_gate:
            torch.nn.init.zeros_(self.gate.weight)
        self.experts = torch.nn.Parameter(torch.randn(4, 8))

    def forward(self, x):
        scores = torch.sigmoid(self.gate(x))
        _, chosen = torch.topk(scores, k=2, dim=-1)
        return self.experts[chosen].sum(dim=-2)


def _export(model):
    x = torch.randn(2, 5, 8)
    return Session(model, (x,), {}, ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}))


def test_a_zero_initialised_router_fails_verify_with_the_tie_named_at_the_users_topk_line():
    torch.manual_seed(0)
    session = _export(TopKRouter(zero_gate=True))
    eager_order = torch.topk(torch.full((4,), 0.5), k=2).indices.tolist()
    if eager_order == [0, 1]:
        pytest.skip("this PyTorch breaks ties by the lowest index, as onnxruntime does: nothing diverges")
    result = session.verify()

    assert result.status == "failed"
    [finding] = [f for f in result.findings if f.kind == "wrong_at_example"]
    assert finding.cause is not None
    topk_line = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "_, chosen = torch.topk" in line)
    assert finding.cause.startswith(f"torch.topk (tests/exporter/test_verify_ties.py:{topk_line})")
    assert "picks among equal values in 10 of 10 row(s) (row 0: 4 of 4 values equal 0.5)" in finding.cause
    assert "break ties differently" in finding.cause


def test_a_router_with_distinct_scores_passes_and_names_no_tie():
    torch.manual_seed(0)
    result = _export(TopKRouter(zero_gate=False)).verify()

    assert result.status == "passed", result.summary()
    assert not any(f.cause and "equal values" in f.cause for f in result.findings)


def _selection(k, largest=True, dim=1):
    return Selection("topk", "torch.topk", "x", dim, k, largest, None)


@pytest.mark.parametrize(("rows", "k", "largest", "tied"), [
    ([[3.0, 1.0, 2.0, 0.0]], 2, True, 0),        # distinct values: no tie
    ([[3.0, 2.0, 2.0, 0.0]], 2, True, 1),        # the 2nd and 3rd largest tie: the pick is ambiguous
    ([[3.0, 2.0, 2.0, 0.0]], 1, True, 0),        # top-1 is 3: the tie below it does not matter
    ([[0.0, 0.0, 5.0, 1.0]], 1, False, 1),       # argmin-like pick among two zeros
    ([[1.0, 1.0], [2.0, 1.0]], None, True, 1),   # a full sort orders equal values in either way
])
def test_tied_rows_counts_only_ties_where_the_pick_is_made(rows, k, largest, tied):
    count, total, example = tied_rows(torch.tensor(rows), _selection(k, largest))

    assert (count, total) == (tied, len(rows))
    assert (example is not None) == bool(tied)


@pytest.mark.parametrize(("call", "op", "k", "largest"), [
    (lambda x: torch.topk(x, 2, dim=1, largest=False)[1], "torch.topk", 2, False),
    (lambda x: torch.sort(x, dim=1, descending=True)[1], "torch.sort", None, True),
    (lambda x: torch.argmax(x, dim=1), "torch.argmax", 1, True),
    (lambda x: torch.max(x, dim=1)[1], "torch.max", 1, True),
])
def test_selection_of_reads_the_picking_op_and_its_arguments_from_the_program(call, op, k, largest):
    class Pick(torch.nn.Module):
        def forward(self, x):
            return call(x)

    program = torch.export.export(Pick(), (torch.randn(3, 4),)).run_decompositions()
    output = next(n for n in program.graph.nodes if n.op == "output").args[0][0]
    selection = selection_of(program, output.name)

    assert selection is not None
    assert (selection.op, selection.dim, selection.k, selection.largest) == (op, 1, k, largest)
    assert selection.source is not None and "test_verify_ties.py:" in selection.source


def test_selection_of_ignores_the_values_output_of_topk():
    class Values(torch.nn.Module):
        def forward(self, x):
            return torch.topk(x, 2)[0]

    program = torch.export.export(Values(), (torch.randn(3, 4),)).run_decompositions()
    output = next(n for n in program.graph.nodes if n.op == "output").args[0][0]

    assert selection_of(program, output.name) is None
