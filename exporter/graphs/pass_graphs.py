"""One optimizer pass as two graphs: the ONNX model just before it and just after it, with
the nodes it removed, added and changed::

    from exporter.graphs.pass_graphs import pass_graphs

    step = pass_graphs(session, 3)      # session.passes[3]
    step.removed, step.added            # node names (before side, after side)
    step.changed_before, step.changed_after

The optimize stage keeps no model per pass (that would cost a copy per pass): the model
before pass ``i`` is rebuilt from the translated model by replaying the passes that ran
before it (as :func:`exporter.passes.bisect_passes` does), then pass ``i`` runs once more on
it. Nodes are followed by identity across that one run, as the recording does, so the sets
are the pass's :meth:`~exporter.pipeline.pass_records.PassRecord.diff` (by drawn name: a
node without a name is drawn ``<op>_<index>``). Only the main graph is drawn.
:func:`exporter.graphs.draw.before_after` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..pipeline.optimize import replay
from ..pipeline.pass_records import OptimizerPasses, PassRecord, Snapshot
from .model import Graph
from .onnx import onnx_graph
from ..node_metadata import onnx_node_name

if TYPE_CHECKING:
    import onnx_ir as ir

    from ..events import CancelToken

__all__ = ["PassGraphs", "RecordsPasses", "pass_graphs"]


class RecordsPasses(Protocol):
    """An export whose optimize stage was recorded pass by pass (an :class:`exporter.Session`)."""

    @property
    def passes(self) -> OptimizerPasses: ...

    def stage_output(self, stage: str) -> Any: ...


@dataclass(frozen=True)
class PassGraphs:
    """The main graph before and after one pass, and the node names it touched on each side."""

    record: PassRecord
    before: Graph
    after: Graph
    removed: frozenset[str] = frozenset()  # before side
    added: frozenset[str] = frozenset()  # after side
    changed_before: frozenset[str] = frozenset()
    changed_after: frozenset[str] = frozenset()

    @property
    def highlighted_before(self) -> frozenset[str]:
        return self.removed | self.changed_before

    @property
    def highlighted_after(self) -> frozenset[str]:
        return self.added | self.changed_after

    def __repr__(self) -> str:
        return (f"PassGraphs({self.record.label}: {len(self.before)} → {len(self.after)} nodes, "
                f"{len(self.removed)} removed, {len(self.added)} added, {len(self.changed_after)} changed)")


def _drawn_names(model: ir.Model) -> dict[Any, str]:
    """node → the name the drawing gives it, for the main graph's nodes."""
    return {node: onnx_node_name(node, i) for i, node in enumerate(model.graph)}


def pass_graphs(session: RecordsPasses, index: int, *, cancel: CancelToken | None = None) -> PassGraphs:
    """``session.passes[index]`` as the graphs before and after it. A pass that was skipped or
    raised changed nothing drawable: both sides are the model before it. ``cancel`` is checked
    between the passes replayed (:class:`~exporter.events.Cancelled` when it was set)."""
    passes = session.passes
    if not len(passes):
        raise ValueError(f"no optimizer pass was recorded ({passes.note or 'the optimize stage did not run'})")
    if not -len(passes) <= index < len(passes):
        raise IndexError(f"pass {index} out of range: there are {len(passes)} passes (0 … {len(passes) - 1})")
    record = passes[index]
    model = session.stage_output("translate").clone()
    replay(model, passes.records[:record.index], cancel=cancel)
    before = onnx_graph(model, "onnx_before")
    if not record.ran or record._make is None:
        return PassGraphs(record, before, before)
    if cancel is not None:
        cancel.check()
    names_before = _drawn_names(model)
    snapshot = Snapshot.of(model)
    record._make()(model)
    after_snapshot = Snapshot.of(model)
    names_after = _drawn_names(model)
    after = onnx_graph(model, "onnx_after")
    kept = names_before.keys() & names_after.keys()
    changed = {n for n in kept if snapshot.nodes[n] != after_snapshot.nodes[n]}
    return PassGraphs(
        record, before, after,
        removed=frozenset(name for n, name in names_before.items() if n not in names_after),
        added=frozenset(name for n, name in names_after.items() if n not in names_before),
        changed_before=frozenset(names_before[n] for n in changed),
        changed_after=frozenset(names_after[n] for n in changed),
    )
