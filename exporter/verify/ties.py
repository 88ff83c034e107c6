"""Indices chosen among equal values: a divergence that is not an export error.

``torch.topk``, ``sort``, ``argmax``/``argmin`` and ``max``/``min`` over a dim return *an*
index of equal values, and PyTorch and onnxruntime may pick different ones: ONNX ``TopK`` and
``ArgMax`` take the lowest index, PyTorch's CPU kernels need not. Values equal up to float
rounding tie too: each runtime computes them in its own order (a VQ model's codebook distances
2.4e-7 apart), so each may find another one smallest. When verify's first divergent node is
such an index, its input holds (near-)ties where the choice is made, and onnxruntime's pick in
every row that differs is one of the tied values, the ONNX model is as right as the op allows:
the case is not counted as wrong (:class:`Tie`, ``excused``); what differs downstream follows
from the pick. A pick beyond rounding of PyTorch's is a wrong index and still fails. A model
built with random weights is where exact ties happen: transformers zero-initialises some
routers, so every routing score ties (AFMoE's sigmoid router gives 0.5 for every expert).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..artifacts import ExportArtifacts
from ..frames import short_source, source_of_stack
from .divergence import Divergence, first_divergence
from .intermediates.fx_side import FxRunner
from .intermediates.ort_side import OrtRunner
from .program_run import program_inputs

__all__ = ["Selection", "Tie", "picks_within_rounding", "selection_of", "tie_of", "tied_cases", "tied_rows"]

_SELECTIONS = {
    "aten.topk.default": "torch.topk", "aten.sort.default": "torch.sort", "aten.sort.stable": "torch.sort",
    "aten.argmax.default": "torch.argmax", "aten.argmin.default": "torch.argmin",
    "aten.max.dim": "torch.max", "aten.min.dim": "torch.min",
}


@dataclass(frozen=True)
class Selection:
    """An FX node that picks indices among values: ``input`` its operand's node name, ``dim``
    the dim it picks along, ``k`` how many it picks (None: it orders the whole dim),
    ``largest`` which end it picks from."""

    node: str
    op: str
    input: str
    dim: int
    k: int | None
    largest: bool
    source: str | None


def selection_of(program: Any, fx_value: str | None) -> Selection | None:
    """The selection whose *indices* the FX value ``fx_value`` is, or None."""
    import operator

    node = next((n for n in program.graph.nodes if n.name == fx_value), None)
    if node is None:
        return None
    if node.target is operator.getitem:
        node, index = node.args[0], node.args[1]
        if index != 1:  # values of topk/sort/max.dim, not indices
            return None
    op = _SELECTIONS.get(str(node.target))
    if op is None:
        return None
    args = list(node.args) + [None] * 5
    kwargs = node.kwargs
    value = node.args[0]
    rank = len(value.meta["val"].shape) if "val" in getattr(value, "meta", {}) else 1
    if op == "torch.topk":
        k, dim, largest = args[1], kwargs.get("dim", args[2]), kwargs.get("largest", args[3])
        dim = -1 if dim is None else dim
        largest = True if largest is None else bool(largest)
    elif op == "torch.sort":
        positional = str(node.target).endswith("default")  # sort.stable takes its dim and order by keyword
        k, dim = None, kwargs.get("dim", args[1] if positional else None)
        dim = -1 if dim is None else dim
        largest = bool(kwargs.get("descending", args[2] if positional else False))
    else:
        k, dim, largest = 1, kwargs.get("dim", args[1]), op in ("torch.argmax", "torch.max")
        if dim is None:
            return None  # argmax over the flattened tensor: not judged
    if not isinstance(k, (int, type(None))) or not isinstance(dim, int):
        return None  # a symbolic k: not judged
    source = short_source(source_of_stack(node.meta.get("stack_trace")))
    return Selection(node.name, op, value.name, dim % max(rank, 1), k, largest, source)


_ROUNDING_ULPS = 64
"""A near-tie: two values closer than this many units of float rounding at the row's largest
magnitude. Scores and distances are differences of terms of that size (``|z|² + |e|² - 2z·e``
for a codebook's distances), so their rounding error scales with it, not with the result; a
summation order of its own (onnxruntime's, a decomposed ``cdist``) moves them by a few such units."""


def rounding_slack(rows: Any) -> Any:
    """Per row, how close two values may be and still be one value up to float rounding: 0 for
    integers (only equal values tie)."""
    import torch

    if not rows.is_floating_point():
        return torch.zeros(rows.shape[0], dtype=torch.float64)
    finite = torch.where(rows.isfinite(), rows, torch.zeros_like(rows)).abs().double()
    return _ROUNDING_ULPS * torch.finfo(rows.dtype).eps * finite.amax(dim=-1)


def _rows(value: Any, selection: Selection) -> Any:
    return value.detach().movedim(selection.dim, -1).reshape(-1, value.shape[selection.dim])


def tied_rows(value: Any, selection: Selection) -> tuple[int, int, str | None]:
    """``(rows with ties where the pick is made, rows, the first such row in words)``: a row
    ties when, among the values it picks and the next one, two are equal or within float
    rounding of each other at the row's magnitude (:func:`rounding_slack`)."""
    count, total, example, _ = _tied(value, selection)
    return count, total, example


def _tied(value: Any, selection: Selection) -> tuple[int, int, str | None, bool]:
    """:func:`tied_rows`, and whether the first tie is exact (equal values)."""
    import torch

    if not isinstance(value, torch.Tensor) or value.numel() == 0 or value.is_complex():
        return 0, 0, None, False
    rows = _rows(value, selection)
    width = rows.shape[-1]
    keep = width if selection.k is None else min(selection.k + 1, width)
    ordered = rows.sort(dim=-1, descending=selection.largest).values[:, :keep]
    slack = rounding_slack(rows)
    gaps = (ordered[:, 1:].double() - ordered[:, :-1].double()).abs()
    close = gaps <= slack[:, None]
    tied = close.any(dim=-1)
    count = int(tied.sum())
    if not count:
        return 0, rows.shape[0], None, False
    first = int(tied.nonzero()[0, 0])
    at = int(close[first].nonzero()[0, 0])
    tie, gap = ordered[first, at], float(gaps[first, at])
    if gap == 0:
        equal = int((rows[first] == tie).sum())
        return count, rows.shape[0], f"row {first}: {equal} of {width} values equal {tie.item():.4g}", True
    near = int(((rows[first].double() - float(tie)).abs() <= float(slack[first])).sum())
    return count, rows.shape[0], (f"row {first}: {near} of {width} values within {gap:.2g} of {tie.item():.4g}, "
                                  f"float rounding at their magnitude"), False


@dataclass(frozen=True)
class Tie:
    """Indices picked among (near-)equal values in one verify case: ``tied`` of ``rows`` rows
    tie where the pick is made (``example`` the first, in words); ``differ`` rows where
    onnxruntime picked other indices than PyTorch (None: its indices could not be read), and
    ``excused`` when each of those picks is one of the tied values (within rounding of
    PyTorch's pick): the ONNX model is as right as the op allows. A pick far from PyTorch's
    (a wrong index) is never excused, even in a row with ties elsewhere."""

    case: str
    selection: Selection
    tied: int
    rows: int
    example: str
    exact: bool = True
    differ: int | None = None
    excused: bool = False

    @property
    def cause(self) -> str:
        where = f" ({self.selection.source.split(' in ', 1)[0]})" if self.selection.source else ""
        if self.exact:
            text = (f"{self.selection.op}{where} picks among equal values in {self.tied} of {self.rows} row(s) "
                    f"({self.example}): PyTorch and onnxruntime break ties differently (ONNX takes the lowest index), "
                    "so the indices differ and what follows from them")
        else:
            text = (f"{self.selection.op}{where} picks among values equal up to float rounding in {self.tied} of "
                    f"{self.rows} row(s) ({self.example}): PyTorch and onnxruntime compute them in another order, so "
                    "each may find another one smallest or largest; the indices differ and what follows from them")
        if self.excused:
            return (text + f"; onnxruntime's pick in each of the {self.differ} row(s) that differ is one of the tied "
                    "values, so the ONNX model is as right as the op allows")
        if self.differ:
            return (text + f"; but in the {self.differ} row(s) that differ, onnxruntime also picks values beyond "
                    "rounding of PyTorch's pick: a wrong index, not only the tie")
        return (text + ". The ONNX model is not wrong for it; with these weights the scores tie (an all-zero, freshly "
                "initialised layer?). Verify with trained weights, or random ones where the model zero-initialises")


def tie_of(session: ExportArtifacts, divergence: Divergence | None, args: tuple[Any, ...],
           kwargs: Mapping[str, Any]) -> Tie | None:
    """The tie behind ``divergence`` when it is indices picked among (near-)equal values; None
    when it is not (or cannot be told). Reads the op's input and PyTorch's indices from the
    program, onnxruntime's indices from the ONNX model, on the case's inputs."""
    if divergence is None or divergence.stage != "onnx" or divergence.fx_node is None:
        return None
    program = session.stage_output("decompose")
    selection = selection_of(program, divergence.fx_node)
    if selection is None:
        return None
    _, _, values = FxRunner(program).run(program_inputs(program, session, args, kwargs),
                                         {selection.input, divergence.fx_node}, None)
    value = (values or {}).get(selection.input)
    count, total, example, exact = _tied(value, selection)
    if not count or example is None:
        return None
    tie = Tie(divergence.case, selection, count, total, example, exact)
    theirs = _onnx_indices(session, divergence, args, kwargs)
    ours = (values or {}).get(divergence.fx_node)
    if theirs is None or ours is None:
        return tie
    differ, excused = picks_within_rounding(value, selection, ours, theirs)
    return replace(tie, differ=differ, excused=excused)


def _onnx_indices(session: ExportArtifacts, divergence: Divergence, args: tuple[Any, ...],
                  kwargs: Mapping[str, Any]) -> Any:
    import torch

    if divergence.onnx_value is None:
        return None
    runner = OrtRunner(session.stage_output("optimize"), session.ort_model)
    try:
        value = runner.run([divergence.onnx_value], session.feeds(*args, **kwargs), keep=False)[divergence.onnx_value]
    except Exception:  # noqa: BLE001 - unread: the tie is explained, not excused
        return None
    finally:
        runner.close()
    return torch.as_tensor(value)


def picks_within_rounding(value: Any, selection: Selection, ours: Any, theirs: Any) -> tuple[int | None, bool]:
    """``(rows whose indices differ, whether each of onnxruntime's picks there has a value within
    float rounding of PyTorch's pick at the same rank)``, reading both picks' values from
    ``value``, the op's input; ``(None, False)`` when the indices do not line up with it."""
    rows = _rows(value, selection)
    width = rows.shape[-1]

    def per_row(indices: Any) -> Any:
        if indices.dim() == value.dim():
            indices = indices.movedim(selection.dim, -1)
        return indices.reshape(rows.shape[0], -1).long()

    try:
        mine, other = per_row(ours), per_row(theirs.to(ours.device))
    except RuntimeError:
        return None, False
    if mine.shape != other.shape or bool((other < 0).any() or (other >= width).any()):
        return None, False
    differs = (mine != other).any(dim=-1)
    if not bool(differs.any()):
        return 0, False
    picked = rows[differs].double()
    gaps = (picked.gather(-1, mine[differs]) - picked.gather(-1, other[differs])).abs()
    within = bool((gaps <= rounding_slack(rows[differs])[:, None]).all())
    return int(differs.sum()), within


def tied_cases(session: ExportArtifacts, divergence: Divergence | None, failing: Sequence[str],
               inputs: Mapping[str, tuple[tuple[Any, ...], Mapping[str, Any], Sequence[Any] | None]],
               tolerances: Any = None, limit: int = 16) -> dict[str, Tie]:
    """The ties behind verify's failing cases, by case: ``divergence`` (the first failing case's)
    and, when its tie is excused, each other case of ``failing`` located in turn (none when
    there are more than ``limit`` of them; the search stops at the first case that is not a
    tie). A case missing from the
    answer is not explained by a tie; an explanation that cannot be made is left out."""
    if divergence is None or divergence.stage != "onnx" or divergence.case not in inputs:
        return {}
    try:
        first = tie_of(session, divergence, *inputs[divergence.case][:2])
    except Exception:  # noqa: BLE001 - an explanation that cannot be made is left out
        return {}
    if first is None:
        return {}
    found = {divergence.case: first}
    others = [name for name in failing if name != divergence.case and name in inputs]
    if not first.excused or len(others) > limit:
        return found
    for name in others:
        args, kwargs, expected = inputs[name]
        try:
            located = first_divergence(session, name, args, kwargs, expected or [], tolerances=tolerances)
            tie = tie_of(session, located, args, kwargs)
        except Exception:  # noqa: BLE001
            tie = None
        if tie is None:
            break
        found[name] = tie
    return found
