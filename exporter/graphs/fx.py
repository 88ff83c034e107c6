"""An ``ExportedProgram``'s FX graph as a :class:`~exporter.graphs.model.Graph`."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..frames import source_of_stack
from ..node_metadata import normalize_module_path
from .model import Graph, GraphNode, ValueInfo
from .. import compat

__all__ = ["fx_graph"]

_SYMBOL = re.compile(r"\b[su]\d+\b")


def _dim_text(size: Any, names: Mapping[str, str]) -> Any:
    if type(size) is int:
        return size
    text = compat.size_expression(size)
    if text.lstrip("-").isdigit():
        return int(text)
    return _SYMBOL.sub(lambda m: names.get(m.group(0), m.group(0)), text)


def _value_info(name: str, value: Any, names: Mapping[str, str]) -> ValueInfo:
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None:
        return ValueInfo(name, type(value).__name__ if value is not None else None)
    return ValueInfo(
        name,
        str(dtype).removeprefix("torch.") if dtype is not None else None,
        tuple(_dim_text(d, names) for d in shape),
    )


def _outputs(node: Any, names: Mapping[str, str]) -> tuple[ValueInfo, ...]:
    value = node.meta.get("val")
    if isinstance(value, (list, tuple)):
        return tuple(_value_info(f"{node.name}[{i}]", v, names) for i, v in enumerate(value))
    return (_value_info(node.name, value, names),)


def _module_stack(node: Any) -> list[tuple[str, str]] | None:
    """The node's ``nn_module_stack`` as ``[(path, class name), ...]``, outermost first."""
    stack = node.meta.get("nn_module_stack")
    if not stack:
        return None
    out = []
    for path, cls in stack.values():
        # torch fills the stack of nodes made outside any module call (sym_size) with a placeholder
        if str(path).startswith("_empty_nn_module_stack"):
            continue
        cls_name = cls if isinstance(cls, str) else getattr(cls, "__qualname__", str(cls))
        out.append((normalize_module_path(str(path)), str(cls_name).rsplit(".", 1)[-1]))
    return out


def _argument_text(value: Any, limit: int = 80) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attributes(node: Any) -> tuple[tuple[str, str], ...]:
    """The node's arguments that are not other nodes (``dim=-1``, ``alpha=0.5``), positional
    ones named by the op's schema where it has one."""
    import torch.fx

    schema = getattr(node.target, "_schema", None)
    names = [a.name for a in schema.arguments] if schema is not None else []
    out = []
    for i, arg in enumerate(node.args):
        if isinstance(arg, torch.fx.Node) or (isinstance(arg, (list, tuple)) and any(isinstance(a, torch.fx.Node) for a in arg)):
            continue
        out.append((names[i] if i < len(names) else f"arg{i}", _argument_text(arg)))
    for key, arg in node.kwargs.items():
        if not isinstance(arg, torch.fx.Node):
            out.append((key, _argument_text(arg)))
    return tuple(out)


def _inputs(node: Any) -> tuple[str, ...]:
    return tuple(arg.name for arg in node.all_input_nodes)


def fx_graph(program: Any, kind: str = "fx", dim_names: Mapping[str, str] | None = None) -> Graph:
    """The program's graph: one :class:`GraphNode` per ``call_function`` node (op =
    ``aten.linear.default``), user inputs and outputs as :class:`ValueInfo`. Parameters,
    buffers and constants are not nodes; they appear among a node's ``inputs`` by name.
    ``dim_names`` maps torch symbols (``s77``) to the user's dim names."""
    names = dict(dim_names or {})
    signature = program.graph_signature
    user_inputs = set(signature.user_inputs)
    user_outputs = {s.arg.name for s in signature.output_specs if s.kind.name == "USER_OUTPUT" and hasattr(s.arg, "name")}
    nodes: list[GraphNode] = []
    inputs: list[ValueInfo] = []
    outputs: list[ValueInfo] = []
    classes: dict[str, str] = {}
    sources: dict[str | None, str | None] = {}  # the nodes of one module call share a stack trace
    for node in program.graph.nodes:
        if node.op == "placeholder":
            if node.name in user_inputs:
                inputs.extend(_outputs(node, names))
        elif node.op == "output":
            args = node.args[0] if node.args else ()
            for arg in args if isinstance(args, (list, tuple)) else (args,):
                if getattr(arg, "name", None) in user_outputs:
                    outputs.extend(_outputs(arg, names))
        elif node.op in ("call_function", "call_method", "call_module"):
            stack = _module_stack(node)
            module, module_class = (stack[-1] if stack else ("", None)) if stack is not None else (None, None)
            classes.update(stack or ())
            target = node.target
            stack_trace = node.meta.get("stack_trace")
            if stack_trace not in sources:
                sources[stack_trace] = source_of_stack(stack_trace)
            op = getattr(target, "__name__", None) if not hasattr(target, "_schema") else str(target)
            nodes.append(
                GraphNode(
                    name=node.name,
                    op=op or str(target),
                    inputs=_inputs(node),
                    outputs=_outputs(node, names),
                    module=module,
                    module_class=module_class,
                    source=sources[stack_trace],
                    attributes=_attributes(node),
                )
            )
    return Graph(kind, tuple(nodes), tuple(inputs), tuple(outputs), tuple(classes.items()))
