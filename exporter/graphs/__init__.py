"""Graphs of an export: the FX programs and ONNX models as plain data, the FX↔ONNX node
mapping, and the per-module alignment::

    from exporter.graphs import graphs_of

    graphs = graphs_of(session)            # session.graphs
    graphs.onnx_optimized.to_frame()       # one row per node: op, inputs, outputs, module, source
    graphs.mapping.to_frame()              # ONNX node → FX nodes, origin fx / optimizer / unmapped
    graphs.mapping.coverage                # share of ONNX nodes with a known origin
    graphs.modules_frame(depth=1)          # per top-level module: node counts and ops, FX vs ONNX
    session.compare_intermediates()        # every ONNX node's output vs its FX value, on one case

Nothing heavy is imported until a graph is built.
"""

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

# Lazy (exporter._lazy). verify's intermediates engine (which reads graphs_of) is re-exported here
# for convenience; its types are named from exporter.verify.intermediates, never through here.
_EXPORTS = {
    **dict.fromkeys(("IntermediateComparison", "IntermediateRow", "compare_intermediates"), "..verify.intermediates"),
    **dict.fromkeys(("MappingEntry", "NodeMapping", "RemovedNode", "map_nodes"), ".mapping"),
    "source_of_stack": "..frames",
    **dict.fromkeys(("fx_name_of", "module_path_of", "normalize_module_path"), "..node_metadata"),
    **dict.fromkeys(("Graph", "GraphNode", "ValueInfo", "module_ancestors"), ".model"),
    **dict.fromkeys(("KINDS", "SessionGraphs", "graphs_of"), ".session_graphs"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from ..frames import source_of_stack
    from ..node_metadata import fx_name_of, module_path_of, normalize_module_path
    from .mapping import MappingEntry, NodeMapping, RemovedNode, map_nodes
    from .model import Graph, GraphNode, ValueInfo, module_ancestors
    from .session_graphs import KINDS, SessionGraphs, graphs_of

__all__ = [
    "KINDS",
    "Graph",
    "GraphNode",
    "IntermediateComparison",
    "IntermediateRow",
    "MappingEntry",
    "NodeMapping",
    "RemovedNode",
    "SessionGraphs",
    "ValueInfo",
    "compare_intermediates",
    "fx_name_of",
    "graphs_of",
    "map_nodes",
    "module_ancestors",
    "module_path_of",
    "normalize_module_path",
    "source_of_stack",
]
