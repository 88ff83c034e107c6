"""Where a failing case first goes wrong: in capture, or at the first divergent ONNX node."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportArtifacts
from ..presentation import Presentable
from .intermediates.result import IntermediateComparison
from .intermediates.run import compare_inputs
from .tolerance import Tolerance


@dataclass(frozen=True, repr=False)
class Divergence(Presentable):
    """Where a failing case first goes wrong.

    ``stage`` is ``capture`` when the captured program already disagrees with eager PyTorch
    at these inputs (torch.export baked in something true only at the example), ``onnx`` when
    the program agrees with eager but an ONNX node disagrees with the FX node it came from.
    """

    case: str
    stage: str
    message: str
    onnx_node: str | None = None
    op_type: str | None = None
    onnx_value: str | None = None
    fx_node: str | None = None
    fx_target: str | None = None
    module_path: str | None = None
    source: str | None = None
    max_abs: float | None = None
    compared: int = 0


def first_divergence(
    session: ExportArtifacts,
    case: str,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    expected: Sequence[Any],
    *,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
) -> Divergence:
    """Find where a case first goes wrong: in capture (the program already differs from
    ``expected``, eager PyTorch's outputs), or at the first ONNX node (in topological order)
    whose value differs from its FX node's value beyond tolerance. It is the first bad node of
    :func:`~exporter.graphs.compare_intermediates` on the same inputs (the same pairs, the same
    rule; values streamed, not all held at once)."""
    result = compare_inputs(session, case, tuple(args), dict(kwargs), tuple(expected), tolerances=tolerances)
    return divergence_of(result, session)


def divergence_of(result: IntermediateComparison, session: ExportArtifacts) -> Divergence:
    """A comparison's answer to "where does this case first go wrong"."""
    case = result.case
    if result.error:
        if result.error_at == "program":
            return Divergence(case, "capture", result.error + " (a runtime assert the ONNX model does not carry)")
        return Divergence(case, "onnx", result.error)
    if result.program_differs:
        return Divergence(case, "capture", result.program_differs)
    bad = result.first_bad
    if bad is None:
        return Divergence(
            case, "onnx",
            f"no ONNX node value differs from its FX node ({result.compared} compared); the difference "
            "appears in values without an FX counterpart (fused or renamed by the optimizer)",
            compared=result.compared,
        )
    if bad.status == "mismatch":
        detail = bad.reason or "another shape or dtype"
    else:
        detail = f"max abs diff {bad.max_abs:.3g} > allowed {bad.atol_applied:.3g}, max rel diff {bad.max_rel:.3g}"
        detail += f"; worst: {bad.reason}" if bad.reason else ""
    compared = sum(row.status != "not compared" for row in result.rows[:result.rows.index(bad) + 1])
    return Divergence(
        case, "onnx", f"ONNX {bad.onnx_op} differs from FX {bad.fx_value} ({detail})",
        onnx_node=bad.onnx_node, op_type=bad.onnx_op, onnx_value=bad.onnx_value, fx_node=bad.fx_value,
        fx_target=_fx_target(session, bad.fx_value), module_path=bad.module, source=bad.source,
        max_abs=bad.max_abs, compared=compared,
    )


def _fx_target(session: ExportArtifacts, name: str | None) -> str | None:
    node = next((n for n in session.stage_output("decompose").graph.nodes if n.name == name), None)
    return str(node.target) if node is not None else None
