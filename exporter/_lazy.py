"""Package ``__init__``s that import nothing when they run (PEP 562).

A package ``__init__`` that imports its submodules runs whenever *any* of its submodules is
imported, before it; if one of them imports back into the package, two threads importing the
package at once (the workbench's warm-up and a notebook's first ``%onnx_export``) can meet in
that cycle and one of them gets a partially initialised module. A lazy ``__init__`` declares
its public names and where they live; each is imported on first access::

    _EXPORTS = {"export": ".api", "Dim": ".dims"}
    __getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

``tests/test_architecture.py`` reads the ``_EXPORTS`` literal, so its import graph still
knows where ``from exporter import export`` leads.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: a name in ``exports`` is imported from its
    module (relative to ``package``) on first access and kept on the package; any other name
    that is a submodule is imported as ``import package.name`` would."""

    def __getattr__(name: str) -> Any:
        where = exports.get(name)
        if where is not None:
            value = getattr(importlib.import_module(where, package), name)
        elif not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(exports))

    return __getattr__, __dir__
