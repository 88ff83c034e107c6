"""Inference from more inputs: a spec from several example input sets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..dims import AxisPolicy, Dim, DimSpec
from ..dims.model import default_dim_name
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
    named Dim over the observed ``[min, max]``, every other axis static.

    Each varying axis gets a Dim of its own (``x_dim0``, ``x_dim1``, ...; the user's Dim name
    for that axis if ``spec`` has one): sizes that merely vary alike, such as ``(4, 4)`` then
    ``(8, 8)``, say nothing about the model, and one shared Dim would make the program reject
    ``(5, 6)``. Axes the user gave one name share it (while their sizes agree). When the model
    really needs two axes equal (``input_ids * attention_mask``), capture rejects the spec
    with torch's fix ``attention_mask_dim0 = input_ids_dim0``:
    ``session.with_dims(spec).apply_suggested_fixes()`` applies it and merges them."""
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
    varying: list[tuple[tuple[str, int], tuple[int, ...]]] = []
    for leaf in bound.leaves:
        for axis in range(leaf.rank):
            sizes = tuple(s.leaf(leaf.path).shape[axis] for s in sets)
            if len(set(sizes)) > 1:
                varying.append(((leaf.path, axis), sizes))
    user_names = {(e.path, e.axis): e.policy.name for e in (spec or DimSpec()) if isinstance(e.policy, Dim)}
    named: dict[str, tuple[int, ...]] = {}  # user name -> the sizes of the axes sharing it
    for key, sizes in varying:
        name = user_names.get(key)
        if name is not None:
            named.setdefault(name, sizes)
    taken = set(named)
    value: dict[tuple[str, int], AxisPolicy] = {}
    for key, sizes in varying:
        name = user_names.get(key)
        if name is None or named[name] != sizes:  # no name, or sizes that contradict it
            name = base = default_dim_name(*key)
            suffix = 2
            while name in taken:
                name, suffix = f"{base}_{suffix}", suffix + 1
            taken.add(name)
        value[key] = Dim(name, min=min(sizes) or None, max=max(sizes))
    return spec_from(value, bound)
