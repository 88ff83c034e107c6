"""ONNX export, staged and inspectable. UI-free: usable from scripts, CLIs and notebooks.

>>> from exporter import export, ExportOptions, Dim
>>> session = export(model, x, options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
>>> session.save("model.onnx")

Importing this package is cheap: torch, onnx and onnxruntime load on first use.
"""

from .api import ExportOptions, Serializer, export
from .axis import Axis
from .pipeline.capture import STRATEGIES, CaptureAttempt, CaptureStrategy
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
from .serialize import OnnxSerializer, Pt2Serializer
from .session import STAGES, Session, StageResult
from .verify import ContractReport, Tolerance, VerifyResult
from .bench import BenchmarkResult, LatencyStats, ProfileResult, SweepResult
from .guards import Guard, Guards
from .recording import Recording, RecordingError, record
from .shapes import DimOutcome, DimOutcomes, DimPolicyWarning, DimWarning, SuggestedFixes
from .display import sections as _sections  # noqa: F401 - registers how every result is shown (summary, repr, HTML)

__all__ = [
    "AUTO", "DYNAMIC", "STATIC", "STAGES", "STRATEGIES", "Axis",
    "CaptureAttempt", "CaptureError", "CaptureStrategy", "DecomposeError", "Dim", "DimSpec",
    "ExportError", "ExportOptions", "OnnxSerializer", "OptimizeError", "Policy", "Pt2Serializer",
    "SerializeError", "Serializer", "Session", "SpecError", "StageResult", "TranslateError", "export",
    "BenchmarkResult", "ContractReport", "LatencyStats", "ProfileResult", "SweepResult", "Tolerance", "VerifyResult",
    "DimOutcome", "DimOutcomes", "DimPolicyWarning", "DimWarning", "Guard", "Guards", "SuggestedFixes",
    "Recording", "RecordingError", "record",
]
