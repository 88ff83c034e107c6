"""Fully masked attention rows: PyTorch's semantics in the ONNX model.

When every key of a query is masked out (a padded sequence, an attention mask row that is all
False), ``F.scaled_dot_product_attention`` returns 0 for that query. torch.onnx's translation
(torchlib) adds the float's lowest finite value (``-3.4e38`` for float32), not ``-inf``, at
masked positions of a bool mask, so the softmax over such a row sees equal scores and gives
equal weights: onnxruntime returns the *mean of v* for that row. With a float mask of
``-inf`` the softmax gives NaN. No error either way, different numbers.

``ExportOptions(fully_masked_rows="zero")`` (the default) translates
``aten.scaled_dot_product_attention`` as torchlib does and then sets the rows whose mask allows
no key to 0, as PyTorch does (below opset 23; from 23 torchlib emits ONNX ``Attention``, which
onnxruntime already computes so): for a bool mask one ``Cast``, one ``ReduceMax`` over the mask's
last axis and one ``Mul`` per attention. ``fully_masked_rows="mean"`` keeps torch.onnx.export's translation as it is.

Importing this module imports nothing heavy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import compat
from .frames import source_of_stack

__all__ = [
    "FULLY_MASKED_ROWS",
    "MaskedAttention",
    "attention_nodes",
    "translations",
    "zero_fully_masked_rows",
]

#: The choices of ``ExportOptions.fully_masked_rows``: what the ONNX model returns for a query
#: whose attention mask allows no key.
FULLY_MASKED_ROWS = {
    "zero": "0, as PyTorch returns (three small ONNX nodes per attention)",
    "mean": "the mean of v for a bool mask, NaN for a -inf float mask (torch.onnx.export's translation)",
}

_SDPA = "aten::scaled_dot_product_attention"


def zero_fully_masked_rows(out: Any, attn_mask: Any) -> Any:
    """Inside a translation: ``out`` (an attention output ``[..., L, Ev]``) with every query
    row whose mask allows no key (a bool row all False, a float row all ``-inf``) set to 0.
    An output of ONNX ``Attention`` (torchlib's translation from opset 23) is returned as it
    is: onnxruntime already returns 0 for such rows (verify's edge values check it)."""
    import onnx_ir as ir
    from onnxscript import opset18

    # onnxscript types its opset for script functions (TensorProto constants, typed script
    # values); a translation passes it onnx_ir tensors and graph values.
    op: Any = opset18
    producer = out.producer() if hasattr(out, "producer") else None
    if attn_mask is None or (producer is not None and producer.op_type == "Attention"):
        return out  # no mask (or only is_causal): every query sees at least one key
    # ``value=``, not ``value_ints=``: onnx's version converter (opset_version < 18) needs it.
    axes = op.Constant(value=ir.tensor([-1], dtype=ir.DataType.INT64))
    if attn_mask.dtype == ir.DataType.BOOL:
        # 1.0 where the row allows some key, else 0.0 (ReduceMax has no bool kernel); the
        # output is finite (torchlib adds a finite value at masked keys), so a product zeroes it.
        allowed = op.ReduceMax(op.CastLike(attn_mask, out), axes, keepdims=1)
        return op.Mul(out, allowed)
    # A float mask: a row of -inf softmaxes to NaN, which a product would keep.
    allowed = op.Not(op.IsInf(op.ReduceMax(attn_mask, axes, keepdims=1), detect_negative=1, detect_positive=0))
    zero = op.CastLike(op.Constant(value=ir.tensor(0.0, dtype=ir.DataType.FLOAT)), out)
    return op.Where(allowed, out, zero)


@functools.lru_cache(maxsize=8)
def translations(fully_masked_rows: str, opset_version: int) -> tuple[tuple[Any, Callable[..., Any]], ...]:
    """The custom translations (FX target, function) the option asks for at a (torchlib
    registry) opset: ``aten.scaled_dot_product_attention`` translated as the registry
    translates it, then :func:`zero_fully_masked_rows`; ``()`` for ``"mean"``. Cached, so one
    option and opset give the same functions (and one registry copy)."""
    if fully_masked_rows != "zero":
        return ()
    import torch

    target = torch.ops.aten.scaled_dot_product_attention.default
    original = compat.registered_translation(opset_version, target)
    if original is None:
        return ()

    def sdpa_zero_fully_masked_rows(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                                    is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
        """``aten.scaled_dot_product_attention`` as torchlib translates it, with fully masked
        rows set to 0 as PyTorch returns them."""
        out = original(query, key, value, attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale,
                       enable_gqa=enable_gqa)
        return zero_fully_masked_rows(out, attn_mask)

    return ((target, sdpa_zero_fully_masked_rows),)


@dataclass(frozen=True)
class MaskedAttention:
    """One attention in a program that takes a mask: the FX node, the op, the mask's dtype
    (``bool`` or a float name), the user inputs the mask is computed from, and the user's
    source line."""

    node: str
    op: str
    mask_dtype: str
    inputs: tuple[str, ...]
    source: str | None = None


def attention_nodes(program: Any, input_paths: dict[str, str] | None = None) -> tuple[MaskedAttention, ...]:
    """Every masked ``scaled_dot_product_attention`` of a program (captured or decomposed),
    with the user inputs its mask depends on (placeholder names mapped through
    ``input_paths`` to input paths when given)."""
    found = []
    for node in program.graph.nodes:
        if node.op != "call_function" or getattr(node.target, "name", lambda: "")().split(".")[0] != _SDPA:
            continue
        mask = node.args[3] if len(node.args) > 3 else node.kwargs.get("attn_mask")
        if mask is None or not hasattr(mask, "meta"):
            continue
        value = mask.meta.get("val")
        dtype = str(getattr(value, "dtype", "")).removeprefix("torch.")
        sources = _placeholders_behind(mask)
        names = tuple(sorted((input_paths or {}).get(name, name) for name in sources))
        found.append(MaskedAttention(node.name, _SDPA.split("::")[1], dtype, names, source_of_stack(node.meta.get("stack_trace"))))
    return tuple(found)


def _placeholders_behind(node: Any) -> set[str]:
    seen: set[Any] = set()
    stack = [node]
    out: set[str] = set()
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        if current.op == "placeholder":
            out.add(current.name)
        stack.extend(current.all_input_nodes)
    return out
