"""Mask & position plumbing: the top-level nodes of a graph that only derive masks, positions
and shapes from the graph inputs (``sym_size``, ``arange``, ``unsqueeze``, ``slice``,
``bitwise_and``, ``Shape``, ``Range``, ``Cast``...), folded into one pseudo-module so that a
drawing of a real model shows its modules first::

    fold_plumbing(graph)         # the graph with those nodes in module PLUMBING (computed once per graph)
    plumbing_nodes(graph)        # their names

A node is plumbing when it is not inside any module, every value it reads is a graph input, a
constant (parameter, initializer) or the output of another plumbing node, and it is about
masks, positions or shapes: its outputs are not floating point (ints, bools, sizes), or it reads
a plumbing value or an integer/bool graph input (the cast of a bool mask to float, ``1 - mask``).
A float computation on a float input (``x * 2`` before the first module) stays as it is, and
a graph without modules is never folded (its top level *is* the model). Fewer than two such
nodes are not folded either.
"""

from __future__ import annotations

import dataclasses

from .model import Graph, GraphNode

__all__ = ["PLUMBING", "PLUMBING_CLASS", "fold_plumbing", "plumbing_label", "plumbing_nodes"]

#: The module path the drawings give the folded plumbing (no real module path has parentheses).
PLUMBING = "(plumbing)"
#: What its box says it is.
PLUMBING_CLASS = "mask & position plumbing"

_CACHE = "_plumbing_folded"  # where a graph keeps its folded form (Graph is frozen; its cached lookups live there too)
_FLOAT = ("float", "bfloat", "complex", "half", "double")


def _is_float(dtype: str | None) -> bool:
    return dtype is not None and dtype.lower().startswith(_FLOAT)


def plumbing_nodes(graph: Graph) -> frozenset[str]:
    """The names of the graph's plumbing nodes (see the module docstring); empty when fewer
    than two, or when no node is inside a module."""
    if not any(node.module for node in graph.nodes):
        return frozenset()
    inputs = {v.name: v for v in graph.inputs}
    producers = graph.producers
    found: set[str] = set()
    plumbing_values: set[str] = {name for name, v in inputs.items() if not _is_float(v.dtype)}
    for node in graph.nodes:  # topological order: producers first
        if node.module:
            continue
        reads = [name for name in node.inputs if name]
        if any(name in producers and producers[name] not in found for name in reads):
            continue  # reads a value computed by the model (or by a node that is not plumbing)
        non_float = bool(node.outputs) and not any(_is_float(v.dtype) for v in node.outputs)
        if non_float or any(name in plumbing_values for name in reads):
            found.add(node.name)
            plumbing_values.update(v.name for v in node.outputs)
    return frozenset(found) if len(found) >= 2 else frozenset()


def plumbing_label(count: int) -> str:
    """``mask & position plumbing (12 nodes)``"""
    return f"{PLUMBING_CLASS} ({count} node{'s' * (count != 1)})"


def fold_plumbing(graph: Graph) -> Graph:
    """``graph`` with its plumbing nodes moved into the pseudo-module :data:`PLUMBING`
    (class :data:`PLUMBING_CLASS`); the graph itself when it has none. Computed once per graph
    (kept beside its other cached lookups): every redraw of a drawing folds the same graphs."""
    cached = graph.__dict__.get(_CACHE)
    if cached is not None:
        return cached
    names = plumbing_nodes(graph)
    if not names:
        graph.__dict__[_CACHE] = graph
        return graph

    def moved(node: GraphNode) -> GraphNode:
        if node.name not in names:
            return node
        return dataclasses.replace(node, module=PLUMBING, module_class=PLUMBING_CLASS)

    folded = Graph(graph.kind, tuple(moved(n) for n in graph.nodes), graph.inputs, graph.outputs,
                   graph.classes + ((PLUMBING, PLUMBING_CLASS),))
    folded.__dict__[_CACHE] = folded  # folding again changes nothing
    graph.__dict__[_CACHE] = folded
    return folded
