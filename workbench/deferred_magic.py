"""``%onnx_export`` as ``%load_ext workbench`` registers it: a stand-in that loads the real
magic (:mod:`workbench.magics`, which imports the exporter core: ≈0.25 s of small modules) on
its first call, so loading the extension costs a few milliseconds.

The first call waits for the warm-up thread to finish importing the core, if it is at it
(:func:`workbench.warmup.wait_for_core_import`), then registers
:class:`~workbench.magics.ExportMagics` in its place and runs it;
later calls go straight to it. ``%onnx_export?`` shows the real magic's help at any time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["DeferredExportMagic", "MAGIC_NAME"]

MAGIC_NAME = "onnx_export"


class DeferredExportMagic:
    """The line-and-cell magic ``onnx_export`` until its first use (see the module docstring)."""

    def __init__(self, shell: InteractiveShell) -> None:
        self._shell = shell

    def __call__(self, line: str, cell: str | None = None) -> None:
        magic = self._load()
        if cell is None:
            magic(line)
        else:
            magic(line, cell)

    def getdoc(self) -> str | None:
        """The help of the real magic: IPython's ``%onnx_export?`` asks an object for it here."""
        from .magics import ExportMagics

        return ExportMagics.onnx_export.__doc__

    def _load(self) -> Callable[..., None]:
        from .warmup import wait_for_core_import

        wait_for_core_import()  # the warm-up thread may be importing the core right now
        from .magics import ExportMagics

        magics = ExportMagics(shell=self._shell)
        self._shell.register_magics(magics)
        return magics.onnx_export

    def register(self) -> None:
        """Register this stand-in as ``%onnx_export`` and ``%%onnx_export``."""
        manager = self._shell.magics_manager
        if manager is None:  # only before the shell is initialised
            raise RuntimeError("this IPython shell has no magics manager yet")
        manager.register_function(self, magic_kind="line_cell", magic_name=MAGIC_NAME)
