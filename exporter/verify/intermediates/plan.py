"""What a comparison of one export compares, worked out once per export: each ONNX node with
its ``(ONNX value, FX node)`` pairs, its op, module and source line, and the rows of the nodes
that have nothing to compare."""

from __future__ import annotations

import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...errors import Status
from ...node_metadata import onnx_node_name
from .fx_side import FxRunner
from .result import IntermediateRow

__all__ = ["NodePlan", "Plan", "chunks", "pair_names", "plan_of"]


@dataclass(frozen=True)
class NodePlan:
    """One ONNX node of the optimized model: ``pairs`` are its outputs named after an FX node
    (or graph outputs paired with the program's user output at their position), each with
    that FX node; ``fx_nodes``, ``module`` and ``source`` come from the FX ↔ ONNX mapping."""

    name: str
    node: Any  # onnx_ir.Node
    op: str
    fx_nodes: tuple[str, ...]
    module: str | None
    source: str | None
    pairs: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Plan:
    """Every ONNX node in topological order; ``wanted``: the FX nodes whose values are
    compared; ``skipped``: the ready ``not compared`` row of each node without pairs;
    ``output_names``: the model's graph outputs."""

    nodes: tuple[NodePlan, ...]
    wanted: frozenset[str]
    skipped: Mapping[str, IntermediateRow]
    output_names: tuple[str, ...]
    fx: FxRunner  # the decomposed program's interpreter, reused from call to call


_PLANS: weakref.WeakKeyDictionary[Any, tuple[Any, Any, Plan]] = weakref.WeakKeyDictionary()


def plan_of(graphs: Any, program: Any, model: Any) -> Plan:
    """The plan of an export, kept with its graphs object (``session.graphs``) for the next
    comparison of the same export."""
    try:
        kept = _PLANS.get(graphs)
    except TypeError:  # graphs that cannot be weakly referenced: no reuse
        return _build(graphs.mapping, program, model)
    if kept is not None and kept[0]() is program and kept[1]() is model:
        return kept[2]
    plan = _build(graphs.mapping, program, model)
    try:
        _PLANS[graphs] = (weakref.ref(program), weakref.ref(model), plan)
    except TypeError:
        pass
    return plan


def chunks(plan: Plan, sizes: Mapping[str, int], budget: int) -> list[list[NodePlan]]:
    """The nodes with pairs, in order, cut where their output bytes would pass ``budget``."""
    out: list[list[NodePlan]] = []
    current: list[NodePlan] = []
    total = 0
    for node in plan.nodes:
        if not node.pairs:
            continue
        size = sum(sizes.get(fx, 0) for _, fx in node.pairs)
        if current and total + size > budget:
            out.append(current)
            current, total = [], 0
        current.append(node)
        total += size
    if current:
        out.append(current)
    return out


def _build(mapping: Any, program: Any, model: Any) -> Plan:
    fx_names = {n.name for n in program.graph.nodes if n.op == "call_function"}
    user_outputs = [getattr(s.arg, "name", None) for s in program.graph_signature.output_specs
                    if s.kind.name == "USER_OUTPUT"]
    output_names = tuple(v.name for v in model.graph.outputs)
    by_output = dict(zip(output_names, user_outputs)) if len(output_names) == len(user_outputs) else {}
    nodes: list[NodePlan] = []
    skipped: dict[str, IntermediateRow] = {}
    for index, node in enumerate(model.graph):
        name = onnx_node_name(node, index)
        entry = _entry(mapping, name)
        planned = NodePlan(name, node, _op(node), entry.fx_nodes if entry is not None else (),
                           entry.module if entry is not None else None, entry.source if entry is not None else None,
                           _pairs(node, fx_names, by_output))
        nodes.append(planned)
        if not planned.pairs:
            skipped[name] = _not_compared(planned, entry)
    wanted = frozenset(fx for node in nodes for _, fx in node.pairs)
    return Plan(tuple(nodes), wanted, skipped, output_names, FxRunner(program))


def _pairs(node: Any, fx_names: set[str], by_output: Mapping[str, str | None]) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for value in node.outputs:
        if not value.name or value.dtype is None:
            continue
        fx = value.name if value.name in fx_names else by_output.get(value.name)
        if fx is not None and fx in fx_names:
            found.append((value.name, fx))
    return tuple(found)


def _not_compared(node: NodePlan, entry: Any) -> IntermediateRow:
    origin = entry.origin if entry is not None else "unmapped"
    if origin == "unmapped":
        reason = "no FX origin recorded"
    elif origin == "optimizer":
        reason = "created by the optimizer; its outputs have no FX counterpart"
    elif any(v.dtype is None for v in node.node.outputs):
        reason = "its output has no type in the ONNX model"
    else:
        reason = f"an inner step of the translation of {', '.join(node.fx_nodes)}: its outputs have no FX counterpart"
    return IntermediateRow(node.name, node.op, node.fx_nodes, node.module, node.source, Status.NOT_COMPARED, reason=reason)


def _entry(mapping: Any, name: str) -> Any:
    try:
        return mapping[name]
    except KeyError:
        return None


def _op(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def pair_names(nodes: Sequence[NodePlan]) -> list[str]:
    """The ONNX values of ``nodes``' pairs, in order."""
    return [value for node in nodes for value, _ in node.pairs]
