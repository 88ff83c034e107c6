"""The seam between results and their presentation: results inherit :class:`Presentable`,
the builders (:mod:`exporter.display.sections`) register how each result type lowers to blocks.

A result never imports its builder (that would point an arrow up); the builder, above it,
registers for the result's type (the class, or its qualified name ``exporter.guards.Guards``),
as treescope registers formatters by type, and :func:`lower` finds it through the result's
class::

    # exporter/display/sections/shapes.py
    @presents(Guards)
    def guards_section(guards: Guards) -> Section: ...

    # exporter/guards.py
    @dataclass(frozen=True, repr=False)      # repr=False: the mixin's __repr__ stays
    class Guards(Presentable): ...

``summary()``, ``__repr__``, ``_repr_pretty_`` (IPython's text) and ``_repr_html_`` then all
come from the one section. This module imports nothing from the project at import time; the
first lookup that finds no builder loads the builders' modules (:data:`BUILDER_MODULES`) by
name, as plugins are loaded, so a result shows itself whichever module it was imported from.
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["BUILDER_MODULES", "Presentable", "builder_for", "lower", "presents", "registered", "set_html_renderer"]

_BUILDERS: dict[str, Callable[[Any], Any]] = {}
_HTML: list[Callable[[Any], str]] = []

BUILDER_MODULES = ("exporter.display.sections", "exporter.recording.present")
"""Where the builders live (and the HTML renderer, which they import): loaded on first need.
The recordings' builders sit in their package (from display.sections they would close an import
cycle through the session's report)."""
_loaded = threading.Event()
_loading = threading.Lock()


def _load_builders() -> None:
    if _loaded.is_set():
        return
    with _loading:
        if not _loaded.is_set():
            for module in BUILDER_MODULES:
                importlib.import_module(module)
            _loaded.set()

Builder = TypeVar("Builder", bound=Callable[..., Any])


def _name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def presents(*types: type | str) -> Callable[[Builder], Builder]:
    """Register the decorated function as the builder (result → Section) of the types given
    (classes, or their qualified names); the function is returned unchanged."""

    def register(builder: Builder) -> Builder:
        for kind in types:
            _BUILDERS[kind if isinstance(kind, str) else _name(kind)] = builder
        return builder

    return register


def registered() -> tuple[str, ...]:
    """The qualified names of every type with a registered builder."""
    _load_builders()
    return tuple(_BUILDERS)


def builder_for(obj: Any) -> Callable[[Any], Any] | None:
    """The builder registered for ``obj``'s type or its nearest base; None if there is none."""
    for attempt in range(2):
        for cls in type(obj).__mro__:
            builder = _BUILDERS.get(_name(cls))
            if builder is not None:
                return builder
        if attempt or _loaded.is_set():
            break
        _load_builders()
    return None


def lower(obj: Any) -> Any:
    """``obj`` as its Section. Raises ``TypeError`` when no builder is registered for it."""
    builder = builder_for(obj)
    if builder is None:
        raise TypeError(f"no display for {type(obj).__name__}")
    return builder(obj)


def set_html_renderer(render: Callable[[Any], str]) -> None:
    """The renderer's ``obj → HTML`` that never raises (:func:`exporter.display.repr_html`)."""
    _HTML[:] = [render]


class Presentable:
    """Text and HTML representations of a result, all from the section its builder makes."""

    __slots__ = ()

    def summary(self) -> str:
        """The result as plain text (the text renderer of its section)."""
        return lower(self).to_text()

    def __repr__(self) -> str:
        try:
            return self.summary()
        except Exception as exc:  # noqa: BLE001 - a repr never raises
            return f"<{type(self).__name__}: could not be shown ({type(exc).__name__}: {exc})>"

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(repr(self))

    def _repr_html_(self) -> str | None:
        _load_builders()
        return _HTML[0](self) if _HTML else None
