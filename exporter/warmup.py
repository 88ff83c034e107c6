"""Warm-up: pay a process's one-time export costs, in the background while the user types.

The first export in a fresh process waits for ``import torch``, onnxscript and onnxruntime,
for torchlib's registry and the ONNX decomposition table of the default opset, and for the
first run of torch.export's and the exporter's machinery. :func:`warm_up` does all of it once
(a tiny export through the exporter's own pipeline, so its per-process caches fill);
``%load_ext workbench`` runs it on a daemon thread (:mod:`workbench.warmup`, which starts the
thread without importing this package on the kernel's thread) and returns at once.

- :func:`warm_up_quietly` never raises: a failure is logged at debug level (logger
  ``exporter.warmup``) and the first real export pays the costs as it would have.
- torch's C++ libraries are loaded first with the GIL released, so the kernel keeps answering
  cells while they load (torch's import then holds it for at most ~0.1 s at a time). One C
  initialisation still holds it long: ml_dtypes' (onnx and onnx_ir import it), which
  registers its numpy dtypes for 0.6-0.7 s in one stretch (loading its library is not the
  cost: preloading it takes 2 ms and changes nothing). A cell run in that window, in the
  first seconds, waits for it.
- A user's ``import torch`` meanwhile waits for the warm-up's import to finish (Python's import
  lock) instead of importing twice. The tiny export runs on the export worker
  (:mod:`exporter.worker`) and every stage takes the session's torch lock, so it never runs
  a capture at the same time as an export of the user's through the exporter (``export()``,
  ``Session.run``, ``Session.submit``, ``%onnx_export``); a bare ``torch.export.export`` of the
  user's started within the warm-up's first seconds is not serialised with it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from . import compat
from ._quiet import captured_library_output, quiet_library_warnings
from .dims import Dim
from .masked_attention import translations
from .options import ExportOptions
from .pipeline.local_decompositions import decomposition_tables
from .pipeline.translate import registry_opset
from .pipeline.translations import onnx_registry
from .session import Session
from .worker import submit_work

__all__ = ["warm_up", "warm_up_quietly"]

_logger = logging.getLogger(__name__)


def warm_up_quietly(stopping: Callable[[], bool] = lambda: False) -> None:
    """:func:`warm_up`, never raising and never printing: what the libraries print or log on
    this thread (torch's "torchvision is not installed" while it builds the registry) would
    land in whatever cell the user is running; it goes to this module's debug log instead."""
    try:
        with quiet_library_warnings(), captured_library_output() as output:
            warm_up(stopping)
    except Exception:  # a warm-up never reaches the user's session
        _logger.debug("warm-up failed; the first export pays its one-time costs", exc_info=True)
        return
    if output.text:
        _logger.debug("the libraries said during the warm-up:\n%s", output.text)


def warm_up(stopping: Callable[[], bool] = lambda: False) -> None:
    """Import torch, onnxscript and onnxruntime, build the registries and the decomposition
    tables of the default opset, and run one tiny export on the export worker (waits for it).
    Between steps, returns early once ``stopping()`` is true."""
    for step in _STEPS:
        if stopping():
            _logger.debug("warm-up stopped before %s", step.__name__)
            return
        step()
    _logger.debug("warm-up done")


# torch's shared libraries whose loading runs no Python code, in the order torch loads them
# (``libtorch_global_deps`` globally, as torch's ``_load_global_deps`` does). libtorch_python and
# torch._C are left to the import: their initialisers call into Python.
_TORCH_LIBRARIES = (("libtorch_global_deps.so", os.RTLD_GLOBAL), ("libc10.so", os.RTLD_LOCAL),
                    ("libtorch_cpu.so", os.RTLD_LOCAL), ("libtorch.so", os.RTLD_LOCAL))


def _preload_torch_libraries() -> None:
    """Load torch's C++ libraries with the GIL released (libc's ``dlopen`` through ctypes, whose
    foreign calls release it). Python's import of an extension module holds the GIL while the
    dynamic loader maps libtorch_cpu and runs its static initialisers (0.5-1 s on a busy
    machine), and the kernel's thread could answer no cell meanwhile; ``import torch`` then
    finds them loaded. Linux only; anything unexpected leaves the work to ``import torch``."""
    import ctypes
    import importlib.util
    import sys

    if not sys.platform.startswith("linux") or "torch" in sys.modules:
        return
    spec = importlib.util.find_spec("torch")
    if spec is None or spec.origin is None:
        return
    directory = os.path.join(os.path.dirname(spec.origin), "lib")
    dlopen = ctypes.CDLL(None).dlopen
    dlopen.restype, dlopen.argtypes = ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_int]
    for name, visibility in _TORCH_LIBRARIES:
        path = os.path.join(directory, name)
        if not os.path.exists(path) or not dlopen(path.encode(), os.RTLD_NOW | visibility):
            _logger.debug("warm-up: %s not preloaded", path)
            return


# First the imports whose C initialisation holds the GIL longest (ml_dtypes, which onnx and
# onnx_ir import: 0.6-0.7 s in one stretch, measured; torch._C after the preload: under
# 0.1 s), while the user is still typing the cell after %load_ext: a cell run meanwhile waits
# for them. onnxruntime: verify's session.
_LIBRARIES = ("ml_dtypes", "torch", "onnxscript", "onnxruntime")


def _import_libraries() -> None:
    for name in _LIBRARIES:
        _import_after_others(name)


def _import_after_others(name: str, patience: float = 30.0) -> None:
    """Import ``name`` once no other thread is inside an import (holds a module lock), waiting
    up to ``patience`` seconds for that: the user's own ``import torch`` in the cell of
    ``%load_ext`` runs alone, the warm-up's import of a library then finds it in ``sys.modules``.
    An import the user starts after ours waits for it on Python's module lock. (Taking Python's
    global import lock for the whole import would serialise them fully, but any cell then
    waits seconds for it: measured.)"""
    import importlib
    import time

    deadline = time.monotonic() + patience
    while _another_thread_importing() and time.monotonic() < deadline:
        time.sleep(0.02)
    importlib.import_module(name)


def _another_thread_importing() -> bool:
    """Whether a thread other than this one holds a module lock (a snapshot of importlib's
    table of module locks)."""
    from importlib import _bootstrap

    me = threading.get_ident()
    for reference in list(_bootstrap._module_locks.values()):  # type: ignore[attr-defined]
        lock = reference()
        owner = getattr(lock, "owner", None)
        if owner and owner != me and getattr(lock, "count", 0):
            return True
    return False


def _build_registries() -> None:
    opset = registry_opset(compat.default_opset())
    registry = onnx_registry(opset)
    decomposition_tables(registry)
    onnx_registry(opset, translations(ExportOptions().fully_masked_rows, opset))


def _export_on_the_worker() -> None:
    submit_work(_tiny_export).result()


def _tiny_export() -> None:
    """A two-layer model with a dynamic batch through the whole pipeline (every stage)."""
    import torch

    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2)).eval()
    x = torch.randn(3, 4)
    session = Session(model, (x,), {}, ExportOptions(dynamic_shapes={"input": {0: Dim("batch")}}))
    result = session.run()
    _logger.debug("warm-up export: %s", result.status)


_STEPS: tuple[Callable[[], None], ...] = (_preload_torch_libraries, _import_libraries, _build_registries, _export_on_the_worker)
