"""Every use of a private torch / onnxscript API, in one place.

Each function here is covered by ``tests/exporter/test_torch_compat.py`` so that a torch
upgrade that moves or changes one of them fails loudly in one obvious test.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Any, Iterator


def tree_flatten_with_path(value: Any) -> list[tuple[tuple[Any, ...], Any]]:
    """``torch.utils._pytree.tree_flatten_with_path`` (the flattening torch.export uses)."""
    from torch.utils import _pytree

    return _pytree.tree_flatten_with_path(value)[0]


def pytree_children(value: Any) -> list[tuple[str, Any]] | None:
    """The direct children of a pytree node as ``(key, child)``; None for a leaf."""
    from torch.utils import _pytree

    from ..inputs import key_path_to_str

    if _pytree.tree_is_leaf(value):
        return None
    flat, _ = _pytree.tree_flatten_with_path(value, is_leaf=lambda node: node is not value)
    return [(key_path_to_str("", path)[1:], child) for path, child in flat]


def torch_dim_kind(value: Any) -> str | None:
    """What a ``torch.export`` dim object is: ``"hint"`` (``Dim.AUTO``/``STATIC``/``DYNAMIC``,
    class ``_DimHint``), ``"derived"`` (``2 * dx``, ``_DerivedDim``), ``"dim"`` (a named
    ``Dim``), or None for anything else."""
    from torch.export import dynamic_shapes

    if isinstance(value, dynamic_shapes._DimHint):
        return "hint"
    if isinstance(value, dynamic_shapes._DerivedDim):
        return "derived"
    if isinstance(value, dynamic_shapes.Dim):
        return "dim"
    return None


def dim_hint_policy(value: Any) -> tuple[str, Any, Any]:
    """A ``Dim.AUTO``-style hint as ``(policy name, min, max)``."""
    return value.type.name, getattr(value, "min", None), getattr(value, "max", None)


def module_state(model: Any) -> tuple:
    """A cheap fingerprint of what a capture of ``model`` depends on besides its code: the
    train/eval mode of every submodule and the identity and in-place version counter
    (``Tensor._version``) of every parameter and buffer. ``model.eval()``, swapping a
    submodule or ``load_state_dict`` all change it."""
    import torch

    if not isinstance(model, torch.nn.Module):
        return ()
    modes = tuple(module.training for module in model.modules())
    tensors = [*model.parameters(), *model.buffers()]
    return modes, tuple((id(t), t._version) for t in tensors)


def size_expression(size: Any) -> str:
    """A dim of a traced tensor as text: its sympy expression (``s77``, ``2*s77``) when it is
    a ``SymInt``, else the int."""
    node = getattr(size, "node", None)
    return str(node.expr) if node is not None else str(int(size))


def train_mode_dependent_modules() -> tuple[type, ...]:
    """Module classes whose output depends on train/eval mode (every dropout and batch norm
    variant, through their private base classes)."""
    import torch

    return (torch.nn.modules.dropout._DropoutNd, torch.nn.modules.batchnorm._BatchNorm)


@contextlib.contextmanager
def size_oblivious_capture() -> Iterator[None]:
    """Capture so that a size-0/1 example does not specialize its dim (what torch.onnx does)."""
    import torch.fx.experimental._config as fx_config

    with fx_config.patch(backed_size_oblivious=True):
        yield


# -- what torch.onnx.export's capture strategies patch (exporter/capture.py) ---------------
#
# torch.onnx.export captures under two patches plain torch.export does not apply
# (torch/onnx/_internal/exporter/_capture_strategies.py): with dynamic shapes,
# ``torch.export._patches``' while_loop decompositions of ``aten.lstm.input`` and
# ``aten.gru.input`` (the default decompositions loop in Python over the example's time steps,
# which pins the sequence length); in strict mode, ``torch.jit.isinstance`` replaced by
# ``isinstance`` (dynamo cannot trace it). torch's LSTM/GRU patch sets the op's Python kernel
# but leaves ``OpOverload._dispatch_cache`` alone, so once the op has been dispatched in a
# process (any earlier export of an RNN) the cached kernel wins and the patch does nothing:
# torch.onnx.export's second dynamic-sequence LSTM export in a process fails. The patch below
# clears that cache on entry and exit.

import threading as _threading  # noqa: E402 - this section's imports stay with it


class _SharedPatch:
    """A process-wide patch entered by the first user and undone by the last (captures may
    run in several threads; the patched state is global, so nesting is counted)."""

    def __init__(self, apply: Any) -> None:
        self._apply = apply  # () -> contextlib.AbstractContextManager
        self._lock = _threading.Lock()
        self._depth = 0
        self._stack: contextlib.ExitStack | None = None

    @property
    def active(self) -> bool:
        return self._depth > 0

    @contextlib.contextmanager
    def __call__(self) -> Iterator[None]:
        with self._lock:
            if self._depth == 0:
                stack = contextlib.ExitStack()
                try:
                    stack.enter_context(self._apply())
                except BaseException:
                    stack.close()
                    raise
                self._stack = stack
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._depth == 0 and self._stack is not None:
                    stack, self._stack = self._stack, None
                    stack.close()


def _rnn_ops() -> tuple[Any, ...]:
    import torch

    return (torch.ops.aten.lstm.input, torch.ops.aten.gru.input)


def _forget_dispatch(ops: tuple[Any, ...]) -> None:
    """Drop the kernels an ``OpOverload`` cached per dispatch key (``py_impl`` does this when
    it registers a kernel; torch's RNN patch writes ``py_kernels`` directly and does not)."""
    for op in ops:
        op._dispatch_cache.clear()


@contextlib.contextmanager
def _apply_rnn_while_loop() -> Iterator[None]:
    from torch.export._patches import (
        register_gru_while_loop_decomposition,
        register_lstm_while_loop_decomposition,
    )

    ops = _rnn_ops()
    try:
        with register_lstm_while_loop_decomposition(), register_gru_while_loop_decomposition(), _rnn_noise_hidden():
            _forget_dispatch(ops)
            yield
    finally:
        _forget_dispatch(ops)


# What torch's while_loop decompositions warn about on every capture and decomposition, which
# no user can act on: the ``torch._check_is_size`` their loop body calls (FutureWarning, from
# FX-generated code), and nn.LSTM/GRU's ``_flat_weights`` list being reassigned while tracing.
_RNN_NOISE = (
    (r"_check_is_size will be removed", FutureWarning),
    (r"The tensor attributes (self\.\S*_flat_weights\[\d+\](, )?)+ were assigned during export", UserWarning),
)


@contextlib.contextmanager
def _rnn_noise_hidden() -> Iterator[None]:
    """Hide :data:`_RNN_NOISE` by adding two exact filters and removing those same entries
    on exit (not ``warnings.catch_warnings``, which would also undo other threads' changes)."""
    import warnings

    added = []
    for message, category in _RNN_NOISE:
        warnings.filterwarnings("ignore", message=message, category=category)
        added.append(warnings.filters[0])
    try:
        yield
    finally:
        for entry in added:
            for i, current in enumerate(warnings.filters):
                if current is entry:
                    del warnings.filters[i]
                    break
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()


@contextlib.contextmanager
def _apply_jit_isinstance() -> Iterator[None]:
    import torch.jit

    original = torch.jit.isinstance
    torch.jit.isinstance = isinstance
    try:
        yield
    finally:
        torch.jit.isinstance = original


_RNN_WHILE_LOOP = _SharedPatch(_apply_rnn_while_loop)
_JIT_ISINSTANCE = _SharedPatch(_apply_jit_isinstance)


def rnn_while_loop_decompositions() -> contextlib.AbstractContextManager[None]:
    """While the block runs, ``nn.LSTM`` and ``nn.GRU`` trace as one ``while_loop`` over the
    sequence instead of a Python loop over the example's time steps, so a dynamic sequence
    length stays dynamic (``torch.export._patches``; what torch.onnx.export applies when it
    captures with dynamic shapes). The captured graph keeps ``aten.lstm``/``aten.gru``, which
    translate to ONNX's LSTM/GRU; the loop only gives them symbolic output shapes, so
    :func:`decompose_for_onnx` needs it too. Process-wide while any block is open."""
    return _RNN_WHILE_LOOP()


def rnn_while_loop_active() -> bool:
    """Whether ``aten.lstm.input`` dispatches to torch's while_loop decomposition now."""
    import torch

    from torch.export import _patches

    kernel = torch.ops.aten.lstm.input.py_kernels.get(torch._C.DispatchKey.CompositeImplicitAutograd)
    return kernel is _patches.lstm_while_loop_impl


def jit_isinstance_as_isinstance() -> contextlib.AbstractContextManager[None]:
    """While the block runs, ``torch.jit.isinstance`` is ``isinstance``: TorchDynamo (strict
    capture) cannot trace the former; torch.onnx.export's strict strategy does the same."""
    return _JIT_ISINSTANCE()


@contextlib.contextmanager
def onnx_capture_patches(dynamic_shapes: Any, *, strict: bool, rnn: bool = True) -> Iterator[None]:
    """The patches torch.onnx.export's capture strategies apply: the RNN while_loop
    decompositions when ``rnn`` and ``dynamic_shapes`` asks for any (non-empty),
    ``torch.jit.isinstance`` as ``isinstance`` when ``strict``. Everything is restored on
    exit, also after a failure."""
    with contextlib.ExitStack() as stack:
        if rnn and dynamic_shapes:
            stack.enter_context(rnn_while_loop_decompositions())
        if strict:
            stack.enter_context(jit_isinstance_as_isinstance())
        yield


def program_has_rnn(program: Any) -> bool:
    """Whether a captured program calls ``aten.lstm.input`` or ``aten.gru.input`` (also
    inside a higher-order op's subgraph)."""
    targets = set(_rnn_ops())
    return any(
        node.target in targets
        for module in program.graph_module.modules()
        if hasattr(module, "graph")
        for node in module.graph.nodes
    )


def default_opset() -> int:
    """The opset ``torch.onnx.export`` uses when none is given."""
    from torch.onnx import _constants

    return _constants.ONNX_DEFAULT_OPSET


def torchlib_min_opset() -> int:
    from torch.onnx._internal.exporter import _constants

    return _constants.TORCHLIB_OPSET


@functools.lru_cache(maxsize=4)
def onnx_registry(opset_version: int) -> Any:
    """The torchlib registry for an opset. Built once per process: ``torch.onnx.export``
    rebuilds it on every call (~0.3 s), which is the main saving on a re-export."""
    import logging

    from torch.onnx._internal.exporter import _registration

    # Without torchvision installed, torch logs one warning per torchvision op it skips.
    registration_logger = logging.getLogger(_registration.__name__)
    level = registration_logger.level
    registration_logger.setLevel(logging.ERROR)
    try:
        registry = _registration.ONNXRegistry.from_torchlib(opset_version=opset_version)
        # Our translations beyond torchlib (exporter/translations.py), registered as
        # torch.onnx.export(custom_translation_table=...) registers its entries. A translation
        # whose arguments are not tensors (map_impl's body) has no inferable ONNX signature:
        # torch logs a warning and dispatches every such node to it, which is what we want.
        from ..pipeline.translations import translation_table

        for target, translation in translation_table().items():
            registry.register_op(target, translation, is_complex=False)
        return registry
    finally:
        registration_logger.setLevel(level)


def record_onnx_node(op_type: str, *inputs: Any, num_outputs: int = 1, **attributes: Any) -> Any:
    """Inside a translation: add an ONNX node with ``num_outputs`` outputs (which onnxscript's
    ``op.Scan(...)`` cannot say) to the graph being built; returns its outputs. torchlib's own
    higher-order-op helper (``_torchlib/ops/hop.py: call_op``)."""
    from torch.onnx._internal.exporter._torchlib.ops import hop

    return hop.call_op(op_type, *inputs, _num_outputs=num_outputs, **attributes)


@functools.lru_cache(maxsize=8)
def onnx_registry_with(opset_version: int, translations: tuple[tuple[Any, Any], ...]) -> Any:
    """:func:`onnx_registry` plus more custom translations ``((target, function), ...)``, each
    winning over the registry's own (as ``custom_translation_table`` entries do). A copy, built
    once per opset and table: the shared registry is not changed."""
    import copy

    base = onnx_registry(opset_version)
    registry = copy.copy(base)
    registry.functions = {name: list(entries) for name, entries in base.functions.items()}
    for target, function in translations:
        registry.register_op(target, function, is_complex=False)
    return registry


def registered_translation(opset_version: int, target: Any) -> Any:
    """The translation :func:`onnx_registry` dispatches ``target`` (an OpOverload) to, or None."""
    entries = onnx_registry(opset_version).get_decomps(target)
    return entries[0].onnx_function if entries else None


@functools.lru_cache(maxsize=4)
def _onnx_decomposition_table(opset_version: int) -> dict:
    from torch.onnx._internal.exporter import _decomp

    registered = set(_decomp.get_onnx_implemented_overloads(onnx_registry(opset_version)))
    return _decomp.create_onnx_friendly_decomposition_table(registered)


@functools.lru_cache(maxsize=4)
def _split_onnx_decompositions(opset_version: int) -> tuple[dict, dict]:
    """The table split the way ``ExportedProgram.run_decompositions`` splits it on every call
    (composite-implicit ops apart, ~0.07 s): done once per opset instead."""
    from torch.export import exported_program

    return exported_program._split_decomp_table_to_cia_and_python_decomp(
        dict(_onnx_decomposition_table(opset_version))
    )


def decompose_for_onnx(program: Any, opset_version: int) -> Any:
    """What ``torch.onnx.export`` does between capture and translation (its
    ``_prepare_exported_program_for_export``): ONNX-friendly decompositions, explicit type
    promotion, assertion nodes removed. ``run_decompositions`` minus its per-call table
    preparation, which is done once per opset. A dynamic program with an LSTM/GRU is
    retraced under :func:`rnn_while_loop_decompositions`, as it was captured: the default
    decomposition would pin the sequence length again here, silently."""
    from torch.export import exported_program
    from torch.onnx._internal.exporter import _fx_passes

    from ..pipeline.translations import use_translated_equivalents

    composite, python = _split_onnx_decompositions(opset_version)
    rnn = bool(getattr(program, "range_constraints", None)) and program_has_rnn(program)
    drop_leftover_unbacked_symbols(program)
    with size_oblivious_capture(), (rnn_while_loop_decompositions() if rnn else contextlib.nullcontext()):
        decomposed = exported_program._decompose_exported_program(
            program,
            cia_to_decomp=dict(composite),
            python_decomp_table=dict(python),
            joint_loss_index=None,
            decompose_custom_triton_ops=False,
        )
        graph_module = decomposed.graph_module
        views_as_reshapes(graph_module)
        with unbacked_symbols_discarded(decomposed):
            _fx_passes.insert_type_promotion_nodes(graph_module)
        graph_module = _fx_passes.remove_assertion_nodes(graph_module)
        use_translated_equivalents(graph_module)  # last: no fake kernel runs on the swapped targets
        decomposed._graph_module = graph_module
    return decomposed


# -- unbacked symbols left pending between traces (decompose_for_onnx) -----------------------
#
# A program whose graph calls ``.item()`` inside a higher-order op's body (``scan`` over rows,
# each slicing ``row[:p.item()]``) gets a fresh unbacked symbol (``u6``) every time its graph is
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


def translate_to_onnx_ir(program: Any, registry: Any) -> Any:
    """Translate a decomposed ExportedProgram to an ``onnx_ir.Model``."""
    from torch.onnx._internal.exporter import _core

    return _core._exported_program_to_onnx_program(program, registry=registry).model


def optimize_onnx_ir(model: Any) -> Any:
    """The optimization ``torch.onnx.export(optimize=True)`` applies (in place; returns it)."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.optimize(model)


def onnxscript_optimizer_parts() -> dict[str, Any]:
    """What :func:`optimize_onnx_ir` is built of (onnxscript 0.7: ``optimize_ir`` with its
    defaults, then ``onnx_fusions.fuse``), for running its passes one by one
    (:mod:`exporter.passes`): onnxscript's private constant-folding pass and its size limits,
    and the default rewrite rules (``rewriter._DEFAULT_REWRITE_RULES``)."""
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding
    from onnxscript.rewriter import onnx_fusions

    return {
        "FoldConstantsPass": _constant_folding.FoldConstantsPass,
        "input_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        "output_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
        "RewritePass": rewriter.RewritePass,
        "default_rewrite_rules": rewriter._DEFAULT_REWRITE_RULES,
        "fuse": onnx_fusions.fuse,
        "fixpoint_steps": 2,  # optimize_ir(num_iterations=2, stop_if_no_change=True)
    }


def convert_onnx_version(model: Any, opset_version: int) -> Any:
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.convert_version(model, opset_version)


def draft_export_report(program: Any) -> Any:
    """The ``DraftExportReport`` attached by ``torch.export.draft_export`` (or None)."""
    return getattr(program, "_report", None)


def output_paths(program: Any) -> list[str]:
    """Readable names of a program's user outputs from its output pytree spec:
    ``output`` for a single tensor, ``output.0`` / ``logits`` for tuples / dicts."""
    from torch.utils import _pytree

    from ..inputs import key_path_to_str

    spec = program.call_spec.out_spec
    if spec is None:
        return []
    positions = _pytree.tree_unflatten(list(range(spec.num_leaves)), spec)
    flat = _pytree.tree_flatten_with_path(positions)[0]
    if len(flat) == 1 and not flat[0][0]:
        return ["output"]
    names = []
    for path, _ in flat:
        name = key_path_to_str("output", path)
        if isinstance(positions, dict):
            name = name.removeprefix("output.")
        names.append(name)
    return _present_names(positions, names)


def _present_names(positions: Any, names: list[str]) -> list[str]:
    """Outputs inside a returned KV cache read ``present.0.key``, ``present.0.value`` ...
    (the convention of onnxruntime-genai and Optimum) instead of ``cache.0.key``."""
    from torch.utils import _pytree

    caches = _pytree.tree_flatten_with_path(positions, is_leaf=lambda node: is_kv_cache_type(type(node)))[0]
    firsts = {}  # position of a cache's first leaf -> its number of leaves
    for _, node in caches:
        if is_kv_cache_type(type(node)):
            leaves = _pytree.tree_leaves(node)
            if leaves:
                firsts[leaves[0]] = len(leaves)
    if not firsts:
        return names
    out = list(names)
    only_one = len(firsts) == 1
    for number, (first, count) in enumerate(sorted(firsts.items())):
        prefix = "present" if only_one else f"present{number}"
        for position in range(first, first + count):
            rest = names[position].removeprefix(names[first].rsplit(".", 2)[0] + ".")
            out[position] = f"{prefix}.{rest}"
    return out


def rename_onnx_axes(model: Any, mapping: dict[str, str]) -> None:
    """Rename symbolic dims (and the symbols inside dim expressions) everywhere in a model."""
    from torch.onnx._internal.exporter import _ir_passes

    _ir_passes.rename_axis(model, mapping)


# -- verification (exporter/verify.py) ------------------------------------------------------


def guards_code(program: Any) -> list[str]:
    """The shape guards a program was specialized under, as torch source text
    (``L['x'].size()[0] == 3``). ``ExportedProgram._guards_code`` is private."""
    return [str(code) for code in (getattr(program, "_guards_code", None) or ())]


def tree_replace_leaves(value: Any, leaves: list[Any]) -> Any:
    """``value`` with its pytree leaves (in :func:`tree_flatten_with_path` order) replaced."""
    from torch.utils import _pytree

    _, spec = _pytree.tree_flatten(value)
    return _pytree.tree_unflatten(list(leaves), spec)


# -- shapes: guards with provenance, dim ranges (exporter/guards.py, exporter/shapes/) ----
#
# torch emits every shape guard through ``ShapeEnv._log_guard``; with
# ``torch._logging._internal.GET_DTRACE_STRUCTURED`` set it also lands on the structured-trace
# logger as ``guard_added`` with the user's frames. That flag, however, turns on *every* dtrace
# event (one ``expression_created`` record with a captured stack per symbolic operation) and
# made a small export ~10x slower here. So the collector below wraps ``_log_guard`` alone and
# reads the same data torch puts in that record: the guard, the input sources of its symbols,
# and the user frames (dynamo's ``TracingContext`` stack in strict mode, the Python stack
# outside torch in non-strict mode).

import os  # noqa: E402 - this section is appended; its imports stay with it
import sys  # noqa: E402
import threading  # noqa: E402
from dataclasses import dataclass  # noqa: E402


@dataclass(frozen=True)
class ShapeGuardEvent:
    """One guard torch's ShapeEnv added while tracing, as plain data.

    ``prefix`` is torch's: ``"eval"`` for a guard, ``"runtime_assert"`` for a deferred assert.
    ``expr`` is the sympy boolean in torch symbols (``s77 > 2``). ``sources`` maps each symbol
    to every input source equal to it (``L['x'].size()[0]``; strict mode names inputs
    ``L['flat_args'][i]``). ``frames`` are the user frames, outermost first, each
    ``(filename, line, function, code)``."""

    prefix: str
    expr: Any
    sources: tuple[tuple[str, tuple[str, ...]], ...]
    frames: tuple[tuple[str, int, str, str], ...]


_GUARD_LOCK = threading.Lock()  # installing the recorder only; recording needs no lock
_GUARD_LOCAL = threading.local()  # .sinks: this thread's open record_shape_guards lists
_GUARD_MARK = "_exporter_records_shape_guards"  # set on the installed recorder


@functools.lru_cache(maxsize=1)
def _export_dir() -> str:
    """torch.export's directory: in non-strict mode the traced code's stack ends there."""
    import torch

    return os.path.join(os.path.dirname(os.path.abspath(torch.__file__)), "export", "")


def _user_frames(limit: int = 4) -> tuple[tuple[str, int, str, str], ...]:
    """The innermost ``limit`` user frames of the code being traced, outermost first."""
    import linecache

    from torch._guards import TracingContext

    from ..frames import is_user_file

    traced = TracingContext.extract_stack()  # strict mode: dynamo's stack of the user's code
    if len(traced):
        picked = [f for f in traced if is_user_file(f.filename)][-limit:]
        return tuple((f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in picked)
    # Non-strict: the Python stack, from the guard outward to torch.export's entry (frames
    # beyond it belong to whoever called the export, not to the traced code).
    frames: list[tuple[str, int, str, str]] = []
    boundary = _export_dir()
    frame = sys._getframe(2)
    while frame is not None and len(frames) < limit:
        code = frame.f_code
        if code.co_filename.startswith(boundary) and not code.co_filename.endswith("_patches.py"):
            break  # (torch/export/_patches.py is traced code: the RNN while_loop decompositions)
        if is_user_file(code.co_filename):
            line = linecache.getline(code.co_filename, frame.f_lineno).strip()
            frames.append((code.co_filename, frame.f_lineno, code.co_name, line))
        frame = frame.f_back
    return tuple(reversed(frames))


def _guard_event(shape_env: Any, prefix: str, expr: Any) -> ShapeGuardEvent:
    import sympy

    replacements = getattr(shape_env, "replacements", {})

    def resolve(symbol: Any) -> Any:
        for _ in range(32):
            target = replacements.get(symbol)
            if not isinstance(target, sympy.Symbol) or target == symbol:
                break
            symbol = target
        return symbol

    free = expr.free_symbols
    sources: dict[str, list[str]] = {str(s): [] for s in sorted(free, key=str)}
    for source, var in getattr(shape_env, "source_to_var", {}).items():
        if var in free:
            sources[str(var)].append(source)
        elif isinstance(var, sympy.Symbol):
            target = resolve(var)
            if target in free:
                sources[str(target)].append(source)
    return ShapeGuardEvent(
        prefix,
        expr,
        tuple((k, tuple(v)) for k, v in sources.items()),
        _user_frames(),
    )


def _is_recorder(method: Any) -> bool:
    """Whether ``method`` is the recorder, or wraps it (``functools.wraps`` keeps the mark)."""
    for _ in range(64):
        if method is None:
            return False
        if getattr(method, _GUARD_MARK, False):
            return True
        method = getattr(method, "__wrapped__", None)
    return False


def _install_guard_recorder() -> None:
    """Wrap ``ShapeEnv._log_guard`` once for the life of the process (never unwrapped, so a
    plain export in another thread never sees a half-removed patch). The wrapped method is
    held in the closure; the wrapper records only in threads inside ``record_shape_guards``
    and otherwise just calls it. Installing again is a no-op while the recorder is in place,
    even under another library's wrapper."""
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    with _GUARD_LOCK:
        current = ShapeEnv.__dict__.get("_log_guard", ShapeEnv._log_guard)
        if _is_recorder(current):
            return
        original = current

        @functools.wraps(original)
        def _log_guard(self: Any, prefix: str, g: Any, *args: Any, **kwargs: Any) -> Any:
            sinks = getattr(_GUARD_LOCAL, "sinks", None)
            if sinks and "suppressed" not in prefix:
                # Recorded once even when another wrapper sits between two recorders.
                if getattr(_GUARD_LOCAL, "current", None) != (id(self), prefix, id(g)):
                    try:
                        event = _guard_event(self, prefix, g)
                    except Exception:  # noqa: BLE001 - provenance is best effort, never breaks an export
                        event = None
                    if event is not None:
                        for sink in sinks:
                            sink.append(event)
                outer = getattr(_GUARD_LOCAL, "current", None)
                _GUARD_LOCAL.current = (id(self), prefix, id(g))
                try:
                    return original(self, prefix, g, *args, **kwargs)
                finally:
                    _GUARD_LOCAL.current = outer
            return original(self, prefix, g, *args, **kwargs)

        setattr(_log_guard, _GUARD_MARK, True)
        ShapeEnv._log_guard = _log_guard


@contextlib.contextmanager
def record_shape_guards() -> Iterator[list[ShapeGuardEvent]]:
    """Collect, in a list, every shape guard and runtime assert torch adds in this thread
    while the block runs (strict, non-strict, draft export; nested blocks all receive them).
    Other threads, recording or not, are unaffected."""
    _install_guard_recorder()
    sink: list[ShapeGuardEvent] = []
    sinks = getattr(_GUARD_LOCAL, "sinks", None)
    if sinks is None:
        sinks = _GUARD_LOCAL.sinks = []
    sinks.append(sink)
    try:
        yield sink
    finally:
        for i, other in enumerate(sinks):
            if other is sink:
                del sinks[i]
                break


def pytree_keystr(key_path: tuple[Any, ...]) -> str:
    """``torch.utils._pytree.keystr``: how torch writes a key path in an input's source,
    ``[0]['key']`` for sequences and dicts, ``.b`` for namedtuple and dataclass fields."""
    from torch.utils import _pytree

    return _pytree.keystr(key_path)


def program_ranges(program: Any) -> dict[str, tuple[int, int | None]]:
    """``ExportedProgram.range_constraints`` as ``{"s77": (min, max or None)}``."""
    import sympy

    out: dict[str, tuple[int, int | None]] = {}
    for symbol, ranges in getattr(program, "range_constraints", {}).items():
        lower, upper = ranges.lower, ranges.upper

        def finite(value: Any) -> int | None:
            if isinstance(value, (int, sympy.Integer)) and not isinstance(value, bool):
                return int(value)
            return None  # int_oo / oo / -int_oo

        lo = finite(lower)
        out[str(symbol)] = (max(lo, 0) if lo is not None else 0, finite(upper))
    return out


def size_oblivious_available() -> bool:
    """Whether this torch can capture size-obliviously (keep a size-0/1 example dynamic)."""
    try:
        import torch.fx.experimental._config as fx_config
    except ImportError:  # pragma: no cover
        return False
    return hasattr(fx_config, "backed_size_oblivious")


def additional_inputs_examples(value: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]] | None:
    """The ``(args, kwargs)`` examples held by a ``torch.export.AdditionalInputs`` (else None)."""
    try:
        from torch.export import AdditionalInputs
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(value, AdditionalInputs):
        return None
    return [(tuple(args), dict(kwargs or {})) for args, kwargs in value._examples]


def clear_dim_marks(*values: Any) -> None:
    """Remove the dim markings (``_dynamo_weak_dynamic_indices`` ...) ``torch.export`` puts on
    the input tensors. A failed export leaves them behind, and a later export of the same
    tensors with ``dynamic_shapes=None`` then still treats those dims as dynamic."""
    import torch
    from torch._export.non_strict_utils import _clean_dynamic_markers

    for value in values:
        for _, leaf in tree_flatten_with_path(value):
            if isinstance(leaf, torch.Tensor):
                _clean_dynamic_markers(leaf)


def fx_node_origins(node: Any) -> tuple[str, ...]:
    """The names of the nodes an FX node was made from in the program it descends from,
    read from its ``meta["from_node"]`` provenance (``torch.fx.traceback.NodeSource``
    chains): the roots of the chain, e.g. a decomposed program's ``mul_8`` → the captured
    program's ``mul``. Empty when torch recorded none."""
    roots: list[str] = []

    def walk(sources: Any) -> None:
        for source in sources or ():
            parents = getattr(source, "from_node", None)
            if parents:
                walk(parents)
            elif getattr(source, "name", None):
                roots.append(source.name)

    walk(node.meta.get("from_node"))
    return tuple(dict.fromkeys(roots))


# -- exception types torch raises (exporter/compat/formats.py reads their text) ------------


def is_constraint_violation_error(exc: BaseException) -> bool:
    """Whether torch raised ``exc`` for a dim spec its code contradicts:
    ``torch._dynamo.exc.UserError`` of type ``UserErrorType.CONSTRAINT_VIOLATION`` (what
    ``torch.export`` raises) or ``symbolic_shapes.ConstraintViolationError`` (under it)."""
    if "torch" not in sys.modules:  # nothing torch raised can exist yet
        return False
    from torch._dynamo.exc import UserError, UserErrorType
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    if isinstance(exc, ConstraintViolationError):
        return True
    return isinstance(exc, UserError) and exc.error_type == UserErrorType.CONSTRAINT_VIOLATION


def is_data_dependent_error(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's ``GuardOnDataDependentSymNode``: a branch or size on a value
    that depends on tensor data."""
    if "torch" not in sys.modules:
        return False
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return isinstance(exc, GuardOnDataDependentSymNode)


# -- guard solving (exporter/shapes/solve.py) ----------------------------------------------


def condition_holds_on(expr: Any, symbol: Any, lo: int, hi: int | None) -> bool | None:
    """Whether the sympy boolean ``expr`` holds for every ``symbol`` in ``[lo, hi]`` (``hi``
    None: unbounded), by torch's value-range analysis (``torch.utils._sympy.value_ranges.
    bound_sympy``): True when proved, False when it fails for every size there, None when
    the analysis cannot tell."""
    import sympy
    from torch.utils._sympy.numbers import int_oo
    from torch.utils._sympy.value_ranges import ValueRanges, bound_sympy

    try:
        result = bound_sympy(expr, {symbol: ValueRanges(sympy.Integer(lo), int_oo if hi is None else sympy.Integer(hi))})
    except Exception:  # noqa: BLE001 - an expression the analysis does not cover
        return None
    if result.lower is sympy.true and result.upper is sympy.true:
        return True
    if result.lower is sympy.false and result.upper is sympy.false:
        return False
    return None


def derived_dim_parts(value: Any) -> tuple[Any, int, int]:
    """A torch derived dim (``2 * dx + 1``, class ``_DerivedDim``) as ``(root Dim, scale,
    offset)``, read from its private ``root`` and ``fn`` (a linear function of the root)."""
    root, fn = value.root, value.fn
    offset = int(fn(0))
    return root, int(fn(1)) - offset, offset


# -- KV caches: transformers' DynamicCache as a pytree (exporter/inputs.py, translate.py) ---
#
# transformers' own registration (``register_dynamic_cache_export_support``) rebuilds a
# DynamicCache in its unflatten function through ``DynamicCache(ddp_cache_data)``, whose
# ``DynamicLayer.update`` -> ``lazy_initialization`` creates ``torch.tensor([])`` and
# concatenates the cached tensors onto it. torch runs unflatten *inside* the traced region:
# once at capture (4 lifted constants for 2 layers) and again when ``run_decompositions``
# retraces the program, where the new empty tensors become ``lifted_tensor_4...`` in the
# signature without being added to ``ExportedProgram.constants`` (SpecViolationError), and
# every round adds a ``cat`` with an empty tensor. The registration below rebuilds the cache
# by setting each layer's ``keys`` / ``values``: no tensor is created, the graph reads the
# inputs directly. It flattens by layer, so the cache's leaves read ``cache.0.key``,
# ``cache.0.value``, ``cache.1.key``... and its dynamic_shapes take the legacy tuple form,
# one ``[key_dims, value_dims]`` pair per layer.

_KV_CACHE_INSTALLED: list[bool] = []


def _dynamic_cache_classes() -> tuple[type, type] | None:
    """``(DynamicCache, DynamicLayer)`` when transformers is already imported (never imports it)."""
    module = sys.modules.get("transformers.cache_utils")
    if module is None:
        return None
    cache_cls, layer_cls = getattr(module, "DynamicCache", None), getattr(module, "DynamicLayer", None)
    if cache_cls is None or layer_cls is None or not hasattr(layer_cls, "lazy_initialization"):
        return None  # a transformers without per-layer caches (< 4.55): its own registration applies
    return cache_cls, layer_cls


def _unflatten_dynamic_layer(layer_cls: type, values: list[Any]) -> Any:
    keys, values_ = values
    layer = layer_cls()
    if keys is not None:
        layer.keys, layer.values = keys, values_
        layer.dtype, layer.device = getattr(keys, "dtype", None), getattr(keys, "device", None)
        layer.is_initialized = True
    return layer


def _dynamic_cache_layers(cache: Any, layer_cls: type) -> list[Any]:
    """The layers of a DynamicCache, each a plain ``DynamicLayer`` (a sliding-window or
    quantized layer keeps state besides its tensors, which this flattening would drop)."""
    other = next((type(layer) for layer in cache.layers if type(layer) is not layer_cls), None)
    if other is not None:
        from ..errors import SpecError

        raise SpecError(
            f"the exporter flattens a DynamicCache made of {layer_cls.__name__}s only, and this one holds a "
            f"{other.__name__} (state besides its tensors)",
            hint=f"export with a cache of {layer_cls.__name__}s (DynamicCache() without a config that asks for "
            "sliding windows), or without the cache (use_cache=False)",
        )
    return list(cache.layers)


def _unflatten_dynamic_cache(cache_cls: type, layers: list[Any]) -> Any:
    cache = cache_cls()
    cache.layers = list(layers)
    return cache


def register_kv_cache_pytree() -> bool:
    """Make torch flatten transformers' ``DynamicCache`` by layer (``cache.0.key`` ...),
    rebuilding it without creating tensors (see above). Replaces transformers' registration
    for the rest of the process (torch has one registry); idempotent. False when
    transformers is not imported or has no ``DynamicLayer``."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return False
    if _KV_CACHE_INSTALLED:
        return True
    from torch.fx import _pytree as fx_pytree
    from torch.utils import _pytree

    cache_cls, layer_cls = classes
    with _GUARD_LOCK:
        if _KV_CACHE_INSTALLED:
            return True
        for cls in (cache_cls, layer_cls):
            if cls in _pytree.SUPPORTED_NODES:
                _pytree._deregister_pytree_node(cls)
            if cls in fx_pytree.SUPPORTED_NODES:  # transformers' spec flattener (by kind, not layer)
                fx_pytree._deregister_pytree_flatten_spec(cls)
        _pytree.register_pytree_node(
            layer_cls,
            lambda layer: ([layer.keys, layer.values], None),
            lambda values, _: _unflatten_dynamic_layer(layer_cls, list(values)),
            serialized_type_name=f"{layer_cls.__module__}.{layer_cls.__name__}",
            flatten_with_keys_fn=lambda layer: (
                [(_pytree.MappingKey("key"), layer.keys), (_pytree.MappingKey("value"), layer.values)], None
            ),
        )
        _pytree.register_pytree_node(
            cache_cls,
            lambda cache: (_dynamic_cache_layers(cache, layer_cls), None),
            lambda layers, _: _unflatten_dynamic_cache(cache_cls, list(layers)),
            serialized_type_name=f"{cache_cls.__module__}.{cache_cls.__name__}",
            flatten_with_keys_fn=lambda cache: (
                [(_pytree.SequenceKey(i), layer) for i, layer in enumerate(_dynamic_cache_layers(cache, layer_cls))],
                None,
            ),
        )
        _KV_CACHE_INSTALLED.append(True)
    return True


def is_kv_cache_type(cls: Any) -> bool:
    """Whether a pytree node type is a transformers KV cache (or one of its layers)."""
    module = getattr(cls, "__module__", "") or ""
    return isinstance(cls, type) and module.startswith("transformers.") and module.endswith("cache_utils")


def holds_kv_cache(value: Any, depth: int = 2) -> bool:
    """Whether ``value`` is, or holds within ``depth`` levels of dicts/lists/tuples, a
    transformers ``DynamicCache``."""
    classes = _dynamic_cache_classes()
    if classes is None:
        return False
    if isinstance(value, classes[0]):
        return True
    if depth and isinstance(value, dict):
        return any(holds_kv_cache(v, depth - 1) for v in value.values())
    if depth and isinstance(value, (list, tuple)):
        return any(holds_kv_cache(v, depth - 1) for v in value)
    return False


def prepare_kv_cache_pytree(model: Any, args: tuple, kwargs: Any) -> bool:
    """Install :func:`register_kv_cache_pytree` before inputs are flattened when they hold a
    ``DynamicCache`` or the model is a transformers model (which may return one)."""
    if "transformers.cache_utils" not in sys.modules:
        return False
    from_transformers = any(
        (getattr(cls, "__module__", "") or "").startswith("transformers.") for cls in type(model).__mro__
    )
    if from_transformers or holds_kv_cache(args, 3) or holds_kv_cache(dict(kwargs), 3):
        return register_kv_cache_pytree()
    return False


def kv_cache_leaf_names(prefix: str, value: Any) -> dict[str, str]:
    """ONNX names of the tensors inside the transformers KV caches in ``value`` (the input
    ``prefix``), by leaf path: ``cache.0.key`` -> ``past_key_values.0.key`` (with two caches,
    ``past_key_values0.`` / ``past_key_values1.``)."""
    from torch.utils import _pytree

    from ..inputs import key_path_to_str

    classes = _dynamic_cache_classes()
    if classes is None:
        return {}
    found = [
        (path, node)
        for path, node in _pytree.tree_flatten_with_path(value, is_leaf=lambda node: isinstance(node, classes[0]))[0]
        if isinstance(node, classes[0])
    ]
    out: dict[str, str] = {}
    for number, (path, cache) in enumerate(found):
        name = "past_key_values" if len(found) == 1 else f"past_key_values{number}"
        for sub, _ in _pytree.tree_flatten_with_path(cache)[0]:
            out[key_path_to_str(prefix, tuple(path) + tuple(sub))] = key_path_to_str(name, sub)
    return out


# --- model state (exporter/model_state.py) -----------------------------------------------


def trace_tensor_kind(value: Any) -> str | None:
    """What kind of tracing leftover a tensor is: ``"FakeTensor"`` (torch._subclasses), a
    ``"FunctionalTensor"`` (functionalization's wrapper), ``"functional tensor"`` (a C++
    functional wrapper), ``"meta tensor"``; None for a real tensor. A trace that stores
    such a tensor on a module leaves the module unusable for the next run or export."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    if not isinstance(value, torch.Tensor):
        return None
    if isinstance(value, FakeTensor):
        return "FakeTensor"
    if isinstance(value, FunctionalTensor):
        return "FunctionalTensor"
    if torch._is_functional_tensor(value):
        return "functional tensor"
    if value.device.type == "meta":
        return "meta tensor"
    return None
