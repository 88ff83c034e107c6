"""What each optimizer pass did, as data: :class:`PassRecord` (one pass in one round: time,
nodes before and after, nodes added / removed / changed, initializers folded, whether the model
still holds together), :class:`OptimizerPasses` (``session.passes``) and :class:`PassDiff` (one
pass's changes, ``passes[i].diff()``). The optimize stage (:mod:`exporter.pipeline.optimize`)
records them; :mod:`exporter.passes` bisects over them.

A node is followed by identity through the passes (they change the model in place), so a
renamed node is "changed", not removed and added. Node counts are of the main graph and the
subgraphs of its If/Loop/Scan nodes; local functions are not counted (InlinePass removes them).
``checks`` is a structural check, cheap enough to run after every pass: every node input is
produced before it is read, and every graph output is produced (``onnx.checker`` on every
intermediate model would cost more than the optimizer itself on small models).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Status
from ..presentation import Presentable

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["NodeChange", "OptimizerPasses", "PassDiff", "PassRecord", "Signature", "Snapshot", "diff",
           "structure_problem"]


@dataclass(frozen=True)
class NodeChange:
    """One node a pass added, removed or changed. ``op`` is ``Add`` or ``domain::Op``;
    ``what`` says what changed on a changed node (``renamed from 'x'``, ``inputs``,
    ``attributes``, ``outputs``)."""

    kind: str  # "added" | "removed" | "changed"
    name: str
    op: str
    what: str = ""


@dataclass(frozen=True, repr=False)
class PassDiff(Presentable):
    """What one pass changed: nodes added, removed and changed, initializers added and removed."""

    index: int
    label: str  # "FoldConstantsPass (round 0)"
    description: str
    nodes_before: int
    nodes_after: int
    added: tuple[NodeChange, ...] = ()
    removed: tuple[NodeChange, ...] = ()
    changed: tuple[NodeChange, ...] = ()
    initializers_added: tuple[str, ...] = ()
    initializers_removed: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[NodeChange, ...]:
        return self.added + self.removed + self.changed

    @property
    def empty(self) -> bool:
        return not (self.changes or self.initializers_added or self.initializers_removed)

    def to_frame(self) -> Any:
        import pandas as pd

        rows = [{"change": c.kind, "node": c.name, "op": c.op, "what": c.what} for c in self.changes]
        rows += [{"change": "initializer added", "node": n, "op": "", "what": ""} for n in self.initializers_added]
        rows += [{"change": "initializer removed", "node": n, "op": "", "what": ""} for n in self.initializers_removed]
        return pd.DataFrame(rows, columns=["change", "node", "op", "what"])


@dataclass(frozen=True, repr=False)
class PassRecord(Presentable):
    """One pass as it ran (or was skipped, or raised) in the optimize stage.

    ``round``: the round of onnxscript's fixpoint loop (0 or 1) for the passes inside it,
    None for the others. ``modified``: what the pass itself reported. ``checks``: the model
    after it is structurally whole (``check_error`` says what is not). ``error``: the pass
    raised (the run stopped there). ``skipped``: named in ``skip_passes``."""

    index: int
    name: str
    description: str
    round: int | None
    seconds: float
    nodes_before: int
    nodes_after: int
    modified: bool = False
    added: tuple[NodeChange, ...] = ()
    removed: tuple[NodeChange, ...] = ()
    changed: tuple[NodeChange, ...] = ()
    initializers_before: int = 0
    initializers_after: int = 0
    initializers_added: tuple[str, ...] = ()
    initializers_removed: tuple[str, ...] = ()
    checks: bool = True
    check_error: str = ""
    error: str = ""
    skipped: bool = False
    # Builds a fresh instance of this pass (``model -> modified``): how bisect_passes replays it.
    _make: Callable[[], Callable[[Any], bool]] | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        return self.name if self.round is None else f"{self.name} (round {self.round})"

    @property
    def status(self) -> Status:
        if self.skipped:
            return Status.SKIPPED
        if self.error:
            return Status.FAILED
        if not self.checks:
            return Status.BROKEN
        return Status.CHANGED if self.changes_model else Status.NO_CHANGE

    @property
    def ran(self) -> bool:
        return not self.skipped and not self.error

    @property
    def changes_model(self) -> bool:
        return self.modified or bool(self.added or self.removed or self.changed
                                     or self.initializers_added or self.initializers_removed)

    @property
    def initializers_folded(self) -> int:
        """Constant tensors the pass added (folded results, lifted constants)."""
        return len(self.initializers_added)

    def diff(self) -> PassDiff:
        """What this pass changed, as its own result (text / HTML / ``to_frame()``)."""
        return PassDiff(self.index, self.label, self.description, self.nodes_before, self.nodes_after,
                        self.added, self.removed, self.changed, self.initializers_added, self.initializers_removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.label,
            "status": self.status,
            "seconds": self.seconds,
            "nodes before": self.nodes_before,
            "nodes after": self.nodes_after,
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
            "initializers folded": self.initializers_folded,
            "checks": self.checks,
            "error": self.error or self.check_error,
        }


@dataclass(frozen=True, repr=False)
class OptimizerPasses(Presentable):
    """The optimize stage pass by pass: ``session.passes``. A sequence of :class:`PassRecord`
    (``passes[i]``, ``len``, iteration); ``to_frame()`` is one row per pass."""

    records: tuple[PassRecord, ...] = ()
    skip_passes: tuple[str, ...] = ()
    seconds: float = 0.0
    note: str = ""  # why there are none ("optimize=False")

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[PassRecord]:
        return iter(self.records)

    def __getitem__(self, index: int) -> PassRecord:
        return self.records[index]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.records)

    @property
    def ran(self) -> tuple[PassRecord, ...]:
        return tuple(r for r in self.records if r.ran)

    @property
    def failed(self) -> PassRecord | None:
        return next((r for r in self.records if r.error), None)

    def to_frame(self) -> Any:
        import pandas as pd

        columns = ["pass", "status", "seconds", "nodes before", "nodes after", "added", "removed", "changed",
                   "initializers folded", "checks", "error"]
        return pd.DataFrame([r.to_dict() for r in self.records], columns=columns)


# -- structure ------------------------------------------------------------------------------------
#
# Recording runs after every pass over every node, so it is written for speed (a 1,600-node
# model: about a tenth of the optimizer's time otherwise). onnx_ir keeps a node's inputs as an
# immutable tuple (replaced on every change) and an attribute's value cannot be set (a change is a
# new Attr), so a snapshot keeps references, not copies: the inputs tuple and the Attr objects.
# Only names (mutable strings on nodes and values) are copied.

_PLAIN = (int, float, str, bool, type(None))

# A node's signature: (name, inputs, attributes, output names: a str for one output, else a
# tuple); equal when the node is unchanged.
Signature = tuple[Any, tuple[Any, ...], Any, Any]


def _attribute_key(value: Any) -> Any:
    """What a change of an attribute value is judged by: plain values and lists of them by
    value, anything else (a tensor, a subgraph) by identity."""
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value):
        return tuple(value)
    return _Same(value)


class _Same:
    """Compares by identity (a tensor attribute, a subgraph): no value comparison."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    __hash__ = None  # type: ignore[assignment]


_NO_ATTRIBUTES = ()


class _Attributes:
    """A node's attributes at one point of the run: their names and Attr objects. Equal to
    another when the names match and each value is the same Attr object or an equal one by
    :func:`_attribute_key` (plain values by value, tensors and subgraphs by identity)."""

    __slots__ = ("names", "values")

    def __init__(self, attributes: dict[str, Any]) -> None:
        self.names = tuple(attributes)
        self.values = tuple(attributes.values())

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _Attributes) or self.names != other.names:
            return False
        if all(map(operator.is_, self.values, other.values)):
            return True
        return all(_attribute_key(mine.value) == _attribute_key(theirs.value)
                   for mine, theirs in zip(self.values, other.values, strict=True))

    __hash__ = None  # type: ignore[assignment]


def _op(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _what_changed(before: Signature, after: Signature) -> str:
    parts = []
    if before[0] != after[0]:
        parts.append(f"renamed from {before[0]!r}")
    if before[1] != after[1]:
        parts.append("inputs")
    if before[2] != after[2]:
        parts.append("attributes")
    if before[3] != after[3]:
        parts.append("outputs renamed")
    return ", ".join(parts)


def _walk(graph: Any, outer: set[Any], nodes: dict[Any, Signature], problems: list[str]) -> None:
    """Every node of ``graph`` and its subgraphs into ``nodes`` (node -> signature), and the
    first structural problem into ``problems``: one walk does both (the recording's cost).
    ``outer``: the values visible from an enclosing graph (and None, an omitted input)."""
    import onnx_ir as ir

    graph_kind, graphs_kind = ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS
    defined = set(outer)
    defined.add(None)
    defined.update(graph.inputs)
    defined.update(graph.initializers.values())
    for node in graph:
        inputs = node.inputs
        if not problems and not defined.issuperset(inputs):
            value = next(v for v in inputs if v not in defined)
            problems.append(f"node {node.name!r} ({_op(node)}) reads {value.name!r}, which nothing before it produces")
        attributes = node.attributes.data  # the plain dict under onnx_ir's UserDict
        if attributes:  # a subgraph's nodes come before the node that holds it
            for attribute in attributes.values():
                kind = attribute.type
                if kind == graph_kind:
                    _walk(attribute.value, defined, nodes, problems)
                elif kind == graphs_kind:
                    for sub in attribute.value:
                        _walk(sub, defined, nodes, problems)
        outputs = node.outputs
        # one output (most nodes): its name alone, one tuple fewer per node for the garbage collector
        names = outputs[0].name if len(outputs) == 1 else tuple([o.name for o in outputs])
        nodes[node] = (node.name, inputs, _Attributes(attributes) if attributes else _NO_ATTRIBUTES, names)
        defined.update(outputs)
    if not problems and not defined.issuperset(graph.outputs):
        value = next(v for v in graph.outputs if v not in defined)
        problems.append(f"graph output {value.name!r} is produced by no node")


@dataclass
class Snapshot:
    """The model's nodes (by identity, with what a change would alter), its initializer names,
    and its first structural problem, at one point of the run."""

    nodes: dict[Any, Signature]  # node (kept alive) -> its signature
    initializers: tuple[str, ...]
    problem: str = ""

    @classmethod
    def of(cls, model: ir.Model) -> Snapshot:
        nodes: dict[Any, Signature] = {}
        problems: list[str] = []
        _walk(model.graph, set(), nodes, problems)
        return cls(nodes, tuple(model.graph.initializers), problems[0] if problems else "")


def diff(before: Snapshot, after: Snapshot) -> tuple[tuple[NodeChange, ...], tuple[NodeChange, ...],
                                                     tuple[NodeChange, ...], tuple[str, ...], tuple[str, ...]]:
    """``(added, removed, changed, initializers added, initializers removed)`` from ``before`` to ``after``."""
    old_nodes, new_nodes = before.nodes, after.nodes
    added = tuple(NodeChange("added", n.name or "", _op(n)) for n in new_nodes if n not in old_nodes)
    removed = tuple(NodeChange("removed", sig[0] or "", _op(n)) for n, sig in old_nodes.items() if n not in new_nodes)
    changed = []
    for node, signature in new_nodes.items():
        was = old_nodes.get(node)
        if was is not None and was != signature:
            changed.append(NodeChange("changed", node.name or "", _op(node), _what_changed(was, signature)))
    if before.initializers == after.initializers:
        return added, removed, tuple(changed), (), ()
    old, new = set(before.initializers), set(after.initializers)
    return added, removed, tuple(changed), tuple(n for n in after.initializers if n not in old), \
        tuple(n for n in before.initializers if n not in new)


def structure_problem(model: ir.Model) -> str:
    """'' when every node input is produced before it is read (graph inputs, initializers,
    earlier nodes, an outer graph's values for a subgraph) and every graph output is produced;
    else the first problem."""
    return Snapshot.of(model).problem
