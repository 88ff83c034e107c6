"""The scale an element of an output is judged at: its channel's, never another channel's.

An output's axes mean different things (``[batch, features]``, ``[N, C, H, W]``,
``[batch, seq, hidden]``) and verify does not know which one holds the channels. What it can
say without knowing: an element belongs, along each axis ``d``, to the *slice* of the elements
with its index on ``d`` (column ``c`` of ``[batch, features]`` is the slice of axis 1 at ``c``;
channel ``c`` of ``[N, C, H, W]`` the slice of axis 1 at ``c``; token ``t`` of
``[batch, seq, hidden]`` the slice of axis 1 at ``t``). Its *channel scale* is the smallest, over
the axes, of the largest value in its slice: an element is never scaled by a slice it is not in,
and of the slices it is in, the quietest decides. One large feature of ``fc(x) * [1e4, 1, ...]``
scales only its own column; the other columns keep a scale of ~1. An element near zero in a
hidden state of magnitude ~1 keeps the scale of its token and of its hidden channel (~1): the
float noise it carries from terms of that size is not a difference.

A slice needs ``min_count`` elements to say anything: with a batch of 1, the slice of a column
of ``[1, features]`` is the element itself, and its scale would be its own value (no slack for
float noise near zero). Axes whose slices hold fewer elements are skipped; with none left (a
single row, a vector, a scalar), the scale is the *median* of the whole output: nothing tells
its channels apart, and the median is the typical magnitude there, which a few large channels
cannot move (``fc(x) * [1e4, 1, ...]`` at a batch of 1 keeps a scale of ~1; a hidden vector
of magnitude ~1 keeps ~1 for its elements near zero).

Computed only for the elements that need it (those beyond ``atol + rtol*|expected|``): one
reduction per axis, then a gather at their indices; vectorised numpy throughout.
"""

from __future__ import annotations

from typing import Any

__all__ = ["channel_scale"]


def channel_scale(values: Any, flat_indices: Any, min_count: int) -> Any:
    """For each flat index into ``values`` (a non-negative float array), the smallest over its
    axes of the largest value of its slice along that axis (see the module docstring), as a
    float64 array of ``len(flat_indices)``."""
    import numpy as np

    values = np.asarray(values)
    flat_indices = np.asarray(flat_indices, dtype=np.intp)
    shape = values.shape
    size = values.size
    axes = [d for d in range(len(shape)) if shape[d] > 1 and size // shape[d] >= min_count]
    if not axes or not flat_indices.size:
        whole = float(np.median(values)) if size else 0.0
        return np.full(flat_indices.shape, whole, dtype=np.float64)
    coords = np.unravel_index(flat_indices, shape)
    scale: Any = None
    for d in axes:
        others = tuple(a for a in range(len(shape)) if a != d)
        per_slice = values.max(axis=others).astype(np.float64, copy=False)
        at = per_slice[coords[d]]
        scale = at if scale is None else np.minimum(scale, at)
    return scale
