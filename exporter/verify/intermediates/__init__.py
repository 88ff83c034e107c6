"""Per-node numeric differences: every ONNX node's output against the FX node it came from.

:func:`compare_intermediates` runs the decomposed program (what was translated) in a
``torch.fx.Interpreter`` and the optimized ONNX model (what the user saves) in onnxruntime,
with node outputs exposed as graph outputs, on one set of inputs (a verify case), and pairs
each ONNX node output with the FX value of the same name (the torch exporter names the value
an FX node becomes after the node; a graph output pairs with the program's user output at its
position). Each pair is judged by verify's rule (:func:`exporter.verify.tolerance.compare`:
``atol`` scaled to the value's magnitude). ONNX nodes whose outputs have no FX counterpart
(the inner steps of one FX node's translation, values an optimizer fusion created) are listed
as ``not compared``, with the reason. The program's outputs are also compared with eager
PyTorch's (run on the inputs, or kept by verify for the same case).

Memory: values stream in chunks. A first FX run measures every paired value and keeps them
while their total stays under ``max_bytes``; the ONNX model then runs once per chunk of nodes
whose outputs fit in ``max_bytes`` (with the FX run repeated per chunk, keeping that chunk's
values only, when the first run could not keep them all). Only the metrics stay: at most about
``2 * max_bytes`` of intermediate values are held at once (``peak_bytes`` says how much was).

Verify's first-divergence search (:func:`exporter.verify.first_divergence`) is this comparison
on the failing case: its first bad node is the node verify names. ``exporter.graphs`` re-exports
:func:`compare_intermediates` and its results (the graph widget paints them).

Modules: :mod:`.result` (the rows and the comparison), :mod:`.plan` (what is compared, worked
out once per export), :mod:`.fx_side`, :mod:`.ort_side`, :mod:`.judge` (the rows: pairs that pass
measured together), :mod:`.inside` (the first bad node's translation searched on FX inputs, so
that ``first_bad`` can name a node without an FX value) and :mod:`.run` (the call).
"""

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

# Lazy (exporter._lazy): verify.program_run uses .fx_side, and .run uses program_run.
_EXPORTS = {
    **dict.fromkeys(("METRICS", "IntermediateComparison", "IntermediateRow"), ".result"),
    **dict.fromkeys(("DEFAULT_MAX_BYTES", "IntermediatesSource", "compare_intermediates"), ".run"),
}
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .result import METRICS, IntermediateComparison, IntermediateRow
    from .run import DEFAULT_MAX_BYTES, IntermediatesSource, compare_intermediates

__all__ = ["DEFAULT_MAX_BYTES", "METRICS", "IntermediateComparison", "IntermediateRow", "IntermediatesSource",
           "compare_intermediates"]
