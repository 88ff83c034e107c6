"""The FX↔ONNX node mapping: which FX nodes each ONNX node of the optimized model came from.

The torch exporter writes the FX node's name on every ONNX node it emits
(``pkg.torch.onnx.fx_node``). The optimizer keeps that metadata on the nodes it keeps; a node
it creates (a fusion) usually has none, so its origins are found in the model before
optimization: the nodes there that computed its outputs from its inputs. Nodes the optimizer
removed (constants folded, subgraphs fused) are listed in :attr:`NodeMapping.removed`.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..presentation import Presentable
from .model import Graph, GraphNode

__all__ = ["MappingEntry", "NodeMapping", "RemovedNode", "map_nodes"]

ORIGINS = ("fx", "optimizer", "unmapped")


@dataclass(frozen=True)
class MappingEntry:
    """One ONNX node of the optimized model and where it came from.

    ``origin`` is ``fx`` (translated from ``fx_nodes`` and kept by the optimizer),
    ``optimizer`` (created by the optimizer; ``fx_nodes`` are the origins of the nodes it
    replaced, when they could be found) or ``unmapped`` (no FX origin recorded).
    ``fx_captured`` are the same origins in the captured program (before decompositions)."""

    onnx_node: str
    onnx_op: str
    fx_nodes: tuple[str, ...]
    module: str | None
    source: str | None
    origin: str
    fx_captured: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "onnx_node": self.onnx_node,
            "onnx_op": self.onnx_op,
            "fx_nodes": ", ".join(self.fx_nodes),
            "module": self.module,
            "source": self.source,
            "origin": self.origin,
            "fx_captured": ", ".join(self.fx_captured),
        }


@dataclass(frozen=True)
class RemovedNode:
    """A node of the model before optimization that the optimizer removed: ``fate`` is
    ``folded`` (its output became a constant), ``fused into <node>`` (replaced together with
    others by a new node) or ``removed`` (dead code or an identity)."""

    onnx_node: str
    onnx_op: str
    fx_nodes: tuple[str, ...]
    module: str | None
    fate: str


@dataclass(frozen=True, repr=False)
class NodeMapping(Presentable):
    """Every ONNX node of the optimized model mapped to its FX origins (see
    :class:`MappingEntry`), and the nodes the optimizer removed."""

    entries: tuple[MappingEntry, ...]
    removed: tuple[RemovedNode, ...] = ()

    @property
    def coverage(self) -> float:
        """The share of ONNX nodes whose origin is known (``fx`` or ``optimizer``)."""
        if not self.entries:
            return 1.0
        return sum(e.origin != "unmapped" for e in self.entries) / len(self.entries)

    @functools.cached_property
    def _by_onnx(self) -> dict[str, MappingEntry]:
        return {e.onnx_node: e for e in self.entries}

    @functools.cached_property
    def _by_fx(self) -> dict[str, tuple[str, ...]]:
        out: dict[str, list[str]] = {}
        for entry in self.entries:
            for fx in entry.fx_nodes:
                out.setdefault(fx, []).append(entry.onnx_node)
        return {k: tuple(v) for k, v in out.items()}

    def __getitem__(self, onnx_node: str) -> MappingEntry:
        try:
            return self._by_onnx[onnx_node]
        except KeyError:
            raise KeyError(f"no ONNX node {onnx_node!r} in the optimized model") from None

    def __len__(self) -> int:
        return len(self.entries)

    def fx_nodes_of(self, onnx_node: str) -> tuple[str, ...]:
        """The FX nodes (of the decomposed program) an ONNX node came from."""
        return self[onnx_node].fx_nodes

    def onnx_nodes_of(self, fx_node: str) -> tuple[str, ...]:
        """The ONNX nodes of the optimized model an FX node (decomposed program) became."""
        return self._by_fx.get(fx_node, ())

    def to_frame(self) -> Any:
        """One row per ONNX node: onnx_node, onnx_op, fx_nodes, module, source, origin
        (``fx``, ``optimizer`` or ``unmapped``), fx_captured."""
        import pandas as pd

        columns = ["onnx_node", "onnx_op", "fx_nodes", "module", "source", "origin", "fx_captured"]
        return pd.DataFrame([e.to_dict() for e in self.entries], columns=columns)

    def removed_frame(self) -> Any:
        """One row per node the optimizer removed: onnx_node, onnx_op, fx_nodes, module, fate."""
        import pandas as pd

        return pd.DataFrame(
            [(r.onnx_node, r.onnx_op, ", ".join(r.fx_nodes), r.module, r.fate) for r in self.removed],
            columns=["onnx_node", "onnx_op", "fx_nodes", "module", "fate"],
        )

    def counts(self) -> dict[str, int]:
        """How many ONNX nodes have each origin (``fx``, ``optimizer``, ``unmapped``)."""
        return {o: sum(e.origin == o for e in self.entries) for o in ORIGINS}


def _common_module(modules: list[str | None]) -> str | None:
    known = [m for m in modules if m is not None]
    if not known:
        return None
    parts = [m.split(".") if m else [] for m in known]
    common = []
    for level in zip(*parts):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)


def _replaced(node: GraphNode, before: Graph, optimized: Graph, limit: int = 64) -> list[GraphNode]:
    """The nodes of ``before`` that computed ``node``'s outputs from ``node``'s inputs and are
    gone from ``optimized``: walk back from the producers of its outputs, stopping at its
    inputs and at nodes the optimizer kept (a ``CastLike(mask, out)`` folded to ``Cast(mask)``
    replaced the CastLike, not the attention that computed ``out``); at most ``limit`` nodes."""
    stop = set(node.inputs)
    seen: dict[str, GraphNode] = {}
    todo = [before.producers[v.name] for v in node.outputs if v.name in before.producers]
    while todo and len(seen) < limit:
        name = todo.pop()
        if name in seen or name in optimized:
            continue
        seen[name] = before[name]
        for value in seen[name].inputs:
            if value and value not in stop and value in before.producers:
                todo.append(before.producers[value])
    return list(seen.values())


def _removed_consumers(node: GraphNode, before: Graph, optimized: Graph) -> list[GraphNode]:
    """The nodes of ``before`` that read ``node``'s (non-constant) inputs and are gone from
    ``optimized``: what a new node with new output values (a ``Split`` replacing
    ``SplitToSequence`` + ``SequenceAt``) most likely replaced."""
    graph_inputs = {v.name for v in before.inputs}
    found: dict[str, GraphNode] = {}
    for value in node.inputs:
        if value and (value in before.producers or value in graph_inputs):
            for name in before.consumers.get(value, ()):
                if name not in optimized:
                    found.setdefault(name, before[name])
    return list(found.values())


def map_nodes(
    optimized: Graph,
    before: Graph,
    fx_names: Mapping[str, str | None],
    fx: Graph,
    captured_origins: Mapping[str, tuple[str, ...]] | None = None,
) -> NodeMapping:
    """Map each node of ``optimized`` to FX nodes of ``fx`` (the decomposed program).

    ``before`` is the model before optimization; ``fx_names`` the FX node each ONNX node
    (of either model, by name) records in its metadata; ``captured_origins`` maps a
    decomposed FX node to its origins in the captured program."""
    captured_origins = captured_origins or {}
    entries: list[MappingEntry] = []
    fused_into: dict[str, str] = {}
    for node in optimized.nodes:
        fx_name = fx_names.get(node.name)
        if node.name in before:
            origin = "fx" if fx_name else "unmapped"
            fx_nodes: tuple[str, ...] = (fx_name,) if fx_name else ()
        else:
            origin = "optimizer"
            replaced = _replaced(node, before, optimized) or _removed_consumers(node, before, optimized)
            for old in replaced:
                fused_into.setdefault(old.name, node.name)
            found = [fx_names.get(old.name) for old in reversed(replaced)]
            fx_nodes = tuple(dict.fromkeys(f for f in ([fx_name] if fx_name else []) + found if f))
        fx_nodes = tuple(f for f in fx_nodes if f in fx) or fx_nodes
        module = node.module
        source = node.source
        if fx_nodes and (module is None or source is None):
            origins = [fx[f] for f in fx_nodes if f in fx]
            module = module if module is not None else _common_module([o.module for o in origins])
            source = source or next((o.source for o in origins if o.source), None)
        captured = tuple(dict.fromkeys(c for f in fx_nodes for c in captured_origins.get(f, ())))
        entries.append(MappingEntry(node.name, node.op, fx_nodes, module, source, origin, captured))

    kept_values = {v.name for n in optimized.nodes for v in n.outputs}
    removed = []
    for node in before.nodes:
        if node.name in optimized:
            continue
        fx_name = fx_names.get(node.name)
        if node.name in fused_into:
            fate = f"fused into {fused_into[node.name]}"
        elif any(v.name in kept_values for v in node.outputs):
            fate = "replaced"
        elif node.op == "Constant" or all(not i for i in node.inputs) or _feeds_only_constants(node, before):
            fate = "folded"
        else:
            fate = "removed"
        removed.append(RemovedNode(node.name, node.op, (fx_name,) if fx_name else (), node.module, fate))
    return NodeMapping(tuple(entries), tuple(removed))


def _feeds_only_constants(node: GraphNode, graph: Graph) -> bool:
    """True when none of the node's inputs comes from a graph input (directly or not): the
    optimizer can fold it to a constant."""
    graph_inputs = {v.name for v in graph.inputs}
    seen: set[str] = set()
    todo = list(node.inputs)
    while todo:
        value = todo.pop()
        if not value or value in seen:
            continue
        seen.add(value)
        if value in graph_inputs:
            return False
        producer = graph.producers.get(value)
        if producer is not None:
            todo.extend(graph[producer].inputs)
    return True
