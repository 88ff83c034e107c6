"""The Graphs tab: the FX and ONNX graphs side by side (``workbench.render.graph_view``) when
that module is installed, a placeholder otherwise. Drawn on request: Graphviz layout of a big
model takes seconds."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from .blocks import esc, failure_html, pane, verdict

__all__ = ["GraphsView", "graph_renderer"]

PLACEHOLDER = "The FX ↔ ONNX graph view is not available in this installation."


def graph_renderer() -> Callable[..., Any] | None:
    """``side_by_side(session, expand=, select=, overlay=)`` if importable, else None."""
    try:
        from workbench.render.graph_view import side_by_side
    except ImportError:
        return None
    return side_by_side


class GraphsView:
    title = "Graphs"

    def __init__(self, on_draw: Callable[[], None]) -> None:
        self.available = graph_renderer() is not None
        self.button = widgets.Button(description="Draw graphs", icon="project-diagram", disabled=not self.available)
        self.button.add_class("wb-draw-graphs")
        self.button.on_click(lambda _: on_draw())
        self.expand = widgets.Text(placeholder="modules to open, e.g. encoder.layer.0", continuous_update=False,
                                   description="expand", layout=widgets.Layout(width="260px"))
        self.select = widgets.Text(placeholder="an FX or ONNX node name", continuous_update=False,
                                   description="select", layout=widgets.Layout(width="260px"))
        self.view = widgets.HTML(pane(verdict("not drawn", PLACEHOLDER if not self.available else
                                              "Click 'Draw graphs' to lay out the FX and ONNX graphs.")))
        self.view.add_class("wb-graphs")
        self.widget = widgets.VBox([widgets.HBox([self.button, self.expand, self.select],
                                                 layout=widgets.Layout(flex_flow="row wrap")), self.view])

    def options(self) -> dict[str, Any]:
        """``side_by_side`` keywords from the fields: ``expand`` (comma-separated) and ``select``."""
        expand = tuple(p.strip() for p in self.expand.value.split(",") if p.strip())
        return {"expand": expand, "select": self.select.value.strip() or None}

    def show(self, result: Any) -> None:
        """A ``GraphView`` (``.svg``, or ``.message`` and a table without Graphviz), or an error."""
        if isinstance(result, BaseException):
            from exporter.errors import Failure

            self.view.value = failure_html(Failure.from_exception(result, "graphs"), "drawing the graphs failed")
        elif getattr(result, "svg", None):
            self.view.value = f'<div style="overflow: auto; max-height: 80vh; max-width: 100%">{result.svg}</div>'
        else:
            self.view.value = result._repr_html_() if hasattr(result, "_repr_html_") else esc(repr(result))
