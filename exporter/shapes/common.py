"""Helpers the rest of :mod:`exporter.shapes` shares: axis names and labels, a spec from
per-axis policies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dims import STATIC, AxisEntry, AxisPolicy, DimSpec

if TYPE_CHECKING:
    from ..inputs import BoundInputs


def axis_name(path: str, axis: int) -> str:
    return f"{path}.{axis}"


def label(path: str, axis: int) -> str:
    return f"{path}.shape[{axis}]"


def spec_from(value: dict[tuple[str, int], AxisPolicy], bound: BoundInputs) -> DimSpec:
    order = {leaf.path: leaf.index for leaf in bound.leaves}
    entries = tuple(
        AxisEntry(path, axis, policy)
        for (path, axis), policy in sorted(value.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        if policy is not STATIC
    )
    return DimSpec.parse(DimSpec(entries), bound)
