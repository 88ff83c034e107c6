"""The pipeline in order: capture → decompose → translate → optimize, as declared stages.

:data:`PIPELINE` is the ordered registry a :class:`~exporter.session.Session` runs; each stage's
work is in its own module (:mod:`.capture`, :mod:`.decompose`, :mod:`.translate`,
:mod:`.optimize`), and each declares what its cached result depends on: a new dim spec
re-runs capture and everything after it, a new opset re-runs decompose onward, new output
names re-run translate onward, new ``skip_passes`` only optimize.
"""

from __future__ import annotations

import dataclasses
import time
import warnings
from typing import TYPE_CHECKING, Any

from ..compat import module_state
from ..errors import DecomposeError, Status, TranslateError
from ..hints import decompose_hint, translate_hint
from ..masked_attention import translations
from ..shapes.baked import baked_constants
from ..shapes.policy_warnings import DimPolicyWarning, dim_warnings
from .capture import capture
from .decompose import decompose
from .optimize import optimize_stage
from .runnable import onnxruntime_refusal
from .stage import Stage, StageContext, StageResult, run_guarded
from .translate import constant_outputs, registry_opset, resolve_opset, translate

if TYPE_CHECKING:
    from ..events import CancelToken, Observer

__all__ = ["PIPELINE", "STAGES", "CaptureStage", "DecomposeStage", "OptimizeStage", "TranslateStage",
           "cache_key", "stage_named"]


class CaptureStage(Stage):
    """The user's model → a ``torch.export.ExportedProgram``, by the capture strategies."""

    name = "capture"
    consumes = None
    produces = "torch.export.ExportedProgram"

    def key(self, context: StageContext) -> tuple[Any, ...]:
        # The model's state (train/eval, its tensors) too: capture reads it.
        options = context.options
        return (context.spec, options.strategy, options.runtime_asserts, options.patches,
                module_state(context.model))

    def run(self, context: StageContext, previous: Any, observer: Observer,
            cancel: CancelToken | None) -> StageResult:
        # stacklevel: the user's call of Session.run / result, through the session's stage runner.
        for warning in dim_warnings(context.spec, context.inputs):
            warnings.warn(str(warning), DimPolicyWarning, stacklevel=6)
        return capture(context.model, context.inputs, context.spec, strategy=context.options.strategy,
                       runtime_asserts=context.options.runtime_asserts, patches=context.options.patches,
                       observer=observer, cancel=cancel)


class DecomposeStage(Stage):
    """The captured program → the same program in the operators torchlib translates."""

    name = "decompose"
    consumes = "capture"
    produces = "torch.export.ExportedProgram (decomposed for ONNX)"

    def key(self, context: StageContext) -> tuple[Any, ...]:
        # Which operators stay whole is the opset's torchlib registry's choice: every opset
        # below torchlib's own shares one.
        return (registry_opset(resolve_opset(context.options.opset_version)),)

    def run(self, context: StageContext, previous: Any, observer: Observer,
            cancel: CancelToken | None) -> StageResult:
        opset = self.key(context)[0]
        return run_guarded("decompose", DecomposeError, lambda exc: decompose_hint(exc, previous),
                           lambda: decompose(previous, opset))


class TranslateStage(Stage):
    """The decomposed program → an ``onnx_ir.Model`` at the asked opset, with readable names."""

    name = "translate"
    consumes = "decompose"
    produces = "onnx_ir.Model"

    def key(self, context: StageContext) -> tuple[Any, ...]:
        options = context.options
        return (resolve_opset(options.opset_version), options.input_names, options.output_names,
                options.fully_masked_rows)

    def run(self, context: StageContext, previous: Any, observer: Observer,
            cancel: CancelToken | None) -> StageResult:
        options = context.options
        opset = resolve_opset(options.opset_version)
        constants = constant_outputs(previous)
        return run_guarded(
            "translate", TranslateError, lambda exc: translate_hint(exc, constants),
            lambda: translate(previous, opset_version=opset, bound=context.inputs, spec=context.spec,
                              input_names=options.input_names, output_names=options.output_names,
                              translations=translations(options.fully_masked_rows, registry_opset(opset))),
        )


class OptimizeStage(Stage):
    """The translated model → the optimized one (the translated one with ``optimize=False``)."""

    name = "optimize"
    consumes = "translate"
    produces = "onnx_ir.Model (optimized)"

    def key(self, context: StageContext) -> tuple[Any, ...]:
        options = context.options
        return (options.optimize, options.skip_passes, options.extra_rewrite_rules)

    def run(self, context: StageContext, previous: Any, observer: Observer,
            cancel: CancelToken | None) -> StageResult:
        options = context.options
        result = optimize_stage(previous, enabled=options.optimize, skip_passes=options.skip_passes,
                                extra_rewrite_rules=options.extra_rewrite_rules)
        return _baked(_loadable(result), previous, context)


def _loadable(result: StageResult) -> StageResult:
    """The final model as onnxruntime sees it: one it refuses is kept (as torch.onnx.export
    writes it), but the stage says why with a warning instead of ``ok``."""
    if not result.ok or result.output is None:
        return result
    start = time.perf_counter()
    refusal = onnxruntime_refusal(result.output)
    seconds = result.seconds + time.perf_counter() - start
    if refusal is None:
        return dataclasses.replace(result, seconds=seconds)
    detail = "; ".join(filter(None, (result.detail, refusal)))
    return dataclasses.replace(result, status=Status.WARNING, seconds=seconds, detail=detail,
                               warnings=(*result.warnings, refusal))


def _baked(result: StageResult, translated: Any, context: StageContext) -> StageResult:
    """A final model with sizes fixed at the example where a dim is asked dynamic
    (:mod:`exporter.shapes.baked`) is kept, but the stage warns, one sentence per node."""
    if not result.ok or result.output is None:
        return result
    found = baked_constants(translated, result.output, context.inputs, context.spec, context.options.input_names)
    if not found:
        return result
    detail = f"{len(found)} size(s) fixed at the example where a dim is dynamic: wrong or failing at other sizes"
    return dataclasses.replace(result, status=Status.WARNING, detail="; ".join(filter(None, (result.detail, detail))),
                               warnings=(*result.warnings, *(b.message for b in found)))


PIPELINE: tuple[Stage, ...] = (CaptureStage(), DecomposeStage(), TranslateStage(), OptimizeStage())
STAGES: tuple[str, ...] = tuple(stage.name for stage in PIPELINE)
_BY_NAME = {stage.name: stage for stage in PIPELINE}


def stage_named(name: str) -> Stage:
    """The stage called ``name``; a ``ValueError`` listing the stages for any other name."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown stage {name!r}; stages are {', '.join(STAGES)}") from None


def cache_key(name: str, context: StageContext) -> tuple[Any, ...]:
    """What the stage ``name``'s result depends on: its own key after the key of every stage
    it consumes, back to capture."""
    stage = stage_named(name)
    own = stage.key(context)
    return own if stage.consumes is None else cache_key(stage.consumes, context) + own
