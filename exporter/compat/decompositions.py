"""The pieces of torch.onnx's decomposition step (``_prepare_exported_program_for_export``),
each a private API: the ONNX-friendly decomposition table, the decomposition itself, the FX
passes after it, and the ShapeEnv bookkeeping a retrace needs. The stage that puts them
together is :mod:`exporter.pipeline.decompose`."""

from __future__ import annotations

import contextlib
import functools
from typing import Any

__all__ = [
    "copy_program", "drop_leftover_unbacked_symbols", "insert_type_promotion_nodes", "name_outputs_after_their_nodes",
    "onnx_decomposition_tables", "program_shape_env", "remove_assertion_nodes", "replace_graph_module", "retrace_changes_graph",
    "run_decompositions", "type_promotion_needed", "unbacked_symbols_discarded",
]


def _registered_op_count() -> int:
    """How many ops torch's dispatcher knows (~2 ms): it grows when a library registers more
    (``quantized_decomposed`` once ``torch.ao`` is imported), and the tables built from the
    ops then known are built again."""
    import torch

    return len(torch._C._dispatch_get_all_op_names())


def onnx_decomposition_table(registry: Any) -> dict[Any, Any]:
    """torch.onnx's ONNX-friendly decomposition table for a registry: every op the registry
    translates is kept whole. Built once per registry and set of registered ops."""
    return _decomposition_table(registry, _registered_op_count())


def onnx_decomposition_tables(registry: Any) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """:func:`onnx_decomposition_table` split the way ``ExportedProgram.run_decompositions``
    splits it on every call, ``(composite-implicit ops, python decompositions)`` (~0.07 s):
    done once per registry and set of registered ops instead.

    The composite-implicit part keeps only the ops whose handling differs from their own
    CompositeImplicitAutograd kernel: the ones kept whole (translated directly) and the ones
    with another decomposition. torch's table also lists ~400 ops whose entry just runs that
    kernel, which the retrace runs anyway; every entry is patched into the op's Python
    kernels and restored on every decomposition (11,000 ``py_impl`` calls, ~0.1 s of a
    tiny model's 0.12 s). Same graphs without them."""
    return _decomposition_tables(registry, _registered_op_count())


@functools.lru_cache(maxsize=4)
def _decomposition_table(registry: Any, op_count: int) -> dict[Any, Any]:
    from torch.onnx._internal.exporter import _decomp

    registered = set(_decomp.get_onnx_implemented_overloads(registry))
    return _decomp.create_onnx_friendly_decomposition_table(registered)


@functools.lru_cache(maxsize=4)
def _decomposition_tables(registry: Any, op_count: int) -> tuple[dict[Any, Any], dict[Any, Any]]:
    from torch.export import exported_program

    composite, python = exported_program._split_decomp_table_to_cia_and_python_decomp(
        dict(_decomposition_table(registry, op_count))
    )
    return {op: fn for op, fn in composite.items() if not _runs_its_own_cia_kernel(fn)}, python


def _runs_its_own_cia_kernel(decomposition: Any) -> bool:
    """Whether a composite-implicit entry is torch's "decompose with the op's own
    CompositeImplicitAutograd kernel" (``torch._export.utils._get_decomp_for_cia``)."""
    return isinstance(decomposition, functools.partial) and getattr(
        decomposition.func, "__qualname__", "") == "_get_decomp_for_cia.<locals>._special_op_to_decompose_cia"


def run_decompositions(program: Any, tables: tuple[dict[Any, Any], dict[Any, Any]]) -> Any:
    """``program.run_decompositions`` with tables already split (:func:`onnx_decomposition_tables`):
    a new ExportedProgram, retraced."""
    from torch.export import exported_program

    composite, python = tables
    return exported_program._decompose_exported_program(
        program,
        cia_to_decomp=dict(composite),
        python_decomp_table=dict(python),
        joint_loss_index=None,
        decompose_custom_triton_ops=False,
    )


def retrace_changes_graph(program: Any, registry: Any, tables: tuple[dict[Any, Any], dict[Any, Any]],
                          undone: frozenset[Any] = frozenset()) -> bool:
    """Whether :func:`run_decompositions` with ``tables`` could give ``program`` a graph other
    than its own (renamed nodes aside). It cannot when the program only lifts parameters,
    buffers and constants and only returns its outputs (nothing to functionalize), and every
    node is SymInt arithmetic or an ATen op that is functional, translated by ``registry``
    and, for a CompositeImplicitAutograd op, marked kept whole in the table (the retrace
    keeps those as they are) or in ``undone`` (ops whose decomposition the caller turns back
    into them). A higher-order op, a mutation, an op to decompose: True."""
    import operator

    import torch
    from torch._export.utils import _special_op_to_preserve_cia
    from torch.export.graph_signature import InputKind, OutputKind

    signature = program.graph_signature
    if any(spec.kind not in (InputKind.USER_INPUT, InputKind.PARAMETER, InputKind.BUFFER, InputKind.CONSTANT_TENSOR)
           for spec in signature.input_specs):
        return True
    if any(spec.kind is not OutputKind.USER_OUTPUT for spec in signature.output_specs):
        return True
    composite, _ = tables
    cia = torch._C.DispatchKey.CompositeImplicitAutograd
    for node in program.graph.nodes:
        if node.op in ("placeholder", "output", "get_attr"):
            continue
        if node.op != "call_function":
            return True
        target = node.target
        if isinstance(target, torch._ops.OpOverload):
            if target._schema.is_mutable or not registry.is_registered(target):
                return True
            if (target not in undone and torch._C._dispatch_has_kernel_for_dispatch_key(target.name(), cia)
                    and composite.get(target) is not _special_op_to_preserve_cia):
                return True
        elif not (getattr(target, "__module__", None) in (operator.__name__, "_operator", "math")
                  or target in (torch.sym_float, torch.sym_int, torch.sym_max, torch.sym_min, torch.sym_not)):
            return True
    return False


def copy_program(program: Any) -> Any:
    """A new ExportedProgram on a copy of ``program``'s graph and signature (same node names
    and metadata; parameters, buffers and constants shared), for passes that change a graph
    in place (then :func:`name_outputs_after_their_nodes`). Each copied node's
    ``meta["from_node"]`` names its original, as a retrace's nodes do."""
    import copy

    import torch
    from torch.fx.traceback import NodeSource, NodeSourceAction

    graph = copy.deepcopy(program.graph_module.graph)
    for old, new in zip(program.graph_module.graph.nodes, graph.nodes, strict=True):
        new.name = old.name  # the copy's namespace renames names such as ``input``; the signature uses them
        new.meta["from_node"] = [NodeSource(old, "copy_program", NodeSourceAction.CREATE)]
    graph_module = torch.fx.GraphModule(program.graph_module, graph)
    graph_module.meta.update(program.graph_module.meta)
    return program._update(graph_module, copy.deepcopy(program.graph_signature))


def name_outputs_after_their_nodes(program: Any) -> None:
    """After a pass made a graph output another node (an eval dropout returned, now its
    input), the signature's output names follow the output node, as after a retrace; in
    place, on a program of its own (:func:`copy_program`)."""
    from torch.export.graph_signature import TensorArgument

    [output] = [node for node in program.graph.nodes if node.op == "output"]
    for spec, node in zip(program.graph_signature.output_specs, output.args[0], strict=True):
        if isinstance(spec.arg, TensorArgument) and hasattr(node, "name"):
            spec.arg.name = node.name


def insert_type_promotion_nodes(graph_module: Any) -> None:
    """torch.onnx's explicit type promotion (in place): ONNX ops do not promote their inputs.
    Re-runs the graph's nodes on fake tensors, without autograd: with it, a ``scan`` over
    inputs that require grad (a model's parameters) runs its autograd path, whose partitioned
    body also returns the sizes it saves for backward, and scan's fake kernel fails stacking
    them ("'SymInt' object has no attribute 'unsqueeze'"; Mamba's selective scan as a scan).
    Skipped when the graph's recorded values show no node it would change
    (:func:`type_promotion_needed`): re-running the graph is most of decompose's time."""
    import torch
    from torch.onnx._internal.exporter import _fx_passes

    if not type_promotion_needed(graph_module):
        return
    with torch.no_grad():
        _fx_passes.insert_type_promotion_nodes(graph_module)


def type_promotion_needed(graph_module: Any) -> bool:
    """Whether torch.onnx's type-promotion pass would insert a cast anywhere in
    ``graph_module``: its own rules asked of every node, on the ``meta["val"]`` values the
    graph carries, for an argument whose dtype is not the promoted one (the pass's
    ``_maybe_promote_arg``). True when that cannot be told: a value missing, a nested graph
    (a higher-order op's body), a rule that fails on them."""
    import torch
    from torch.onnx._internal.fx import type_utils
    from torch.onnx._internal.fx.passes import type_promotion

    if any(module is not graph_module for module in graph_module.modules()):
        return True
    table = type_promotion.TypePromotionTable()
    for node in graph_module.graph.nodes:
        if node.op != "call_function" or (rule := type_promotion.get_type_promotion_rule(node, table)) is None:
            continue
        values = [n.meta.get("val") for n in node.all_input_nodes]
        if any(v is None for v in values):
            return True
        try:
            args, kwargs = torch.fx.node.map_arg((node.args, node.kwargs), lambda n: n.meta["val"])
            info = rule.preview_type_promotion(args, kwargs)
        except Exception:  # noqa: BLE001 - the pass itself will say what is wrong
            return True
        wanted = [(arg, info.args_dtypes.get(i)) for i, arg in enumerate(node.args)]
        wanted += [(arg, info.kwargs_dtypes.get(name)) for name, arg in node.kwargs.items()]
        if any(_would_promote(arg, dtype, type_utils) for arg, dtype in wanted):
            return True
    return False


def _would_promote(arg: Any, dtype: Any, type_utils: Any) -> bool:
    """The pass's ``_maybe_promote_arg``: would it put a cast on ``arg`` for ``dtype``?"""
    import torch

    if dtype is None:
        return False
    if isinstance(arg, torch.fx.Node):
        value = arg.meta["val"]
        if isinstance(value, torch.Tensor):
            return value.dtype != dtype
        if type_utils.is_torch_symbolic_type(value):
            return type_utils.from_scalar_type_to_torch_dtype(type(value)) != dtype
        return False
    if (equivalent := type_utils.from_scalar_type_to_torch_dtype(type(arg))) is not None:
        return equivalent != dtype
    if isinstance(arg, (tuple, list)):
        return any(_would_promote(item, dtype, type_utils) for item in arg)
    return False


def remove_assertion_nodes(graph_module: Any) -> Any:
    """torch.onnx's removal of runtime assertion nodes (ONNX has none); returns the graph module."""
    from torch.onnx._internal.exporter import _fx_passes

    return _fx_passes.remove_assertion_nodes(graph_module)


def replace_graph_module(program: Any, graph_module: Any) -> None:
    """Make ``graph_module`` the graph module of ``program`` (its private ``_graph_module``,
    as torch.onnx does after its passes)."""
    program._graph_module = graph_module


# Unbacked symbols left pending between traces. A program whose graph calls ``.item()``
# inside a higher-order op's body (``scan`` over rows, each slicing ``row[:p.item()]``) gets a fresh unbacked symbol (``u6``) every time its graph is
# re-run on fake tensors. torch.onnx's type-promotion pass re-runs it outside any trace, so the
# symbol stays in the ShapeEnv's ``pending_fresh_unbacked_symbols`` list, which the program
# shares with everything decomposed from it. The next retrace of the same program (a second
# decomposition, by us or by torch.onnx.export) then fails on the first node it binds:
# ``PendingUnbackedSymbolNotFound: Pending unbacked symbols {u6} not in returned outputs``.


def program_shape_env(program: Any) -> Any:
    """The ShapeEnv of a program's fake tensors (placeholders' ``meta["val"]``), or None."""
    from torch._guards import detect_fake_mode

    values = [node.meta.get("val") for node in program.graph.nodes if node.op == "placeholder"]
    fake_mode = detect_fake_mode(values)
    return getattr(fake_mode, "shape_env", None)


def drop_leftover_unbacked_symbols(program: Any) -> int:
    """Clear the unbacked symbols an earlier, finished re-run of ``program``'s graph left
    pending (see above; no trace is running, so nothing can claim them any more): a retrace
    would fail on them. Returns how many."""
    env = program_shape_env(program)
    pending = getattr(env, "pending_fresh_unbacked_symbols", None)
    if not pending:
        return 0
    count = len(pending)
    pending.clear()
    return count


def unbacked_symbols_discarded(program: Any) -> contextlib.AbstractContextManager[None]:
    """While the block runs, unbacked symbols created in this thread are not left pending
    in ``program``'s ShapeEnv (``ShapeEnv.ignore_fresh_unbacked_symbols``): for passes that
    re-run a graph's nodes on fake tensors only to read their types."""
    env = program_shape_env(program)
    return env.ignore_fresh_unbacked_symbols() if env is not None else contextlib.nullcontext()
