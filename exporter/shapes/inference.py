"""Inference from more inputs: a spec from several example input sets."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from ..dims import AxisPolicy, Dim, DimSpec
from ..dims.model import default_dim_name
from ..errors import SpecError
from .common import spec_from
from ..compat import additional_inputs_examples
from ..inputs import bind_inputs

if TYPE_CHECKING:
    from ..inputs import BoundInputs

AxisKey = tuple[str, int]  # (leaf path, axis)

#: Readable names for a dim shared by several inputs at the same axis.
SHARED_AXIS_NAMES = {0: "batch", 1: "seq"}

FORMS_HINT = "session.infer_dims([(x2,), (x3,)]) or [{'x': x2}, {'x': x3}] or [((x2,), {'mask': m2})]"


def _examples(more_inputs: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    held = additional_inputs_examples(more_inputs)
    if held is not None:
        return held
    if isinstance(more_inputs, (dict, tuple)) or not isinstance(more_inputs, Iterable):
        raise SpecError(
            f"more_inputs must be a list of input sets or a torch.export.AdditionalInputs, "
            f"not {type(more_inputs).__name__}",
            hint=FORMS_HINT,
        )
    out: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
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


def _same_form_hint(bound: BoundInputs) -> str:
    """The call that passes every input the example has, in the example's own form."""
    positional = [f"{name}2" for name in bound.parameter_names[: len(bound.args)]]
    args = "(" + ", ".join(positional) + ("," if len(positional) == 1 else "") + ")"
    if not bound.kwargs:
        return f"pass every input in each set: session.infer_dims([{args}, ...])"
    kwargs = "{" + ", ".join(f"{name!r}: {name}2" for name in bound.kwargs) + "}"
    return (
        "pass each set as the example was passed, as an (args, kwargs) pair: "
        f"session.infer_dims([({args}, {kwargs}), ...])"
    )


def _bind_more(model: Any, bound: BoundInputs, more_inputs: Any) -> list[BoundInputs]:
    examples = _examples(more_inputs)
    sets = []
    for number, (args, kwargs) in enumerate(examples, start=1):
        where = f"input set {number} of {len(examples)}"
        other = bind_inputs(model, args, kwargs)
        for leaf in bound.leaves:
            try:
                mine = other.leaf(leaf.path)
            except KeyError:
                raise SpecError(
                    f"is in the example but missing from {where}", input=leaf.path,
                    hint=_same_form_hint(bound),
                ) from None
            if mine.rank != leaf.rank:
                raise SpecError(
                    f"has rank {mine.rank} in {where} but {leaf.rank} in the example",
                    input=leaf.path,
                    hint="only sizes may vary between input sets, not ranks",
                )
        sets.append(other)
    return sets


def _groups(varying: dict[AxisKey, tuple[int, ...]]) -> list[list[AxisKey]]:
    """Axes whose sizes vary together (the same size in every input set), in input order.

    Axes of different inputs that vary together share a group (``x.0`` and
    ``attention_mask.0``). Two axes of one input are only grouped by axis index, so never
    with each other: a square example (4×4, then 8×8) says nothing about the model."""
    by_sizes: dict[tuple[int, ...], list[AxisKey]] = {}
    for key, sizes in varying.items():
        by_sizes.setdefault(sizes, []).append(key)
    groups: list[list[AxisKey]] = []
    for keys in by_sizes.values():
        paths = [path for path, _ in keys]
        if len(set(paths)) == len(paths):
            groups.append(keys)
            continue
        by_axis: dict[int, list[AxisKey]] = {}
        for key in keys:
            by_axis.setdefault(key[1], []).append(key)
        groups.extend(by_axis.values())
    order = {key: i for i, key in enumerate(varying)}
    return sorted(groups, key=lambda group: order[group[0]])


def _generated_name(group: list[AxisKey]) -> str:
    axes = {axis for _, axis in group}
    if len(group) > 1 and len(axes) == 1 and next(iter(axes)) in SHARED_AXIS_NAMES:
        return SHARED_AXIS_NAMES[next(iter(axes))]
    return default_dim_name(*group[0])


def infer_dim_spec(model: Any, bound: BoundInputs, more_inputs: Any, *, spec: DimSpec | None = None) -> DimSpec:
    """A spec from ``bound`` plus more example input sets: an axis whose size varies becomes a
    named Dim over the observed ``[min, max]``, every other axis static.

    ``more_inputs`` is a ``torch.export.AdditionalInputs`` or a list whose items are each an
    args tuple, a kwargs dict or an ``(args, kwargs)`` pair; every set must have the inputs the
    example has.

    Axes of different inputs whose sizes vary together in every set share one Dim, so the spec
    exports as it is when the model needs them equal (``input_ids * attention_mask``). It is
    named after the user's Dim for those axes if ``spec`` has one, else ``batch`` when they
    are all axis 0, ``seq`` when all axis 1, else after the first axis (``x_dim2``). Any other
    varying axis gets a Dim of its own (``x_dim0``), and so do two axes of one input that
    merely vary alike (4×4, then 8×8: one Dim would make the program reject 5×6). If the model
    does need two such axes equal, capture says so and
    ``session.with_dims(spec).apply_suggested_fixes()`` merges them."""
    sets = [bound, *_bind_more(model, bound, more_inputs)]
    varying: dict[AxisKey, tuple[int, ...]] = {}
    for leaf in bound.leaves:
        for axis in range(leaf.rank):
            sizes = tuple(s.leaf(leaf.path).shape[axis] for s in sets)
            if len(set(sizes)) > 1:
                varying[(leaf.path, axis)] = sizes
    user_names = {(e.path, e.axis): e.policy.name for e in (spec or DimSpec()) if isinstance(e.policy, Dim)}

    named_groups: list[tuple[str | None, list[AxisKey]]] = []
    for group in _groups(varying):
        names = list(dict.fromkeys(user_names[key] for key in group if key in user_names))
        if len(names) <= 1:
            named_groups.append((names[0] if names else None, group))
            continue
        # The user gave these axes different names: keep them apart, unnamed ones with the first.
        for name in names:
            named_groups.append((name, [key for key in group if user_names.get(key, names[0]) == name]))

    taken = {name for name, _ in named_groups if name is not None}
    claimed: set[str] = set()  # a user name whose sizes contradict its first use gets a new name
    value: dict[AxisKey, AxisPolicy] = {}
    for asked, group in named_groups:
        if asked is None or asked in claimed:
            name = base = _generated_name(group)
            suffix = 2
            while name in taken:
                name, suffix = f"{base}_{suffix}", suffix + 1
            taken.add(name)
        else:
            name = asked
        claimed.add(name)
        sizes = varying[group[0]]
        for key in group:
            value[key] = Dim(name, min=min(sizes) or None, max=max(sizes))
    return spec_from(value, bound)
