"""Helpers the rest of :mod:`exporter.shapes` shares: a spec from per-axis policies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..dims import AxisPolicy, DimSpec
from ..dims.spec import build

if TYPE_CHECKING:
    from ..inputs import BoundInputs


def spec_from(value: dict[tuple[str, int], AxisPolicy], bound: BoundInputs) -> DimSpec:
    """A validated spec from per-axis policies (``dims.spec.build``)."""
    return build(bound, value)
