"""Verify an ONNX model you bring (edited by hand, exported elsewhere) against the PyTorch model.

:func:`verify_onnx` captures the model with ``torch.export`` (to learn its dim groups, guards
and the sizes worth comparing, as an export would), skips the translation, and runs the
whole verification of :func:`exporter.verify.verify` on the ONNX model given instead of the
one the workbench would have made: the same sweep of sizes, edge values, tolerances, rounding
allowance and findings, the same :class:`~exporter.verify.VerifyResult`.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from ..errors import Status
from .results import VerifyResult

__all__ = ["verify_onnx"]


def verify_onnx(model: Any, onnx_model: Any, /, *args: Any, dynamic_shapes: Any = None, options: Any = None,
                verify_options: Mapping[str, Any] | None = None, **kwargs: Any) -> VerifyResult:
    """Compare ``onnx_model`` in onnxruntime with ``model(*args, **kwargs)`` in eager PyTorch,
    at the example inputs and over the sizes :func:`exporter.verify.verify` sweeps.

    Args:
        model: the ``torch.nn.Module`` the ONNX model should compute.
        onnx_model: the ONNX model: a path, its serialized bytes, an ``onnx.ModelProto`` or an
            ``onnx_ir.Model`` (read only: never changed).
        dynamic_shapes: the dim spec, as :func:`exporter.export` takes it (which dims vary, so
            which sizes are compared); or ``options``: the :class:`~exporter.ExportOptions` the
            model was exported with (``input_names`` maps forward's inputs to the ONNX model's).
        verify_options: options of :func:`exporter.verify.verify` (``tolerances``, ``sizes``,
            ``edge_values``...).

    Raises ``ValueError`` when the ONNX model's inputs are not named as forward's inputs are
    (naming both; the fix: ``options=ExportOptions(input_names=[...])``), and the capture's
    :class:`~exporter.ExportError` when torch cannot capture the model (verify needs its
    program to choose the sizes). A wrong ONNX model is not an error: the result says how.
    """
    from ..options import ExportOptions
    from ..ort_model import OrtModel
    from ..pipeline.records import StageResult
    from ..session import Session
    from .core import verify

    if options is not None and dynamic_shapes is not None:
        raise ValueError("verify_onnx: give dynamic_shapes= or options=ExportOptions(dynamic_shapes=...), not both")
    if options is None:
        options = ExportOptions(dynamic_shapes=dynamic_shapes)
    given = _as_ir(onnx_model)
    session = Session(model, args, kwargs, options)
    record = session.snapshot("decompose")
    if "decompose" not in record.results or not all(result.ok for result in record.results.values()):
        session.raise_for_status()  # verify needs the captured program
    _check_inputs(given, session.onnx_input_names)
    ort_models: list[OrtModel] = []

    def ort_model() -> OrtModel:
        if not ort_models:
            ort_models.append(OrtModel(given))
        return ort_models[0]

    results = {
        **record.results,
        "translate": StageResult("translate", Status.OK, 0.0, output=given, detail="the ONNX model given"),
        "optimize": StageResult("optimize", Status.OK, 0.0, output=given, detail="the ONNX model given"),
    }
    record = dataclasses.replace(record, until="optimize", results=MappingProxyType(results), last_verify=None,
                                 graphs=None, _ort_model=ort_model)
    try:
        return verify(record, **dict(verify_options or {}))
    finally:
        if ort_models:
            ort_models[0].release()


def _as_ir(onnx_model: Any) -> Any:
    """An ``onnx_ir.Model`` of a path, bytes, an ``onnx.ModelProto`` or an ``onnx_ir.Model``."""
    import onnx
    import onnx_ir as ir

    if isinstance(onnx_model, ir.Model):
        return onnx_model
    if isinstance(onnx_model, (bytes, bytearray, memoryview)):
        return ir.from_proto(onnx.load_from_string(bytes(onnx_model)))
    if isinstance(onnx_model, onnx.ModelProto):
        return ir.from_proto(onnx_model)
    if isinstance(onnx_model, (str, os.PathLike)):
        return ir.load(os.fspath(onnx_model))
    raise TypeError(f"verify_onnx: onnx_model must be a path, bytes, an onnx.ModelProto or an onnx_ir.Model, "
                    f"got {type(onnx_model).__name__}")


def _check_inputs(model: Any, names: Mapping[str, str]) -> None:
    """The ONNX model's inputs must each be one of forward's tensor inputs, by its ONNX name."""
    expected = list(names.values())
    inputs = [value.name for value in model.graph.inputs]
    unknown = [name for name in inputs if name not in expected]
    if not unknown:
        return
    by_path = ", ".join(f"{path} -> {name!r}" for path, name in names.items())
    raise ValueError(
        f"verify_onnx: the ONNX model's inputs {inputs} are not named as forward's tensor inputs are "
        f"({by_path}): {unknown} match none of them, so onnxruntime could not be fed. Fix: pass "
        f"options=ExportOptions(input_names=[...]) naming forward's inputs, in order, as the ONNX model does "
        f"(here {inputs!r} if they are in forward's order), or rename the ONNX inputs"
    )
