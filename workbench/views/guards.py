"""The Guards tab: every shape guard torch added while capturing, with the user's line that
added it (the core's guards table), and the charts of :mod:`workbench.render.dim_charts`.
Charts are drawn when the tab is shown, so a dim toggle only pays for the rows."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ipywidgets as widgets

from exporter.display import render
from workbench.render.dim_charts import dim_ranges_chart, guards_chart

from .blocks import figure_html, folded, pane, verdict

if TYPE_CHECKING:
    from exporter.session import Session

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
        self._session: Session | None = None
        self._drawn: Session | None = None

    def show(self, session: Session, visible: bool) -> None:
        """Remember ``session`` (its capture has run); draw now if the tab is visible."""
        self._session = session
        if visible:
            self.draw()

    def draw(self) -> None:
        session = self._session
        if session is None or session is self._drawn:
            return
        guards, dims = session.guards, session.dims
        records = tuple(guards)
        ranges = figure_html(dim_ranges_chart(dims))
        if not records:
            self.summary.value = pane(verdict("none", f"no shape guards: torch added none while capturing "
                                                      f"({guards.strategy or 'not captured'})", tone="muted"))
            self.table.value = ""
            self.charts.value = pane(folded("dim ranges chart", ranges))
            self._drawn = session
            return
        axes = {a.dotted for g in records for a in g.axes}
        self.summary.value = pane(verdict(f"{len(records)} guard{'s' if len(records) != 1 else ''}",
                                          f"on {len(axes)} input ax{'es' if len(axes) != 1 else 'is'}; "
                                          "each row names the line that added it", tone="info"))
        self.table.value = pane(*render(guards).body)
        self.charts.value = pane(folded("charts: guards per axis, dim ranges",
                                        figure_html(guards_chart(guards, dims)), ranges))
        self._drawn = session
