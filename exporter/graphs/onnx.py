"""An ``onnx_ir.Model``'s main graph as a :class:`~exporter.graphs.model.Graph`."""

from __future__ import annotations

import functools
from typing import Any

from ..compat.formats import CLASS_HIERARCHY_KEY, parse_string_list
from ..frames import source_of_stack
from ..node_metadata import NAME_SCOPES_KEY, STACK_TRACE_KEY, module_path_of, onnx_node_name
from .model import Graph, GraphNode, ValueInfo

__all__ = ["onnx_graph", "onnx_node_name"]

_CLASS_KEY = CLASS_HIERARCHY_KEY


def _dtype(value: Any) -> str | None:
    dtype = value.dtype
    return None if dtype is None else _dtype_name(dtype)


@functools.lru_cache(maxsize=64)
def _dtype_name(dtype: Any) -> str:
    """``float32``: numpy's name of an ``onnx_ir.DataType`` (there are a few dozen)."""
    try:
        return str(dtype.numpy().name)
    except Exception:  # noqa: BLE001 - types numpy lacks (bfloat16, float8...)
        return dtype.name.lower()


def _value_info(value: Any) -> ValueInfo:
    shape = value.shape
    dims = None if shape is None else tuple(_dim(d) for d in shape)
    return ValueInfo(value.name or "", _dtype(value), dims)


def _dim(dim: Any) -> int | str | None:
    """A dim as an int, its name (``batch``), or None when the model leaves it unnamed."""
    if isinstance(dim, int):
        return dim
    value = dim.value if hasattr(dim, "value") else dim
    return None if value is None else (value if isinstance(value, int) else str(value))


def _module_class(node: Any) -> str | None:
    text = node.metadata_props.get(_CLASS_KEY)
    return _module_class_of(text) if text else None


@functools.lru_cache(maxsize=4096)
def _module_class_of(text: str) -> str | None:
    """The innermost module's class in a class hierarchy as torch writes it, parsed once per
    text (the nodes of one module call share it)."""
    classes = parse_string_list(text)
    if not isinstance(classes, (list, tuple)):
        return None
    # the last entry is the aten op; the one before it the innermost module's class
    return str(classes[-2]).rsplit(".", 1)[-1] if len(classes) >= 2 else None


def _attribute_text(value: Any, limit: int = 80) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dtype"):  # a tensor attribute: its type, not its bytes
        return f"tensor {_dtype(value) or '?'}[{', '.join(str(d) for d in shape)}]"
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _attributes(node: Any) -> tuple[tuple[str, str], ...]:
    return tuple((name, _attribute_text(attr.value)) for name, attr in node.attributes.items())


def onnx_graph(model: Any, kind: str = "onnx") -> Graph:
    """The model's main graph: one :class:`GraphNode` per ONNX node (op = ``Gemm``, or
    ``domain::op`` outside the default domain), with the module path and source line the
    torch exporter recorded on it. Initializers are not nodes."""
    nodes = []
    sources: dict[str | None, str | None] = {}  # the nodes of one module call share a stack trace
    for index, node in enumerate(model.graph):
        module_text = node.metadata_props.get(NAME_SCOPES_KEY)
        module = module_path_of(module_text) if module_text else None
        stack = node.metadata_props.get(STACK_TRACE_KEY)
        if stack not in sources:
            sources[stack] = source_of_stack(stack)
        nodes.append(
            GraphNode(
                name=onnx_node_name(node, index),
                op=node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}",
                inputs=tuple((v.name or "") if v is not None else "" for v in node.inputs),
                outputs=tuple(_value_info(v) for v in node.outputs),
                module=module,
                module_class=_module_class(node) if module else None,
                source=sources[stack],
                attributes=_attributes(node),
            )
        )
    return Graph(
        kind,
        tuple(nodes),
        tuple(_value_info(v) for v in model.graph.inputs),
        tuple(_value_info(v) for v in model.graph.outputs),
    )
