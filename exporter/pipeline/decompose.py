"""The decompose stage: a captured ExportedProgram made ready for ONNX translation.

What ``torch.onnx.export`` does between capture and translation (its
``_prepare_exported_program_for_export``), plus what a re-export and a dynamic program need:

1. unbacked symbols an earlier re-run of the program's graph left pending are dropped (a
   retrace would fail on them);
2. ONNX-friendly decompositions: every op the registry translates is kept whole (the table is
   built and split once per registry, not on every call as ``run_decompositions`` does; the
   few ops torch decomposes into a graph it cannot run again use :mod:`.local_decompositions`),
   retraced size-obliviously, and under the RNN while_loop decompositions when the program is
   dynamic and has an LSTM/GRU (as it was captured: the default decomposition would pin the
   sequence length again here, silently). When the retrace cannot change the graph (every
   op is functional and translated whole: :func:`~exporter.compat.retrace_changes_graph`),
   a copy of the graph takes its place: the same ONNX model but for node names, which stay
   those of the captured graph, at a fraction of the time (the demo block: 0.47 -> 0.11 s).
   The copy first gets what the retrace would do to the few ops that otherwise force one
   (:mod:`.retrace_work`: eval dropout and batch norm, no-op ``to``, in-place activations,
   ``flatten``, shape lists with a ``-1``...), so transformers' and torchvision's models take
   this path too;
3. every ``view`` becomes a ``reshape`` (:func:`views_as_reshapes`);
4. explicit type promotion, without leaving new unbacked symbols pending (skipped when no
   node needs a cast: :func:`~exporter.compat.type_promotion_needed`);
5. assertion nodes removed;
6. custom ops with a translated equivalent call it (last: no fake kernel runs on them);
7. the nodes inlined from a ``torch.no_grad()`` subgraph get back the model's source line
   (:mod:`.subgraph_traces`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import compat
from .local_decompositions import decomposition_tables
from .retrace_work import undo_retrace_work, undone
from .subgraph_traces import restore_subgraph_stack_traces
from .translations import onnx_registry, use_translated_equivalents

__all__ = ["decompose", "undo_retrace_work", "views_as_reshapes"]


def decompose(program: Any, opset_version: int) -> Any:
    """``program`` (an ExportedProgram) decomposed for ONNX translation at ``opset_version``:
    a new ExportedProgram; ``program`` is left as it was."""
    registry = onnx_registry(opset_version)
    tables = decomposition_tables(registry)
    rnn = bool(program.range_constraints) and compat.program_has_rnn(program)
    compat.drop_leftover_unbacked_symbols(program)
    rnn_loops = compat.rnn_while_loop_decompositions() if rnn else contextlib.nullcontext()
    with compat.size_oblivious_capture(), rnn_loops:
        copied = None if rnn else compat.copy_program(program)
        if copied is not None and undo_retrace_work(copied.graph_module, recompile=False) \
                and not compat.retrace_changes_graph(copied, registry, tables, undone=undone()):
            compat.name_outputs_after_their_nodes(copied)
            decomposed = copied
        else:
            decomposed = compat.run_decompositions(program, tables)
        graph_module = decomposed.graph_module
        views_as_reshapes(graph_module, recompile=False)  # remove_assertion_nodes recompiles
        with compat.unbacked_symbols_discarded(decomposed):
            compat.insert_type_promotion_nodes(graph_module)
        graph_module = compat.remove_assertion_nodes(graph_module)
        use_translated_equivalents(graph_module)
        restore_subgraph_stack_traces(program.graph_module, graph_module)
        compat.replace_graph_module(decomposed, graph_module)
    return decomposed


def views_as_reshapes(graph_module: Any, *, recompile: bool = True) -> int:
    """Turn every ``aten.view`` of a decomposed graph into ``aten.reshape`` (in place; returns
    how many). ONNX has no strides: both become ``Reshape``. But torch.onnx's type-promotion
    pass re-runs the graph on fresh fake tensors, whose strides can differ from those seen
    at capture: a ``.contiguous()`` or ``reshape`` that was a no-op at capture (so recorded
    as nothing, or as a ``view``) then meets a non-contiguous input, and the ``view`` fails
    with "Cannot view a tensor with shape ... and strides ..." (T5's attention output, GPT-2's
    ``x.view(-1, x.size(-1))`` after SDPA). The graph is functional after decomposition, so a
    view aliases nothing a reshape would not."""
    import torch

    view, reshape = torch.ops.aten.view.default, torch.ops.aten.reshape.default
    count = 0
    for node in graph_module.graph.nodes:
        if node.op == "call_function" and node.target is view:
            node.target = reshape
            count += 1
    if count and recompile:
        graph_module.recompile()
    return count
