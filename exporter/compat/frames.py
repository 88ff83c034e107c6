"""Which source files are the user's: one rule for error messages, guard provenance and the
first divergent node.

User code is the code the export traced and the person can change: their scripts and
notebook cells, the built-in example models (``exporter/examples.py``), and *installed*
model code such as ``transformers``. Never the user's: torch (with functorch and torchgen),
sympy, onnx, onnxscript, onnx_ir, onnxruntime, numpy, Hugging Face's ``kernels`` (the wrapper
transformers calls a layer's fallback through), this distribution (``exporter``,
``workbench``), the standard library, and synthetic files (``<frozen ...>``, ``<string>``)
other than an IPython cell whose lines linecache holds.

A library is recognized both by the directory Python imports it from and, for paths of
another environment (a traceback from elsewhere, a test), by its top-level name right after
a ``site-packages`` / ``dist-packages`` directory.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable

__all__ = ["LIBRARY_PACKAGES", "is_user_file"]

#: Top-level packages whose frames are never the user's.
LIBRARY_PACKAGES = (
    "torch", "functorch", "torchgen", "sympy", "mpmath", "onnx", "onnxscript", "onnx_ir", "onnxruntime",
    "numpy", "exporter", "workbench",
    "kernels",  # Hugging Face's hub kernels: transformers' layers call their fallback through its wrapper
)

_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # exporter/
_EXAMPLES_FILE = os.path.join(_PACKAGE_DIR, "examples.py")
_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]([^/\\]+)")


@functools.lru_cache(maxsize=1)
def _dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(the directories the library packages are imported from; the standard library's).
    Found without importing anything (``find_spec`` of a top-level name only locates it)."""
    import importlib.util
    import sysconfig

    def as_dirs(paths: Iterable[str | None]) -> tuple[str, ...]:
        return tuple(sorted({os.path.join(os.path.abspath(p), "") for p in paths if p}))

    libraries: list[str] = [_PACKAGE_DIR]
    for name in LIBRARY_PACKAGES:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is not None:
            libraries.extend(spec.submodule_search_locations or ())
    paths = sysconfig.get_paths()
    return as_dirs(libraries), as_dirs([paths.get("stdlib"), paths.get("platstdlib")])


def is_user_file(filename: str | None) -> bool:
    """Whether a frame's file is the user's code (see the module docstring for the rule)."""
    if not filename:
        return False
    if filename.startswith("<"):
        if not filename.startswith("<ipython-input-"):
            return False
        import linecache

        # not cached: a cell becomes the user's once linecache holds its lines
        return bool(linecache.getlines(filename))
    if os.path.isabs(filename):
        return _is_user_path_cached(filename)
    return _is_user_path(filename)  # relative: the answer depends on the working directory


def _is_user_path(filename: str) -> bool:
    """:func:`is_user_file` for a file on disk."""
    path = os.path.abspath(filename)
    if path == _EXAMPLES_FILE:
        return True
    installed = _INSTALLED.search(filename)
    if installed is not None:
        top = os.path.splitext(installed.group(1))[0]
        return top not in LIBRARY_PACKAGES and not path.startswith(_dirs()[0])
    libraries, stdlib = _dirs()
    return not path.startswith(libraries) and not path.startswith(stdlib)


# An absolute path's answer never changes (the library directories are found once): the
# graphs of one export ask about a few files thousands of times.
_is_user_path_cached = functools.lru_cache(maxsize=4096)(_is_user_path)
