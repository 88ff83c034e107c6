"""Figure helpers shared by the chart modules. Figures are built without pyplot, so nothing
is left open in its global state and a chart never shows itself."""

from __future__ import annotations

from typing import Any


def new_figure(width: float = 6.4, height: float = 3.6) -> Any:
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), layout="constrained")


def message_figure(text: str) -> Any:
    """A small figure that says why there is nothing to plot."""
    figure = new_figure(6.4, 1.2)
    ax = figure.add_subplot()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", wrap=True)
    return figure
