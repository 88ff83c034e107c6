"""One ONNX node's row: each of its outputs against its FX value under verify's rule, the worst kept."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ..tolerance import compare
from .plan import NodePlan
from .result import IntermediateRow

__all__ = ["node_row"]

_RANK = {"mismatch": 0, "fail": 1, "pass": 2, "not compared": 3}


def node_row(case: str, node: NodePlan, onnx_values: Mapping[str, Any], fx_values: Mapping[str, Any],
             tolerances: Any) -> IntermediateRow:
    rows = [_pair_row(case, node, value, fx, onnx_values.get(value), fx_values.get(fx), tolerances)
            for value, fx in node.pairs]
    if len(rows) == 1:
        return rows[0]
    return min(rows, key=lambda r: (_RANK[r.status], -(r.max_abs or 0.0)))


def _pair_row(case: str, node: NodePlan, value: str, fx: str, got: Any, want: Any, tolerances: Any) -> IntermediateRow:
    import numpy as np
    import torch

    # The row's fields, gathered and built once: dataclasses.replace per step cost a fifth of
    # a warm call on a 2-layer BERT.
    fields: dict[str, Any] = {
        "onnx_node": node.name, "onnx_op": node.op, "fx_nodes": node.fx_nodes or (fx,), "module": node.module,
        "source": node.source, "status": "not compared", "onnx_value": value, "fx_value": fx}
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
        fields.update(status="mismatch", reason=f"dtype {raw_dtype.name} in ONNX, {fx_dtype} in FX",
                      nonfinite_onnx=_nonfinite(raw), nonfinite_fx=_nonfinite(want))
        return IntermediateRow(**fields)
    check = compare(case, value, got, want, tolerances)
    if check.status not in ("pass", "fail"):  # a shape mismatch, or no comparison
        fields.update(status="mismatch", reason=check.describe(), nonfinite_onnx=_nonfinite(raw),
                      nonfinite_fx=_nonfinite(want))
    else:
        fields.update(status=check.status, max_abs=check.max_abs, max_rel=check.max_rel, atol_applied=check.atol_applied,
                      reason=None if check.ok else check.elements_text() or None,
                      nonfinite_onnx=check.nonfinite_actual, nonfinite_fx=check.nonfinite_expected)
    return IntermediateRow(**fields)


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
