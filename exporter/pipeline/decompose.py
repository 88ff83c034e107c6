"""The decompose stage: a captured ExportedProgram made ready for ONNX translation."""

from __future__ import annotations

from typing import Any

from .. import compat


def decompose(program: Any, opset_version: int) -> Any:
    """What ``torch.onnx.export`` does between capture and translation: ONNX-friendly
    decompositions, explicit type promotion, assertion nodes removed. Returns the decomposed
    ExportedProgram; ``program`` is left as it was."""
    return compat.decompose_for_onnx(program, opset_version)
