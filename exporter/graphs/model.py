"""One graph (FX or ONNX) as plain data: nodes with their inputs, typed outputs, module path
and source line."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..frames import short_source

__all__ = ["Graph", "GraphNode", "ValueInfo", "module_ancestors", "short_source"]

# ``/…/site-packages/transformers/models/bert/modeling_bert.py:95`` → ``transformers/models/…``


@dataclass(frozen=True)
class ValueInfo:
    """A value flowing between nodes: its name, dtype (``float32``) and shape with the user's
    dim names (``("batch", 3, 16)``); either may be ``None`` when unknown."""

    name: str
    dtype: str | None = None
    shape: tuple[Any, ...] | None = None

    def describe(self) -> str:
        """``name: float32[batch, 3, 16]``"""
        return f"{self.name}: {self.type_text()}"

    def type_text(self) -> str:
        """``float32[batch, 3, 16]``; a dim nobody named or sized reads ``?``, never ``None``."""
        dtype = self.dtype or "?"
        if self.shape is None:
            return dtype
        return f"{dtype}[{', '.join('?' if d is None or d == 'None' else str(d) for d in self.shape)}]"


@dataclass(frozen=True)
class GraphNode:
    """One computation of a graph.

    ``inputs`` are value names (FX: the producing node or a parameter; ONNX: value names,
    ``""`` for an omitted optional input), ``outputs`` the values it produces. ``module`` is
    the ``nn.Module`` path it ran in (``""`` at the top level, ``None`` when unknown),
    ``module_class`` that module's class, ``source`` the user's ``file:line in func: code``,
    ``attributes`` the node's settings as ``(name, short text)`` (ONNX attributes; an FX
    node's non-node arguments and keywords)."""

    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[ValueInfo, ...]
    module: str | None = None
    module_class: str | None = None
    source: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "op": self.op,
            "inputs": ", ".join(self.inputs),
            "outputs": ", ".join(v.describe() for v in self.outputs),
            "module": self.module,
            "source": self.source,
        }


_COLUMNS = ["name", "op", "inputs", "outputs", "module", "source"]


@dataclass(frozen=True)
class Graph:
    """A graph as data: ``kind`` (``fx``, ``fx_decomposed``, ``onnx``, ``onnx_optimized``),
    its computation ``nodes`` in topological order, and its ``inputs`` / ``outputs``.

    Parameters, buffers and ONNX initializers are not nodes: they appear by name among a
    node's inputs. ``to_frame()`` gives one row per node."""

    kind: str
    nodes: tuple[GraphNode, ...]
    inputs: tuple[ValueInfo, ...] = ()
    outputs: tuple[ValueInfo, ...] = ()
    classes: tuple[tuple[str, str], ...] = ()  # (module path, class) of every module seen, outer ones too

    def __len__(self) -> int:
        return len(self.nodes)

    def __iter__(self):
        return iter(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __getitem__(self, name: str) -> GraphNode:
        try:
            return self._by_name[name]
        except KeyError:
            raise KeyError(f"no node {name!r} in the {self.kind} graph") from None

    @functools.cached_property
    def _by_name(self) -> dict[str, GraphNode]:
        return {node.name: node for node in self.nodes}

    @functools.cached_property
    def producers(self) -> dict[str, str]:
        """Value name → name of the node producing it."""
        return {value.name: node.name for node in self.nodes for value in node.outputs}

    @functools.cached_property
    def consumers(self) -> dict[str, tuple[str, ...]]:
        """Value name → names of the nodes reading it, in graph order."""
        out: dict[str, list[str]] = {}
        for node in self.nodes:
            for value in dict.fromkeys(node.inputs):
                if value:
                    out.setdefault(value, []).append(node.name)
        return {k: tuple(v) for k, v in out.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(node.name for node in self.nodes)

    def to_frame(self) -> Any:
        """One row per node: name, op, inputs, outputs (``name: dtype[dims]``), module, source."""
        import pandas as pd

        return pd.DataFrame([node.to_dict() for node in self.nodes], columns=_COLUMNS)

    def op_counts(self, module: str | None = None, *, recursive: bool = True) -> Counter[str]:
        """How many nodes of each op, in ``module`` (and its submodules unless
        ``recursive=False``), or in the whole graph."""
        return Counter(node.op for node in self.nodes_in(module, recursive=recursive))

    def nodes_in(self, module: str | None, *, recursive: bool = True) -> Iterable[GraphNode]:
        if module is None:
            return iter(self.nodes)
        if not recursive:
            return (n for n in self.nodes if (n.module or "") == module)
        return (n for n in self.nodes if module in module_ancestors(n.module or "", include_root=True))

    @functools.cached_property
    def module_classes(self) -> dict[str, str]:
        """Module path → class name, as far as the graph records it."""
        out = dict(self.classes)
        out.update({n.module: n.module_class for n in self.nodes if n.module is not None and n.module_class})
        return out

    def __repr__(self) -> str:
        return f"Graph({self.kind}, {len(self.nodes)} nodes, {len(self.inputs)} inputs, {len(self.outputs)} outputs)"


def module_ancestors(path: str, *, include_root: bool = False) -> tuple[str, ...]:
    """``encoder.layer.0`` → ``("encoder", "encoder.layer", "encoder.layer.0")`` (with ``""``
    first if ``include_root``)."""
    parts = path.split(".") if path else []
    chain = tuple(".".join(parts[: i + 1]) for i in range(len(parts)))
    return (("",) + chain) if include_root else chain


