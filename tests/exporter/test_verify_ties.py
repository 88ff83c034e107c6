"""Indices picked among equal values: verify names the tie as the likely cause of a divergence,
and only when the picked values really tie (no false cause on a model that is simply wrong)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from exporter import ExportOptions, Session
from exporter.verify.ties import Selection, picks_within_rounding, selection_of, tied_rows


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


def test_a_zero_initialised_router_is_not_called_wrong_and_names_the_tie_at_the_users_topk_line():
    torch.manual_seed(0)
    session = _export(TopKRouter(zero_gate=True))
    eager_order = torch.topk(torch.full((4,), 0.5), k=2).indices.tolist()
    if eager_order == [0, 1]:
        pytest.skip("this PyTorch breaks ties by the lowest index, as onnxruntime does: nothing diverges")
    result = session.verify()

    # every case ties at the router: nothing after the pick was compared, so not PASSED either
    assert result.status == "not_verified", result.summary()
    assert not any(f.fails for f in result.findings)
    [tie] = [f for f in result.findings if f.kind == "tie"]
    topk_line = next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if "_, chosen = torch.topk" in line)
    assert tie.cause.startswith(f"torch.topk (tests/exporter/test_verify_ties.py:{topk_line})")
    assert "picks among equal values in 10 of 10 row(s) (row 0: 4 of 4 values equal 0.5)" in tie.cause
    assert "break ties differently" in tie.cause
    assert any(f.kind == "not_verified" and "torch.topk" in f.message for f in result.findings)


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
    ([[5.0, 1.0, 1.0 + 2.4e-7, 3.0]], 1, False, 1),  # a near-tie: one float32 step apart at magnitude 5
    ([[5.0, 1.0, 1.001, 3.0]], 1, False, 0),         # 1e-3 apart: far beyond rounding
    ([[7, 3, 3, 9]], 1, False, 1),                   # integers tie only when equal
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


class Codebook(torch.nn.Module):
    """A vector quantizer's lookup, as VQModel's: the nearest of four codes by squared distance.
    Codes 0 and 1 sit at (1, 0) and (-1, 0): a point on the line between them is a near-tie."""

    def __init__(self):
        super().__init__()
        self.codes = torch.nn.Parameter(torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 3.0], [0.0, -3.0]]))

    def forward(self, z):
        distances = ((z[:, None, :] - self.codes[None]) ** 2).sum(-1)
        index = torch.argmin(distances, dim=1)
        return self.codes[index]


def _codebook_session(nudge: float, example=None):
    """The codebook exported with a dynamic batch; in the ONNX model, code 1 moved ``nudge``
    towards code 0 (another runtime's rounding, made large enough to flip a near-tie at will)."""
    import numpy as np
    import onnx_ir as ir

    torch.manual_seed(0)
    z = torch.randn(4, 2) if example is None else example
    session = Session(Codebook(), (z,), {}, ExportOptions(dynamic_shapes={"z": {0: "batch"}}))
    model = session.stage_output("optimize")
    copies = [v for v in model.graph.initializers.values() if v.const_value is not None and v.const_value.numpy().size == 8]
    assert copies  # the codes (the optimizer folds a copy for the distances and one for the lookup)
    for codes in copies:
        moved = codes.const_value.numpy().copy()
        moved.reshape(4, 2)[1, 0] += nudge
        codes.const_value = ir.tensor(np.ascontiguousarray(moved, dtype=np.float32), name=codes.name)
    return session


def _near_ties_in_one_case(delta: float):
    """A ``make_inputs`` hook: in the first case after the example, every other row sits
    ``delta`` off the middle of codes 0 and 1, nearer code 0 (distances 4·delta apart,
    ~3e-7 of the row's largest distance)."""
    seen: list[str] = []

    def make(case):
        if seen:
            return None
        seen.append(case.name)
        (z,) = case.args or tuple(case.kwargs.values())
        z = z.clone()
        z[::2, 0], z[::2, 1] = delta, 0.5
        return (z,), {}

    return make, seen


def test_a_codebook_argmin_with_near_ties_passes_and_says_onnxruntime_picked_among_them():
    session = _codebook_session(nudge=1e-5)
    make, seen = _near_ties_in_one_case(delta=1e-6)

    result = session.verify(make_inputs=make, edge_values=False)

    assert seen, "verify never asked for a case's inputs"
    tied = result.case(seen[0])
    assert tied.outputs and not all(o.ok for o in tied.outputs)  # the indices really differed there
    assert result.status == "passed", result.summary()
    [tie] = [f for f in result.findings if f.kind == "tie"]
    assert tie.case == seen[0] and "not counted as wrong" in tie.message
    assert tie.cause.startswith("torch.argmin (tests/exporter/test_verify_ties.py:")
    assert "picks among values equal up to float rounding in 1 of " in tie.cause
    assert "float rounding at their magnitude" in tie.cause and "as right as the op allows" in tie.cause


def test_a_codebook_argmin_turned_argmax_in_the_onnx_model_fails_even_with_near_ties_in_the_rows():
    torch.manual_seed(1)
    example = torch.randn(4, 2)
    example[::2, 0], example[::2, 1] = 1e-6, 0.5  # rows 0 and 2 near-tie: the tie is named, not taken for the cause
    session = _codebook_session(nudge=1e-5, example=example)
    (argmin,) = [n for n in session.stage_output("optimize").graph if n.op_type == "ArgMin"]
    argmin.op_type = "ArgMax"  # a wrong index: the farthest code, not a near one

    result = session.verify(edge_values=False)

    assert result.status == "failed", result.summary()
    assert not any(f.kind == "tie" for f in result.findings)
    assert result.divergence is not None and result.divergence.op_type == "ArgMax"
    [wrong] = [f for f in result.findings if f.kind == "wrong_at_example"]
    assert "picks among values equal up to float rounding in 2 of 4 row(s)" in wrong.cause
    assert "a wrong index, not only the tie" in wrong.cause


def test_picks_within_rounding_excuses_only_picks_among_the_near_tied_values():
    values = torch.tensor([[5.0, 1.0, 1.0 + 2.4e-7, 3.0], [2.0, 0.0, 4.0, 6.0]])
    selection = Selection("argmin", "torch.argmin", "d", 1, 1, False, None)
    eager = torch.tensor([1, 1])

    assert picks_within_rounding(values, selection, eager, torch.tensor([2, 1])) == (1, True)   # the other near-equal value
    assert picks_within_rounding(values, selection, eager, torch.tensor([3, 1])) == (1, False)  # 3.0: a wrong index
    assert picks_within_rounding(values, selection, eager, torch.tensor([2, 0])) == (2, False)  # the tie, and a wrong one
    assert picks_within_rounding(values, selection, eager, torch.tensor([1, 9]))[0] is None      # out of range: not judged
