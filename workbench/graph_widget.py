"""``GraphWidget``: the FX and ONNX graphs side by side, as a widget you can click::

    from workbench.graph_widget import GraphWidget

    view = GraphWidget(session)          # collapsed to the top-level modules
    view                                 # in a notebook: pan, zoom, click, search
    view.selected = "node_MatMul_3"      # selects it and its FX origins (opening their modules)
    view.expanded                        # the module paths drawn open, as the page shows them
    view.search("encoder.layer.1")       # what Enter in the search box does
    view.overlay = "time"                # "none", "error" (session.compare_intermediates()), "time" (profile)
    view.wait_overlay()                  # the overlay is computed on the export worker; view.cancel_overlay() stops it
    view.legend                          # what its colours mean: scale, units, tolerance, case
    view.message["text"]                 # what is shown, on which case ("error: all 65 compared nodes within …")

The first drawing shows the model's modules, and the top-level nodes that only derive masks,
positions and shapes from the inputs folded into one "mask & position plumbing" box per side
(:mod:`exporter.graphs.plumbing`; it opens like a module, path ``(plumbing)``). The error
overlay paints each node's error relative to the error verify allows it: green within the
tolerance, orange → red over it, the first node over it selected; the time overlay paints ms
per run against a scale the legend gives.

A thin skin: the layout is :func:`exporter.graphs.draw.side_by_side` (Graphviz ``dot``),
the node details come from :mod:`exporter.graphs` (sent to the page as a compact JSON keyed by
the SVG element id, for the elements drawn), the overlays from the session's analyses. The
front end (``workbench/static/graph_widget.js``, an anywidget ES module) highlights a clicked
node and its counterparts at once, then tells Python, which owns ``selected`` and
``expanded``: a change from either side is drawn on both. An overlay is computed (and laid out)
on the export worker, like every analysis of the Workbench: the page keeps the previous drawing
and answers, shows "computing…" and a Cancel button, and the overlay is drawn when it arrives.
"""

from __future__ import annotations

import difflib
import html
import re
import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anywidget
import traitlets

from exporter.events import CancelToken
from exporter.graphs.draw import GraphView, fx_alone, side_by_side
from exporter.graphs.mapping import MappingEntry, NodeMapping
from exporter.graphs.model import Graph, GraphNode, module_ancestors, short_source
from exporter.graphs.modules import module_sort_key, module_tree, short_op
from exporter.graphs.plumbing import fold_plumbing
from exporter.graphs.overlay import error_legend, error_overlay, overlay_values, time_legend
from exporter.graphs.session_graphs import SessionGraphs

from .worker_jobs import JobSlot, WorkerJob

if TYPE_CHECKING:
    from exporter.session import Session

__all__ = ["GraphWidget", "PreparedGraphs", "prepare_graphs"]

STATIC = Path(__file__).parent / "static"
OVERLAYS = ("none", "error", "time")
_ELEMENT = re.compile(r'id="(fx|onnx)(?:-|&#45;)(op|module|more|cluster)(?:-|&#45;)([^"]*)"')


@dataclass(frozen=True)
class PreparedGraphs:
    """What the widget draws from: the session, its graphs, the FX graph, the ONNX graph and
    mapping (``None`` when they could not be built: then ``note`` says why)."""

    session: Session
    graphs: SessionGraphs
    fx: Graph
    onnx: Graph | None = None
    mapping: NodeMapping | None = None
    note: str = ""
    fx_kind: str = "fx_decomposed"
    view: GraphView | None = None  # a first layout, made where the graphs were prepared (the worker thread)

    def origins(self, entry: MappingEntry) -> tuple[str, ...]:
        """The FX nodes (of the drawn FX graph) an ONNX node came from."""
        return entry.fx_nodes if self.fx_kind == "fx_decomposed" else entry.fx_captured


@dataclass(frozen=True)
class _Index:
    """What the widget looks up in the prepared graphs, computed once per drawing: every
    module path, node counts per side and module (descendants included), the module trees,
    FX node → ONNX nodes."""

    modules: set[str]
    counts: dict[str, Counter[str]]
    trees: dict[str, dict[str, list[str]]]
    onnx_of: dict[str, list[str]]


def prepare_graphs(session: Session, *, fx: str = "fx_decomposed", expand: Iterable[str] = (), layout: bool = True,
                   **_: Any) -> PreparedGraphs:
    """The session's graphs, read once (runs the export stages if needed). A model whose ONNX
    side cannot be built (translate failed) gives the FX side alone and a note saying why;
    ``layout`` also lays out the first drawing (collapsed, or ``expand`` open)."""
    graphs: SessionGraphs = session.graphs
    fx_graph = fold_plumbing(graphs[fx])  # as drawn: the mask & position plumbing in one pseudo-module
    try:
        onnx_graph, mapping, note = fold_plumbing(graphs.onnx_optimized), graphs.mapping, ""
    except Exception as exc:  # noqa: BLE001 - the FX side is still worth showing
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        onnx_graph, mapping = None, None
        note = f"The ONNX side is not drawn: {first}. The FX graph is shown alone."
    prepared = PreparedGraphs(session, graphs, fx_graph, onnx_graph, mapping, note, fx)
    if layout:
        known = {a for g in (fx_graph, onnx_graph) if g is not None for n in g.nodes for a in module_ancestors(n.module or "")}
        expand = tuple(p for p in expand if p in known)  # a redraw of another export keeps what it still has
        view = (side_by_side(graphs, expand=expand, fx=fx) if onnx_graph is not None
                else fx_alone(graphs, expand=expand, fx=fx, note=note))
        prepared = PreparedGraphs(session, graphs, fx_graph, onnx_graph, mapping, note, fx, view)
    return prepared


def _close(name: str, candidates: Iterable[str], n: int = 8) -> list[str]:
    """The names nearest to ``name``: close spellings of the whole name or of a dotted
    name's last part (``fc3`` → ``encoder.layer.0.fc1``), and names containing it."""
    candidates = list(dict.fromkeys(candidates))
    lowered = name.lower()
    near = difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)
    by_tail: dict[str, list[str]] = {}
    for c in candidates:
        by_tail.setdefault(c.rsplit(".", 1)[-1], []).append(c)
    for tail in difflib.get_close_matches(name.rsplit(".", 1)[-1], list(by_tail), n=n, cutoff=0.6):
        near.extend(sorted(by_tail[tail], key=module_sort_key))
    contains = sorted((c for c in candidates if lowered and lowered in c.lower()), key=len)
    return list(dict.fromkeys(near + contains))[:n]


@dataclass
class _OverlayJob(WorkerJob):
    """One overlay computed on the export worker: what it paints, and what a cancel goes back to."""

    kind: str
    previous: str  # the overlay drawn when it started


@dataclass(frozen=True)
class _OverlayOutcome:
    """What an overlay job found: values per node, the node to select, the panel message,
    a first layout with the values (None: lay out again when applied), or why it failed."""

    values: dict[str, float]
    first_bad: str | None = None
    message: dict[str, Any] | None = None
    view: GraphView | None = None
    expand: tuple[str, ...] = ()
    cancelled: bool = False
    legend: dict[str, Any] | None = None  # OverlayLegend.to_dict() (time: completed from the layout's scale)
    raw: dict[str, float] | None = None  # what the panel shows per node when it is not the painted value


class GraphWidget(anywidget.AnyWidget):
    """FX (left) and ONNX (right) graphs of a session, grouped into modules, that you can
    click, search, pan and zoom. State both ways: ``selected`` (a node name, FX or ONNX, or a
    module path; ``""`` for nothing), ``expanded`` (module paths drawn open), ``overlay``
    (``none``, ``error``, ``time``). ``message`` is what the panel says about the last
    search or overlay (``{"kind", "text", "names"}``).

    Setting ``overlay`` returns at once: the values are computed on the export worker (the
    page shows ``computing`` and a Cancel button; :meth:`cancel_overlay` is that button,
    :meth:`wait_overlay` waits for the drawing). A cancel keeps the previous overlay and
    drawing, with ``status`` ``"cancelled"``."""

    _esm = STATIC / "graph_widget.js"
    _css = STATIC / "graph_widget.css"

    svg = traitlets.Unicode("").tag(sync=True)
    details = traitlets.Dict().tag(sync=True)  # SVG element id → what the panel shows about it
    names = traitlets.List(traitlets.Unicode()).tag(sync=True)  # search completion
    selected = traitlets.Unicode("").tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode()).tag(sync=True)
    highlight = traitlets.List(traitlets.Unicode()).tag(sync=True)  # element ids drawn selected
    overlay = traitlets.Unicode("none").tag(sync=True)
    message = traitlets.Dict().tag(sync=True)
    legend = traitlets.Dict().tag(sync=True)  # the drawn overlay's OverlayLegend.to_dict() ({} without overlay)
    note = traitlets.Unicode("").tag(sync=True)
    status = traitlets.Unicode("").tag(sync=True)
    computing = traitlets.Unicode("").tag(sync=True)  # the overlay being computed ("" when none): the page shows Cancel
    layout_seconds = traitlets.Float(0.0).tag(sync=True)
    height = traitlets.Unicode("480px").tag(sync=True)

    def __init__(self, session: Session | None = None, *, expand: Iterable[str] = (), select: str | None = None,
                 overlay: str = "none", fx: str = "fx_decomposed", max_children: int = 24, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._prepared: PreparedGraphs | None = None
        self._index_of: PreparedGraphs | None = None
        self._index_cache: _Index | None = None
        self._types_cache: dict[tuple[int, str], dict[str, str]] = {}
        self._values: dict[str, float] = {}  # painted per node (error: ÷ the allowed error; time: µs)
        self._raw: dict[str, float] = {}  # shown per node in the panel (error: max abs error)
        self._max_children = max_children
        self._fx_kind = fx
        self._quiet = False  # set while Python itself writes a trait the observers would redo
        # The overlay job writes traits from the export worker: drawings take this lock, so a
        # page message handled on the kernel thread and a late overlay never interleave.
        self._lock = threading.RLock()
        self._jobs: JobSlot[_OverlayJob] = JobSlot(self._lock)
        self._drawn_overlay = "none"  # the overlay whose values are drawn
        self.on_msg(self._on_front_end_msg)
        if session is not None:
            expand = [expand] if isinstance(expand, str) else list(expand)
            self.show_prepared(prepare_graphs(session, fx=fx, expand=expand))
            self._check_expanded({"value": expand})  # a path that is no module: the closest names
            if select:
                self.selected = select
            if overlay != "none":
                self.overlay = overlay
                self.wait_overlay()  # the constructor returns the widget drawn as asked

    # -- loading ------------------------------------------------------------------------------------
    def show_prepared(self, prepared: PreparedGraphs) -> None:
        """Draw another session's graphs (the Workbench's Draw button; the layout may already
        be done). Selection and open modules are kept where they still exist."""
        self._jobs.cancel()
        self._prepared = prepared
        self._values, self._raw = {}, {}
        self.legend = {}
        self._drawn_overlay = "none"
        self.computing = ""
        modules = self._module_paths()
        op_types = {n.op for n in self._nodes()} | {_short(n.op) for n in self._nodes()}
        self.names = sorted(set(self._node_names()) | modules | op_types)
        self.note = prepared.note
        self.message = {}
        with self.hold_sync():
            self._quiet = True
            try:
                self.overlay = "none"
                if self.selected and not self._known(self.selected):
                    self.selected = ""
            finally:
                self._quiet = False
            kept = [p for p in self.expanded if p in modules]
            view = prepared.view
            if view is not None and set(view.expanded) >= set(kept):
                self._draw(view)
            else:
                self._relayout(kept)

    @property
    def session(self) -> Session | None:
        return self._prepared.session if self._prepared is not None else None

    def _current(self) -> PreparedGraphs:
        """The graphs drawn (only called once there are some)."""
        if self._prepared is None:
            raise RuntimeError("no graphs drawn yet")
        return self._prepared

    # -- the graph data ---------------------------------------------------------------------------
    def _graphs_by_side(self) -> dict[str, Graph]:
        p = self._prepared
        out = {"fx": p.fx} if p is not None else {}
        if p is not None and p.onnx is not None:
            out["onnx"] = p.onnx
        return out

    def _nodes(self) -> list[GraphNode]:
        return [n for g in self._graphs_by_side().values() for n in g.nodes]

    def _node_names(self) -> list[str]:
        return [n.name for n in self._nodes()]

    def _module_paths(self) -> set[str]:
        return self._index().modules

    def _index(self) -> _Index:
        """The lookups of the prepared graphs, computed once per drawing."""
        p = self._current()
        if self._index_cache is not None and self._index_of is p:
            return self._index_cache
        sides = self._graphs_by_side()
        counts = {side: Counter(a for n in g.nodes for a in module_ancestors(n.module or "")) for side, g in sides.items()}
        onnx_of: dict[str, list[str]] = {}
        for entry in (p.mapping.entries if p.mapping is not None else ()):
            for name in p.origins(entry):
                onnx_of.setdefault(name, []).append(entry.onnx_node)
        self._index_cache = _Index(
            modules={m for c in counts.values() for m in c},
            counts=counts,
            trees={side: module_tree({n.module or "" for n in g.nodes}) for side, g in sides.items()},
            onnx_of=onnx_of,
        )
        self._index_of = p
        return self._index_cache

    def _known(self, name: str) -> bool:
        return any(name in g for g in self._graphs_by_side().values()) or name in self._module_paths()

    def _counterparts(self, name: str) -> dict[str, set[str]]:
        """Side → node names selected with ``name`` (itself and the mapped nodes)."""
        p = self._current()
        sides = self._graphs_by_side()
        out: dict[str, set[str]] = {"fx": set(), "onnx": set()}
        if "onnx" in sides and name in sides["onnx"]:
            out["onnx"].add(name)
            if p.mapping is not None:
                out["fx"].update(p.origins(p.mapping[name]))
        elif name in sides["fx"]:
            out["fx"].add(name)
            if p.mapping is not None:
                out["onnx"].update(self._index().onnx_of.get(name, ()))
        return out

    # -- state changes (from the page or from Python) -------------------------------------------------
    @traitlets.validate("selected")
    def _check_selected(self, proposal: Any) -> str:
        name = proposal["value"]
        if name and self._prepared is not None and not self._known(name):
            close = _close(name, list(self._node_names()) + sorted(self._module_paths()))
            raise traitlets.TraitError(f"selected={name!r} is no node or module of the graphs"
                                       + (f"; closest: {', '.join(close)}" if close else ""))
        return name

    @traitlets.validate("expanded")
    def _check_expanded(self, proposal: Any) -> list[str]:
        paths = list(dict.fromkeys(proposal["value"]))
        if self._prepared is not None:
            known = self._module_paths()
            for path in paths:
                if path not in known:
                    close = _close(path, sorted(known))
                    raise traitlets.TraitError(f"expanded: no module {path!r} in the graphs"
                                               + (f"; closest: {', '.join(close)}" if close else ""))
        return paths

    @traitlets.validate("overlay")
    def _check_overlay(self, proposal: Any) -> str:
        if proposal["value"] not in OVERLAYS:
            raise traitlets.TraitError(f"overlay must be one of {', '.join(OVERLAYS)}, not {proposal['value']!r}")
        return proposal["value"]

    @traitlets.observe("selected")
    def _selected_changed(self, change: Any) -> None:
        if self._quiet or self._prepared is None:
            return
        needed = self._modules_to_open(change["new"])
        if not needed <= set(self.expanded):
            self._relayout(sorted(set(self.expanded) | needed))  # also redraws the highlight
        else:
            self.highlight = self._highlight_ids()

    @traitlets.observe("expanded")
    def _expanded_changed(self, change: Any) -> None:
        if self._quiet or self._prepared is None:
            return
        self._relayout(change["new"])

    @traitlets.observe("overlay")
    def _overlay_changed(self, change: Any) -> None:
        if self._quiet or self._prepared is None:
            return
        with self._lock:
            self._jobs.cancel()
            self.message = {}
            if change["new"] == "none":
                self._values, self._raw, self._drawn_overlay, self.computing, self.status = {}, {}, "none", "", ""
                self.legend = {}
                self._relayout(self.expanded)
                return
            job = _OverlayJob(change["new"], self._drawn_overlay)
            self._jobs.replace(job)
            self.computing = job.kind
            self.status = ("profiling in onnxruntime…" if job.kind == "time"
                           else "comparing every intermediate value, FX vs ONNX…")
        self._jobs.submit(self._run_job, job)

    def cancel_overlay(self) -> bool:
        """Stop the overlay being computed (the page's Cancel button): the previous overlay
        and drawing stay, ``status`` says ``cancelled``. False when nothing was computing."""
        with self._lock:
            job = self._jobs.cancel()
            if job is None:
                return False
            self._quiet = True
            try:
                self.overlay = job.previous
            finally:
                self._quiet = False
            self.computing, self.status = "", "cancelled"
            return True

    def wait_overlay(self, timeout: float | None = None) -> bool:
        """Wait until the overlay asked for is drawn (or failed, or was cancelled); False on timeout."""
        return self._jobs.wait(timeout)

    def _run_job(self, job: _OverlayJob) -> None:
        """On the export worker: compute the values and lay them out, then draw them if the job
        is still the one asked for."""
        try:
            outcome = self._compute_overlay(job)
        except Exception as exc:  # noqa: BLE001 - shown in the panel, never raised into the page
            outcome = _OverlayOutcome({}, message={
                "kind": "error", "names": [],
                "text": f"the {job.kind} overlay could not be computed: {(str(exc).splitlines() or [type(exc).__name__])[0]}"})
        try:
            with self._lock:
                if self._jobs.is_current(job):
                    self._apply(job, outcome)
        except Exception as exc:  # noqa: BLE001 - a drawing failure is said in the panel
            self.message = {"kind": "error", "text": f"drawing the {job.kind} overlay failed: {exc}", "names": []}
        finally:
            with self._lock:
                if self._jobs.finish(job):
                    self.computing = ""
            job.done.set()

    def _compute_overlay(self, job: _OverlayJob) -> _OverlayOutcome:
        if job.kind == "time":
            values, message, legend = self._time_values(job.token)
            first_bad, raw = None, values
        else:
            values, raw, first_bad, message, legend = self._error_values(job.token)
        if job.token.cancelled:
            return _OverlayOutcome({}, cancelled=True)
        expand = tuple(sorted(set(self.expanded) | self._modules_to_open(first_bad or "")))
        view = self._layout(expand, values, job.kind)
        return _OverlayOutcome(values, first_bad, message, view, expand, legend=legend, raw=raw)

    def _apply(self, job: _OverlayJob, outcome: _OverlayOutcome) -> None:
        """Draw a finished overlay job (under the lock, the job still current)."""
        if outcome.cancelled:
            return
        self._values, self._drawn_overlay = outcome.values, job.kind
        self._raw = outcome.raw if outcome.raw is not None else outcome.values
        self.status = ""
        self.message = outcome.message or {}
        self.legend = outcome.legend or {}
        with self.hold_sync():
            wanted = set(self.expanded) | self._modules_to_open(outcome.first_bad or "")
            if outcome.view is not None and set(outcome.expand) == wanted:
                self._draw(outcome.view)
            else:  # a module was opened or closed meanwhile
                self._relayout(sorted(wanted))
            if outcome.first_bad:
                self.selected = outcome.first_bad

    def _time_values(self, cancel: CancelToken) -> tuple[dict[str, float], dict[str, Any] | None, dict[str, Any] | None]:
        """µs per run of each node in onnxruntime's profile, what the message line says, and
        the legend (its scale is completed from the layout, :meth:`_draw`)."""
        session = self._current().session
        profile = session.analyses.get("profile") or session.profile(cancel=cancel)
        if profile.cancelled:
            return {}, None, None
        if profile.error:
            raise RuntimeError(profile.error)
        values = overlay_values(profile, self._node_names())
        if not values:
            raise RuntimeError("the profile names no node of the drawing")
        case = _example_text(session)
        slowest = max(values, key=values.__getitem__)
        message = {"kind": "info", "names": [slowest],
                   "text": f"time: onnxruntime profile, {int(profile.runs)} runs on {case}; {len(values)} nodes timed, "
                           f"{sum(values.values()) / 1000:.3g} ms per run in all; the slowest node "
                           f"({values[slowest] / 1000:.3g} ms):"}
        return values, message, time_legend(0.0, case=case).to_dict()

    def _error_values(self, cancel: CancelToken) -> tuple[dict[str, float], dict[str, float], str | None,
                                                          dict[str, Any] | None, dict[str, Any] | None]:
        """Per ONNX node: its max abs error ÷ the error verify allows it (painted: green up to 1,
        red above; a shape or dtype mismatch, or an infinite error, painted as 1000×) and its max
        abs error (the panel); the node to select (the first one over the tolerance); what the
        message line says; the legend. After a failed verify the values are those of the case
        that failed (verify's inputs and eager outputs there), else of the example inputs."""
        session = self._current().session
        last = session.last_verify
        failed = last is not None and str(last.status) == "failed"
        case = _failing_case(last) if failed else None
        result = session.compare_intermediates(case, cancel=cancel)
        if result.status == "cancelled":
            return {}, {}, None, None, None
        if result.error and not result.rows:
            raise RuntimeError(result.error)
        overlay = error_overlay(result)
        where = (_case_text(last, result.case) if failed and last is not None
                 else "example (the example inputs)" if result.case == "example" else result.case)
        bad = result.first_bad
        bad_name = bad.onnx_node if bad is not None else None
        message: dict[str, Any]
        if bad_name and failed:
            message = {"kind": "error", "text": f"verify failed at case {where}; selected the "
                       f"first node whose error exceeds the tolerance there ({len(overlay.over)} of {overlay.compared} "
                       "compared nodes are over it):", "names": [bad_name]}
        elif bad_name:
            message = {"kind": "warning", "names": [bad_name],
                       "text": f"{overlay.summary(where)}; selected the first, {bad.describe() if bad else bad_name}:"}
        else:
            message = {"kind": "info", "names": [], "text": overlay.summary(where)}
            if result.program_differs:
                message = {"kind": "warning", "names": [], "text": message["text"] + f"; but {result.program_differs}"}
        legend = error_legend(overlay.allowed, case=where, rule=_tolerance_rule()).to_dict()
        return dict(overlay.ratios), dict(overlay.errors), bad_name, message, legend

    def _modules_to_open(self, name: str) -> set[str]:
        """Module paths to draw open so that ``name`` (and its counterparts) can be seen."""
        if not name:
            return set()
        if name in self._module_paths() and not any(name in g for g in self._graphs_by_side().values()):
            return set(module_ancestors(name))
        out: set[str] = set()
        for side, names in self._counterparts(name).items():
            graph = self._graphs_by_side().get(side)
            for node in names:
                if graph is not None and node in graph:
                    out.update(module_ancestors(graph[node].module or ""))
        return out

    def _on_front_end_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if isinstance(content, dict) and content.get("type") == "search":
            self.search(str(content.get("text", "")))
        elif isinstance(content, dict) and content.get("type") == "cancel":
            self.cancel_overlay()

    # -- search -----------------------------------------------------------------------------------
    def search(self, text: str) -> str | None:
        """What Enter in the search box does: a node name selects that node; a module path (or
        the end of one, ``fc1``) selects and opens that module; an op type (``MatMul``)
        selects its first node and lists the others; anything else lists the closest names.
        Returns what was selected (``None`` when nothing matched). Never raises."""
        text = text.strip()
        if not text or self._prepared is None:
            return None
        sides = self._graphs_by_side()
        modules = self._module_paths()
        if any(text in g for g in sides.values()) or text in modules:
            return self._select_found(text, "")
        tails = sorted((m for m in modules if m.endswith("." + text)), key=module_sort_key)
        if len(tails) == 1:
            return self._select_found(tails[0], f"module {tails[0]}")
        if tails:
            self.message = {"kind": "info", "text": f"{len(tails)} modules end with {text!r}:", "names": tails[:20]}
            return None
        of_op = [n.name for g in sides.values() for n in g.nodes
                 if text.lower() in (n.op.lower(), _short(n.op).lower())]
        if of_op:
            more = f"; {len(of_op)} nodes of op {text}:" if len(of_op) > 1 else ""
            return self._select_found(of_op[0], f"selected {of_op[0]}{more}", of_op[:20] if len(of_op) > 1 else [])
        close = _close(text, self.names)
        self.message = {"kind": "warning", "text": f"no node, op or module is named {text!r}"
                        + ("; the closest names:" if close else ""), "names": close}
        return None

    def _select_found(self, name: str, text: str, names: list[str] | None = None) -> str:
        self.message = {"kind": "info", "text": text, "names": names or []} if text else {}
        if self.selected == name:
            self._selected_changed({"new": name})  # re-open what was collapsed since
        else:
            self.selected = name
        return name

    # -- drawing ------------------------------------------------------------------------------------
    def _relayout(self, expand: Iterable[str]) -> None:
        with self._lock:
            busy = self.status
            self.status = "laying out…"
            try:
                view = self._layout(tuple(expand), self._values, self._drawn_overlay)
            finally:
                self.status = busy if self._jobs.job is not None else ""
            self._draw(view)

    def _layout(self, expand: tuple[str, ...], values: dict[str, float], overlay: str) -> GraphView:
        """The drawing with ``values`` painted; a module box sums up its nodes (time adds up,
        an error is as bad as its worst node)."""
        p = self._current()
        reduce = "max" if overlay == "error" else "sum"
        scale = "tolerance" if overlay == "error" else "relative"
        if p.onnx is not None:
            return side_by_side(p.graphs, expand=expand, overlay=values or None, fx=p.fx_kind,
                                max_children=self._max_children, overlay_reduce=reduce, overlay_scale=scale)
        return fx_alone(p.graphs, expand=expand, overlay=values or None, fx=p.fx_kind,
                        max_children=self._max_children, note=p.note, overlay_reduce=reduce, overlay_scale=scale)

    def _draw(self, view: GraphView) -> None:
        with self._lock, self.hold_sync():
            self._quiet = True
            try:
                if list(view.expanded) != list(self.expanded):
                    self.expanded = list(view.expanded)
            finally:
                self._quiet = False
            if view.svg is None:  # no Graphviz: say so in the panel
                self.message = {"kind": "error", "text": view.message or "no drawing", "names": []}
                self.svg = ""
                self.details = {}
            else:
                self.details = self._details_for(view.svg)
                self.svg = view.svg
            self.layout_seconds = float(view.seconds)
            self.highlight = self._highlight_ids()
            if self.legend.get("kind") == "time" and self._drawn_overlay == "time":
                # the top colour stands for the largest box drawn: it changes as modules open
                self.legend = time_legend(view.overlay_max, case=self.legend.get("case", "")).to_dict()

    def _visible_ids(self) -> set[str]:
        return set(self.details)

    def _unit_id(self, side: str, name: str, visible: set[str]) -> str | None:
        """The element standing for node ``name`` on ``side``: its own box, or the collapsed
        module (or folded run) holding it."""
        own = f"{side}-op-{name}"
        if own in visible:
            return own
        graph = self._graphs_by_side().get(side)
        if graph is None or name not in graph:
            return None
        for path in module_ancestors(graph[name].module or ""):
            if f"{side}-module-{path}" in visible:
                return f"{side}-module-{path}"
            for element in visible:
                if element.startswith(f"{side}-more-") and path in self.details[element].get("modules", ()):
                    return element
        return None

    def _highlight_ids(self) -> list[str]:
        name = self.selected
        if not name or self._prepared is None:
            return []
        visible = self._visible_ids()
        sides = self._graphs_by_side()
        if name in self._module_paths() and not any(name in g for g in sides.values()):
            return [e for side in sides for e in (f"{side}-cluster-{name}", f"{side}-module-{name}") if e in visible]
        out = []
        for side, names in self._counterparts(name).items():
            for node in sorted(names):
                element = self._unit_id(side, node, visible)
                if element is not None and element not in out:
                    out.append(element)
        return out

    def _details_for(self, svg: str) -> dict[str, dict[str, Any]]:
        """Per element drawn (node, module box, folded run, open module): what the panel shows."""
        sides = self._graphs_by_side()
        found = [(side, kind, html.unescape(rest)) for side, kind, rest in _ELEMENT.findall(svg)]
        drawn = {f"{side}-{kind}-{rest}" for side, kind, rest in found}
        trees, counts = self._index().trees, self._index().counts
        out: dict[str, dict[str, Any]] = {}
        for side, kind, rest in found:
            element = f"{side}-{kind}-{rest}"
            graph = sides.get(side)
            if graph is None:
                continue
            if kind == "op" and rest in graph:
                out[element] = self._node_details(side, graph[rest], drawn)
            elif kind in ("module", "cluster"):
                count = counts[side][rest]
                out[element] = {"kind": kind, "side": side, "path": rest, "class": graph.module_classes.get(rest),
                                "nodes": count, "children": trees[side].get(rest, [])[:40]}
            elif kind == "more":
                out[element] = {"kind": "more", "side": side, "path": rest,
                                "modules": self._folded_run(trees[side], rest, side, drawn)}
        return out

    @staticmethod
    def _folded_run(tree: dict[str, list[str]], first: str, side: str, drawn: set[str]) -> list[str]:
        parent = first.rsplit(".", 1)[0] if "." in first else ""
        siblings = tree.get(parent, [])
        if first not in siblings:
            return [first]
        run: list[str] = []
        for path in siblings[siblings.index(first):]:
            if run and (f"{side}-module-{path}" in drawn or f"{side}-cluster-{path}" in drawn
                        or f"{side}-more-{path}" in drawn):
                break
            run.append(path)
        return run

    def _node_details(self, side: str, node: GraphNode, drawn: set[str]) -> dict[str, Any]:
        types = self._value_types(side)
        value, ratio = self._raw.get(node.name), self._values.get(node.name) if self._drawn_overlay == "error" else None
        counterparts = self._counterparts(node.name)
        other = "onnx" if side == "fx" else "fx"
        mapped = sorted(counterparts[other])
        if value is None and side == "fx" and mapped:
            found = [self._raw[m] for m in mapped if m in self._raw]
            value = (max(found) if self._drawn_overlay == "error" else sum(found)) if found else None
            ratios = [self._values[m] for m in mapped if m in self._values]
            ratio = max(ratios) if ratios and self._drawn_overlay == "error" else ratio
        entry = None
        p = self._current()
        if side == "onnx" and p.mapping is not None:
            entry = p.mapping[node.name]
        return {
            "kind": "op", "side": side, "name": node.name, "op": node.op,
            "attributes": [list(a) for a in node.attributes],
            "inputs": [[name, types.get(name, "")] for name in node.inputs if name],
            "outputs": [[v.name, v.type_text()] for v in node.outputs],
            "module": node.module, "class": node.module_class, "source": short_source(node.source or (entry.source if entry else None)),
            "mapped": [[other, m, f"{other}-op-{m}" if f"{other}-op-{m}" in drawn else None] for m in mapped],
            "origin": entry.origin if entry is not None else None,
            "value": value, "overlay": self._drawn_overlay, "value_text": _value_text(self._drawn_overlay, value, ratio),
        }

    def _value_types(self, side: str) -> dict[str, str]:
        key = (id(self._prepared), side)
        if key not in self._types_cache:
            graph = self._graphs_by_side()[side]
            types = {v.name: v.type_text() for v in graph.inputs}
            types.update({v.name: v.type_text() for n in graph.nodes for v in n.outputs})
            self._types_cache[key] = types
        return self._types_cache[key]

    def __repr__(self) -> str:
        if self._prepared is None:
            return "GraphWidget(nothing drawn)"
        return (f"GraphWidget(selected={self.selected!r}, expanded={list(self.expanded)}, overlay={self.overlay!r}, "
                f"{len(self.details)} elements drawn)")


def _value_text(overlay: str, value: float | None, ratio: float | None) -> str | None:
    """What the panel says about a node's overlay value: ``0.012 ms per run``, ``3e-08 (0.01×
    tolerance)``."""
    if value is None:
        return None
    if overlay == "time":
        return f"{value / 1000:.3g} ms per run"
    if ratio is None:
        return f"{value:.3g}"
    return f"{value:.3g} ({ratio:.2g}× the allowed error: {'within' if ratio <= 1 else 'over'} tolerance)"


def _tolerance_rule() -> str:
    """The rule the comparison applies (verify's default tolerances), for float32 values."""
    from exporter.verify.tolerance import tolerance_for

    return f"float32: {tolerance_for('float32')}"


def _short(op: str) -> str:
    return short_op(op, namespace=False)


def _failing_case(verified: Any) -> str | None:
    """The case a failed verify located its first divergence in, else its first case whose
    values differ; None when no case computed wrong values (the contract failed, or
    onnxruntime refused a case)."""
    names = [c.name for c in verified.cases if c.status == "fail"]
    located = verified.divergence.case if verified.divergence is not None else None
    return located if located in names else (names[0] if names else None)


def _example_text(session: Any) -> str:
    """``the example inputs (batch=2, seq=16)``: the inputs a profile runs on, with the sizes of
    their dynamic dims (each tied group once)."""
    sizes = [f"{row.name or row.axes}={row.first.example}" for row in session.dims.grouped() if row.first.dynamic]
    return f"the example inputs ({', '.join(sizes)})" if sizes else "the example inputs"


def _case_text(verified: Any, name: str) -> str:
    """``min (batch=1)``: a verify case's name with its sizes."""
    try:
        sizes = verified.case(name).sizes_text
    except KeyError:
        return name
    return name if sizes in (name, "all static") else f"{name} ({sizes})"
