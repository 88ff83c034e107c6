"""Jupyter front end of the ONNX export workbench.

::

    %load_ext workbench
    %onnx_export --dynamic x.0=batch model(x)

``%load_ext workbench`` registers the ``%onnx_export`` magic and imports no torch, onnxscript,
onnxruntime or ipywidgets on the kernel's thread, nor the exporter core (the magic loads it
on its first call: :mod:`workbench.deferred_magic`); it starts a background warm-up that
imports them and runs a tiny export while the user types (:mod:`workbench.warmup`; skipped
with ``ONNX_WORKBENCH_WARMUP=0``). ``workbench.Workbench(session)`` is the widget the magic
displays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .deferred_magic import DeferredExportMagic
from .warmup import start_warmup

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

    from .app import Workbench

__all__ = ["Workbench", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: InteractiveShell) -> None:
    """Register ``%onnx_export`` / ``%%onnx_export`` (called by ``%load_ext workbench``) and
    start the export warm-up in the background (:func:`workbench.warmup.start_warmup`)."""
    DeferredExportMagic(ipython).register()
    start_warmup()


def unload_ipython_extension(ipython: InteractiveShell) -> None:
    """Nothing to undo: magics stay registered until the kernel restarts, as IPython's own do."""


def __getattr__(name: str) -> type[Workbench]:
    if name == "Workbench":  # ipywidgets loads only when the widget is asked for
        from .app import Workbench

        return Workbench
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")
