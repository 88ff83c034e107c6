"""The Graphs tab: the FX and ONNX graphs side by side in the interactive graph widget
(:class:`workbench.graph_widget.GraphWidget`: click, search, open modules, pan and zoom,
error/time overlays). Drawn on request: Graphviz layout of a big model takes seconds, so the
first layout runs on the export worker (:func:`graph_renderer`) and the widget adopts it.
Without anywidget the tab shows the static drawing; without the graph view, a placeholder."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from .blocks import esc, failure_html, pane, verdict

__all__ = ["GraphsView", "graph_renderer"]

PLACEHOLDER = "The FX ↔ ONNX graph view is not available in this installation."


def _widget_class() -> Any:
    try:
        from workbench.graph_widget import GraphWidget
    except ImportError:  # anywidget is not installed: the static drawing instead
        return None
    return GraphWidget


def graph_renderer() -> Callable[..., Any] | None:
    """What the Draw button runs on the export worker: ``prepare_graphs(session, expand=)``
    (the graphs read and laid out for the widget), ``side_by_side`` without anywidget, None
    when neither is importable."""
    try:
        from exporter.graphs.draw import side_by_side
    except ImportError:
        return None
    if _widget_class() is None:
        return side_by_side
    from workbench.graph_widget import prepare_graphs

    return prepare_graphs


class GraphsView:
    title = "Graphs"

    def __init__(self, on_draw: Callable[[], None]) -> None:
        self.available = graph_renderer() is not None
        widget_class = _widget_class() if self.available else None
        self.button = widgets.Button(description="Draw graphs", icon="project-diagram", disabled=not self.available)
        self.button.add_class("wb-draw-graphs")
        self.button.on_click(lambda _: on_draw())
        self.view = widgets.HTML(pane(verdict("not drawn", PLACEHOLDER if not self.available else
                                              "Click 'Draw graphs' to lay out the FX and ONNX graphs; then click a "
                                              "node, open a module, search by name.")))
        self.view.add_class("wb-graphs")
        self.graph = widget_class(height="420px") if widget_class is not None else None
        if self.graph is not None:
            self.graph.layout.display = "none"  # until drawn
        children = [self.button, self.view] + ([self.graph] if self.graph is not None else [])
        self.widget = widgets.VBox(children, layout=widgets.Layout(max_width="100%"))

    def options(self) -> dict[str, Any]:
        """Keywords for the renderer: the modules the widget has open stay open on a redraw."""
        return {"expand": tuple(self.graph.expanded)} if self.graph is not None else {}

    def show(self, result: Any) -> None:
        """Prepared graphs (the widget draws them), a ``GraphView`` (static drawing), or an error."""
        if isinstance(result, BaseException):
            from exporter.errors import Failure

            self.view.value = failure_html(Failure.from_exception(result, "graphs"), "drawing the graphs failed")
        elif self.graph is not None and hasattr(result, "fx") and hasattr(result, "graphs"):
            self.view.value = ""
            self.graph.show_prepared(result)
            self.graph.layout.display = None
        elif getattr(result, "svg", None):
            self.view.value = f'<div style="overflow: auto; max-height: 80vh; max-width: 100%">{result.svg}</div>'
        else:
            self.view.value = result._repr_html_() if hasattr(result, "_repr_html_") else esc(repr(result))
