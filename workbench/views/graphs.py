"""The Graphs tab: the FX and ONNX graphs side by side in the interactive graph widget
(:class:`workbench.graph_widget.GraphWidget`: click, search, open modules, pan and zoom,
error/time overlays). Drawn on request: Graphviz layout of a big model takes seconds, so the
first layout runs on the export worker (:func:`graph_renderer`) and the widget adopts it.
Without anywidget the tab shows the static drawing (:func:`exporter.graphs.draw.side_by_side`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import ipywidgets as widgets

from exporter.errors import Failure
from exporter.graphs.draw import GraphView, side_by_side

from .blocks import failure_html, pane, verdict

if TYPE_CHECKING:
    from workbench.graph_widget import GraphWidget, PreparedGraphs

    # What the renderer gives the tab: graphs prepared for the widget, or a static drawing.
    Drawn = Union[PreparedGraphs, GraphView]

__all__ = ["GraphsView", "graph_renderer"]



def _widget_class() -> type[GraphWidget] | None:
    try:  # anywidget is an optional dependency
        from workbench.graph_widget import GraphWidget
    except ImportError:  # anywidget is not installed: the static drawing instead
        return None
    return GraphWidget


def graph_renderer() -> Callable[..., Drawn]:
    """What the Draw button runs on the export worker: ``prepare_graphs(session, expand=)``
    (the graphs read and laid out for the widget), or ``side_by_side`` without anywidget."""
    if _widget_class() is None:
        return side_by_side
    from workbench.graph_widget import prepare_graphs

    return prepare_graphs


class GraphsView:
    title = "Graphs"

    def __init__(self, on_draw: Callable[[], None]) -> None:
        self.available = True  # the drawing is part of the core (the widget is optional)
        widget_class = _widget_class()
        self.button = widgets.Button(description="Draw graphs", icon="project-diagram")
        self.button.add_class("wb-draw-graphs")
        self.button.on_click(lambda _: on_draw())
        self.view = widgets.HTML(pane(verdict("not drawn", "Click 'Draw graphs' to lay out the FX and ONNX graphs; "
                                              "then click a node, open a module, search by name.")))
        self.view.add_class("wb-graphs")
        self.graph = widget_class(height="420px") if widget_class is not None else None
        if self.graph is not None:
            self.graph.layout.display = "none"  # until drawn
        children = [self.button, self.view] + ([self.graph] if self.graph is not None else [])
        self.widget = widgets.VBox(children, layout=widgets.Layout(max_width="100%"))

    def options(self) -> dict[str, Any]:
        """Keywords for the renderer: the modules the widget has open stay open on a redraw."""
        return {"expand": tuple(self.graph.expanded)} if self.graph is not None else {}

    def show_nothing_to_draw(self, failed: Any) -> None:
        """Say why a click drew nothing: the export failed at ``failed`` (a stage result) before
        there was a graph."""
        first = (str(failed.error).splitlines() or [""])[0] if failed.error is not None else ""
        self.view.value = pane(verdict("nothing to draw", f"The export failed at {failed.name}, before there is a "
                                       f"graph: {first}. The Stages tab says why and what to change; "
                                       "draw again once it exports.", tone="warn"))
        if self.graph is not None:
            self.graph.layout.display = "none"

    def show(self, result: Drawn | BaseException) -> None:
        """Prepared graphs (the widget draws them), a ``GraphView`` (static drawing), or an error."""
        if isinstance(result, BaseException):
            self.view.value = failure_html(Failure.from_exception(result, "graphs"), "drawing the graphs failed")
        elif isinstance(result, GraphView):
            self.view.value = (f'<div class="wb-graph-scroll">{result.svg}</div>'
                               if result.svg else result._repr_html_())
        elif self.graph is not None:
            self.view.value = ""
            self.graph.show_prepared(result)
            self.graph.layout.display = None
