"""The Guards tab: every shape guard and runtime assert torch added while capturing, with the
user's file, line and code (``session.guards.to_frame()``), and the dim-range and
guards-per-axis charts of :mod:`workbench.render.dim_charts`. Charts are drawn when the tab is
shown, so a dim toggle only pays for the rows."""

from __future__ import annotations

from typing import Any

import ipywidgets as widgets

from ._html import figure_svg, frame_html, note, pre

__all__ = ["GuardsView"]


class GuardsView:
    title = "Guards"

    def __init__(self) -> None:
        self.summary = widgets.HTML()
        self.table = widgets.HTML()
        self.table.add_class("wb-guards-table")
        self.charts = widgets.HTML()
        self.charts.add_class("wb-guards-charts")
        self.widget = widgets.VBox([self.summary, self.table, self.charts])
        self._session: Any = None
        self._drawn: Any = None

    def show(self, session: Any, visible: bool) -> None:
        """Remember ``session`` (its capture has run); draw now if the tab is visible."""
        self._session = session
        if visible:
            self.draw()

    def draw(self) -> None:
        session = self._session
        if session is None or session is self._drawn:
            return
        guards = session.guards
        self.summary.value = pre(guards.summary().splitlines()[0]) if len(guards) else note(guards.summary())
        self.table.value = frame_html(guards.to_frame()[["kind", "expression", "axes", "file", "line", "code"]])
        from workbench.render.dim_charts import dim_ranges_chart, guards_chart

        dims = session.dims
        self.charts.value = figure_svg(dim_ranges_chart(dims)) + figure_svg(guards_chart(guards, dims))
        self._drawn = session
