"""One graph (FX or ONNX) as a Graphviz ``Digraph``, grouped by module (the sides of
:func:`exporter.graphs.draw.side_by_side`).

A module is drawn either *collapsed*, as one box standing for every node inside it, or
*expanded*, as a cluster holding its own nodes and its submodules (themselves collapsed or
expanded). Modules are nested by their dotted path (``encoder`` ⊃ ``encoder.layer`` ⊃
``encoder.layer.0``). An expanded module with many collapsed children (600 blocks) shows the
first and last few and folds each run in between into one "… N modules" box.

SVG elements carry ids (``<side>-op-<node>``, ``<side>-module-<path>``...) and CSS classes
that a page styles and clicks: ``wb-op`` (a node), ``wb-module`` (a collapsed module),
``wb-more`` (folded modules), ``wb-io`` (graph input/output), ``wb-cluster`` (an expanded
module), plus ``wb-selected`` on highlighted nodes and ``wb-overlay`` on coloured ones; the
folded mask & position plumbing (:mod:`~exporter.graphs.plumbing`) is a ``wb-module wb-plumbing``
box labelled "mask & position plumbing (N nodes)".
The ``graphviz`` package is imported when a graph is built.

Every label, id and tooltip is user text (module paths, node and value names, source lines)
and goes in through :func:`dot_text` or :func:`dot_tooltip`, so a backslash, a quote, an
escape sequence (``\\N``), an entity (``&lt;``) or something that looks like an HTML-like
label (``<b>``) is drawn as written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

from .model import Graph, GraphNode, module_ancestors, short_source
from .modules import module_tree, short_op
from .overlay import ramp_colour, reduce_values, tolerance_colour
from .plumbing import PLUMBING, plumbing_label

__all__ = ["SideStyle", "dot_text", "dot_tooltip", "side_digraph", "side_digraphs"]

SELECTED_COLOUR = "#d62728"


@dataclass(frozen=True)
class SideStyle:
    """What to show on one side: ``expanded`` module paths, ``selected`` node names,
    ``values`` per node name (overlay) reduced per module with ``reduce`` and coloured
    relative to the largest value shown, at most
    ``max_children`` submodule boxes per expanded module before folding runs of them; ``fills``
    a fill colour per node name (the overlay paints over it)."""

    side: str
    title: str
    expanded: frozenset[str] = frozenset()
    selected: frozenset[str] = frozenset()
    values: Mapping[str, float] = field(default_factory=dict)
    reduce: str = "sum"
    max_children: int = 24
    fills: Mapping[str, str] = field(default_factory=dict)  # node name → fill colour (a pass's changes)
    # how values are coloured: "relative" (light yellow → dark red up to the largest value shown,
    # or ``scale_max`` when given) or "tolerance" (a value is an error ÷ its allowed error: green
    # up to 1, orange → red above)
    scale: str = "relative"
    scale_max: float | None = None


def _quoted(text: str) -> str:
    # the graphviz package passes "<...>" through as an HTML-like label unless it is marked nohtml
    import graphviz

    return graphviz.nohtml(text)


def dot_text(text: str) -> str:
    """``text`` as a DOT label or id that Graphviz draws (or writes into the SVG) exactly as
    written: backslashes doubled (no ``\\N``/``\\l`` escape sequences, no dangling ``\\``
    before the closing quote), ``&`` written ``&amp;`` (Graphviz decodes entities in labels
    and ids), and never an HTML-like label. Quotes are escaped by the ``graphviz`` package."""
    return _quoted(text.replace("&", "&amp;").replace("\\", "\\\\"))


def dot_tooltip(text: str) -> str:
    """``text`` as a DOT tooltip that the SVG shows as written. Graphviz reads a tooltip's
    backslashes twice (once as an escString, once for ``\\N``-style names), so each one is
    written four times."""
    return _quoted(text.replace("&", "&amp;").replace("\\", "\\" * 4))


def _attrs(element_id: str, css: str, **more: str) -> dict[str, str]:
    return {"id": element_id, "class": css, **more}


def _node(container: Any, gid: str, label: str, attrs: dict[str, str]) -> None:
    """One Graphviz node; its label, id and tooltip are plain text, escaped here."""
    escaped = {**attrs, "id": dot_text(attrs["id"])}
    if "tooltip" in attrs:
        escaped["tooltip"] = dot_tooltip(attrs["tooltip"])
    container.node(gid, dot_text(label), **escaped)


# What an expanded module (or the root) holds, as planned before it is drawn.
@dataclass(frozen=True)
class _Box:
    """A collapsed module: one box standing for its ``names`` (every node inside)."""

    gid: str
    path: str
    names: list[str]


@dataclass(frozen=True)
class _More:
    """A run of collapsed sibling modules folded into one "… N modules" box."""

    gid: str
    paths: list[str]
    names: list[str]


@dataclass(frozen=True)
class _Cluster:
    """An expanded module: a cluster holding its own items."""

    path: str
    items: list[_Item]


@dataclass(frozen=True)
class _Op:
    """A node drawn as itself."""

    node: GraphNode


_Item = Union[_Box, _More, _Cluster, _Op]


class _Builder:
    def __init__(self, graph: Graph, style: SideStyle) -> None:
        import graphviz

        self.graphviz = graphviz
        self.graph = graph
        self.style = style
        self.side = style.side
        modules = {n.module or "" for n in graph.nodes}
        self.tree = module_tree(modules)
        self.nodes_in: dict[str, list[GraphNode]] = {}  # module path → nodes directly in it
        for node in graph.nodes:
            self.nodes_in.setdefault(node.module or "", []).append(node)
        self.highlighted_modules = {
            a for name in style.selected if name in graph for a in module_ancestors(graph[name].module or "")
        }
        self.owner: dict[str, str] = {}  # collapsed module path → graphviz node id
        self.members: dict[str, list[str]] = {}  # graphviz node id → node names it stands for
        self.counter = 0
        self.op_ids: dict[str, str] = {}  # node name → graphviz node id
        self.value_max = 0.0
        self.local_max = 0.0
        self.items: list[_Item] | None = None

    def new_id(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    # -- nodes ---------------------------------------------------------------------------
    def unit_of(self, node: GraphNode) -> str:
        for path in module_ancestors(node.module or ""):
            if path in self.owner:
                return self.owner[path]
        return self.op_ids[node.name]

    def _value(self, names: list[str]) -> float | None:
        found = [self.style.values[n] for n in names if n in self.style.values]
        return reduce_values(found, self.style.reduce) if found else None

    def _paint(self, attrs: dict[str, str], names: list[str]) -> None:
        value = self._value(names)
        if value is None:
            return
        if self.style.scale == "tolerance":
            colour, dark = tolerance_colour(value), value > 10
        elif self.value_max:
            colour, dark = ramp_colour(value / self.value_max), value / self.value_max > 0.6
        else:
            return
        if "filled" not in attrs.get("style", ""):
            attrs["style"] = (attrs.get("style", "") + ",filled").lstrip(",")
        attrs["fillcolor"] = colour
        if dark:  # dark red: black text would be hard to read
            attrs["fontcolor"] = "white"
        attrs["class"] += " wb-overlay"
        attrs["tooltip"] = attrs.get("tooltip", "") + f"\nvalue: {value:.4g}"

    def _descendant_nodes(self, path: str) -> list[str]:
        out = [n.name for n in self.nodes_in.get(path, ())]
        for child in self.tree.get(path, ()):
            out.extend(self._descendant_nodes(child))
        return out

    def emit_module_box(self, container: Any, gid: str, path: str, names: list[str]) -> None:
        cls = self.graph.module_classes.get(path)
        if path == PLUMBING:  # the folded mask & position plumbing: one box, opened like a module
            label = plumbing_label(len(names)).replace(" (", "\n(")
            attrs = _attrs(f"{self.side}-module-{path}", "wb-module wb-plumbing", shape="box", style="filled,dashed",
                           fillcolor="#eef3fb", tooltip=f"{plumbing_label(len(names))}: click to open")
        else:
            label = "\n".join(x for x in (path, cls, f"{len(names)} node{'s' * (len(names) != 1)}") if x)
            attrs = _attrs(f"{self.side}-module-{path}", "wb-module", shape="box", style="filled", fillcolor="#eeeeee",
                           tooltip=f"{path} ({cls or 'module'})")
        if path in self.highlighted_modules:
            attrs["class"] += " wb-contains-selected"
        self._paint(attrs, names)
        _node(container, gid, label, attrs)

    def emit_more_box(self, container: Any, gid: str, run: list[str], names: list[str]) -> None:
        label = f"… {len(run)} modules\n{run[0]} … {run[-1]}\n{len(names)} nodes"
        attrs = _attrs(f"{self.side}-more-{run[0]}", "wb-more", shape="box", style="dashed",
                       tooltip=f"{run[0]} … {run[-1]}: pass one of them to expand= to open it")
        self._paint(attrs, names)
        _node(container, gid, label, attrs)

    def emit_op(self, container: Any, node: GraphNode) -> None:
        gid = self.op_ids[node.name]
        out = node.outputs[0].type_text() if node.outputs else ""
        op = short_op(node.op, namespace=False)
        label = (op if node.name in (op, op.split(".")[0]) else f"{op}\n{node.name}") + (f"\n{out}" if out and out != "?" else "")
        tooltip = "\n".join(x for x in (f"{node.op} {node.name}", f"module: {node.module}" if node.module else "",
                                          short_source(node.source) or "") if x)
        attrs = _attrs(f"{self.side}-op-{node.name}", "wb-op", shape="box", style="rounded", tooltip=tooltip)
        if node.name in self.style.selected:
            attrs["class"] += " wb-selected"
            attrs.update(color=SELECTED_COLOUR, penwidth="3")
        if node.name in self.style.fills:
            attrs.update(style="rounded,filled", fillcolor=self.style.fills[node.name])
        self._paint(attrs, [node.name])
        _node(container, gid, label, attrs)

    # -- structure -----------------------------------------------------------------------
    def _runs(self, children: list[str]) -> list[str | list[str]]:
        """Children in order; runs of collapsed, unselected ones beyond ``max_children`` folded."""
        limit = self.style.max_children
        if len(children) <= limit:
            return list(children)
        head, tail = limit // 2, limit - limit // 2 - 1
        keep = set(children[:head]) | set(children[len(children) - tail:])
        keep |= {c for c in children if c in self.style.expanded or c in self.highlighted_modules}
        out: list[str | list[str]] = []
        run: list[str] = []
        for child in children:
            if child in keep:
                if run:
                    out.append(run if len(run) > 1 else run[0])
                    run = []
                out.append(child)
            else:
                run.append(child)
        if run:
            out.append(run if len(run) > 1 else run[0])
        return out

    def plan(self, path: str) -> list[_Item]:
        """What an expanded module (or the root) holds; records which graphviz node stands
        for each collapsed module."""
        items: list[_Item] = []
        for item in self._runs(self.tree.get(path, [])):
            if isinstance(item, list):
                gid = self.new_id("r")
                names = [n for child in item for n in self._descendant_nodes(child)]
                self.owner.update({child: gid for child in item})
                items.append(_More(gid, item, names))
            elif item in self.style.expanded:
                items.append(_Cluster(item, self.plan(item)))
            else:
                gid = self.new_id("m")
                self.owner[item] = gid
                items.append(_Box(gid, item, self._descendant_nodes(item)))
        items.extend(_Op(node) for node in self.nodes_in.get(path, ()))
        return items

    def unit_values(self, items: list[_Item]) -> list[float]:
        out: list[float] = []
        for item in items:
            if isinstance(item, _Cluster):
                out.extend(self.unit_values(item.items))
            else:
                value = self._value(item.names if isinstance(item, (_Box, _More)) else [item.node.name])
                if value is not None:
                    out.append(value)
        return out

    def emit(self, container: Any, items: list[_Item]) -> None:
        for item in items:
            if isinstance(item, _Box):
                self.emit_module_box(container, item.gid, item.path, item.names)
            elif isinstance(item, _More):
                self.emit_more_box(container, item.gid, item.paths, item.names)
            elif isinstance(item, _Op):
                self.emit_op(container, item.node)
            else:
                path = item.path
                with container.subgraph(name=f"cluster_{self.new_id('c')}") as cluster:
                    cls = self.graph.module_classes.get(path)
                    title = cls if path == PLUMBING else f"{path} ({cls})" if cls else path
                    cluster.attr(label=dot_text(title or path), style="rounded",
                                 color="#7f7f7f", id=dot_text(f"{self.side}-cluster-{path}"),
                                 **{"class": "wb-cluster"})
                    self.emit(cluster, item.items)

    def prepare(self) -> float:
        """Plan the drawing; the largest value of a unit drawn (0 without values)."""
        self.op_ids = {node.name: f"n{i}" for i, node in enumerate(self.graph.nodes)}
        self.items = self.plan("")
        values = self.unit_values(self.items) if self.style.values else []
        self.local_max = max(values, default=0.0)
        return self.local_max

    def build(self, value_max: float | None = None) -> Any:
        """The digraph; overlay values coloured up to ``value_max`` (default: the style's
        ``scale_max``, else the largest unit value drawn)."""
        if self.items is None:
            self.prepare()
        self.value_max = value_max if value_max is not None else (self.style.scale_max or self.local_max)
        dot = self.graphviz.Digraph(name=self.side, graph_attr={
            "rankdir": "TB", "nodesep": "0.25", "ranksep": "0.35", "label": dot_text(self.style.title), "labelloc": "t",
            "fontname": "Helvetica", "fontsize": "14", "id": f"{self.side}-graph", "class": "wb-side",
        }, node_attr={"fontname": "Helvetica", "fontsize": "10", "margin": "0.08,0.03", "height": "0.3"},
            edge_attr={"arrowsize": "0.6", "color": "#555555"})
        self.emit(dot, self.items or [])
        self.add_edges(dot)
        return dot

    def add_edges(self, dot: Any) -> None:
        producers = self.graph.producers
        unit = {node.name: self.unit_of(node) for node in self.graph.nodes}
        edges: dict[tuple[str, str], int] = {}
        inputs = {v.name: i for i, v in enumerate(self.graph.inputs)}
        for i, value in enumerate(self.graph.inputs):
            _node(dot, f"i{i}", _io_label(value), _attrs(f"{self.side}-input-{value.name}", "wb-io", **_IO,
                                                         tooltip=value.describe()))
        for node in self.graph.nodes:
            head = unit[node.name]
            for name in node.inputs:
                if name in producers:
                    tail = unit[producers[name]]
                elif name in inputs:
                    tail = f"i{inputs[name]}"
                else:
                    continue
                if tail != head:
                    edges[(tail, head)] = edges.get((tail, head), 0) + 1
        for i, value in enumerate(self.graph.outputs):
            _node(dot, f"o{i}", _io_label(value), _attrs(f"{self.side}-output-{value.name}", "wb-io", **_IO,
                                                         tooltip=value.describe()))
            if value.name in producers:
                edges[(unit[producers[value.name]], f"o{i}")] = 1
            elif value.name in inputs:
                edges[(f"i{inputs[value.name]}", f"o{i}")] = 1
        for (tail, head), count in edges.items():
            dot.edge(tail, head, **({"penwidth": "2"} if count > 1 else {}))


# a graph input or output: a rounded box (an ellipse around the same text is half as wide again)
_IO = {"shape": "box", "style": "rounded,filled", "fillcolor": "#f7f7f7", "color": "#888888"}


def _io_label(value: Any) -> str:
    """A graph input or output on two lines (name, then type): a narrow drawing reads at a larger scale."""
    return f"{value.name}\n{value.type_text()}"


def side_digraph(graph: Graph, style: SideStyle) -> Any:
    """The graph as a ``graphviz.Digraph`` styled by ``style``."""
    return _Builder(graph, style).build()


def side_digraphs(sides: list[tuple[Graph, SideStyle]]) -> tuple[list[Any], float]:
    """Several sides drawn on one colour scale: (their digraphs, the value the scale's top
    colour stands for: each style's ``scale_max``, else the largest unit value drawn on any
    side; 0 without values)."""
    builders = [_Builder(graph, style) for graph, style in sides]
    shared = max((b.prepare() for b in builders), default=0.0)
    tops = [b.style.scale_max or shared for b in builders]
    return [b.build(top) for b, top in zip(builders, tops)], max(tops, default=0.0)
