"""The drawing of an export's graphs: FX and ONNX side by side, grouped by module, with the
node mapping between them::

    from exporter.graphs.draw import side_by_side

    side_by_side(session)                                  # collapsed to top-level modules
    side_by_side(session, expand=("encoder.layer.0",))     # open one module (and its parents)
    side_by_side(session, select="node_MatMul_3")          # an ONNX node and its FX origins
    side_by_side(session, overlay=session.profile())       # colour by onnxruntime time per node
    before_after(pass_graphs(session, 3))                  # the model before and after optimizer pass 3

The FX program after decompositions (what was translated) is on the left, the optimized ONNX
model on the right, each laid out by Graphviz's ``dot`` (:mod:`~exporter.graphs.dot`,
:mod:`~exporter.graphs.svg`), painted by an overlay (:mod:`~exporter.graphs.overlay`). The
result is data, a :class:`GraphView`: ``.svg`` is the SVG text, and a notebook displays it.
Without ``dot`` the view says so and holds the per-module alignment table instead. The
report (:mod:`exporter.report`) and the workbench's graph widget draw with it.
"""

from __future__ import annotations

import difflib
import html
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .dot import SideStyle, side_digraph, side_digraphs
from .mapping import MappingEntry, NodeMapping
from .model import Graph, module_ancestors
from .overlay import OverlaySource, check_reducer, overlay_values, reduce_values
from .pass_graphs import PassGraphs
from .plumbing import fold_plumbing
from .session_graphs import ExportGraphs, SessionGraphs
from .svg import DotMissing, layout_svgs, side_by_side_svg

__all__ = ["CHANGE_COLOURS", "GraphView", "before_after", "fx_alone", "side_by_side"]

FX_KINDS = ("fx_decomposed", "fx")
# The fill of a node an optimizer pass touched (before_after).
CHANGE_COLOURS = {"removed": "#f4a3a3", "added": "#a8dba0", "changed": "#ffd97a"}


@dataclass(frozen=True)
class GraphView:
    """A rendered side-by-side view.

    ``svg`` is one SVG document (``None`` when Graphviz is missing, then ``message`` says why
    and ``table`` holds the module alignment instead). ``fx_dot`` / ``onnx_dot`` are the
    Graphviz sources, ``expanded`` the module paths drawn open, ``selected`` the highlighted
    ``(side, node)`` pairs, ``seconds`` the time taken."""

    svg: str | None
    fx_dot: str | None
    onnx_dot: str | None
    expanded: tuple[str, ...]
    selected: tuple[tuple[str, str], ...]
    seconds: float
    message: str | None = None
    table: Any = None  # a pandas DataFrame
    overlay_max: float = 0.0  # the overlay value the top colour stands for (relative scale; 0: none)

    def _repr_svg_(self) -> str | None:
        return self.svg

    def _repr_html_(self) -> str:
        if self.svg is None:
            table = self.table.to_html(index=False) if self.table is not None else ""
            return f'<div class="wb-graph-fallback"><p>{html.escape(self.message or "")}</p>{table}</div>'
        return f'<div class="wb-graph-view" style="overflow:auto; max-height:80vh">{readable_svg(self.svg)}</div>'

    def __repr__(self) -> str:
        if self.svg is None:
            return f"GraphView(no drawing: {self.message})"
        chosen = ", ".join(f"{side}:{name}" for side, name in self.selected) or "none"
        return (f"GraphView({len(self.svg)} chars of SVG, expanded={list(self.expanded)}, selected={chosen}, "
                f"{self.seconds:.2f} s)")


#: The smallest scale a drawing is shown at in a notebook: node text (10 pt) stays ≥ 10 px.
MIN_SCALE = 0.75
_SVG_SIZE = re.compile(r'<svg\b[^>]*?\swidth="([\d.]+)pt"[^>]*?\sheight="([\d.]+)pt"')


def readable_svg(svg: str, min_scale: float = MIN_SCALE) -> str:
    """``svg`` sized for a notebook's output area: it shrinks to the area's width (JupyterLab
    scales SVGs to 100%), but never below ``min_scale`` of its natural size; past that the
    output scrolls instead of drawing text too small to read."""
    size = _SVG_SIZE.search(svg)
    if size is None:
        return svg
    width = float(size.group(1)) * 4 / 3  # pt → CSS px
    style = (f' style="width:{width:.0f}px; max-width:100%; min-width:{width * min_scale:.0f}px; height:auto"')
    return svg[:size.start()] + "<svg" + style + svg[size.start() + len("<svg"):]


def _graphs(source: ExportGraphs | SessionGraphs) -> SessionGraphs:
    return source if isinstance(source, SessionGraphs) else source.graphs


def _close(name: str, candidates: Iterable[str]) -> str:
    matches = difflib.get_close_matches(name, list(candidates), n=5, cutoff=0.5)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def _module_paths(*graphs: Graph) -> set[str]:
    return {a for g in graphs for n in g.nodes for a in module_ancestors(n.module or "")}


def _counterparts(select: str, fx: Graph, onnx: Graph, mapping: NodeMapping, fx_kind: str) -> tuple[set[str], set[str]]:
    """(FX names, ONNX names) to highlight for the selected node name."""

    def origins(entry: MappingEntry) -> tuple[str, ...]:
        return entry.fx_nodes if fx_kind == "fx_decomposed" else entry.fx_captured

    if select in onnx:
        return set(origins(mapping[select])), {select}
    if select in fx:
        return {select}, {e.onnx_node for e in mapping.entries if select in origins(e)}
    names = list(onnx.names) + list(fx.names)
    raise ValueError(f"select={select!r} is no node of the ONNX model or the FX graph{_close(select, names)}")


def _propagate(values: dict[str, float], fx: Graph, onnx: Graph, mapping: NodeMapping, fx_kind: str,
               reduce: str) -> tuple[dict[str, float], dict[str, float]]:
    """Split overlay values by side; a side with none gets them through the mapping."""
    fx_values = {k: v for k, v in values.items() if k in fx}
    onnx_values = {k: v for k, v in values.items() if k in onnx}

    def pick(entry: MappingEntry) -> tuple[str, ...]:
        return entry.fx_nodes if fx_kind == "fx_decomposed" else entry.fx_captured

    if onnx_values and not fx_values:
        gathered: dict[str, list[float]] = {}
        for entry in mapping.entries:
            if entry.onnx_node in onnx_values:
                for name in pick(entry):
                    gathered.setdefault(name, []).append(onnx_values[entry.onnx_node])
        fx_values = {k: reduce_values(v, reduce) for k, v in gathered.items()}
    elif fx_values and not onnx_values:
        for entry in mapping.entries:
            found = [fx_values[n] for n in pick(entry) if n in fx_values]
            if found:
                onnx_values[entry.onnx_node] = max(found)
    return fx_values, onnx_values


def _checked_arguments(fx: str, overlay_reduce: str, expand: Iterable[str]) -> tuple[str, ...]:
    """``fx`` and ``overlay_reduce`` checked; ``expand`` as a tuple (one path may be a string)."""
    if fx not in FX_KINDS:
        raise ValueError(f"fx must be one of {', '.join(FX_KINDS)}, not {fx!r}")
    check_reducer(overlay_reduce)
    return (expand,) if isinstance(expand, str) else tuple(expand)


def _check_expand(expand: Iterable[str], paths: set[str]) -> None:
    for path in expand:
        if path not in paths:
            raise ValueError(f"expand: no module {path!r} in the graphs{_close(path, paths)}")


def side_by_side(
    session: ExportGraphs | SessionGraphs,
    expand: Iterable[str] = (),
    select: str | None = None,
    overlay: OverlaySource = None,
    *,
    fx: str = "fx_decomposed",
    overlay_reduce: str = "sum",
    max_children: int = 24,
    overlay_scale: str = "relative",
) -> GraphView:
    """Draw the session's FX graph (left) and optimized ONNX model (right), grouped into
    clusters by module path.

    - ``expand``: module paths to draw open (``"encoder.layer.0"`` opens its parents too);
      every other module is one box. Default: top-level modules only.
    - ``select``: an ONNX or FX node name; it and its counterparts on the other side are
      highlighted (CSS class ``wb-selected``) and their modules opened.
    - ``overlay``: a value per node (ONNX or FX names; a mapping, a pandas Series or
      ``session.profile()``) painted light yellow → dark red; module boxes show the
      ``overlay_reduce`` (``sum``, ``max``, ``mean``) of their nodes, and a side without values
      gets them through the mapping.
    - ``fx``: ``fx_decomposed`` (what was translated; the default) or ``fx`` (as captured).
    - ``max_children``: submodule boxes shown per open module before runs are folded.
    - ``overlay_scale``: ``relative`` (the colours run up to the largest value drawn, on both
      sides: ``GraphView.overlay_max``) or ``tolerance`` (each value is an error ÷ its allowed
      error: green up to 1, orange → red above).

    The top-level nodes that only derive masks, positions and shapes from the inputs are drawn
    as one "mask & position plumbing" box (:mod:`~exporter.graphs.plumbing`), opened like a
    module (``expand=("(plumbing)",)``).

    ``session`` is an :class:`exporter.Session` (or its ``graphs``). A name that matches
    nothing raises ``ValueError`` with the closest names."""
    start = time.perf_counter()
    expand = _checked_arguments(fx, overlay_reduce, expand)
    graphs = _graphs(session)
    fx_graph, onnx_graph, mapping = fold_plumbing(graphs[fx]), fold_plumbing(graphs.onnx_optimized), graphs.mapping

    paths = _module_paths(fx_graph, onnx_graph)
    _check_expand(expand, paths)
    fx_selected: set[str] = set()
    onnx_selected: set[str] = set()
    if select is not None:
        fx_selected, onnx_selected = _counterparts(select, fx_graph, onnx_graph, mapping, fx)

    expanded = {a for path in expand for a in module_ancestors(path)}
    for graph, chosen in ((fx_graph, fx_selected), (onnx_graph, onnx_selected)):
        for name in chosen:
            expanded.update(module_ancestors(graph[name].module or ""))

    values = overlay_values(overlay, set(fx_graph.names) | set(onnx_graph.names))
    fx_values, onnx_values = _propagate(values, fx_graph, onnx_graph, mapping, fx, overlay_reduce)
    title = "FX (decomposed)" if fx == "fx_decomposed" else "FX (captured)"
    styles = (
        SideStyle("fx", f"{title}: {len(fx_graph)} nodes", frozenset(expanded), frozenset(fx_selected), fx_values,
                  overlay_reduce, max_children, scale=overlay_scale),
        SideStyle("onnx", f"ONNX (optimized): {len(onnx_graph)} nodes", frozenset(expanded), frozenset(onnx_selected),
                  onnx_values, overlay_reduce, max_children, scale=overlay_scale),
    )
    selected = tuple([("fx", n) for n in sorted(fx_selected)] + [("onnx", n) for n in sorted(onnx_selected)])
    try:
        digraphs, top = side_digraphs(list(zip((fx_graph, onnx_graph), styles)))
        svgs = layout_svgs(digraphs)
    except DotMissing as exc:
        return GraphView(None, None, None, tuple(sorted(expanded)), selected, time.perf_counter() - start,
                         message=f"{exc}. Showing the per-module alignment instead.",
                         table=graphs.modules_frame(fx=fx))
    return GraphView(side_by_side_svg(svgs), digraphs[0].source, digraphs[1].source, tuple(sorted(expanded)),
                     selected, time.perf_counter() - start, overlay_max=top)


def fx_alone(
    session: ExportGraphs | SessionGraphs,
    expand: Iterable[str] = (),
    overlay: OverlaySource = None,
    *,
    fx: str = "fx_decomposed",
    overlay_reduce: str = "sum",
    max_children: int = 24,
    note: str = "",
    overlay_scale: str = "relative",
) -> GraphView:
    """The FX graph alone, drawn as :func:`side_by_side` draws its left side: for an export
    whose ONNX side could not be built (translate failed). ``note`` goes into the title."""
    start = time.perf_counter()
    expand = _checked_arguments(fx, overlay_reduce, expand)
    graphs = _graphs(session)
    fx_graph = fold_plumbing(graphs[fx])
    paths = _module_paths(fx_graph)
    _check_expand(expand, paths)
    expanded = {a for path in expand for a in module_ancestors(path)}
    values = overlay_values(overlay, fx_graph.names)
    title = "FX (decomposed)" if fx == "fx_decomposed" else "FX (captured)"
    style = SideStyle("fx", f"{title}: {len(fx_graph)} nodes (no ONNX side)", frozenset(expanded), frozenset(),
                      values, overlay_reduce, max_children, scale=overlay_scale)
    try:
        (digraph,), top = side_digraphs([(fx_graph, style)])
        svg = side_by_side_svg(layout_svgs([digraph]))
    except DotMissing as exc:
        return GraphView(None, None, None, tuple(sorted(expanded)), (), time.perf_counter() - start,
                         message=f"{exc}. {note}".strip())
    return GraphView(svg, digraph.source, None, tuple(sorted(expanded)), (), time.perf_counter() - start,
                     message=note or None, overlay_max=top)


def before_after(step: PassGraphs, expand: Iterable[str] = (), *, max_children: int = 24) -> GraphView:
    """One optimizer pass (:func:`exporter.graphs.pass_graphs.pass_graphs`) drawn as
    :func:`side_by_side` draws, with the model before the pass on the left and after it on the
    right. The nodes it removed (red fill, left), added (green, right) and changed (yellow, both
    sides) are highlighted (``wb-selected``) and their modules opened; ``expand`` opens more.
    ``selected`` holds ``("before", name)`` and ``("after", name)`` pairs."""
    start = time.perf_counter()
    expand = (expand,) if isinstance(expand, str) else tuple(expand)
    before_graph, after_graph = fold_plumbing(step.before), fold_plumbing(step.after)
    _check_expand(expand, _module_paths(before_graph, after_graph))
    expanded = {a for path in expand for a in module_ancestors(path)}
    for graph, names in ((before_graph, step.highlighted_before), (after_graph, step.highlighted_after)):
        for name in names:
            expanded.update(module_ancestors(graph[name].module or ""))
    label = f"pass {step.record.index}:\n{step.record.label}"
    fills_before = {**{n: CHANGE_COLOURS["changed"] for n in step.changed_before},
                    **{n: CHANGE_COLOURS["removed"] for n in step.removed}}
    fills_after = {**{n: CHANGE_COLOURS["changed"] for n in step.changed_after},
                   **{n: CHANGE_COLOURS["added"] for n in step.added}}
    styles = (
        # titles on short lines: a side is as wide as its widest line, and a wide drawing is
        # scaled down to the notebook's width (≈ 570 px beside JupyterLab's file browser)
        SideStyle("before", f"before {label}\n{len(before_graph)} nodes: {len(step.removed)} removed, "
                  f"{len(step.changed_before)} changed", frozenset(expanded), step.highlighted_before,
                  max_children=max_children, fills=fills_before),
        SideStyle("after", f"after it\n{len(after_graph)} nodes: {len(step.added)} added, "
                  f"{len(step.changed_after)} changed", frozenset(expanded), step.highlighted_after,
                  max_children=max_children, fills=fills_after),
    )
    selected = tuple([("before", n) for n in sorted(step.highlighted_before)]
                     + [("after", n) for n in sorted(step.highlighted_after)])
    try:
        digraphs = [side_digraph(g, s) for g, s in zip((before_graph, after_graph), styles)]
        svgs = layout_svgs(digraphs)
    except DotMissing as exc:
        return GraphView(None, None, None, tuple(sorted(expanded)), selected, time.perf_counter() - start,
                         message=f"{exc}. Showing the pass's changes instead.", table=step.record.diff().to_frame())
    return GraphView(side_by_side_svg(svgs), digraphs[0].source, digraphs[1].source, tuple(sorted(expanded)),
                     selected, time.perf_counter() - start)
