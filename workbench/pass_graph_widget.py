"""``PassGraphWidget``: one optimizer pass, the model before it (left) and after it (right),
in the graph widget's front end (pan, zoom, click a node for its details, open a module)::

    from exporter.graphs.pass_graphs import pass_graphs
    from workbench.pass_graph_widget import PassGraphWidget

    view = PassGraphWidget(pass_graphs(session, 3))
    view.highlight                   # the nodes the pass removed, added and changed, by element id
    view.selected = "node_Add_2"     # that node instead, on both sides if it is on both

    view.show_pass(session, 5)       # returns at once: replayed and laid out on the export worker
    view.wait_pass()                 # the drawing has arrived; view.cancel_pass() stops it

The drawing is :func:`exporter.graphs.draw.before_after` (the same Graphviz layout as the FX
↔ ONNX view, the changes filled red / green / yellow); the front end is the graph widget's own
module (``static/graph_widget.js``) with its overlay buttons hidden: there is no mapping to
another graph and nothing to overlay here. The Stages tab shows it under the pass table.

Picking a pass in the Stages tab calls :meth:`PassGraphWidget.show_pass`: rebuilding the model
before the pass (a replay of the passes before it) and laying it out take seconds on a big
model, so they run on the export worker, as the graph widget's overlays do. The page keeps the
drawing it has and shows "computing…" with a Cancel button; an error is said in the panel.
"""

from __future__ import annotations

import html
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from exporter.events import Cancelled
from exporter.graphs.draw import GraphView, before_after
from exporter.graphs.model import Graph, GraphNode, module_ancestors, short_source
from exporter.graphs.pass_graphs import PassGraphs, pass_graphs
from exporter.graphs.plumbing import fold_plumbing

from .graph_widget import STATIC
from .worker_jobs import JobSlot, WorkerJob

if TYPE_CHECKING:
    from exporter.graphs.pass_graphs import RecordsPasses

__all__ = ["PassGraphWidget", "PassJob"]

_ELEMENT = re.compile(r'id="(before|after)(?:-|&#45;)(op|module|more|cluster)(?:-|&#45;)([^"]*)"')
_OTHER = {"before": "after", "after": "before"}


@dataclass
class PassJob(WorkerJob):
    """One pass drawn on the export worker (:meth:`PassGraphWidget.show_pass`): which pass,
    how to stop it, and how it ended. ``step`` is set when it was drawn, ``error`` (a line, also
    in the panel) and ``exception`` when it failed, ``cancelled`` when it was stopped or replaced."""

    index: int
    step: PassGraphs | None = None
    error: str = ""
    exception: Exception | None = None


class PassGraphWidget(anywidget.AnyWidget):
    """The model before and after one optimizer pass, its changes highlighted (and filled
    red / green / yellow). ``selected``: a node name (highlighted on each side it is on, its
    details in the panel; the changes keep their fill); ``expanded``:
    module paths drawn open (those holding a change always are); ``step``: the
    :class:`~exporter.graphs.pass_graphs.PassGraphs` drawn.

    :meth:`show_step` draws a step already built, at once; :meth:`show_pass` builds and lays
    out a session's pass on the export worker and returns at once (``computing`` says which
    while it runs: the page shows Cancel; :meth:`cancel_pass` is that button, :meth:`wait_pass`
    waits for the drawing)."""

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
    computing = traitlets.Unicode("").tag(sync=True)  # the pass being drawn on the worker ("" when none)
    height = traitlets.Unicode("420px").tag(sync=True)

    def __init__(self, step: PassGraphs | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.step: PassGraphs | None = None
        self.view: GraphView | None = None  # the drawing shown
        self._quiet = False
        # A pass job writes traits from the export worker: drawings take this lock, so a page
        # message handled on the kernel thread and a late job never interleave.
        self._lock = threading.RLock()
        self._jobs: JobSlot[PassJob] = JobSlot(self._lock)
        self.on_msg(self._on_front_end_msg)
        if step is not None:
            self.show_step(step)

    def show_step(self, step: PassGraphs) -> None:
        """Draw another pass: its changes highlighted, the modules holding them open."""
        with self._lock:
            self._jobs.cancel()
            self.computing, self.status = "", ""
            self._show(step, None)

    def _show(self, step: PassGraphs, view: GraphView | None) -> None:
        """Draw ``step`` (with ``view``, its layout with nothing expanded, when there is one)."""
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
            self._draw(view)

    # -- a session's pass, on the export worker ------------------------------------------------------
    def show_pass(self, session: RecordsPasses, index: int, *, cache: dict[int, PassGraphs] | None = None,
                  on_done: Callable[[PassJob], None] | None = None) -> PassJob:
        """Draw ``session.passes[index]``: the model before it is rebuilt (the passes before
        it replayed) and both sides laid out on the export worker. Returns at once; the
        drawing shown stays until the new one arrives. ``cache``: steps already built, by
        index (read, and filled with this one). ``on_done(job)`` is called when the job ends
        (drawn, failed or cancelled), on the worker. A pass asked for while another is being
        drawn replaces it."""
        job = PassJob(index)
        with self._lock:
            self._jobs.replace(job)
            self.message = {}
            self.computing = f"pass {index}"
            self.status = f"replaying the passes up to pass {index}…"
        self._jobs.submit(self._run_job, job, session, cache, on_done)
        return job

    def cancel_pass(self) -> bool:
        """Stop the pass being drawn (the page's Cancel button): the drawing shown stays,
        ``status`` says ``cancelled``. False when nothing was being drawn."""
        with self._lock:
            if self._jobs.cancel() is None:
                return False
            self.computing, self.status = "", "cancelled"
            return True

    @property
    def job(self) -> PassJob | None:
        """The pass being drawn on the worker (None when none is)."""
        return self._jobs.job

    def wait_pass(self, timeout: float | None = None) -> bool:
        """Wait until the pass asked for is drawn (or failed, or was cancelled); False on timeout."""
        return self._jobs.wait(timeout)

    def _run_job(self, job: PassJob, session: RecordsPasses, cache: dict[int, PassGraphs] | None,
                 on_done: Callable[[PassJob], None] | None) -> None:
        """On the export worker: build the step and lay it out, then draw it if the job is
        still the one asked for. Never raises: a failure is said in the panel."""
        step: PassGraphs | None = None
        view: GraphView | None = None
        try:
            step = cache.get(job.index) if cache is not None else None
            if step is None:
                step = pass_graphs(session, job.index, cancel=job.token)
                if cache is not None:
                    cache[job.index] = step
            job.token.check()
            view = before_after(step)
        except Cancelled:
            job.cancelled = True
        except Exception as exc:  # noqa: BLE001 - shown in the panel, never raised into the page
            job.exception = exc
            job.error = f"pass {job.index} could not be drawn: {(str(exc).splitlines() or [type(exc).__name__])[0]}"
        try:
            with self._lock:
                if self._jobs.is_current(job):
                    if job.error:
                        self.message = {"kind": "error", "text": job.error, "names": []}
                        self.status = ""
                    elif step is not None:
                        self.status = ""
                        self._show(step, view)
                        job.step = step
        except Exception as exc:  # noqa: BLE001 - a drawing failure is said in the panel
            job.exception = exc
            job.error = f"drawing pass {job.index} failed: {exc}"
            self.message = {"kind": "error", "text": job.error, "names": []}
        finally:
            with self._lock:
                if self._jobs.finish(job):
                    self.computing = ""
            try:
                if on_done is not None:
                    on_done(job)
            except Exception as exc:  # noqa: BLE001 - the caller's callback must not kill the worker job
                self.message = {"kind": "error", "text": f"after drawing pass {job.index}: {exc}", "names": []}
            finally:
                job.done.set()  # after on_done: whoever waits sees what it did

    # -- drawing ----------------------------------------------------------------------------------
    def _graphs(self) -> dict[str, Graph]:
        step = self._current()
        return {"before": fold_plumbing(step.before), "after": fold_plumbing(step.after)}  # as drawn (plumbing folded)

    def _current(self) -> PassGraphs:
        if self.step is None:
            raise RuntimeError("no pass drawn yet")
        return self.step

    def _draw(self, view: GraphView | None = None) -> None:
        """Show ``view`` (laid out for the current ``expanded``: the worker's, by :meth:`_show`),
        or lay one out."""
        with self._lock:
            step = self._current()
            if view is None:
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
            "module": node.module, "class": node.module_class, "source": short_source(node.source),
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
        with self._lock:
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
        if isinstance(content, dict) and content.get("type") == "cancel":
            self.cancel_pass()
            return
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

