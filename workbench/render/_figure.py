"""Figure helpers shared by the chart modules. Figures are built without pyplot, so nothing
is left open in its global state and a chart never shows itself."""

from __future__ import annotations

import functools
import io
from typing import Any


@functools.cache
def chart_class() -> type:
    """A matplotlib ``Figure`` that shows itself as SVG when it is a cell's value (a bare
    ``Figure`` prints ``<Figure size ...>`` unless a pyplot backend is active)."""
    from matplotlib.figure import Figure

    class Chart(Figure):
        def _repr_svg_(self) -> str:
            buffer = io.StringIO()
            self.savefig(buffer, format="svg")
            return buffer.getvalue()

    return Chart


# The width of a notebook output pane in a 1000 px JupyterLab window with the file browser open
# (~540 px): charts are drawn at it, so their SVG, scaled to the pane (width:100%), keeps its
# fonts at their size instead of shrinking a wide figure.
PANE_WIDTH = 5.6


def new_figure(width: float = PANE_WIDTH, height: float = 3.6) -> Any:
    return chart_class()(figsize=(width, height), layout="constrained")


def message_figure(text: str) -> Any:
    """A small figure that says why there is nothing to plot."""
    figure = new_figure(PANE_WIDTH, 1.2)
    ax = figure.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure
