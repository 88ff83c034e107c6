"""torch's pytrees (``torch.utils._pytree``): flattening with key paths, and key paths as text."""

from __future__ import annotations

from typing import Any

__all__ = ["key_path_to_str", "pytree_children", "pytree_keystr", "tree_flatten_with_path", "tree_replace_leaves"]


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


def tree_flatten_with_path(value: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """``torch.utils._pytree.tree_flatten_with_path`` (the flattening torch.export uses)."""
    from torch.utils import _pytree

    return _pytree.tree_flatten_with_path(value)[0]


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """The direct children of a pytree node as ``(key, child)``; None for a leaf."""
    from torch.utils import _pytree

    if _pytree.tree_is_leaf(value):
        return None
    flat, _ = _pytree.tree_flatten_with_path(value, is_leaf=lambda node: node is not value)
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
