"""``graphs_of(session)``: a session's four graphs and the mapping between them, computed on
first use from the stage results."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Protocol

from ..artifacts import ExportArtifacts
from .fx import fx_graph
from .mapping import NodeMapping, map_nodes
from ..node_metadata import fx_name_of
from .model import Graph
from .modules import module_rows
from .onnx import onnx_graph
from ..node_metadata import onnx_node_name
from .. import compat
from ..program_symbols import dim_names

__all__ = ["ExportGraphs", "SessionGraphs", "graphs_of"]

KINDS = ("fx", "fx_decomposed", "onnx", "onnx_optimized")


@dataclass(frozen=True)
class SessionGraphs:
    """A session's graphs, each a :class:`~exporter.graphs.Graph` built when first read:

    - ``fx``: the captured program (``torch.export``'s graph),
    - ``fx_decomposed``: after the ONNX decompositions (what was translated),
    - ``onnx``: the ONNX model before optimization,
    - ``onnx_optimized``: the final model (the same as ``onnx`` with ``optimize=False``),

    and :attr:`mapping`, each optimized ONNX node linked to the FX nodes it came from.
    Reading one runs the session's stages up to it (a failed stage raises its
    :class:`~exporter.ExportError`). Shapes use the user's dim names."""

    session: ExportArtifacts  # an exporter.Session

    def __repr__(self) -> str:
        built = [k for k in KINDS if k in self.__dict__]
        return f"SessionGraphs({', '.join(built) or 'nothing built yet'})"

    def __getitem__(self, kind: str) -> Graph:
        """A graph by kind (``fx``, ``fx_decomposed``, ``onnx``, ``onnx_optimized``)."""
        if kind not in KINDS:
            raise ValueError(f"unknown graph {kind!r}; graphs are {', '.join(KINDS)}")
        return getattr(self, kind)

    @functools.cached_property
    def _dim_names(self) -> dict[str, str]:
        return dim_names(self.session.stage_output("capture"), self.session.inputs, self.session.spec)

    @functools.cached_property
    def fx(self) -> Graph:
        return fx_graph(self.session.stage_output("capture"), "fx", self._dim_names)

    @functools.cached_property
    def fx_decomposed(self) -> Graph:
        return fx_graph(self.session.stage_output("decompose"), "fx_decomposed", self._dim_names)

    @functools.cached_property
    def onnx(self) -> Graph:
        return onnx_graph(self.session.stage_output("translate"), "onnx")

    @functools.cached_property
    def onnx_optimized(self) -> Graph:
        return onnx_graph(self.session.stage_output("optimize"), "onnx_optimized")

    @functools.cached_property
    def mapping(self) -> NodeMapping:
        """Each node of :attr:`onnx_optimized` → the :attr:`fx_decomposed` nodes it came from
        (and, in ``fx_captured``, their origins in :attr:`fx`)."""
        fx_names: dict[str, str | None] = {}
        for stage in ("translate", "optimize"):
            for index, node in enumerate(self.session.stage_output(stage).graph):
                fx_names[onnx_node_name(node, index)] = fx_name_of(node)
        decomposed = self.session.stage_output("decompose")
        captured = {n.name: compat.fx_node_origins(n) for n in decomposed.graph.nodes if n.op == "call_function"}
        return map_nodes(self.onnx_optimized, self.onnx, fx_names, self.fx_decomposed, captured)

    def modules_frame(self, depth: int | None = None, *, fx: str = "fx_decomposed", onnx: str = "onnx_optimized") -> Any:
        """Per module path: module, module_class, fx_nodes, onnx_nodes (node counts),
        fx_ops, onnx_ops (``MatMul×2, Add×2``). Each node counts in its innermost module,
        or in its ancestor ``depth`` levels down when given (``depth=1``: top-level
        modules). ``fx`` / ``onnx`` choose which graphs to align."""
        import pandas as pd

        rows = module_rows(self[fx], self[onnx], depth)
        return pd.DataFrame(rows, columns=["module", "module_class", "fx_nodes", "onnx_nodes", "fx_ops", "onnx_ops"])


def graphs_of(session: ExportArtifacts) -> SessionGraphs:
    """The graphs of a session (built lazily, on first read of each)."""
    return SessionGraphs(session)


class ExportGraphs(Protocol):
    """Has the FX and ONNX graphs of an export (a :class:`~exporter.Session`)."""

    @property
    def graphs(self) -> SessionGraphs:
        """Each graph built when first asked for, and the FX ↔ ONNX node mapping."""
        ...
