"""``DimSpec``: the validated per-axis policies of one export, parsed from any form users write
(:mod:`exporter.dims.parse`) and rendered as torch's ``dynamic_shapes`` or as Python source
(:mod:`exporter.dims.render`). The policies themselves are :mod:`exporter.dims.model`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import SpecError
from ..inputs import BoundInputs
from . import render
from .model import STATIC, AxisEntry, AxisPolicy, Dim, default_dim_name, named_dims
from .parse import (
    check_axis,
    find_leaf,
    parse_axis_value,
    parse_dynamic_axes,
    parse_dynamic_shapes,
    validated_entries,
)
from .tree import Tree

__all__ = ["DimSpec", "build"]


@dataclass(frozen=True)
class DimSpec:
    """Validated per-axis policies. Axes not listed are STATIC. Hashable, immutable."""

    entries: tuple[AxisEntry, ...] = ()
    _index: dict[tuple[str, int], AxisPolicy] = field(
        default_factory=dict, init=False, repr=False, compare=False, hash=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {(e.path, e.axis): e.policy for e in self.entries})

    # -- queries ---------------------------------------------------------------------------
    def policy(self, path: str, axis: int) -> AxisPolicy:
        return self._index.get((path, axis), STATIC)

    def __iter__(self) -> Iterator[AxisEntry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def named_dims(self) -> dict[str, Dim]:
        """Every named dim by name, the roots of derived dims included."""
        return named_dims(self.entries)

    def is_static(self) -> bool:
        return not self.entries

    # -- edits (each returns a new, validated spec) ----------------------------------------
    def with_axis(self, bound: BoundInputs, path: str, axis: int, policy: Any) -> DimSpec:
        """This spec with one axis set to ``policy`` (AUTO, STATIC, DYNAMIC, Dim, str, ...)."""
        leaf = find_leaf(bound, path, axis=axis if isinstance(axis, int) else None)
        value = {(e.path, e.axis): e.policy for e in self.entries}
        axis = check_axis(leaf, axis)
        value[(leaf.path, axis)] = parse_axis_value(policy, leaf, axis)
        return build(bound, value)

    # -- construction ----------------------------------------------------------------------
    @classmethod
    def parse(
        cls, raw: Any, bound: BoundInputs, *, dynamic_axes: Any = None,
        input_names: Any = None, output_names: Any = None,
    ) -> DimSpec:
        """Parse and validate any accepted spec form against the bound example inputs.
        ``input_names`` / ``output_names`` (torch.onnx.export's) let ``dynamic_axes`` be keyed
        by them."""
        if isinstance(raw, DimSpec):
            tree = Tree(bound)
            value = {}
            for e in raw.entries:
                leaf = find_leaf(bound, e.path, axis=e.axis, tree=tree)
                axis = check_axis(leaf, e.axis)
                value[(leaf.path, axis)] = parse_axis_value(e.policy, leaf, axis)
        else:
            value = parse_dynamic_shapes(raw, bound)
        if dynamic_axes is not None:
            for key, policy in parse_dynamic_axes(dynamic_axes, bound, input_names, output_names).items():
                if key in value and value[key] != policy:
                    path, axis = key
                    raise SpecError(
                        f"dynamic_shapes and dynamic_axes disagree: {value[key]!r} vs {policy!r}",
                        input=path,
                        axis=axis,
                        hint="give each axis in only one of dynamic_shapes= and dynamic_axes=",
                    )
                value[key] = policy
        return build(bound, value)

    # -- conversions -----------------------------------------------------------------------
    def to_torch(self, bound: BoundInputs) -> dict[str, Any] | None:
        """The equivalent ``dynamic_shapes=`` for ``torch.export.export``."""
        return render.to_torch(self.entries, bound)

    def to_code(self, bound: BoundInputs) -> str:
        """Python source that builds the same ``dynamic_shapes`` with ``torch.export.Dim``."""
        return render.to_code(self.entries, bound)

    def to_dynamic_axes(self) -> dict[str, dict[int, str]]:
        """Legacy ``dynamic_axes`` form (named dims only keep their names)."""
        out: dict[str, dict[int, str]] = {}
        for e in self.entries:
            name = e.policy.name if isinstance(e.policy, Dim) else default_dim_name(e.path, e.axis)
            out.setdefault(e.path, {})[e.axis] = name
        return out

    def describe(self) -> str:
        if not self.entries:
            return "all dims static"
        return ", ".join(f"{e.axis_key.dotted}={e.policy!r}" for e in self.entries)

    def __repr__(self) -> str:
        return f"DimSpec({self.describe()})"


def build(bound: BoundInputs, value: dict[tuple[str, int], AxisPolicy]) -> DimSpec:
    """A validated spec from per-axis policies ``{(leaf path, axis): policy}``: the cross-axis
    rules checked (shared names, ranges against the example sizes), entries ordered by input
    then axis, STATIC ones dropped."""
    return DimSpec(validated_entries(bound, value))
