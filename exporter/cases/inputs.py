"""Generated inputs for one size assignment of the dim groups (:func:`make_case_inputs`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportInputs
from ..inputs import BoundInputs
from ..program_symbols import symbol_of
from .groups import DimGroup, complete_sizes

__all__ = ["InputCase", "is_mask", "make_case_inputs", "mask_kept_value", "tensor_like"]


@dataclass(frozen=True)
class InputCase:
    """What a ``make_inputs`` hook receives: the case name, the size of each dim group
    (by label, e.g. ``{"batch": 5}``), the shape of each tensor input (by path), and the
    generated ``args`` / ``kwargs``. The hook returns ``(args, kwargs)`` to use instead, or
    None to keep the generated ones."""

    name: str
    sizes: Mapping[str, int]
    shapes: Mapping[str, tuple[int, ...]]
    args: tuple[Any, ...]
    kwargs: Mapping[str, Any]


def _axis_sizes(bound: BoundInputs, program: Any, groups: Sequence[DimGroup],
                assignment: Mapping[str, int]) -> dict[tuple[str, int], int]:
    """The size of every input axis for a case: group sizes (``assignment`` names every
    group: see :func:`complete_sizes`), derived dims evaluated."""
    sizes: dict[tuple[str, int], int] = {}
    by_symbol: dict[str, int] = {}
    for group in groups:
        size = assignment[group.label]
        for group_axis in group.axes:
            sizes[group_axis] = size
        for symbol in group.symbols or ((group.symbol,) if group.symbol else ()):
            by_symbol[symbol] = size
    for (path, axis), expr in symbol_of(program, bound).items():
        if (path, axis) in sizes or expr.lstrip("-").isdigit():
            continue
        try:
            import sympy

            value = sympy.sympify(expr).subs({sympy.Symbol(k): v for k, v in by_symbol.items()})
            sizes[(path, axis)] = int(value)
        except Exception:  # noqa: BLE001 - unknown expression: keep the example size
            pass
    return sizes


def is_mask(example: Any) -> bool:
    """Whether a tensor holds a mask: bool, or integers that are all 0 or 1."""
    import torch

    if example.dtype == torch.bool:
        return True
    if example.dtype.is_floating_point or example.is_complex() or example.numel() == 0:
        return False
    return bool(((example == 0) | (example == 1)).all())


def mask_kept_value(example: Any) -> int:
    """The value (1 or 0) that marks a kept key in a mask. A sequence has a real token at one
    end, padding at the other: the value every row gives one end (its first key when the other
    end is not the same in every row, its last key when only that end is), else the more
    frequent one (every row padded on the same side: ``[[0, 0, 1, 1, 1]]``). ``attention_mask``
    keeps at 1, ``src_key_padding_mask`` at False."""

    rows = example.reshape(-1, example.shape[-1]) if example.dim() else example.reshape(1, 1)
    ends = []
    for column in (rows[:, 0] != 0, rows[:, -1] != 0):
        uniform = bool(column.all()) or not bool(column.any())
        ends.append(int(bool(column[0])) if uniform else None)
    first, last = ends
    if first is not None and (last is None or last == first):
        return first
    if first is None and last is not None:
        return last
    return int(bool((rows != 0).sum() * 2 >= rows.numel()))


def _make_mask(example: Any, shape: tuple[int, ...], generator: Any) -> Any:
    """A mask of ``shape`` that keeps what the example keeps: each row keeps its first keys and
    masks a random number of its last ones, never all of them (a row with no key left makes
    eager attention return NaN, which is no case to compare an export with)."""
    import torch

    kept = mask_kept_value(example)
    out = torch.full(shape, kept, dtype=torch.int64)
    if bool((example == kept).all()) or not shape or shape[-1] <= 1:
        return out.to(example.dtype)
    rows = out.reshape(-1, shape[-1])
    pads = torch.randint(0, shape[-1], (rows.shape[0],), generator=generator)
    for i, pad in enumerate(pads.tolist()):
        if pad:
            rows[i, shape[-1] - pad :] = 1 - kept
    return rows.reshape(shape).to(example.dtype)


def tensor_like(example: Any, shape: tuple[int, ...], generator: Any, index_caps: Sequence[tuple[int, int]] = ()) -> Any:
    """A new tensor of ``shape`` with values like ``example``'s: random floats, a mask for a
    mask, integers in its range (capped below a shrunk size they could index: ``index_caps``
    holds ``(example size, new size)`` pairs)."""
    import torch

    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(example.dtype)
    if example.is_complex():
        return torch.randn(shape, generator=generator, dtype=example.dtype)
    if is_mask(example):
        return _make_mask(example, shape, generator)
    if example.numel() == 0:
        return torch.zeros(shape, dtype=example.dtype)
    lo, hi = int(example.min()), int(example.max())
    for example_size, size in index_caps:  # values that could index a shrunk dim stay valid
        if hi < example_size and size < example_size:
            hi = max(lo, min(hi, size - 1))
    return torch.randint(lo, hi + 1, shape, generator=generator, dtype=torch.int64).to(example.dtype)


def make_case_inputs(
    export: ExportInputs,
    program: Any,
    groups: Sequence[DimGroup],
    assignment: Mapping[str, int],
    *,
    seed: int = 0,
) -> tuple[tuple[Any, ...], dict[str, Any], dict[str, tuple[int, ...]]]:
    """Generated ``(args, kwargs, shapes)`` for one size assignment (group label → size;
    a group missing from it at its example size, a derived group sized from the others) of
    ``export``'s inputs (a :class:`~exporter.Session`); ``program`` is its captured program."""
    import torch

    bound = export.inputs
    assignment = complete_sizes(groups, assignment)
    axis_sizes = _axis_sizes(bound, program, groups, assignment)
    caps = [(g.example, assignment[g.label]) for g in groups]
    generator = torch.Generator().manual_seed(seed)
    leaves = list(bound.values)
    shapes: dict[str, tuple[int, ...]] = {}
    for leaf in bound.leaves:
        example = leaves[leaf.index]
        if not isinstance(example, torch.Tensor):
            continue
        shape = tuple(axis_sizes.get((leaf.path, a), s) for a, s in enumerate(leaf.shape))
        shapes[leaf.path] = shape
        if shape != tuple(example.shape):
            leaves[leaf.index] = tensor_like(example, shape, generator, caps)
    args, kwargs = bound.rebuild(leaves)
    return args, kwargs, shapes
