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
   (:func:`undo_retrace_work`: eval dropout, no-op ``to``, ``__and__``, shape lists with a
   ``-1``), so BERT takes this path too;
3. every ``view`` becomes a ``reshape`` (:func:`views_as_reshapes`);
4. explicit type promotion, without leaving new unbacked symbols pending;
5. assertion nodes removed;
6. custom ops with a translated equivalent call it (last: no fake kernel runs on them).
"""

from __future__ import annotations

import contextlib
from typing import Any

from .. import compat
from .local_decompositions import decomposition_tables
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
        if copied is not None and undo_retrace_work(copied.graph_module) \
                and not compat.retrace_changes_graph(copied, registry, tables, undone=_reshapes()):
            compat.name_outputs_after_their_nodes(copied)
            decomposed = copied
        else:
            decomposed = compat.run_decompositions(program, tables)
        graph_module = decomposed.graph_module
        views_as_reshapes(graph_module)
        with compat.unbacked_symbols_discarded(decomposed):
            compat.insert_type_promotion_nodes(graph_module)
        graph_module = compat.remove_assertion_nodes(graph_module)
        use_translated_equivalents(graph_module)
        compat.replace_graph_module(decomposed, graph_module)
    return decomposed


def undo_retrace_work(graph_module: Any) -> bool:
    """Do to a copied graph (in place) what the retrace would do to the ops that alone make it
    retrace transformers' models: an eval ``dropout`` is its input; ``_assert_tensor_metadata``
    goes (the assertion pass would remove it); a ``to`` that keeps dtype and device is its
    input, another one a ``_to_copy`` to its dtype; ``__and__`` is ``bitwise_and``, two-tensor
    ``min`` is ``minimum``; an in-place ``add_``/``sub_``/``mul_``/``div_`` of a fresh result
    nothing else reads is its functional op (:func:`_functional_alike`);
    ``contiguous`` is its input when that is contiguous, else a ``clone`` to the contiguous
    format, and so is a ``reshape`` to its input's own shape; ``unflatten`` and ``flatten``
    are the ``view`` to their output's shape; a ``-1`` in
    the sizes of a ``reshape`` of a non-contiguous input is the static size it stands for (so
    the optimizer sees a reshape to the same shape as one, as after a retrace), see
    :func:`_reshape_sizes`; nodes left without users go. A graph output may become another
    node: the caller renames the signature's outputs after them. False when such a ``-1``
    stands for a symbolic size, or a ``(un)flatten`` for a size no earlier node computes: the
    retrace writes that as an expression, so the caller retraces. Measured on tiny BERT,
    GPT-2, Llama, Qwen2, T5, ViT and ``nn.MultiheadAttention``: the same ONNX ops in the same
    order as after the retrace, and the same outputs."""
    import torch

    aten = torch.ops.aten
    tos = (aten.to.dtype_layout, aten.to.device, aten.to.dtype)
    in_place = _in_place_ops()
    graph = graph_module.graph
    sizes: dict[Any, Any] = {}  # a symbolic size's expression -> the first node computing it
    for node in list(graph.nodes):
        _note_size(node, sizes)
        if node.op != "call_function":
            continue
        target = node.target
        if target is aten.dropout.default and not (node.args[2] if len(node.args) > 2 else node.kwargs.get("train")):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif target is aten._assert_tensor_metadata.default and not node.users:
            graph.erase_node(node)
        elif target in tos:
            source, out = node.args[0], node.meta.get("val")
            value = getattr(source, "meta", {}).get("val")
            if out is None or value is None:
                return False
            if (out.dtype, out.device) != (value.dtype, value.device):
                node.target, node.args, node.kwargs = aten._to_copy.default, (source,), {"dtype": out.dtype}
            else:
                node.replace_all_uses_with(source)
                graph.erase_node(node)
        elif target is aten.__and__.Tensor:
            node.target = aten.bitwise_and.Tensor
        elif target is aten.min.other:
            node.target = aten.minimum.default
        elif target in in_place:
            if not _functional_alike(node):
                return False
            node.target = in_place[target]
        elif target is aten.contiguous.default:
            value = getattr(node.args[0], "meta", {}).get("val")
            if value is None or node.kwargs.get("memory_format", torch.contiguous_format) is not torch.contiguous_format:
                return False
            if not _is_contiguous(value):
                node.target, node.kwargs = aten.clone.default, {"memory_format": torch.contiguous_format}
            else:
                node.replace_all_uses_with(node.args[0])
                graph.erase_node(node)
        elif target in (aten.unflatten.int, aten.flatten.using_ints):
            shape = _output_shape(node, sizes)
            if shape is None:
                return False
            node.target, node.args, node.kwargs = aten.view.default, (node.args[0], shape), {}
        elif target is aten.reshape.default and _same_shape(node.args[0], node):
            node.replace_all_uses_with(node.args[0])
            graph.erase_node(node)
        elif target is aten.reshape.default and -1 in _size_list(node):
            resolved = _reshape_sizes(node)
            if resolved is None:
                return False
            node.args = (node.args[0], resolved, *node.args[2:])
    graph.eliminate_dead_code()
    graph_module.recompile()
    return True


def _in_place_ops() -> dict[Any, Any]:
    import torch

    aten = torch.ops.aten
    return {aten.add_.Tensor: aten.add.Tensor, aten.sub_.Tensor: aten.sub.Tensor,
            aten.mul_.Tensor: aten.mul.Tensor, aten.div_.Tensor: aten.div.Tensor}


def _functional_alike(node: Any) -> bool:
    """Whether an in-place arithmetic node computes what its functional op would, as the
    retrace's functionalization writes it: it mutates a fresh result no other node reads
    (not an input, not a view of one), and no operand would promote the result's dtype."""
    import torch

    mutated = node.args[0]
    if getattr(mutated, "op", None) != "call_function" or len(mutated.users) != 1:
        return False
    target = mutated.target
    if not isinstance(target, torch._ops.OpOverload) or any(r.alias_info for r in target._schema.returns):
        return False
    value = mutated.meta.get("val")
    if value is None:
        return False
    for operand in (*node.args[1:], *node.kwargs.values()):
        other = getattr(operand, "meta", {}).get("val") if hasattr(operand, "meta") else operand
        if isinstance(other, torch.Tensor) and other.dtype != value.dtype:
            return False
        if isinstance(other, float) and not value.dtype.is_floating_point:
            return False
    return True


def _note_size(node: Any, sizes: dict[Any, Any]) -> None:
    import torch

    value = node.meta.get("val")
    if isinstance(value, torch.SymInt):
        sizes.setdefault(value.node.expr, node)


def _output_shape(node: Any, sizes: dict[Any, Any]) -> list[Any] | None:
    """The ``view`` sizes the retrace writes for ``unflatten`` and ``flatten``: the output's
    shape, a static size as the int, a symbolic one as the earlier node that computes it
    (the retrace reuses it); None when no node does."""
    out = node.meta.get("val")
    if out is None:
        return None
    shape: list[Any] = []
    for size in out.shape:
        if isinstance(size, int):
            shape.append(size)
        elif size.node.expr in sizes:
            shape.append(sizes[size.node.expr])
        else:
            return None
    return shape


def _same_shape(source: Any, node: Any) -> bool:
    value, out = getattr(source, "meta", {}).get("val"), node.meta.get("val")
    if value is None or out is None or len(value.shape) != len(out.shape):
        return False
    return all(_expression(a) == _expression(b) for a, b in zip(value.shape, out.shape))


def _expression(size: Any) -> Any:
    return size if isinstance(size, int) else size.node.expr


def _size_list(node: Any) -> list[Any]:
    sizes = node.args[1] if len(node.args) > 1 else ()
    return list(sizes) if isinstance(sizes, (list, tuple)) else []


def _is_contiguous(value: Any) -> bool | None:
    """Whether a node's example value is contiguous; None when torch cannot say without a guard."""
    try:
        return bool(value.is_contiguous())
    except Exception:  # noqa: BLE001 - a symbolic stride torch cannot decide: the caller retraces
        return None


def _reshape_sizes(node: Any) -> list[Any] | None:
    """The size list the retrace gives a ``reshape`` with a ``-1``: ATen's reshape views a
    contiguous input with the sizes as written (the ``-1`` stays, as in ``view`` and
    ``expand``); for another input it infers the ``-1``, which the retrace writes as the
    static size it stands for, or as an expression when it is symbolic (None: retrace)."""
    source, out = getattr(node.args[0], "meta", {}).get("val"), node.meta.get("val")
    if source is None or out is None:
        return None
    contiguous = _is_contiguous(source)
    if contiguous is None:
        return None
    if contiguous:
        return _size_list(node)
    sizes = _size_list(node)
    for index, size in enumerate(sizes):
        if isinstance(size, int) and size == -1:
            if not isinstance(out.shape[index], int):
                return None
            sizes[index] = out.shape[index]
    return sizes


def _reshapes() -> frozenset[Any]:
    """``aten.reshape``: the retrace decomposes it into a ``view`` (with a ``clone`` first when
    the input is not contiguous, which ONNX does not see), and :func:`views_as_reshapes` turns
    that back into a ``reshape``."""
    import torch

    return frozenset({torch.ops.aten.reshape.default})


def views_as_reshapes(graph_module: Any) -> int:
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
    if count:
        graph_module.recompile()
    return count
