"""ONNX export, staged and inspectable. UI-free: usable from scripts, CLIs and notebooks.

>>> from exporter import export, ExportOptions, Dim
>>> session = export(model, x, options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
>>> session.save("model.onnx")

Importing this package is cheap and imports nothing else: each public name below loads its
module on first use (:mod:`exporter._lazy`), and torch, onnx and onnxruntime load when an
export needs them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

_EXPORTS = {
    **dict.fromkeys(("ExportOptions", "export"), ".api"),
    **dict.fromkeys(("ANALYSES", "Analysis"), ".analyses"),
    "Axis": ".axis",
    **dict.fromkeys(("STRATEGIES", "CaptureAttempt", "CaptureStrategy"), ".pipeline.capture"),
    **dict.fromkeys(("AUTO", "DYNAMIC", "STATIC", "Dim", "DimSpec", "Policy"), ".dims"),
    **dict.fromkeys(("CaptureError", "DecomposeError", "ExportError", "OptimizeError", "SerializeError", "SpecError",
                     "TranslateError"), ".errors"),
    **dict.fromkeys(("OnnxSerializer", "Pt2Serializer", "Serializer"), ".serializers"),
    **dict.fromkeys(("STAGES", "Session", "StageResult"), ".session"),
    **dict.fromkeys(("ContractReport", "Tolerance", "VerifyResult"), ".verify"),
    "verify_onnx": ".verify.given",
    **dict.fromkeys(("BenchmarkResult", "LatencyStats", "ProfileResult", "SweepResult"), ".bench"),
    **dict.fromkeys(("Guard", "Guards"), ".guards"),
    **dict.fromkeys(("Recording", "RecordingError", "record"), ".recording"),
    **dict.fromkeys(("DimOutcome", "DimOutcomes", "DimPolicyWarning", "DimWarning", "SuggestedFixes"), ".shapes"),
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .analyses import ANALYSES, Analysis
    from .api import ExportOptions, export
    from .axis import Axis
    from .bench import BenchmarkResult, LatencyStats, ProfileResult, SweepResult
    from .dims import AUTO, DYNAMIC, STATIC, Dim, DimSpec, Policy
    from .errors import (
        CaptureError,
        DecomposeError,
        ExportError,
        OptimizeError,
        SerializeError,
        SpecError,
        TranslateError,
    )
    from .guards import Guard, Guards
    from .pipeline.capture import STRATEGIES, CaptureAttempt, CaptureStrategy
    from .recording import Recording, RecordingError, record
    from .serializers import OnnxSerializer, Pt2Serializer, Serializer
    from .session import STAGES, Session, StageResult
    from .shapes import DimOutcome, DimOutcomes, DimPolicyWarning, DimWarning, SuggestedFixes
    from .verify import ContractReport, Tolerance, VerifyResult
    from .verify.given import verify_onnx

__all__ = [
    "ANALYSES", "AUTO", "Analysis", "Axis", "BenchmarkResult", "CaptureAttempt", "CaptureError", "CaptureStrategy", "ContractReport",
    "DYNAMIC", "DecomposeError", "Dim", "DimOutcome", "DimOutcomes", "DimPolicyWarning", "DimSpec", "DimWarning",
    "ExportError", "ExportOptions", "Guard", "Guards", "LatencyStats", "OnnxSerializer", "OptimizeError",
    "Policy", "ProfileResult", "Pt2Serializer", "Recording", "RecordingError", "STAGES", "STATIC", "STRATEGIES",
    "SerializeError", "Serializer", "Session", "SpecError", "StageResult", "SuggestedFixes", "SweepResult",
    "Tolerance", "TranslateError", "VerifyResult", "export", "record", "verify_onnx",
]
