"""Per-module alignment of two graphs: how many nodes, and which ops, each ``nn.Module``
has on the FX side and on the ONNX side."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from .model import Graph, module_ancestors

__all__ = ["fold_module", "module_rows", "module_sort_key", "module_tree", "op_summary", "short_op"]

UNKNOWN = "(unknown)"


def fold_module(path: str | None, depth: int | None) -> str:
    """A node's module path cut to ``depth`` components (``None``: kept whole);
    ``(unknown)`` when the node has no recorded module."""
    if path is None:
        return UNKNOWN
    if depth is None or not path:
        return path
    return ".".join(path.split(".")[:depth])


def op_summary(counts: Counter[str]) -> str:
    """``Counter({'MatMul': 2, 'Add': 2})`` → ``MatMul×2, Add×2`` (most frequent first)."""
    return ", ".join(f"{op}×{n}" if n > 1 else op for op, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def module_rows(fx: Graph, onnx: Graph, depth: int | None = None) -> list[dict[str, Any]]:
    """One row per module path found on either side (``""`` is the top level): module,
    module_class, fx_nodes, onnx_nodes, fx_ops, onnx_ops. Each node counts in its innermost
    module, or in its ancestor at ``depth`` when given."""
    sides: dict[str, dict[str, Counter[str]]] = {}
    for key, graph in (("fx", fx), ("onnx", onnx)):
        for node in graph.nodes:
            path = fold_module(node.module, depth)
            sides.setdefault(path, {"fx": Counter(), "onnx": Counter()})[key][short_op(node.op)] += 1
    classes = {**onnx.module_classes, **fx.module_classes}
    rows = []
    for path in sorted(sides, key=module_sort_key):
        fx_ops, onnx_ops = sides[path]["fx"], sides[path]["onnx"]
        rows.append({
            "module": path,
            "module_class": classes.get(path),
            "fx_nodes": sum(fx_ops.values()),
            "onnx_nodes": sum(onnx_ops.values()),
            "fx_ops": op_summary(fx_ops),
            "onnx_ops": op_summary(onnx_ops),
        })
    return rows


def short_op(op: str, *, namespace: bool = True) -> str:
    """``aten.linear.default`` → ``aten.linear`` (``linear`` with ``namespace=False``, as a
    graph drawing labels it); ONNX op types stay as they are."""
    short = op.removesuffix(".default")
    return short if namespace else short.removeprefix("aten.")


def module_sort_key(path: str) -> tuple[Any, ...]:
    """Model order for module paths: ``blocks.2`` before ``blocks.10``; ``(unknown)`` last."""
    if path == UNKNOWN:
        return ((2, 0, ""),)
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in path.split(".")) if path else ()


def module_tree(modules: Iterable[str]) -> dict[str, list[str]]:
    """Children of each module path (``""`` is the root) by dotted path, every ancestor
    included (``encoder`` ⊃ ``encoder.layer`` ⊃ ``encoder.layer.0``), in model order."""
    children: dict[str, set[str]] = {"": set()}
    for path in modules:
        parent = ""
        for current in module_ancestors(path):
            children.setdefault(parent, set()).add(current)
            children.setdefault(current, set())
            parent = current
    return {p: sorted(c, key=module_sort_key) for p, c in children.items()}
