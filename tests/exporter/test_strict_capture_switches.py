"""TorchDynamo (the strict capture) traces through the per-job switches of
``compat.shared_patch``: the compile flags answer as torch.export makes them answer, and a
patch entered by the capturing job is what the trace sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import torch

from exporter import ExportOptions, export
from exporter.compat.shared_patch import choices_for_dynamo, shared_patch


class AsksIfCompiling(torch.nn.Module):
    def forward(self, x):
        if torch.compiler.is_compiling():  # transformers' is_torchdynamo_compiling() asks this
            return x * 2
        return x * 3


def test_a_strict_capture_of_a_model_that_asks_is_compiling_takes_the_compiling_branch():
    session = export(AsksIfCompiling(), torch.randn(2, 3), options=ExportOptions(strategy="strict"))
    assert session.stages[0].status == "ok", session.stages[0].error
    (out,) = session.run_onnx(torch.ones(2, 3))
    assert (out == 2).all()  # what torch.export.export(strict=True) alone captures
    assert not torch.compiler.is_compiling()  # and the user's code is not told it compiles


class Scaled(torch.nn.Module):
    def scale(self, x):
        return x * 3

    def forward(self, x):
        return self.scale(x) + 1


def _strict_program_output(model, x):
    with choices_for_dynamo():
        program = torch.export.export(model, (x,), strict=True)
    return program.module()(x)


def test_a_strict_trace_sees_the_patch_of_its_own_context_and_not_another_contexts():
    x = torch.ones(2)
    double = lambda original: lambda self, x: x * 10  # noqa: E731 - the replacement's factory
    with shared_patch(Scaled, "scale", double):
        assert (_strict_program_output(Scaled(), x) == 11).all()
        assert (Scaled()(x) == 11).all()
    assert (_strict_program_output(Scaled(), x) == 4).all()  # the switch is gone: the original


def test_a_strict_capture_takes_the_compiling_branch_when_a_switch_was_installed_before_dynamo_was_used(tmp_path):
    # In a fresh interpreter the first switch on torch.compiler.is_compiling comes before TorchDynamo
    # built its tables of torch functions (as in a long session: an eager stage ran first).
    script = tmp_path / "first_switch.py"
    script.write_text(
        "import torch\n"
        "from exporter.compat.shared_patch import compile_flags_in_this_job\n"
        "with compile_flags_in_this_job():\n"
        "    import torch._dynamo.variables.torch as tables\n"
        "    tables.tracing_state_functions()\n"
        f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        "from test_strict_capture_switches import "
        "test_a_strict_capture_of_a_model_that_asks_is_compiling_takes_the_compiling_branch as check\n"
        "check()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
