"""``scaled_dot_product_attention`` on more than 4 dims: the extra leading dims folded into the batch.

PyTorch's SDPA takes ``query [*batch, heads, L, E]``, ``key [*batch, heads, S, E]``,
``value [*batch, heads, S, Ev]`` with any number of leading batch dims (broadcast between the
three, and with the mask's). timm's Twins (``LocallyGroupedAttn``: ``[B, groups, heads, N, d]``)
and Hiera (``MaskUnitAttention``: ``[B, heads, windows, N, d]``) call it on 5-D tensors.
torchlib's translation takes 4-D only ("only 4D query, key, and value are supported"), at every
opset. :func:`fold_leading_dims` wraps a 4-D translation: on rank > 4 it reshapes the leading
dims ``[*batch]`` into one (their broadcast shape, read at run time, so dynamic dims stay
dynamic), calls the 4-D translation, and reshapes its output back to ``[*batch, heads, L, Ev]``.
A 4-D (or 3-D) call goes to the wrapped translation unchanged: the same nodes as without it.

Importing this module imports nothing heavy; onnx_ir and onnxscript load when a translation runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["fold_leading_dims"]

#: The dims a 4-D attention keeps per tensor: heads, sequence, embedding.
_KEPT = 3


@functools.lru_cache(maxsize=16)
def fold_leading_dims(inner: Callable[..., Any]) -> Callable[..., Any]:
    """``aten.scaled_dot_product_attention`` as ``inner`` (a translation of 4-D attention:
    torchlib's, or one wrapping it) translates it, for any rank. Cached: one function per
    ``inner``, so a registry built twice from the same translations is the same registry."""

    def sdpa_nd(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
                is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
        """``aten.scaled_dot_product_attention``; more than 4 dims are folded into one batch dim
        around the 4-D translation."""
        options = {"dropout_p": dropout_p, "is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa}
        ranks = [len(tensor.shape) for tensor in (query, key, value)]
        if max(ranks) <= 4:
            return inner(query, key, value, attn_mask, **options)
        if min(ranks) < _KEPT:
            raise NotImplementedError(
                f"scaled_dot_product_attention of {ranks[0]}-D query, {ranks[1]}-D key and {ranks[2]}-D value: "
                f"every one needs at least {_KEPT} dims (heads, sequence, embedding)"
            )
        return _folded(inner, query, key, value, attn_mask, options)

    sdpa_nd.__wrapped__ = inner  # type: ignore[attr-defined]
    return sdpa_nd


def _folded(inner: Callable[..., Any], query: Any, key: Any, value: Any, attn_mask: Any,
            options: dict[str, Any]) -> Any:
    """``inner`` on q/k/v (and a mask of more than 3 dims) reshaped to ``[batch, heads, seq, emb]``,
    ``batch`` the product of the leading dims' broadcast shape; its output reshaped back."""
    import onnx_ir as ir
    from onnxscript import opset18

    # onnxscript types its opset for script functions; a translation passes it graph values.
    op: Any = opset18

    def ints(*values: int) -> Any:
        # ``value=``, not ``value_ints=``: onnx's version converter (opset_version < 18) needs it.
        return op.Constant(value=ir.tensor(list(values), dtype=ir.DataType.INT64))

    tensors = (query, key, value)
    rank = max(len(tensor.shape) for tensor in tensors)
    same = _same_leading_dims(tensors)
    # The broadcast shape of the leading dims: the query's when all three provably share them.
    lead = op.Shape(query, start=0, end=rank - _KEPT) if same else _broadcast_lead(op, ints, tensors, rank)
    batch = op.ReduceProd(lead, keepdims=1)
    ones = ints(*([1] * _KEPT))

    def fold(tensor: Any, expand: bool) -> Any:
        """``tensor`` (leading dims broadcast to ``lead`` when ``expand``) as ``[batch, *last 3]``."""
        dims, dtype = list(tensor.shape), tensor.dtype
        source = op.Expand(tensor, op.Concat(lead, ones, axis=0)) if expand else tensor
        folded = op.Reshape(source, op.Concat(batch, op.Shape(tensor, start=-_KEPT), axis=0), allowzero=1)
        # Translations read ranks, head counts and the mask's dtype from the values, which the
        # graph being built does not infer: state them.
        folded.shape = ir.Shape([None if expand else _product(dims[:-_KEPT]), *dims[-_KEPT:]])
        folded.type = ir.TensorType(dtype)
        return folded

    query4, key4, value4 = (fold(tensor, not same) for tensor in tensors)
    mask4 = attn_mask
    if attn_mask is not None and len(attn_mask.shape) > _KEPT:
        mask4 = fold(attn_mask, True)  # [.., L, S] broadcast over the leading dims, then folded
    out = inner(query4, key4, value4, mask4, **options)
    return op.Reshape(out, op.Concat(lead, op.Shape(out, start=1), axis=0), allowzero=1)


def _same_leading_dims(tensors: tuple[Any, ...]) -> bool:
    """Whether query, key and value have one rank and provably equal leading dims (equal ints,
    or the same symbolic dim): then none needs broadcasting."""
    shapes = [list(tensor.shape) for tensor in tensors]
    if len({len(shape) for shape in shapes}) != 1:
        return False
    leads = [[_dim_key(d) for d in shape[:-_KEPT]] for shape in shapes]
    return all(None not in lead for lead in leads) and leads[0] == leads[1] == leads[2]


def _dim_key(dim: Any) -> Any:
    """An int dim, a symbolic dim's name, or None when unknown."""
    if isinstance(dim, int):
        return dim
    name = getattr(dim, "value", None)
    return f"sym:{name}" if name is not None else None


def _product(dims: list[Any]) -> int | None:
    """The product of ``dims`` when all are ints, else None (unknown)."""
    total = 1
    for dim in dims:
        if not isinstance(dim, int):
            return None
        total *= dim
    return total


def _broadcast_lead(op: Any, ints: Callable[..., Any], tensors: tuple[Any, ...], rank: int) -> Any:
    """The broadcast of the three tensors' leading dims (numpy rules, right-aligned), read at run
    time: ``where(a == 1, b, a)`` dim by dim, which is also right for a 0-sized dim."""
    width = rank - _KEPT
    one = ints(1)
    lead = None
    for tensor in tensors:
        own = len(tensor.shape) - _KEPT
        shape = op.Shape(tensor, start=0, end=own) if own else None
        if own < width:  # right-aligned: missing leading dims are 1
            pad = ints(*([1] * (width - own)))
            shape = pad if shape is None else op.Concat(pad, shape, axis=0)
        lead = shape if lead is None else op.Where(op.Equal(lead, one), shape, lead)
    return lead
