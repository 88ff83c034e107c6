"""Indices chosen among equal values: a divergence that is not an export error.

``torch.topk``, ``sort``, ``argmax``/``argmin`` and ``max``/``min`` over a dim return *an*
index of equal values, and PyTorch and onnxruntime may pick different ones: ONNX ``TopK`` and
``ArgMax`` take the lowest index, PyTorch's CPU kernels need not. When verify's first divergent
node is such an index and its input holds ties where the choice is made, the ONNX model is as
right as the op allows; what differs downstream follows from the pick. A model built with
random weights is where this happens: transformers zero-initialises some routers, so every
routing score ties (AFMoE's sigmoid router gives 0.5 for every expert).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportArtifacts
from ..frames import short_source, source_of_stack
from .divergence import Divergence
from .intermediates.fx_side import FxRunner
from .program_run import program_inputs

__all__ = ["Selection", "selection_of", "tie_cause", "tied_rows"]

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


def tied_rows(value: Any, selection: Selection) -> tuple[int, int, str | None]:
    """``(rows with ties where the pick is made, rows, the first such row in words)``: a row
    ties when, among the values it picks and the next one, two are equal."""
    import torch

    if not isinstance(value, torch.Tensor) or value.numel() == 0 or value.is_complex():
        return 0, 0, None
    rows = value.detach().movedim(selection.dim, -1).reshape(-1, value.shape[selection.dim])
    width = rows.shape[-1]
    keep = width if selection.k is None else min(selection.k + 1, width)
    ordered = rows.sort(dim=-1, descending=selection.largest).values[:, :keep]
    tied = (ordered[:, 1:] == ordered[:, :-1]).any(dim=-1)
    count = int(tied.sum())
    if not count:
        return 0, rows.shape[0], None
    first = int(tied.nonzero()[0, 0])
    picked = ordered[first]
    tie = picked[int((picked[1:] == picked[:-1]).nonzero()[0, 0])]
    equal = int((rows[first] == tie).sum())
    return count, rows.shape[0], f"row {first}: {equal} of {width} values equal {tie.item():.4g}"


def tie_cause(session: ExportArtifacts, divergence: Divergence | None, args: tuple[Any, ...],
              kwargs: Mapping[str, Any]) -> str | None:
    """The likely cause of ``divergence`` when it is indices picked among equal values, in
    words; None when it is not (or cannot be told)."""
    if divergence is None or divergence.stage != "onnx" or divergence.fx_node is None:
        return None
    program = session.stage_output("decompose")
    selection = selection_of(program, divergence.fx_node)
    if selection is None:
        return None
    _, _, values = FxRunner(program).run(program_inputs(program, session, args, kwargs), {selection.input}, None)
    count, total, example = tied_rows((values or {}).get(selection.input), selection)
    if not count:
        return None
    where = f" ({selection.source.split(' in ', 1)[0]})" if selection.source else ""
    return (
        f"{selection.op}{where} picks among equal values in {count} of {total} row(s) ({example}): PyTorch and "
        "onnxruntime break ties differently (ONNX takes the lowest index), so the indices differ and what follows "
        "from them. The ONNX model is not wrong for it; with these weights the scores tie (an all-zero, freshly "
        "initialised layer?). Verify with trained weights, or random ones where the model zero-initialises"
    )

