"""The patches torch.onnx.export's capture strategies apply, applied the same way by our capture."""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Iterator

from .shared_patch import shared_patch

__all__ = [
    "jit_isinstance_as_isinstance", "onnx_capture_patches", "program_has_rnn", "rnn_while_loop_active",
    "rnn_while_loop_decompositions", "scan",
]


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


class _SharedPatch:
    """A process-wide patch entered by the first user and undone by the last (captures may
    run in several threads; the patched state is global, so nesting is counted)."""

    def __init__(self, apply: Any) -> None:
        self._apply = apply  # () -> contextlib.AbstractContextManager
        self._lock = threading.Lock()
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
        filters: Any = warnings.filters  # the list itself (typeshed declares a read-only Sequence)
        for entry in added:
            for i, current in enumerate(filters):
                if current is entry:
                    del filters[i]
                    break
        mutated = getattr(warnings, "_filters_mutated", None)
        if mutated is not None:
            mutated()


_RNN_WHILE_LOOP = _SharedPatch(_apply_rnn_while_loop)


def rnn_while_loop_decompositions() -> contextlib.AbstractContextManager[None]:
    """While the block runs, ``nn.LSTM`` and ``nn.GRU`` trace as one ``while_loop`` over the
    sequence instead of a Python loop over the example's time steps, so a dynamic sequence
    length stays dynamic (``torch.export._patches``; what torch.onnx.export applies when it
    captures with dynamic shapes). The captured graph keeps ``aten.lstm``/``aten.gru``, which
    translate to ONNX's LSTM/GRU; the loop only gives them symbolic output shapes, so
    the decompose stage (:mod:`exporter.pipeline.decompose`) needs it too. Process-wide while any block is open."""
    return _RNN_WHILE_LOOP()


def rnn_while_loop_active() -> bool:
    """Whether ``aten.lstm.input`` dispatches to torch's while_loop decomposition now."""
    import torch

    from torch.export import _patches

    kernel = torch.ops.aten.lstm.input.py_kernels.get(torch._C.DispatchKey.CompositeImplicitAutograd)
    return kernel is _patches.lstm_while_loop_impl


def jit_isinstance_as_isinstance() -> contextlib.AbstractContextManager[None]:
    """While the block runs, ``torch.jit.isinstance`` answers as ``isinstance`` for this job
    (:func:`~exporter.compat.shared_patch.shared_patch`): TorchDynamo (strict capture) cannot
    trace the former; torch.onnx.export's strict strategy replaces it for the whole process,
    where the user's code in another thread would get ``isinstance``'s TypeError for
    ``torch.jit.isinstance(x, List[int])``."""
    import torch.jit

    return shared_patch(torch.jit, "isinstance", lambda original: isinstance)


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


def scan(combine_fn: Any, init: Any, xs: Any) -> Any:
    """``torch._higher_order_ops.scan.scan``: ``combine_fn(carry, x) -> (carry, y)`` over the
    first dim of ``xs``, giving ``(last carry, ys stacked)``. torch.export captures it as one
    ``higher_order.scan`` node, whatever the length (a Python loop unrolls and pins it); the
    ONNX translation is a ``Scan``. Used by model patches that rewrite a loop over a sequence."""
    from torch._higher_order_ops.scan import scan as torch_scan

    return torch_scan(combine_fn, init, xs)
