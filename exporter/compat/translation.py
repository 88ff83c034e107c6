"""torch.onnx's translation to ONNX IR and onnxscript's optimizer and version converter."""

from __future__ import annotations

from typing import Any

__all__ = ["convert_onnx_version", "onnxscript_optimizer_parts", "optimize_onnx_ir", "rename_onnx_axes", "translate_to_onnx_ir"]


def translate_to_onnx_ir(program: Any, registry: Any) -> Any:
    """Translate a decomposed ExportedProgram to an ``onnx_ir.Model``."""
    from torch.onnx._internal.exporter import _core

    return _core._exported_program_to_onnx_program(program, registry=registry).model


def optimize_onnx_ir(model: Any) -> Any:
    """The optimization ``torch.onnx.export(optimize=True)`` applies (in place; returns it)."""
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.optimize(model)


def onnxscript_optimizer_parts() -> dict[str, Any]:
    """What :func:`optimize_onnx_ir` is built of (onnxscript 0.7: ``optimize_ir`` with its
    defaults, then ``onnx_fusions.fuse``), for running its passes one by one
    (:mod:`exporter.passes`): onnxscript's private constant-folding pass and its size limits,
    and the default rewrite rules (``rewriter._DEFAULT_REWRITE_RULES``)."""
    from onnxscript import rewriter
    from onnxscript.optimizer import _constant_folding
    from onnxscript.rewriter import onnx_fusions

    return {
        "FoldConstantsPass": _constant_folding.FoldConstantsPass,
        "input_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_INPUT_SIZE_LIMIT,
        "output_size_limit": _constant_folding.DEFAULT_CONSTANT_FOLD_OUTPUT_SIZE_LIMIT,
        "RewritePass": rewriter.RewritePass,
        "default_rewrite_rules": rewriter._DEFAULT_REWRITE_RULES,
        "fuse": onnx_fusions.fuse,
        "fixpoint_steps": 2,  # optimize_ir(num_iterations=2, stop_if_no_change=True)
    }


def convert_onnx_version(model: Any, opset_version: int) -> Any:
    from torch.onnx._internal._lazy_import import onnxscript_apis

    return onnxscript_apis.convert_version(model, opset_version)


def rename_onnx_axes(model: Any, mapping: dict[str, str]) -> None:
    """Rename symbolic dims (and the symbols inside dim expressions) everywhere in a model."""
    from torch.onnx._internal.exporter import _ir_passes

    renames: dict[Any, str] = dict(mapping)  # str keys are what rename_axis looks up
    _ir_passes.rename_axis(model, renames)
