"""Source lines for the nodes that decomposition inlines from a captured subgraph.

A method under ``@torch.no_grad()`` (transformers' sinusoidal position tables, many
``generate`` helpers) is captured as a ``wrap_with_set_grad_enabled`` call of a subgraph whose
nodes carry the model's stack trace. Decomposition inlines the subgraph by running its
generated code, and every node it makes records that code as its trace
(``File "<eval_with_key>.76", line 18, in forward``): a failure there named no line of the
model. The generated line assigns the subgraph node's name (``index_select = torch.ops...``),
and torch.export names nodes uniquely across the program, so the captured node's trace is
found by that name and put back.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["restore_subgraph_stack_traces"]

_GENERATED = re.compile(r'File "<eval_with_key>[^"]*", line \d+, in \w+\n\s*(?P<names>[\w, ]+?)\s*=\s*')


def restore_subgraph_stack_traces(captured: Any, decomposed: Any) -> int:
    """On ``decomposed`` (a GraphModule), the trace of each node whose trace is only a
    subgraph's generated code becomes the trace of the captured subgraph node it came from;
    returns how many nodes got one. ``captured`` (the ExportedProgram's GraphModule before
    decomposition) is only read."""
    known = {node.name: node.meta["stack_trace"]
             for path, module in captured.named_modules() if path and hasattr(module, "graph")
             for node in module.graph.nodes if _is_model_trace(node.meta.get("stack_trace"))}
    if not known:
        return 0
    restored = 0
    for node in decomposed.graph.nodes:
        trace = node.meta.get("stack_trace")
        if not trace or _is_model_trace(trace):
            continue
        match = _GENERATED.search(trace)
        names = [n.strip() for n in match["names"].split(",")] if match else []
        found = next((known[n] for n in names if n in known), None)
        if found is not None:
            node.meta["stack_trace"] = found
            restored += 1
    return restored


def _is_model_trace(trace: str | None) -> bool:
    """A trace with at least one frame of a real file."""
    return trace is not None and re.search(r'File "(?!<eval_with_key>)[^"]+", line \d+', trace) is not None
