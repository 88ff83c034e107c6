"""Dim groups: input axes that always share one size, and what was asked of and obtained for them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..axis import Axis

__all__ = ["DimGroup", "complete_sizes", "policy_text", "resolve_group", "sizes_by_label"]


@dataclass(frozen=True)
class DimGroup:
    """Input axes that must keep equal sizes, and what was asked of and obtained for them.

    ``symbol`` is the torch symbol (``s77``) when the program kept the dim dynamic, None when
    capture specialized it. ``onnx_dims`` holds the ONNX input dim of each axis: a ``dim_param``
    string, an int ``dim_value``, or None when the input is missing from the ONNX model.

    ``derived_expr``: when the model's guards tie this group to others (GPT-2 reads its
    attention mask over the cache and the new tokens: ``total = past_seq + seq``), that sympy
    expression over their labels; the sweep sizes the group from them instead of on its own,
    and ``derived_guards`` names the guards that say so. None for a group swept on its own.
    """

    label: str
    axes: tuple[Axis, ...]
    requested: str
    example: int
    requested_range: tuple[int, int | None]
    symbol: str | None
    obtained_range: tuple[int, int | None]
    onnx_dims: tuple[str | int | None, ...]
    sizes: tuple[int, ...] = ()
    causes: tuple[str, ...] = ()
    cap: int | None = None  # the largest size a guard allows (``Min(128, s)``), above the example
    symbols: tuple[str, ...] = ()  # every torch symbol of the axes (moved together: one size)
    derived_guards: tuple[str, ...] = ()
    derived_expr: Any = None  # sympy, over symbols named by the group labels
    # Sizes near the example chosen from the remainder/divisibility guards torch recorded
    # (``Mod(h, 4) == 0``), and one past a chunk the program cuts the dim into:
    # ``(kind, size, why)``, see :func:`guard_sizes` and :func:`with_chunk_sizes`.
    guard_sizes: tuple[tuple[str, int, str], ...] = ()
    # The divisors the program and its guards apply to the size (``s//80``, a conv's stride),
    # and the sizes on both sides of the example where the coarsest divided size changes
    # parity: ``(kind, size, why)``, see :mod:`exporter.cases.stride_sizes`.
    divisors: tuple[int, ...] = ()
    stride_sizes: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(Axis.parse(a) for a in self.axes))

    def names(self, key: Any) -> bool:
        """Whether ``key`` names this group: its label (a Dim name, ``x.shape[0]``) or one of
        its axes in any form :meth:`Axis.parse` reads (``x.0``, ``("x", 0)``, an ``Axis``)."""
        if isinstance(key, str) and key == self.label:
            return True
        try:
            return Axis.parse(key) in self.axes
        except ValueError:
            return False

    @property
    def derived(self) -> str | None:
        """The expression this group is sized from (``"past_seq + seq"``), or None."""
        return None if self.derived_expr is None else str(self.derived_expr)

    @property
    def derived_from(self) -> tuple[str, ...]:
        """Labels of the groups a derived group's size follows from (``("past_seq", "seq")``)."""
        if self.derived_expr is None:
            return ()
        import sympy

        return tuple(s.name for s in sorted(self.derived_expr.free_symbols, key=sympy.default_sort_key))

    def derived_size(self, sizes: Mapping[str, int]) -> int:
        """A derived group's size from the sizes of the groups it follows, by label
        (``KeyError`` for one missing)."""
        return int(self.derived_expr.subs({s: sizes[s.name] for s in self.derived_expr.free_symbols}))

    @property
    def derived_text(self) -> str | None:
        """``total = past_seq + seq (from the model's guards)``, or None."""
        return None if self.derived is None else f"{self.label} = {self.derived} (from the model's guards)"

    @property
    def specialized(self) -> bool:
        """The program fixed this dim to the example size."""
        return self.symbol is None

    @property
    def auto_static(self) -> bool:
        """AUTO asked torch to decide, and torch made the dim static: the ONNX model declares the
        example size (onnxruntime refuses any other), which is what AUTO permits, not an error."""
        return (self.specialized and self.requested == "AUTO"
                and all(isinstance(d, int) for d in self.onnx_dims) and bool(self.onnx_dims))

    @property
    def onnx_accepts_any_size(self) -> bool:
        return all(isinstance(d, str) for d in self.onnx_dims)

    def in_obtained_range(self, size: int) -> bool:
        lo, hi = self.obtained_range
        return size >= lo and (hi is None or size <= hi)

    def in_both_ranges(self, size: int) -> bool:
        """Whether ``size`` (at least 1) is inside the requested range and the one torch obtained."""
        his = [h for h in (self.requested_range[1], self.obtained_range[1]) if h is not None]
        return size >= max(self.requested_range[0], self.obtained_range[0], 1) and (not his or size <= min(his))

    @property
    def axes_text(self) -> str:
        return ", ".join(a.label for a in self.axes)

    def describe_range(self, which: str = "obtained") -> str:
        lo, hi = self.obtained_range if which == "obtained" else self.requested_range
        return f"[{lo}, {'inf' if hi is None else hi}]"


def resolve_group(groups: Sequence[DimGroup], key: Any, what: str = "dim") -> DimGroup:
    """The group ``key`` names (see :meth:`DimGroup.names`); ``ValueError`` naming the groups
    when none does."""
    for group in groups:
        if group.names(key):
            return group
    if not groups:
        raise ValueError(f"unknown {what} {key!r}: no input dim is dynamic")
    known = [g.label for g in groups]
    raise ValueError(f"unknown {what} {key!r}; dim groups: {known} (or one of their axes, e.g. {groups[0].axes[0].dotted!r})")


def sizes_by_label(groups: Sequence[DimGroup], sizes: Mapping[Any, Any], what: str = "dim") -> dict[str, Any]:
    """``sizes`` keyed by group label, whatever names the groups (a label, an ``Axis``, ``"x.0"``)."""
    return {resolve_group(groups, key, what).label: value for key, value in sizes.items()}


def complete_sizes(groups: Sequence[DimGroup], assignment: Mapping[str, int]) -> dict[str, int]:
    """``assignment`` (group label → size) with every group missing from it at its example
    size, and every derived group missing from it sized from the others."""
    sizes = {g.label: assignment.get(g.label, g.example) for g in groups if g.derived is None}
    for group in groups:
        if group.derived is not None:
            if group.label in assignment:
                sizes[group.label] = assignment[group.label]
            else:
                try:
                    sizes[group.label] = group.derived_size(sizes)
                except Exception:  # noqa: BLE001 - a label it follows is gone: keep the example
                    sizes[group.label] = group.example
    return sizes


QUOTED_GUARD_CHARACTERS = 80
"""A guard longer than this is not quoted in a cause: torch's expression of a padded, windowed
size (SwinV2's ``Mod(8 - Mod(pixel_values.shape[2], 8), 8)`` nested five deep) runs to a
thousand characters and hides the line that added it; at 150 (FocalNet's first guard) it is
already a line of sympy no one reads."""


def guard_words(expr: str) -> str:
    """``guard EXPR``, or for an expression too long to read, its length (``session.guards`` has it whole)."""
    if len(expr) <= QUOTED_GUARD_CHARACTERS:
        return f"guard {expr}"
    return f"a guard of {len(expr):,} characters"


def policy_text(policy: Any) -> str:
    return repr(policy)
