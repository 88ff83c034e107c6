"""Rendering a spec's entries: the ``dynamic_shapes=`` torch.export takes, and the Python source for it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..inputs import BoundInputs, Leaf
from .model import AUTO, DYNAMIC, AxisEntry, AxisPolicy, Derived, Dim, Name, named_dims
from .tree import Tree


def to_torch(entries: Sequence[AxisEntry], bound: BoundInputs) -> dict[str, Any] | None:
    """The equivalent ``dynamic_shapes=`` for ``torch.export.export``."""
    import torch

    torch_dims: dict[str, Any] = {}

    def convert(policy: AxisPolicy) -> Any:
        if policy is AUTO:
            return torch.export.Dim.AUTO
        if policy is DYNAMIC or isinstance(policy, Name):  # a name: what torch.onnx.export passes
            return torch.export.Dim.DYNAMIC
        if isinstance(policy, Derived):
            expr = convert(policy.root)
            expr = expr * policy.scale if policy.scale != 1 else expr
            return expr + policy.offset if policy.offset else expr
        assert isinstance(policy, Dim), policy  # STATIC axes are not entries
        if policy.name not in torch_dims:
            kwargs = {k: v for k, v in (("min", policy.min), ("max", policy.max)) if v is not None}
            torch_dims[policy.name] = torch.export.Dim(policy.name, **kwargs)
        return torch_dims[policy.name]

    if not entries:
        return None
    return _nest(bound, lambda leaf: _leaf_axes(entries, leaf, convert))


def to_code(entries: Sequence[AxisEntry], bound: BoundInputs) -> str:
    """Python source that builds the same ``dynamic_shapes`` with ``torch.export.Dim``. Dim
    names given as strings stay strings (``{0: 'seq'}``), the form ``torch.onnx.export`` and
    ``exporter.export`` take; ``torch.export.export`` wants ``Dim.DYNAMIC`` there
    (``spec.to_torch``)."""
    dims = named_dims(entries)
    named = {k: v for k, v in dims.items() if not isinstance(v, Name)}
    names = set(dims)
    alias = "Dim"
    while alias in names:  # a dim called "Dim" must not shadow the class
        alias = "_" + alias
    header = "from torch.export import Dim" + (f" as {alias}" if alias != "Dim" else "")
    lines = [header, ""]
    for dim in named.values():
        args = "".join(
            f", {k}={v}" for k, v in (("min", dim.min), ("max", dim.max)) if v is not None
        )
        lines.append(f"{dim.name} = {alias}({dim.name!r}{args})")
    if named:
        lines.append("")

    def convert(policy: AxisPolicy) -> Any:
        if isinstance(policy, Name):  # kept a string: torch.onnx.export's (and export()'s) form
            return policy.name
        if isinstance(policy, Derived):
            text = policy.root.name if policy.scale == 1 else f"{policy.scale} * {policy.root.name}"
            if policy.offset:
                text += f" {'+' if policy.offset > 0 else '-'} {abs(policy.offset)}"
            return _Code(text)
        if isinstance(policy, Dim):
            return _Code(policy.name)
        return _Code(f"{alias}.{policy.name}")

    if not entries:
        lines.append("dynamic_shapes = None  # every dim static")
    else:
        nested = _nest(bound, lambda leaf: _leaf_axes(entries, leaf, convert), code=True)
        shared = _share_repeats(nested, names | {alias})
        for var, text in shared:
            lines.append(f"{var} = {text}")
        if shared:
            lines.append("")
        lines.append(f"dynamic_shapes = {_format_code(nested, force=True)}")
    return "\n".join(lines)


def _is_axes(value: Any) -> bool:
    """A leaf's ``{axis: dim}``."""
    return isinstance(value, dict) and bool(value) and all(isinstance(k, int) for k in value)


def _share_repeats(nested: dict[str, Any], taken: set[str]) -> list[tuple[str, str]]:
    """The compact form a person writes for a pytree input whose leaves repeat one spec (a KV
    cache): the leaf spec named once (``cache_axes = {0: 'batch', 2: past}``) and a list of
    equal items written ``[item] * n`` (``[[cache_axes, cache_axes]] * 2``). Rewrites
    ``nested`` in place; returns the (name, code) lines to put before it. The code builds an
    equal spec (equal lists, equal dicts)."""
    out: list[tuple[str, str]] = []
    for top, value in nested.items():
        if not isinstance(value, (list, tuple, _Call)):
            continue
        counts: dict[str, int] = {}
        for leaf in _leaves(value):
            counts[_format_flat(leaf)] = counts.get(_format_flat(leaf), 0) + 1
        repeated = [text for text, n in counts.items() if n > 1]
        names: dict[str, _Code] = {}
        for i, text in enumerate(repeated):
            var = f"{top}_axes" + (f"_{i}" if len(repeated) > 1 else "")
            while not var.isidentifier() or var in taken:
                var = "_" + var if var.isidentifier() else f"axes_{i}"
            taken.add(var)
            names[text] = _Code(var)
            out.append((var, text))
        if names:
            nested[top] = _repeat(_replace(value, names))
    return out


def _leaves(value: Any) -> list[Any]:
    if _is_axes(value):
        return [value]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple, _Call)):
        return [leaf for v in _items(value) for leaf in _leaves(v)]
    return []


def _replace(value: Any, names: dict[str, _Code]) -> Any:
    if _is_axes(value):
        return names.get(_format_flat(value), value)
    if isinstance(value, dict):
        return {k: _replace(v, names) for k, v in value.items()}
    if isinstance(value, _Call):
        return _Call(value.name, [_replace(v, names) for v in value.items])
    if isinstance(value, tuple):
        return tuple(_replace(v, names) for v in value)
    if isinstance(value, list):
        return [_replace(v, names) for v in value]
    return value


def _repeat(value: Any) -> Any:
    """A list (or tuple) of two or more equal containers as ``[item] * n``; inner lists too."""
    if isinstance(value, dict):
        return {k: _repeat(v) for k, v in value.items()}
    if isinstance(value, _Call):
        return _Call(value.name, [_repeat(v) for v in value.items])
    if not isinstance(value, (list, tuple)):
        return value
    items = [_repeat(v) for v in value]
    flat = {_format_flat(v) for v in items}
    if len(items) > 1 and len(flat) == 1 and isinstance(items[0], (list, tuple, dict, _Call)) and not _is_axes(items[0]):
        inner = _format_flat(items[0])
        return _Code(f"[{inner}] * {len(items)}" if isinstance(value, list) else f"({inner},) * {len(items)}")
    return type(value)(items)


def _leaf_axes(entries: Sequence[AxisEntry], leaf: Leaf, convert) -> dict[int, Any] | None:
    axes = {e.axis: convert(e.policy) for e in entries if e.path == leaf.path}
    return axes or None


class _Code(str):
    """A string rendered without quotes by :func:`_format_code`."""


def _format_code(value: Any, indent: int = 0, *, width: int = 88, force: bool = False) -> str:
    """Python source for a nested spec: on one line when it fits, else one item per line."""
    flat = _format_flat(value)
    multi = isinstance(value, (dict, list, tuple, _Call)) and _items(value)
    if not multi or (not force and indent + len(flat) <= width):
        return flat
    pad = " " * (indent + 4)
    if isinstance(value, dict):
        lines = [f"{pad}{k!r}: {_format_code(v, indent + 4, width=width)}," for k, v in value.items()]
        opening, closing = "{", "}"
    else:
        lines = [f"{pad}{_format_code(v, indent + 4, width=width)}," for v in _items(value)]
        opening, closing = (
            (f"{value.name}(", ")") if isinstance(value, _Call) else ("(", ")") if isinstance(value, tuple) else ("[", "]")
        )
    return opening + "\n" + "\n".join(lines) + "\n" + " " * indent + closing


def _items(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return list(value.values())
    if isinstance(value, _Call):
        return list(value.items)
    return list(value)


def _format_flat(value: Any) -> str:
    if isinstance(value, _Code):
        return str(value)
    if isinstance(value, _Call):
        return f"{value.name}({', '.join(_format_flat(v) for v in value.items)})"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r}: {_format_flat(v)}" for k, v in value.items()) + "}"
    if isinstance(value, tuple):
        inner = ", ".join(_format_flat(v) for v in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if isinstance(value, list):
        return "[" + ", ".join(_format_flat(v) for v in value) + "]"
    return repr(value)


class _Call:
    """``Name(a, b)`` in generated code (a namedtuple of specs)."""

    def __init__(self, name: str, items: list[Any]) -> None:
        self.name, self.items = name, items


def _nest(bound: BoundInputs, leaf_fn, *, code: bool = False) -> dict[str, Any]:
    """Rebuild the inputs' structure with ``leaf_fn(leaf)`` at tensor leaves and None
    elsewhere, in the form torch.export's ``dynamic_shapes`` expects: keyed by forward's
    parameters, ``*args`` as a tuple, ``**kwargs`` as a dict, dataclasses as lists,
    namedtuples as the same namedtuple."""
    tree = Tree(bound)

    def build(path: str) -> Any:
        if path in tree.leaves:
            return leaf_fn(tree.leaves[path])
        children = tree.children.get(path)
        if children is None:
            return None
        value = tree.values[path]
        if isinstance(value, Mapping):
            return {key: build(child) for key, child in children}
        built = [build(child) for _, child in children]
        if type(value) is tuple:
            return tuple(built)
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):
            return _Call(type(value).__name__, built) if code else type(value)(*built)
        return built

    return {name: build(name) for name in tree.top}

