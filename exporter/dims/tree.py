"""The bound example inputs as a tree of paths: tensor leaves, containers and other values."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..compat import pytree_children
from ..inputs import BoundInputs, Leaf


class Tree:
    """Every node of the bound example inputs by path: tensor leaves, containers (dicts,
    lists, tuples, registered dataclasses, ``*args``, ``**kwargs``) and other values."""

    def __init__(self, bound: BoundInputs) -> None:
        self.bound = bound
        self.leaves: dict[str, Leaf] = {leaf.path: leaf for leaf in bound.leaves}
        self.values: dict[str, Any] = {}
        self.children: dict[str, list[tuple[str, str]]] = {}
        self.depth: dict[str, int] = {}

        def visit(value: Any, path: str, depth: int) -> None:
            self.values[path] = value
            self.depth[path] = depth
            if path in self.leaves or value is None:
                return
            kids = pytree_children(value)
            if kids is None:
                return
            self.children[path] = [(key, f"{path}.{key}") for key, _ in kids]
            for key, child in kids:
                visit(child, f"{path}.{key}", depth + 1)

        self.top = list(bound.by_signature())
        for name, value in bound.by_signature().items():
            if name == bound.var_keyword:  # **kwargs: its entries keep their own names
                self.values[name] = value
                self.depth[name] = 0
                self.children[name] = [(key, key) for key in value]
                for key, child in value.items():
                    visit(child, key, 1)
            else:
                visit(value, name, 0)

    def names(self) -> list[str]:
        """Every name a user may key a spec by, most likely first."""
        out = list(dict.fromkeys([*self.top, *self.bound.parameter_names, *self.leaves]))
        return out

    def tensors_under(self, path: str) -> Iterator[Leaf]:
        if path in self.leaves:
            yield self.leaves[path]
            return
        for _, child in self.children.get(path, ()):
            yield from self.tensors_under(child)
