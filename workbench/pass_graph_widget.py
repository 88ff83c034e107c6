"""``PassGraphWidget``: one optimizer pass, the model before it (left) and after it (right),
in the graph widget's front end (pan, zoom, click a node for its details, open a module)::

    from exporter.graphs.pass_graphs import pass_graphs
    from workbench.pass_graph_widget import PassGraphWidget

    view = PassGraphWidget(pass_graphs(session, 3))
    view.highlight                   # the nodes the pass removed, added and changed, by element id
    view.selected = "node_Add_2"     # that node instead, on both sides if it is on both

The drawing is :func:`exporter.graphs.draw.before_after` (the same Graphviz layout as the FX
↔ ONNX view, the changes filled red / green / yellow); the front end is the graph widget's own
module (``static/graph_widget.js``) with its overlay buttons hidden: there is no mapping to
another graph and nothing to overlay here. The Stages tab shows it under the pass table.
"""

from __future__ import annotations

import html
import re
from typing import Any

import anywidget
import traitlets

from exporter.graphs.draw import GraphView, before_after
from exporter.graphs.model import Graph, GraphNode, module_ancestors
from exporter.graphs.pass_graphs import PassGraphs

from .graph_widget import STATIC

__all__ = ["PassGraphWidget"]

_ELEMENT = re.compile(r'id="(before|after)(?:-|&#45;)(op|module|more|cluster)(?:-|&#45;)([^"]*)"')
_OTHER = {"before": "after", "after": "before"}


class PassGraphWidget(anywidget.AnyWidget):
    """The model before and after one optimizer pass, its changes highlighted (and filled
    red / green / yellow). ``selected``: a node name (highlighted on each side it is on, its
    details in the panel; the changes keep their fill); ``expanded``:
    module paths drawn open (those holding a change always are); ``step``: the
    :class:`~exporter.graphs.pass_graphs.PassGraphs` drawn."""

    _esm = STATIC / "graph_widget.js"
    _css = STATIC / "graph_widget.css"

    svg = traitlets.Unicode("").tag(sync=True)
    details = traitlets.Dict().tag(sync=True)
    names = traitlets.List(traitlets.Unicode()).tag(sync=True)
    selected = traitlets.Unicode("").tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    highlight = traitlets.List(traitlets.Unicode()).tag(sync=True)
    overlay = traitlets.Unicode("none").tag(sync=True)
    show_overlays = traitlets.Bool(False).tag(sync=True)
    message = traitlets.Dict().tag(sync=True)
    note = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    height = traitlets.Unicode("420px").tag(sync=True)

    def __init__(self, step: PassGraphs | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step: PassGraphs | None = None
        self.view: GraphView | None = None  # the drawing shown
        self._quiet = False
        self.on_msg(self._on_front_end_msg)
        if step is not None:
            self.show_step(step)

    def show_step(self, step: PassGraphs) -> None:
        """Draw another pass: its changes highlighted, the modules holding them open."""
        self.step = step
        self.message = {}
        self.names = sorted(set(step.before.names) | set(step.after.names))
        self.note = ""  # the Stages tab says which pass it is above the drawing
        with self.hold_sync():
            self._quiet = True
            try:
                self.selected = ""
                self.expanded = []
            finally:
                self._quiet = False
            self._draw()

    # -- drawing ----------------------------------------------------------------------------------
    def _graphs(self) -> dict[str, Graph]:
        step = self._current()
        return {"before": step.before, "after": step.after}

    def _current(self) -> PassGraphs:
        if self.step is None:
            raise RuntimeError("no pass drawn yet")
        return self.step

    def _draw(self) -> None:
        step = self._current()
        try:
            view = before_after(step, expand=self.expanded)
        except ValueError as exc:
            self.message = {"kind": "error", "text": str(exc), "names": []}
            return
        self.view = view
        self._quiet = True
        try:
            self.expanded = list(view.expanded)
        finally:
            self._quiet = False
        self.svg = view.svg or ""
        self.note = (view.message or "") if view.svg is None else ""
        self.details = self._details(self.svg)
        self.highlight = self._highlight_ids()

    def _change_ids(self) -> list[str]:
        step = self._current()
        return ([f"before-op-{n}" for n in sorted(step.highlighted_before)]
                + [f"after-op-{n}" for n in sorted(step.highlighted_after)])

    def _highlight_ids(self) -> list[str]:
        """The selected node on each side it is on (the panel describes each); with nothing
        selected, the pass's changes. Their fill colours show the changes either way."""
        chosen = [f"{side}-op-{self.selected}" for side, graph in self._graphs().items()
                  if self.selected and self.selected in graph]
        return chosen or self._change_ids()

    def _change_of(self, side: str, name: str) -> str | None:
        step = self._current()
        if side == "before" and name in step.removed:
            return "removed by this pass"
        if side == "after" and name in step.added:
            return "added by this pass"
        if name in (step.changed_before if side == "before" else step.changed_after):
            what = next((c.what for c in step.record.changed if c.name == name), "")
            return f"changed by this pass{f' ({what})' if what else ''}"
        return None

    def _details(self, svg: str) -> dict[str, dict[str, Any]]:
        graphs = self._graphs()
        found = [(side, kind, html.unescape(rest)) for side, kind, rest in _ELEMENT.findall(svg)]
        out: dict[str, dict[str, Any]] = {}
        for side, kind, rest in found:
            graph = graphs[side]
            element = f"{side}-{kind}-{rest}"
            if kind == "op" and rest in graph:
                out[element] = self._node_details(side, graph[rest])
            elif kind in ("module", "cluster"):
                count = sum(1 for n in graph.nodes if (n.module or "") == rest or (n.module or "").startswith(rest + "."))
                out[element] = {"kind": kind, "side": side, "path": rest, "class": graph.module_classes.get(rest),
                                "nodes": count, "children": []}
            elif kind == "more":
                out[element] = {"kind": "more", "side": side, "path": rest, "modules": [rest]}
        return out

    def _node_details(self, side: str, node: GraphNode) -> dict[str, Any]:
        other = _OTHER[side]
        types = {v.name: v.type_text() for n in self._graphs()[side].nodes for v in n.outputs}
        types.update({v.name: v.type_text() for v in self._graphs()[side].inputs})
        mapped = [[other, node.name, f"{other}-op-{node.name}"]] if node.name in self._graphs()[other] else []
        return {
            "kind": "op", "side": side, "name": node.name, "op": node.op,
            "attributes": [list(a) for a in node.attributes],
            "inputs": [[name, types.get(name, "")] for name in node.inputs if name],
            "outputs": [[v.name, v.type_text()] for v in node.outputs],
            "module": node.module, "class": node.module_class, "source": node.source,
            "mapped": mapped, "mapped_label": f"{other} the pass",
            "change": self._change_of(side, node.name), "origin": None, "value": None, "overlay": "none",
        }

    # -- state from the page or from Python ---------------------------------------------------------
    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> str:
        name = proposal["value"]
        if name and self.step is not None and not any(name in g for g in self._graphs().values()):
            raise traitlets.TraitError(f"selected={name!r} is no node before or after {self.step.record.label}")
        return name

    @traitlets.observe("selected")
    def _selected_changed(self, change: Any) -> None:
        if self._quiet or self.step is None:
            return
        name = change["new"]
        modules = {m for g in self._graphs().values() if name in g for m in module_ancestors(g[name].module or "")}
        if name and not modules <= set(self.expanded):
            self._quiet = True
            try:
                self.expanded = sorted(set(self.expanded) | modules)
            finally:
                self._quiet = False
            self._draw()
        else:
            self.highlight = self._highlight_ids()

    @traitlets.observe("expanded")
    def _expanded_changed(self, change: Any) -> None:
        if self._quiet or self.step is None:
            return
        self._draw()

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not (isinstance(content, dict) and content.get("type") == "search") or self.step is None:
            return
        text = str(content.get("text", "")).strip()
        if any(text in g for g in self._graphs().values()):
            self.message = {}
            self.selected = text
            return
        close = [n for n in self.names if text.lower() in n.lower()][:20]
        self.message = {"kind": "info", "text": f"no node {text!r} before or after the pass" + ("; names with it:" if close else ""),
                        "names": close}

    def __repr__(self) -> str:
        if self.step is None:
            return "PassGraphWidget(nothing drawn)"
        return f"PassGraphWidget({self.step!r}, selected={self.selected!r}, {len(self.highlight)} highlighted)"

