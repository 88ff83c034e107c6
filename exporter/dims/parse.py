"""Parsing every accepted user form (torch dynamic_shapes, leaf paths, dynamic_axes, names)
into validated per-axis policies, with errors that name the input, the axis and the fix."""

from __future__ import annotations

import dataclasses
import difflib
import numbers
from collections.abc import Mapping, Sequence
from typing import Any

from ..axis import Axis
from ..compat import derived_dim_parts, dim_hint_policy, torch_dim_kind
from ..errors import SpecError
from ..inputs import BoundInputs, Leaf, onnx_input_names
from .model import AUTO, DYNAMIC, STATIC, AxisEntry, AxisPolicy, Derived, Dim, Name, Policy, default_dim_name
from .tree import Tree


def _did_you_mean(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, choices, n=1)
    valid = ", ".join(repr(c) for c in choices) or "(none)"
    prefix = f"did you mean {close[0]!r}? " if close else ""
    return f"{prefix}valid inputs: {valid}"


def _unknown_input(path: str, tree: Tree, choices: Sequence[str] | None = None, axis: int | None = None) -> SpecError:
    choices = list(dict.fromkeys(choices if choices is not None else tree.names()))
    hint = _did_you_mean(path, choices)
    if not difflib.get_close_matches(path, choices, n=1):
        hint += " (only inputs take a spec: output dims follow from the input dims)"
    return SpecError(f"unknown input {path!r}", input=path, axis=axis, hint=hint)


def _first_axis(spec: Any) -> int | None:
    """The axis a spec names first (for error messages), if it names one."""
    if isinstance(spec, Mapping):
        return next((k for k in spec if isinstance(k, int) and not isinstance(k, bool)), None)
    if isinstance(spec, (list, tuple)) and spec:
        return 0
    return None


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun[:-1] + 'ies' if noun.endswith('y') else noun + 's'}"


def _describe(value: Any) -> str:
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float, complex, str)):
        return f"{'an' if type(value).__name__[0] in 'aeiou' else 'a'} {type(value).__name__} ({value!r})"
    return f"a {type(value).__name__}"


def find_leaf(bound: BoundInputs, path: Any, axis: int | None = None, tree: Tree | None = None) -> Leaf:
    """The tensor leaf at ``path``, or a SpecError saying what ``path`` is instead."""
    tree = tree or Tree(bound)
    if not isinstance(path, str):
        raise SpecError(f"input name {path!r} is not a string", input=str(path), hint=_did_you_mean(str(path), tree.names()))
    if path in tree.leaves:
        return tree.leaves[path]
    if path in tree.values:
        raise _not_a_tensor(tree, path, axis)
    if path in bound.unbound:
        raise _not_given(path, axis)
    raise _unknown_input(path, tree, axis=axis)


def _not_a_tensor(tree: Tree, path: str, axis: int | None) -> SpecError:
    value = tree.values[path]
    tensors = [leaf.path for leaf in tree.tensors_under(path)]
    axis_text = f"axis {axis}" if axis is not None else "axes"
    if path in tree.children:
        count = len(tree.children[path])
        return SpecError(
            f"input {path!r} is {_describe(value)} of {_count(count, 'item')}, not a tensor, "
            f"so it has no {axis_text} to make dynamic",
            input=path,
            axis=axis,
            hint=(f"name one of its tensors instead: {', '.join(repr(t) for t in tensors)}; or " if tensors else "")
            + f"give a {'dict' if isinstance(value, Mapping) else 'list'} with one spec per item",
        )
    return SpecError(
        f"input {path!r} is {_describe(value)}, not a tensor, so it has no {axis_text} to make dynamic",
        input=path,
        axis=axis,
        hint=f"remove {path!r} from the spec (or give None for it), or pass a tensor for {path!r}",
    )


def _not_given(path: str, axis: int | None) -> SpecError:
    return SpecError(
        f"input {path!r} was given no example value (forward uses its default), so it has no axes",
        input=path,
        axis=axis,
        hint=f"pass an example tensor for {path!r}, or remove it from the spec",
    )


def check_axis(leaf: Leaf, axis: Any) -> int:
    if not isinstance(axis, numbers.Integral) or isinstance(axis, bool):
        raise SpecError(
            f"axis {axis!r} is not an int",
            input=leaf.path,
            hint=f"use an axis index in range({leaf.rank}), e.g. {{0: 'batch'}}"
            if leaf.rank
            else "a 0-d tensor has no axes: leave it static (None)",
        )
    axis = int(axis)
    if not -leaf.rank <= axis < leaf.rank:
        raise SpecError(
            f"axis {axis} is out of range for {leaf.path!r}, a tensor of shape {list(leaf.shape)} (rank {leaf.rank})",
            input=leaf.path,
            axis=axis,
            hint=f"valid axes are 0..{leaf.rank - 1} (or -{leaf.rank}..-1)"
            if leaf.rank
            else "a 0-d tensor has no axes: leave it static (None)",
        )
    return axis % leaf.rank


def parse_axis_value(value: Any, leaf: Leaf, axis: int | None) -> AxisPolicy:
    """One axis: AUTO/STATIC/DYNAMIC, Dim, str, True/None, int, or a torch Dim/hint.
    ``axis`` is None when the value applies to every axis of the tensor."""
    if isinstance(value, (Policy, Dim, Derived)):
        return value
    if value is None or value is False:
        return STATIC
    if value is True:
        return AUTO
    if isinstance(value, str):  # torch.onnx.export's meaning: Dim.DYNAMIC, named in ONNX
        try:
            return Name(value)
        except SpecError as exc:
            raise SpecError(exc.reason, input=leaf.path, axis=axis, hint=exc.hint) from None
    if isinstance(value, numbers.Integral):
        if axis is None or int(value) != leaf.shape[axis]:
            size = leaf.shape[axis] if axis is not None else None
            raise SpecError(
                f"static size {value} does not match the example size {size}"
                if axis is not None
                else f"a static size {value} cannot apply to every axis",
                input=leaf.path,
                axis=axis,
                hint=f"use {size} (or STATIC), or change the example input"
                if axis is not None
                else "use None (every axis static) or a dict {axis: size}",
            )
        return STATIC
    try:
        converted = _from_torch_dim(value, leaf, axis)
    except SpecError as exc:
        raise SpecError(exc.reason, input=leaf.path, axis=axis, hint=exc.hint) from None
    if converted is not None:
        return converted
    raise SpecError(
        f"{value!r} is not a dim policy",
        input=leaf.path,
        axis=axis,
        hint="use AUTO, STATIC, DYNAMIC, Dim('name', min=, max=), a name string, True or None",
    )


def _from_torch_dim(value: Any, leaf: Leaf, axis: int | None) -> AxisPolicy | None:
    kind = torch_dim_kind(value)
    if kind == "hint":
        name, lo, hi = dim_hint_policy(value)
        if lo is not None or hi is not None:
            bounds = "".join(f", {k}={v}" for k, v in (("min", lo), ("max", hi)) if v is not None)
            raise SpecError(
                f"{value!r} carries bounds, which the dim-policy model keeps only on named dims",
                hint=f"name the dim: exporter.Dim({default_dim_name(leaf.path, axis)!r}{bounds})",
            )
        return Policy[name]
    if kind == "derived":
        root, scale, offset = derived_dim_parts(value)
        converted = _from_torch_dim(root, leaf, axis)
        if not isinstance(converted, Dim) or scale < 1:
            raise SpecError(
                f"derived dim {value.__name__!r} is not a positive linear function of a Dim",
                hint="give that axis its own Dim, or AUTO, and let torch find the relation",
            )
        return Derived(converted, scale, offset)
    if kind == "dim":
        lo = value.min if isinstance(value.min, int) and value.min > 0 else None
        hi = value.max if isinstance(value.max, int) and not isinstance(value.max, bool) else None
        return Dim(value.__name__, min=lo, max=hi)
    return None


def _is_dim_hint(value: Any) -> bool:
    return torch_dim_kind(value) == "hint"


def _is_static_hint(value: Any) -> bool:
    return _is_dim_hint(value) and dim_hint_policy(value)[0] == "STATIC"


def _is_whole(spec: Any) -> bool:
    """A spec that applies to every axis of every tensor below it."""
    return spec is True or isinstance(spec, Policy) or _is_dim_hint(spec)


def _clear(leaf: Leaf, out: dict[tuple[str, int], AxisPolicy]) -> None:
    for axis in range(leaf.rank):
        out.pop((leaf.path, axis), None)


def _parse_leaf_spec(raw: Any, leaf: Leaf, out: dict[tuple[str, int], AxisPolicy]) -> None:
    """The spec of one tensor: None, True, a policy, a dict {axis: value} or a per-axis list.
    A dict sets just the axes it names; any other form replaces the tensor's whole spec."""
    if raw is None or raw is False:
        _clear(leaf, out)
        return
    if _is_whole(raw):
        _clear(leaf, out)
        policy = parse_axis_value(raw, leaf, None)
        if policy is not STATIC:
            for axis in range(leaf.rank):
                out[(leaf.path, axis)] = policy
        return
    if isinstance(raw, Mapping):
        for axis, value in raw.items():
            ax = check_axis(leaf, axis)
            out[(leaf.path, ax)] = parse_axis_value(value, leaf, ax)
        return
    if isinstance(raw, (list, tuple)):
        if len(raw) != leaf.rank:
            raise SpecError(
                f"a per-axis list of length {len(raw)} was given for {leaf.path!r}, a tensor of rank "
                f"{leaf.rank} (shape {list(leaf.shape)})",
                input=leaf.path,
                hint=f"give {leaf.rank} entries (one per axis, None for static ones), "
                "or a dict {axis: policy} for just the dynamic axes",
            )
        _clear(leaf, out)
        for axis, value in enumerate(raw):
            out[(leaf.path, axis)] = parse_axis_value(value, leaf, axis)
        return
    if isinstance(raw, (str, Dim)) or _is_torch_dim(raw):
        example = repr(raw) if isinstance(raw, (str, Dim)) else "Dim(...)"
        raise SpecError(
            f"{raw!r} names one dim but {leaf.path!r} is a tensor of shape {list(leaf.shape)}",
            input=leaf.path,
            hint=f"say which axis: {{{leaf.path!r}: {{0: {example}}}}}",
        )
    raise SpecError(
        f"{raw!r} is not a tensor spec",
        input=leaf.path,
        hint="use a dict {axis: policy}, a list with one policy per axis, True (all AUTO) or None",
    )


def _is_torch_dim(value: Any) -> bool:
    return torch_dim_kind(value) == "dim"


def _walk(tree: Tree, path: str, spec: Any, out: dict[tuple[str, int], AxisPolicy]) -> None:
    """Apply ``spec`` to the node at ``path``, following the example value's structure."""
    if path in tree.leaves:
        _parse_leaf_spec(spec, tree.leaves[path], out)
        return
    if spec is None or spec is False or spec is STATIC or _is_static_hint(spec):
        return  # torch.export takes Dim.STATIC (or None) for a non-tensor input too
    children = tree.children.get(path)
    if children is None:  # an int, a float, None, a string...: nothing to make dynamic
        raise _not_a_tensor(tree, path, _first_axis(spec))
    if _is_whole(spec):
        for leaf in tree.tensors_under(path):
            _parse_leaf_spec(spec, leaf, out)
        return
    value = tree.values[path]
    keys = ", ".join(repr(k) for k, _ in children) or "(none)"
    if isinstance(spec, Mapping):
        by_key = dict(children)
        for key, sub in spec.items():
            child = by_key.get(str(key)) if isinstance(key, (str, int)) and not isinstance(key, bool) else None
            if child is None:
                wrong = str(key) if path == tree.bound.var_keyword else f"{path}.{key}"
                raise _unknown_input(wrong, tree, choices=[c for _, c in children] + tree.names())
            _walk(tree, child, sub, out)
        return
    if isinstance(spec, (list, tuple)):
        if len(spec) != len(children):
            raise SpecError(
                f"the spec for {path!r} has {_count(len(spec), 'entry')}, but {path!r} is "
                f"{_describe(value)} of {_count(len(children), 'item')} (keys {keys})",
                input=path,
                hint=f"give {_count(len(children), 'entry')} in that order (None for static ones), "
                "or a dict keyed by the items you want dynamic",
            )
        for (_, child), sub in zip(children, spec):
            _walk(tree, child, sub, out)
        return
    if dataclasses.is_dataclass(spec) and not isinstance(spec, type):
        for key, child in children:
            if hasattr(spec, key):
                _walk(tree, child, getattr(spec, key), out)
        return
    raise SpecError(
        f"{spec!r} cannot describe {path!r}, which is {_describe(value)} of {_count(len(children), 'item')} (keys {keys})",
        input=path,
        hint="give a dict or list that follows its structure, True (every axis AUTO) or None (static)",
    )


def parse_dynamic_shapes(raw: Any, bound: BoundInputs) -> dict[tuple[str, int], AxisPolicy]:
    out: dict[tuple[str, int], AxisPolicy] = {}
    if raw is None:
        return out
    tree = Tree(bound)
    if isinstance(raw, (list, tuple)):
        top, flat = list(tree.top), list(bound.parameter_names)
        if len(raw) == len(top):
            raw = dict(zip(top, raw))
        elif len(raw) == len(flat):
            raw = dict(zip(flat, raw))
        else:
            raise SpecError(
                f"dynamic_shapes has {len(raw)} entries by position but forward was given "
                f"{len(top)} inputs ({', '.join(top) or 'none'})",
                hint="give one entry per input in signature order, or a dict keyed by input name",
            )
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"dynamic_shapes must be a dict, a tuple, a DimSpec or None, not {type(raw).__name__}",
            hint='e.g. dynamic_shapes={"x": {0: "batch"}}',
        )
    items: list[tuple[int, str, Any]] = []
    for key, sub in raw.items():
        if not isinstance(key, str):
            raise SpecError(
                f"dynamic_shapes key {key!r} is not an input name",
                input=str(key),
                hint=_did_you_mean(str(key), tree.names()),
            )
        if key in tree.values:
            items.append((tree.depth[key], key, sub))
        elif key in bound.unbound:
            if sub is not None:
                raise _not_given(key, _first_axis(sub))
        else:
            raise _unknown_input(key, tree, axis=_first_axis(sub))
    # Shallow keys first, so a key naming a leaf (``cache.0.key``) refines its container's spec.
    for _, key, sub in sorted(items, key=lambda item: item[0]):
        _walk(tree, key, sub, out)
    return out


def parse_dynamic_axes(
    raw: Any, bound: BoundInputs, input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None
) -> dict[tuple[str, int], AxisPolicy]:
    """Legacy ``dynamic_axes``: ``{"x": {0: "batch"}}`` or ``{"x": [0, 1]}``, keyed by input
    name, or, as legacy torch.onnx code does, by the ``input_names`` given to the flattened
    inputs in order (entries keyed by ``output_names`` are skipped: output dims follow)."""
    if not isinstance(raw, Mapping):
        raise SpecError(
            f"dynamic_axes must be a dict, not {type(raw).__name__}",
            hint='e.g. dynamic_axes={"x": {0: "batch"}}',
        )
    tree = Tree(bound)
    flattened = {path.replace(".", "_"): path for path in tree.leaves}
    if input_names is not None:
        flattened.update({name: path for path, name in onnx_input_names(bound, input_names).items()})
    outputs = set(output_names or ())
    out: dict[tuple[str, int], AxisPolicy] = {}
    for name, axes in raw.items():
        if isinstance(name, str) and name in outputs and name not in flattened:
            continue  # an output's dims follow from the inputs'
        if isinstance(name, str) and name in flattened and (name not in tree.values or input_names and name in input_names):
            name = flattened[name]  # input_names, or a legacy flattened name: cache_0_key -> cache.0.key
        if axes is None:
            continue  # torch.onnx.export accepts None (no dynamic axes), for outputs too
        leaf = find_leaf(bound, name, axis=_first_axis(axes), tree=tree)
        if isinstance(axes, Mapping):
            for axis, value in axes.items():
                ax = check_axis(leaf, axis)
                out[(leaf.path, ax)] = parse_axis_value(value, leaf, ax)
        elif isinstance(axes, (list, tuple)):
            for axis in axes:
                out[(leaf.path, check_axis(leaf, axis))] = DYNAMIC
        else:
            raise SpecError(
                f"dynamic_axes entry {axes!r} is neither a dict nor a list of axes",
                input=leaf.path,
                hint=f'{{"{leaf.path}": {{0: "batch"}}}} or {{"{leaf.path}": [0]}}',
            )
    return out


def validated_entries(bound: BoundInputs, value: dict[tuple[str, int], AxisPolicy]) -> tuple[AxisEntry, ...]:
    """Validate cross-axis rules and order the entries by input then axis (STATIC ones dropped)."""
    # A name that is also a Dim object elsewhere in the spec means that Dim (one dim, as before).
    strict = {p.name: p for p in value.values() if isinstance(p, Dim) and not isinstance(p, Name)}
    value = {k: strict.get(p.name, p) if isinstance(p, Name) else p for k, p in value.items()}
    named: dict[str, tuple[Dim, str, int, int]] = {}
    for (path, axis), policy in value.items():
        size = bound.leaf(path).shape[axis]
        if isinstance(policy, Derived):
            root_size = policy.root_size(size)
            if root_size is None or root_size < 0:
                raise SpecError(
                    f"the example size {size} is not {policy!r} for any size of {policy.root.name!r}",
                    input=path,
                    axis=axis,
                    hint=f"pass an example whose size is {policy!r}, or give the axis its own Dim",
                )
            derived_text = f" ({policy!r}, so {policy.root.name} = {root_size})"
            policy, size = policy.root, root_size
        else:
            derived_text = ""
        if not isinstance(policy, Dim):
            continue
        if not policy.contains(size):
            lo = policy.min if policy.min is not None else 0
            hi = policy.max if policy.max is not None else "inf"
            new_lo = min(size, lo)
            new_hi = max(size, policy.max) if policy.max is not None else None
            if new_hi is not None and new_hi <= new_lo:
                new_hi = new_lo + 1
            fix = repr(Dim(policy.name, min=new_lo or None, max=new_hi))
            raise SpecError(
                f"the example size {size} is outside Dim {policy.name!r}'s range [{lo}, {hi}]",
                input=path,
                axis=axis,
                hint=f"widen the range (e.g. {fix}) or pass an example inside it",
            )
        if policy.name in named:
            other, other_path, other_axis, other_size = named[policy.name]
            if other != policy:
                raise SpecError(
                    f"dim name {policy.name!r} is used with two different ranges: {other!r} on "
                    f"{Axis(other_path, other_axis).label} and {policy!r} on {Axis(path, axis).label}",
                    input=path,
                    axis=axis,
                    hint=f"create the Dim once ({policy.name} = {other!r}) and reuse it on every axis "
                    "that shares it, or give the axes different names",
                )
            if other_size != size:
                raise SpecError(
                    f"{Axis(path, axis).label} = {bound.leaf(path).shape[axis]}{derived_text} and "
                    f"{Axis(other_path, other_axis).label} = {other_size} "
                    f"share the dim name {policy.name!r}, but their example sizes differ",
                    input=path,
                    axis=axis,
                    hint="give them different names, or make the example sizes equal",
                )
        else:
            named[policy.name] = (policy, path, axis, size)
    order = {leaf.path: leaf.index for leaf in bound.leaves}
    return tuple(
        AxisEntry(path, axis, policy)
        for (path, axis), policy in sorted(value.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        if policy is not STATIC
    )
