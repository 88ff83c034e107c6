"""Where each input axis sits in an ``ExportedProgram``: its placeholder node, its torch symbol
(``s77``) or static size, and the ONNX dim name the translation gives that symbol.

Read by translate (to name the ONNX dims), verify and the dim outcomes; imports nothing above
the spec and the inputs.
"""

from __future__ import annotations

from typing import Any

from . import compat
from .dims import Dim, DimSpec
from .dims.model import default_dim_name
from .inputs import BoundInputs

__all__ = ["dim_names", "input_placeholders", "symbol_of", "user_input_names"]


def user_input_names(program: Any) -> tuple[str | None, ...]:
    """The placeholder names of the program's user inputs, in order (``graph_signature.user_inputs``)."""
    return tuple(program.graph_signature.user_inputs)


def input_placeholders(program: Any, bound: BoundInputs) -> dict[str, Any]:
    """The program's placeholder node of every tensor input, by input path."""
    placeholders = user_input_names(program)
    nodes = {node.name: node for node in program.graph.nodes if node.op == "placeholder"}
    return {
        leaf.path: nodes[placeholders[leaf.index]]
        for leaf in bound.leaves
        if leaf.index < len(placeholders) and placeholders[leaf.index] in nodes
    }


def symbol_of(program: Any, bound: BoundInputs) -> dict[tuple[str, int], str]:
    """The symbol (``s77``) or static size (``"4"``) of every input axis in the program."""
    out: dict[tuple[str, int], str] = {}
    for path, node in input_placeholders(program, bound).items():
        value = node.meta.get("val")
        if value is None:
            continue
        for axis, size in enumerate(value.shape):
            out[(path, axis)] = compat.size_expression(size)
    return out


def dim_names(
    program: Any, bound: BoundInputs, spec: DimSpec, symbols: dict[tuple[str, int], str] | None = None
) -> dict[str, str]:
    """Map torch symbols to ONNX dim names: the user's Dim name, else ``<input>_dim<axis>``
    (``dims.model.default_dim_name``). ``symbols``: ``symbol_of(program, bound)`` if known."""
    symbols = symbol_of(program, bound) if symbols is None else symbols
    mapping: dict[str, str] = {}
    named = [e for e in spec if isinstance(e.policy, Dim)]
    unnamed_axes = [key for key in symbols if not any((e.path, e.axis) == key for e in named)]
    for entry in named:
        symbol = symbols.get((entry.path, entry.axis))
        if symbol and (symbol.isidentifier() or not symbol.lstrip("-").isdigit()):
            # An expression too (``s1 + s2``: the code made this axis the sum of two others):
            # the ONNX dim takes the name asked for, as in torch.onnx.export.
            mapping.setdefault(symbol, entry.policy.name)
    for path, axis in unnamed_axes:
        symbol = symbols[(path, axis)]
        if symbol.isidentifier() and symbol not in mapping:
            mapping[symbol] = default_dim_name(path, axis)
    return mapping
