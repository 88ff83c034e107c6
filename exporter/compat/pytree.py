"""torch's pytrees (``torch.utils._pytree``): flattening with key paths, and key paths as text.

A node registered the old way, with a ``flatten_fn`` but no ``flatten_with_keys_fn`` (diffusers
registers every ``BaseOutput``: ``UNet2DOutput``, ``DecoderOutput``, ``Transformer2DModelOutput``…),
makes torch's ``tree_flatten_with_path`` raise ``ValueError: Did not find a flatten_with_keys_fn``.
``torch.onnx.export`` never asks for key paths (it flattens with ``tree_flatten`` and names the
outputs after the graph's nodes), so it copes. :func:`tree_flatten_with_path` here walks the
registry itself and, for such a node, derives the keys from the node's own flatten: mapping
keys for a mapping whose flatten gives its values (an ``OrderedDict`` subclass, ``BaseOutput``),
field names for a dataclass whose flatten gives its fields, the position otherwise. torch's
registry is only read.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping
from typing import Any

__all__ = [
    "key_path_to_str",
    "keys_of_old_style_node",
    "pytree_children",
    "pytree_keystr",
    "tree_flatten_with_path",
    "tree_replace_leaves",
]


def key_path_to_str(prefix: str, key_path: tuple[Any, ...]) -> str:
    """``("cache", (SequenceKey(0), MappingKey("key")))`` → ``cache.0.key``."""
    parts = [prefix]
    for entry in key_path:
        for attr in ("key", "idx", "name"):
            if hasattr(entry, attr):
                parts.append(str(getattr(entry, attr)))
                break
        else:
            parts.append(str(entry))
    return ".".join(parts)


def tree_flatten_with_path(value: Any, is_leaf: Callable[[Any], bool] | None = None) -> list[tuple[tuple[Any, ...], Any]]:
    """``torch.utils._pytree.tree_flatten_with_path(value, is_leaf)[0]``: the leaves in
    ``tree_flatten`` order with their key paths, also through nodes registered without a
    ``flatten_with_keys_fn`` (keys from :func:`keys_of_old_style_node`)."""
    return list(_key_paths((), value, is_leaf))


def _key_paths(prefix: tuple[Any, ...], node: Any, is_leaf: Callable[[Any], bool] | None) -> Iterator[tuple[tuple[Any, ...], Any]]:
    # torch.utils._pytree._generate_key_paths, with a fallback where it raises
    from torch.utils import _pytree

    if is_leaf is not None and is_leaf(node):
        yield prefix, node
        return
    handler = _pytree.SUPPORTED_NODES.get(_pytree._get_node_type(node))
    if handler is None:
        yield prefix, node
        return
    if handler.flatten_with_keys_fn is not None:
        keyed = list(handler.flatten_with_keys_fn(node)[0])
    else:
        children, context = handler.flatten_fn(node)
        keyed = list(zip(keys_of_old_style_node(node, list(children), context), children))
    for key, child in keyed:
        yield from _key_paths((*prefix, key), child, is_leaf)


def keys_of_old_style_node(node: Any, children: list[Any], context: Any) -> list[Any]:
    """The key of each child a node's ``flatten_fn`` gave (``children``, ``context``), for a node
    registered without a ``flatten_with_keys_fn``: ``MappingKey`` for a mapping whose flatten
    gives its values in order (diffusers' ``BaseOutput``, an ``OrderedDict`` subclass),
    ``GetAttrKey`` for a dataclass whose flatten gives its fields in order, else ``SequenceKey``."""
    from torch.utils import _pytree

    if isinstance(node, Mapping):
        keys = list(context) if isinstance(context, (list, tuple)) and len(context) == len(children) else list(node)
        if len(keys) == len(children) and all(_holds(node, key, child) for key, child in zip(keys, children)):
            return [_pytree.MappingKey(key) for key in keys]
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        names = _field_names(node, children)
        if names is not None:
            return [_pytree.GetAttrKey(name) for name in names]
    return [_pytree.SequenceKey(index) for index in range(len(children))]


def _holds(node: Mapping[Any, Any], key: Any, child: Any) -> bool:
    try:
        if key not in node:
            return False
        value = dict.__getitem__(node, key) if isinstance(node, dict) else node[key]  # past a __getitem__ override
        return value is child
    except Exception:  # noqa: BLE001 - an unhashable key, an odd mapping: not this node's value
        return False


def _field_names(node: Any, children: list[Any]) -> list[str] | None:
    """The fields ``children`` are, in order (a flatten may leave out fields, e.g. ``None``
    ones); None when they are not the node's fields."""
    fields = [(f.name, getattr(node, f.name, None)) for f in dataclasses.fields(node)]
    names, start = [], 0
    for child in children:
        found = next((i for i in range(start, len(fields)) if fields[i][1] is child), None)
        if found is None:
            return None
        names.append(fields[found][0])
        start = found + 1
    return names


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """The direct children of a pytree node as ``(key, child)``; None for a leaf."""
    from torch.utils import _pytree

    if _pytree.tree_is_leaf(value):
        return None
    flat = tree_flatten_with_path(value, is_leaf=lambda node: node is not value)
    return [(key_path_to_str("", path)[1:], child) for path, child in flat]


def pytree_keystr(key_path: tuple[Any, ...]) -> str:
    """``torch.utils._pytree.keystr``: how torch writes a key path in an input's source,
    ``[0]['key']`` for sequences and dicts, ``.b`` for namedtuple and dataclass fields."""
    from torch.utils import _pytree

    return _pytree.keystr(key_path)


def tree_replace_leaves(value: Any, leaves: list[Any]) -> Any:
    """``value`` with its pytree leaves (in :func:`tree_flatten_with_path` order) replaced."""
    from torch.utils import _pytree

    _, spec = _pytree.tree_flatten(value)
    return _pytree.tree_unflatten(list(leaves), spec)
