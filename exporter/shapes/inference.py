"""Inference from more inputs: a spec from several example input sets."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..dims import AxisPolicy, Dim, DimSpec
from ..errors import SpecError
from .common import spec_from

if TYPE_CHECKING:
    from ..inputs import BoundInputs


def _examples(more_inputs: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    from .._torch_compat import additional_inputs_examples

    held = additional_inputs_examples(more_inputs)
    if held is not None:
        return held
    if isinstance(more_inputs, (dict, tuple)) or not isinstance(more_inputs, Iterable):
        raise SpecError(
            f"more_inputs must be a list of input sets or a torch.export.AdditionalInputs, "
            f"not {type(more_inputs).__name__}",
            hint="session.infer_dims([(x2,), (x3,)]) or [{'x': x2}, {'x': x3}] or [((x2,), {'mask': m2})]",
        )
    out = []
    for item in more_inputs:
        if isinstance(item, dict):
            out.append(((), dict(item)))
        elif (
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple) and isinstance(item[1], dict)
        ):
            out.append((item[0], dict(item[1])))
        elif isinstance(item, (tuple, list)):
            out.append((tuple(item), {}))
        else:
            out.append(((item,), {}))
    return out


def infer_dim_spec(model: Any, bound: BoundInputs, more_inputs: Any, *, spec: DimSpec | None = None) -> DimSpec:
    """A spec from ``bound`` plus more example input sets: an axis whose size varies becomes a
    named Dim over the observed ``[min, max]``, every other axis static. Axes whose sizes vary
    identically across all sets share one Dim (torch requires equal named dims to share a
    name); the name is the user's Dim name for that axis if ``spec`` has one."""
    from ..inputs import bind_inputs

    sets = [bound]
    for args, kwargs in _examples(more_inputs):
        other = bind_inputs(model, args, kwargs)
        for leaf in bound.leaves:
            try:
                mine = other.leaf(leaf.path)
            except KeyError:
                raise SpecError(
                    "is missing from an additional input set", input=leaf.path,
                    hint="every input set must have the same inputs and structure",
                ) from None
            if mine.rank != leaf.rank:
                raise SpecError(
                    f"has rank {mine.rank} in an additional input set but {leaf.rank} in the example",
                    input=leaf.path,
                    hint="only sizes may vary between input sets, not ranks",
                )
        sets.append(other)
    observed: dict[tuple[int, ...], list[tuple[str, int]]] = {}
    for leaf in bound.leaves:
        for axis in range(leaf.rank):
            sizes = tuple(s.leaf(leaf.path).shape[axis] for s in sets)
            if len(set(sizes)) > 1:
                observed.setdefault(sizes, []).append((leaf.path, axis))
    user_names = {(e.path, e.axis): e.policy.name for e in (spec or DimSpec()) if isinstance(e.policy, Dim)}
    value: dict[tuple[str, int], AxisPolicy] = {}
    taken: set[str] = set()
    for sizes, axes in observed.items():
        name = next((user_names[a] for a in axes if a in user_names), None)
        if name is None or name in taken:
            path, axis = axes[0]
            name = re.sub(r"\W", "_", path) + f"_dim{axis}"
            if not name.isidentifier():
                name = f"d_{name}"
        taken.add(name)
        dim = Dim(name, min=min(sizes) or None, max=max(sizes))
        for a in axes:
            value[a] = dim
    return spec_from(value, bound)
