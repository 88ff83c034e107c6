"""Helpers the rest of :mod:`exporter.shapes` shares: axis names and labels, a spec from
per-axis policies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dims import AxisPolicy, DimSpec
from ..dims.parse import build
from ..inputs import axis_label

if TYPE_CHECKING:
    from ..inputs import BoundInputs


def axis_name(path: str, axis: int) -> str:
    return f"{path}.{axis}"


label = axis_label  # x.shape[0]


def spec_from(value: dict[tuple[str, int], AxisPolicy], bound: BoundInputs) -> DimSpec:
    """A validated spec from per-axis policies (``dims.parse.build``)."""
    return build(bound, value)
