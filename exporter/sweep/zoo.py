"""Zoos: named collections of model factories, the built-in ones in an ordered registry and
the user's own declared with :func:`zoo_entry`.

A factory is a function of no arguments that returns a :class:`~exporter.sweep.SweepCase`.
The worker process that runs a unit finds its factory again by importing the zoo's
``source``: a module name or the path of a ``.py`` file. So a factory must live in a module
or a file, not in a notebook cell::

    # my_models.py
    from exporter.sweep import SweepCase, zoo_entry

    @zoo_entry("mine")
    def tiny_mlp():
        model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.ReLU())
        return SweepCase(model, (torch.randn(2, 8),), dynamic_shapes=({0: "batch"},))

and ``exporter.sweep.sweep("my_models.py")`` or ``onnx-workbench sweep --zoo my_models.py``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import importlib
import importlib.util
import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .case import SweepCase

__all__ = ["ZOOS", "UserZoo", "Zoo", "ZooEntry", "get_zoo", "load_case", "load_source", "zoo_entry", "zoos_in"]


@dataclass(frozen=True)
class ZooEntry:
    """One model of a zoo: its ``factory`` (None when it cannot run here, and ``skip_reason``
    says why) and the ``source`` a worker imports to find it."""

    zoo: str
    name: str
    source: str
    factory: Callable[[], SweepCase] | None = None
    skip_reason: str | None = None


class Zoo(ABC):
    """A named collection of factories. Subclasses say where they live (``source``, imported
    by the worker) and list their entries; listing must be cheap (build no model)."""

    name: str
    source: str

    @abstractmethod
    def entries(self) -> tuple[ZooEntry, ...]:
        """Every model of the zoo, in a stable order."""

    def entry(self, model: str) -> ZooEntry:
        for entry in self.entries():
            if entry.name == model:
                return entry
        raise KeyError(f"zoo {self.name!r} has no model {model!r}")

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} from {self.source}>"


#: The built-in zoos, in the order a sweep of all of them runs: name → the module whose
#: ``ZOO`` it is (imported only when the zoo is asked for).
ZOOS: dict[str, str] = {
    "transformers": "exporter.sweep.zoos.transformers",
    "timm": "exporter.sweep.zoos.timm",
    "torchvision": "exporter.sweep.zoos.torchvision",
    "diffusers": "exporter.sweep.zoos.diffusers",
}


class UserZoo(Zoo):
    """A zoo filled by :func:`zoo_entry` as its module or file is imported."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = ""
        self._entries: dict[str, ZooEntry] = {}

    def add(self, entry: ZooEntry) -> None:
        self._entries[entry.name] = entry
        self.source = self.source or entry.source

    def entries(self) -> tuple[ZooEntry, ...]:
        return tuple(self._entries.values())


# The user zoos declared so far in this process, and the files loaded by path (module name →
# path): the registry the decorator writes to, as a worker re-imports the same file.
_USER_ZOOS: dict[str, UserZoo] = {}
_LOADED_FILES: dict[str, str] = {}


def _source_of(function: Callable[..., Any]) -> tuple[str, str | None]:
    """Where a worker finds ``function`` again: (source, None) or ("", why it cannot)."""
    module_name = getattr(function, "__module__", "") or ""
    if module_name in _LOADED_FILES:
        return _LOADED_FILES[module_name], None
    if module_name and module_name != "__main__":
        return module_name, None
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if path and path.endswith(".py"):
        return os.path.abspath(path), None
    return "", (f"{function.__qualname__} is defined in a notebook or an interactive session, which a worker "
                "process cannot import: put the factory in a .py file and pass its path (zoo='models.py')")


def zoo_entry(zoo: str = "user", name: str | None = None) -> Callable[[Callable[[], SweepCase]], Callable[[], SweepCase]]:
    """Declare a factory as a model of the user zoo ``zoo`` (``name``: the function's name by
    default). Returns the function unchanged."""

    def register(function: Callable[[], SweepCase]) -> Callable[[], SweepCase]:
        source, reason = _source_of(function)
        entry = ZooEntry(zoo, name or function.__name__, source, None if reason else function, reason)
        _USER_ZOOS.setdefault(zoo, UserZoo(zoo)).add(entry)
        return function

    return register


def load_source(source: str) -> Any:
    """Import a zoo's source: a module name, or a ``.py`` file by path (once per process)."""
    if not source.endswith(".py"):
        return importlib.import_module(source)
    path = os.path.abspath(source)
    module_name = "_sweep_zoo_" + Path(path).stem + "_" + hashlib.sha1(path.encode()).hexdigest()[:8]
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    _LOADED_FILES[module_name] = path
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def zoos_in(source: str) -> tuple[Zoo, ...]:
    """The zoos a module or ``.py`` file declares (with :func:`zoo_entry`, or a ``ZOO``)."""
    module = load_source(source)
    found: list[Zoo] = [z for z in _USER_ZOOS.values() if any(e.source in (source, os.path.abspath(source))
                                                               or e.source == module.__name__ for e in z.entries())]
    own = getattr(module, "ZOO", None)
    if isinstance(own, Zoo) and own not in found:
        found.insert(0, own)
    return tuple(found)


def get_zoo(name: str, source: str | None = None) -> Zoo:
    """The zoo called ``name``: a built-in one (:data:`ZOOS`), or a user zoo, after importing
    ``source`` when given (what a worker does)."""
    if source:
        for zoo in zoos_in(source):
            if zoo.name == name:
                return zoo
    if name in _USER_ZOOS:
        return _USER_ZOOS[name]
    if name in ZOOS:
        zoo = importlib.import_module(ZOOS[name]).ZOO
        assert isinstance(zoo, Zoo)
        return zoo
    known = [*ZOOS, *_USER_ZOOS]
    raise KeyError(f"no zoo {name!r}; known: {', '.join(known)} (or give the path of a .py file)")


def load_case(zoo: str, model: str, source: str | None = None) -> SweepCase:
    """Build one model of a zoo as a sweep's worker does: a fresh model and its inputs.

    >>> case = load_case("transformers", "bert")
    >>> session = exporter.export(case.model, *case.args, options=ExportOptions(
    ...     dynamic_shapes=case.dynamic_shapes), **case.kwargs)
    """
    entry = get_zoo(zoo, source).entry(model)
    if entry.factory is None:
        raise RuntimeError(entry.skip_reason or f"{zoo}/{model} cannot be built here")
    return entry.factory()


def select(entries: Iterable[ZooEntry], models: Iterable[str] | None) -> list[ZooEntry]:
    """The entries whose name matches one of ``models`` (shell patterns: ``"bert*"``), in the
    zoo's order; all of them when ``models`` is None."""
    entries = list(entries)
    if models is None:
        return entries
    patterns = list(models)
    return [e for e in entries if any(fnmatch.fnmatchcase(e.name, p) for p in patterns)]
