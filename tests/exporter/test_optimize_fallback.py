"""When only the ONNX optimizer fails, the session hands out the unoptimized model with a
warning naming the pass; when the translated model is broken too, it fails naming both."""

from __future__ import annotations

import re

import pytest
import torch

from exporter import ExportOptions, export
from exporter.errors import OptimizeError, Status
from exporter.pipeline.optimize import OPTIMIZER_PASSES
from exporter.examples import demo_block


def test_optimizer_failure_at_opset_17_falls_back_to_the_unoptimized_model_which_verifies():
    # The optimizer leaves Split(num_outputs), which opset 17 lacks: before, optimize failed.
    model, args, kwargs, _ = demo_block()
    session = export(model, *args, options=ExportOptions(opset_version=17), **kwargs)
    optimize = session.stages[-1]
    assert optimize.name == "optimize" and optimize.status == Status.WARNING and optimize.ok
    assert session.succeeded and session.failed_stage is None
    (warning,) = optimize.warnings
    assert warning.startswith("the unoptimized model is used (as with optimize=False): ")
    assert "Split(num_outputs)" in warning and warning in optimize.detail
    assert session.stage_output("optimize") is session.stage_output("translate")
    assert session.onnx_model.opset_imports[""] == 17
    assert "warning" in session.summary() and "unoptimized model is used" in session.summary()
    assert session.verify().ok


class RegistersTable(torch.nn.Module):
    """Registers a buffer on first call (older transformers' longrope did, for ``inv_freq``):
    torch.export leaves it a FakeTensor buffer, which becomes a constant without data."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        if getattr(self, "table", None) is None:
            self.register_buffer("table", torch.arange(4.0), persistent=False)
        return self.linear(x) + self.table


def test_a_failing_pass_is_named_by_class_and_purpose_and_a_broken_model_is_not_handed_out():
    model = RegistersTable()
    torch.export.export(model, (torch.ones(2, 4),), strict=False)  # leaves a FakeTensor buffer `table`
    with pytest.raises(OptimizeError) as info:
        export(model, torch.ones(2, 4))
    message = str(info.value)
    # The first pass that reads the leftover's values: RewritePass, since constant folding skips
    # inference where the translation already knows every output's shape (torch.onnx.export's
    # optimizer fails in FoldConstantsPass, below).
    named = re.search(r"the ONNX optimizer's (\w+) \(([^)]*)\) failed", message)
    assert named and named.group(2) == OPTIMIZER_PASSES[named.group(1)], message
    assert "RuntimeError: .numpy() is not supported for tensor subclasses" in message
    assert "object at 0x" not in message and "PassManager" not in message
    assert "tracing leftovers instead of constants: 'table' (FakeTensor)" in message
    assert "del model.table" in info.value.hint
    assert info.value.session.stages[-1].status == Status.FAILED


def test_optimizer_failure_names_the_innermost_pass_and_the_passes_before_it():
    import onnx_ir as ir

    from exporter.pipeline.optimize import optimizer_failure

    model = RegistersTable()
    torch.export.export(model, (torch.ones(2, 4),), strict=False)
    session = export(model, torch.ones(2, 4), options=ExportOptions(optimize=False))
    kept = session.result("optimize")  # the translated model is kept, but not reported ok
    assert kept.status == "warning" and "the model cannot be serialized, so onnxruntime cannot load it" in kept.detail
    translated = session.stage_output("translate").clone()
    from exporter import compat

    with pytest.raises(ir.passes.PassError) as info:
        compat.optimize_onnx_ir(translated)
    failure = optimizer_failure(info.value)
    assert failure.pass_name == "FoldConstantsPass" and failure.after == ()
    assert failure.cause.startswith("RuntimeError: .numpy() is not supported")
