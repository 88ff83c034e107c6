"""The tabs that show analyses, declared like the analyses themselves.

A tab of the workbench is a :class:`View`: a ``title`` and a ``widget``. The tabs that show
analysis results are :class:`AnalysisView` s: they name the analyses they show (``analyses``,
names in :data:`exporter.analyses.ANALYSES`), draw a result (``show(name, result, current)``,
``current`` False when the result is of an earlier spec than the one on screen) and say when
nothing has run (``not_run()``). :data:`ANALYSIS_VIEWS` is the ordered registry of their
factories, each called with ``run(name, **options)`` (what a button calls to run an analysis
in the background). The Workbench puts one tab per factory after its own four (Stages, Dims,
Guards, Graphs), so adding an analysis with a tab is the analysis's module and its view's::

    class NodeCountView:
        title, analyses = "Nodes", ("node_count",)

        def __init__(self, run):
            self.button = widgets.Button(description="Count")
            self.button.on_click(lambda _: run("node_count"))
            self.text = widgets.HTML()
            self.widget = widgets.VBox([self.button, self.text])

        def show(self, name, result, current):
            self.text.value = f"{result.count} nodes" + ("" if current else " (an earlier spec)")

        def not_run(self):
            self.text.value = "not run"

    ANALYSIS_VIEWS.register(NodeCountView)
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any, Protocol

import ipywidgets as widgets

from .benchmark import BenchmarkView
from .verify import VerifyView

__all__ = ["ANALYSIS_VIEWS", "AnalysisView", "AnalysisViews", "View"]


class View(Protocol):
    """A tab: its title and its widget."""

    @property
    def title(self) -> str: ...

    @property
    def widget(self) -> widgets.Widget: ...


class AnalysisView(View, Protocol):
    """A tab that shows the results of some analyses."""

    @property
    def analyses(self) -> tuple[str, ...]:
        """The names of the analyses it shows (in :data:`exporter.analyses.ANALYSES`)."""
        ...

    def show(self, name: str, result: Any, current: bool) -> None:
        """Draw ``result`` of the analysis ``name``; ``current`` False: of an earlier spec.
        A view whose class sets ``takes_verdict = True`` is also given ``verdict=``, the
        :class:`~exporter.verdict.ExportVerdict` of the export the result ran on (the
        Benchmark tab: green only for a model verified as passed)."""
        ...

    def not_run(self) -> None:
        """None of its analyses has run on the session on screen."""
        ...


ViewFactory = Callable[[Callable[..., None]], AnalysisView]
"""Builds an analysis tab given ``run(name, **options)``."""


class AnalysisViews:
    """The ordered registry of analysis tabs (their factories, e.g. the view classes)."""

    def __init__(self, *factories: ViewFactory) -> None:
        self._factories: list[ViewFactory] = []
        for factory in factories:
            self.register(factory)

    def register(self, factory: ViewFactory) -> ViewFactory:
        """Add a tab after the others; returns ``factory`` (so it decorates a view class)."""
        if factory in self._factories:
            raise ValueError(f"{factory!r} is registered already")
        self._factories.append(factory)
        return factory

    def unregister(self, factory: ViewFactory) -> None:
        self._factories.remove(factory)

    def __iter__(self) -> Iterator[ViewFactory]:
        return iter(tuple(self._factories))

    def __len__(self) -> int:
        return len(self._factories)


ANALYSIS_VIEWS = AnalysisViews(VerifyView, BenchmarkView)
