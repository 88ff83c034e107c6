"""The rows of ONNX nodes: each output against its FX value under verify's rule, the worst kept.

:func:`node_rows` judges a whole chunk at once: the pairs that are real floating-point tensors
of one shape and dtype on both sides are measured together (one concatenated array per dtype,
per-pair maxima by segment), which gives the numbers :func:`exporter.verify.tolerance.compare`
gives for a passing pair with every element finite; every other pair (a failure, a NaN, another
shape or dtype, an integer value) goes through :func:`node_row`, one pair at a time."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

from ...errors import Status
from ..tolerance import compare, is_given, tolerance_for
from .plan import NodePlan
from .result import IntermediateRow

__all__ = ["node_row", "node_rows"]

_RANK = {"mismatch": 0, "fail": 1, "pass": 2, "not compared": 3}


def node_row(case: str, node: NodePlan, onnx_values: Mapping[str, Any], fx_values: Mapping[str, Any],
             tolerances: Any) -> IntermediateRow:
    rows = [_pair_row(case, node, value, fx, onnx_values.get(value), fx_values.get(fx), tolerances)
            for value, fx in node.pairs]
    return _worst(rows)


def node_rows(case: str, nodes: Sequence[NodePlan], onnx_values: Mapping[str, Any], fx_values: Mapping[str, Any],
              tolerances: Any) -> dict[str, IntermediateRow]:
    """:func:`node_row` of each node, the passing floating-point pairs measured in one go."""
    passed = _batched_passes(case, nodes, onnx_values, fx_values, tolerances)
    rows: dict[str, IntermediateRow] = {}
    for node in nodes:
        found = [passed.get((node.name, value)) or _pair_row(case, node, value, fx, onnx_values.get(value),
                                                            fx_values.get(fx), tolerances)
                 for value, fx in node.pairs]
        rows[node.name] = _worst(found)
    return rows


def _worst(rows: list[IntermediateRow]) -> IntermediateRow:
    if len(rows) == 1:
        return rows[0]
    return min(rows, key=lambda r: (_RANK[r.status], -(r.max_abs or 0.0)))


def _batched_passes(case: str, nodes: Sequence[NodePlan], onnx_values: Mapping[str, Any], fx_values: Mapping[str, Any],
                    tolerances: Any) -> dict[tuple[str, str], IntermediateRow]:
    """The rows of the pairs that pass with every element finite, keyed by (node, ONNX value):
    real float tensors (float16/32/64) of one shape and dtype on both sides, grouped by dtype and
    measured as one array: a pair passes here when every element is within ``atol + rtol *
    |want|`` (verify's rule without its channel term, in float64, as
    :func:`exporter.verify.tolerance.compare` computes it). A pair left out, or with an element
    beyond that, is judged alone by :func:`node_row`'s path (the channel term included)."""
    import numpy as np
    import torch

    batched = _batched_dtypes()
    groups: dict[Any, list[tuple[NodePlan, str, str, Any, Any]]] = {}
    for node in nodes:
        for value, fx in node.pairs:
            got, want = onnx_values.get(value), fx_values.get(fx)
            if (not isinstance(want, torch.Tensor) or want.dtype not in batched or not isinstance(got, np.ndarray)
                    or got.dtype != batched[want.dtype] or got.shape != tuple(want.shape) or got.size == 0):
                continue
            groups.setdefault(want.dtype, []).append((node, value, fx, got, want))
    out: dict[tuple[str, str], IntermediateRow] = {}
    for dtype, pairs in groups.items():
        name = str(dtype).removeprefix("torch.")
        tol = tolerance_for(name, tolerances)
        relative = not is_given(name, tolerances)
        sizes = np.fromiter((got.size for _, _, _, got, _ in pairs), np.int64, len(pairs))
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
        got_all = np.concatenate([got.reshape(-1) for _, _, _, got, _ in pairs])
        want_all = torch.cat([want.detach().reshape(-1) for _, _, _, _, want in pairs]).cpu().numpy()
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            diff = np.subtract(got_all, want_all, dtype=np.float64)
            np.abs(diff, out=diff)
            magnitude = np.abs(want_all, dtype=np.float64)
            max_abs = np.maximum.reduceat(diff, starts)
            peak = np.maximum.reduceat(magnitude, starts)
            atol = np.array([tol.atol_for(float(p), relative) if np.isfinite(p) else tol.atol for p in peak])
            limit = atol + tol.output_scale * peak  # the row's atol_applied, as compare() gives it
            finite = np.isfinite(max_abs) & np.isfinite(limit)
            failing = np.zeros(len(pairs), dtype=bool)
            # An element within atol passes (its allowed difference is atol + rtol*|w| and more):
            # only a pair whose largest difference passes atol is looked at element by element.
            for k in np.flatnonzero(finite & (max_abs > atol)):
                part = slice(starts[k], starts[k] + sizes[k])
                failing[k] = bool(np.count_nonzero(diff[part] > atol[k] + tol.rtol * magnitude[part]))
            nonzero = magnitude > 0
            relative = np.divide(diff, magnitude, out=np.zeros_like(diff), where=nonzero)
            relative[~nonzero & (diff > 0)] = np.inf
            max_rel = np.maximum.reduceat(relative, starts)
        for i, (node, value, fx, got, want) in enumerate(pairs):
            if not finite[i] or failing[i]:
                continue  # judged alone: its worst elements, NaN / Inf counts
            out[(node.name, value)] = IntermediateRow(
                node.name, node.op, node.fx_nodes or (fx,), node.module, node.source, Status.PASS, value, fx,
                float(max_abs[i]), float(max_rel[i]), float(limit[i]), got.shape, tuple(want.shape), name)
    return out


def _pair_row(case: str, node: NodePlan, value: str, fx: str, got: Any, want: Any, tolerances: Any) -> IntermediateRow:
    import numpy as np
    import torch

    # The row's fields, gathered and built once: dataclasses.replace per step cost a fifth of
    # a warm call on a 2-layer BERT.
    fields: dict[str, Any] = {
        "onnx_node": node.name, "onnx_op": node.op, "fx_nodes": node.fx_nodes or (fx,), "module": node.module,
        "source": node.source, "status": Status.NOT_COMPARED, "onnx_value": value, "fx_value": fx}
    if got is None or want is None:
        return IntermediateRow(**fields, reason="a value was not produced")
    if isinstance(want, (bool, int, float)) and not isinstance(want, torch.Tensor):
        want = torch.tensor(want).reshape(np.shape(got)) if np.size(got) == 1 else torch.tensor(want)
    if not isinstance(want, torch.Tensor):
        return IntermediateRow(**fields, reason=f"the FX value is a {type(want).__name__}, not a tensor")
    if isinstance(got, torch.Tensor):
        raw: Any = got
        raw_dtype = None
    else:
        raw = np.asarray(got)
        raw_dtype = raw.dtype
    fx_dtype = str(want.dtype).removeprefix("torch.")
    fields.update(onnx_shape=tuple(raw.shape), fx_shape=tuple(want.shape), dtype=fx_dtype)
    if (raw_dtype is not None and raw_dtype.kind not in "V" and not want.is_complex() and "float8" not in fx_dtype
            and fx_dtype != "bfloat16" and raw_dtype != _numpy_dtype(fx_dtype)):
        fields.update(status=Status.MISMATCH, reason=f"dtype {raw_dtype.name} in ONNX, {fx_dtype} in FX",
                      nonfinite_onnx=_nonfinite(raw), nonfinite_fx=_nonfinite(want))
        return IntermediateRow(**fields)
    check = compare(case, value, got, want, tolerances)
    if check.status not in ("pass", "fail"):  # a shape mismatch, or no comparison
        fields.update(status=Status.MISMATCH, reason=check.describe(), nonfinite_onnx=_nonfinite(raw),
                      nonfinite_fx=_nonfinite(want))
    else:
        fields.update(status=check.status, max_abs=check.max_abs, max_rel=check.max_rel, atol_applied=check.atol_applied,
                      reason=None if check.ok else check.elements_text() or None,
                      nonfinite_onnx=check.nonfinite_actual, nonfinite_fx=check.nonfinite_expected)
    return IntermediateRow(**fields)


@functools.lru_cache(maxsize=1)
def _batched_dtypes() -> dict[Any, Any]:
    """torch dtype → numpy dtype of the pairs measured together."""
    import numpy as np
    import torch

    return {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
            torch.float16: np.dtype(np.float16)}


@functools.lru_cache(maxsize=64)
def _numpy_dtype(name: str) -> Any:
    """numpy's dtype of a torch dtype name (comparing dtypes is cheaper than reading ``.name``)."""
    import numpy as np

    try:
        return np.dtype(name)
    except TypeError:
        return None


def _nonfinite(value: Any) -> int:
    """NaN / Inf elements of a value that was not compared (bfloat16 from onnxruntime, raw
    bits, is not counted)."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        if not (value.is_floating_point() or value.is_complex()):
            return 0
        if value.dtype not in (torch.float32, torch.float64, torch.float16):
            return int((~torch.isfinite(value)).sum())
        value = value.detach().cpu().numpy()  # a view: numpy's check is cheaper than a torch op
    array = np.asarray(value)
    if array.dtype.kind not in "fc":
        return 0
    finite = np.isfinite(array)
    return 0 if finite.all() else int((~finite).sum())
