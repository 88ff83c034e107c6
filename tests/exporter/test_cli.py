"""The ``onnx-workbench`` command line: demo, export, exit codes and messages."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import textwrap

import onnx
import pytest

from exporter import AUTO, STAGES, Dim
from exporter.cli import AxisRequest, main, parse_axis_request

FACTORY_MODULE = textwrap.dedent(
    """
    import torch

    class CachedLinear(torch.nn.Module):
        def __init__(self, hidden):
            super().__init__()
            self.fc = torch.nn.Linear(8, hidden)

        def forward(self, x, cache):
            return self.fc(x) + cache[0]["key"].sum(-1)[:, None, None]

    def make(hidden=16, batch=3):
        torch.manual_seed(0)
        x = torch.randn(batch, 5, 8)
        return CachedLinear(hidden).eval(), (x,), {"cache": [{"key": torch.randn(batch, 4)}]}
    """
)


def run_cli(*argv: str) -> tuple[int, str, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(list(argv))
    return code, stdout.getvalue(), stderr.getvalue()


def onnx_shapes(path) -> dict[str, list]:
    model = onnx.load(str(path))
    onnx.checker.check_model(model)
    return {
        value.name: [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]
        for value in list(model.graph.input) + list(model.graph.output)
    }


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    outdir = tmp_path_factory.mktemp("demo") / "out"
    code, stdout, stderr = run_cli("demo", "-o", str(outdir))
    return code, outdir, stdout, stderr


@pytest.fixture
def factory_file(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(FACTORY_MODULE)
    return path


def test_demo_writes_an_onnx_model_with_named_dims(demo):
    code, outdir, _, stderr = demo
    assert code == 0, stderr
    shapes = onnx_shapes(outdir / "model.onnx")
    assert shapes["x"] == ["batch", "seq", 64]
    assert shapes["attention_mask"] == ["batch", "seq"]
    assert shapes["output"] == ["batch", "seq", 64]


def test_demo_summary_reports_stages_dims_and_checks(demo):
    _, outdir, stdout, _ = demo
    summary = (outdir / "summary.md").read_text()
    assert stdout.strip() == summary.strip()
    for stage in STAGES:
        assert re.search(rf"^\| {stage} \| ok \| \d+\.\d{{3}} \|", summary, re.MULTILINE), stage
    assert "| nonstrict | ok |" in summary
    assert "`[batch, seq, 64]`" in summary
    assert "batch = Dim('batch')" in summary and "'attention_mask': {0: batch, 1: seq}" in summary
    assert "| x | 0 | 2 | Dim('batch') | dynamic |" in summary
    assert "| attention_mask | 1 | 7 | Dim('seq') | dynamic |" in summary
    assert re.search(r"\| equality \| `attention_mask.shape\[0\] == x.shape\[0\]` \| `\S*examples.py:\d+: mask = ", summary)
    assert "Verification PASSED" in summary
    assert re.search(r"correct at every swept size: batch in \{1, .*\}; seq in \{1, .*\}", summary)
    assert re.search(r"onnxruntime / eager p50 = \d\.\d+", summary)


def test_demo_progress_is_one_line_per_stage_on_stderr(demo):
    _, _, stdout, stderr = demo
    for stage in STAGES:
        assert re.search(rf"^{stage} ok in \d+\.\d\d s", stderr, re.MULTILINE), stderr
        assert f"{stage} ok in" not in stdout
    assert "torchvision" not in stderr and "Warning" not in stderr


def test_export_applies_factory_args_and_dynamic_axes(factory_file, tmp_path):
    output = tmp_path / "nested" / "model.onnx"
    code, stdout, stderr = run_cli(
        "export", f"{factory_file}:make", "--args", "hidden=32", "batch=4",
        "--dynamic", "x.0=batch", "x.1=seq:2:512", "cache.0.key.0=batch",
        "--opset", "18", "--strategy", "nonstrict", "-o", str(output),
    )
    assert code == 0, stderr
    assert onnx_shapes(output) == {
        "x": ["batch", "seq", 8],
        "cache.0.key": ["batch", 4],
        "output": ["batch", "seq", 32],
    }
    assert {o.version for o in onnx.load(str(output)).opset_import if o.domain == ""} == {18}
    assert f"wrote {output}" in stdout and "[batch, seq, 8]" in stdout
    assert re.search(r"^capture ok in \d+\.\d\d s: strategy nonstrict$", stderr, re.MULTILINE)


def test_export_of_an_unknown_input_exits_1_with_a_readable_message(factory_file, tmp_path):
    output = tmp_path / "model.onnx"
    code, _, stderr = run_cli("export", f"{factory_file}:make", "--dynamic", "xs.0=batch", "-o", str(output))
    assert code == 1
    assert "[spec] unknown input 'xs'" in stderr
    assert "fix:" in stderr and "'x'" in stderr
    assert "Traceback" not in stderr
    assert not output.exists()


BRANCH_MODULE = textwrap.dedent(
    """
    import torch

    class Branch(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] == 3 else x + 1

    def make():
        return Branch(), (torch.randn(3, 4),)
    """
)


@pytest.mark.parametrize(("flags", "first_dim"), [((), 3), (("--runtime-asserts",), "x_dim0")])
def test_runtime_asserts_flag_keeps_a_branched_dim_symbolic(tmp_path, flags, first_dim):
    factory = tmp_path / "branch.py"
    factory.write_text(BRANCH_MODULE)
    output = tmp_path / "model.onnx"
    code, _, stderr = run_cli("export", f"{factory}:make", "--dynamic", "x.0=auto", *flags, "-o", str(output))
    assert code == 0, stderr
    shapes = onnx_shapes(output)["x"]
    assert shapes[0] == first_dim


def test_export_of_a_missing_factory_suggests_the_closest_name(factory_file, tmp_path):
    code, _, stderr = run_cli("export", f"{factory_file}:mkae", "-o", str(tmp_path / "m.onnx"))
    assert code == 1
    assert "[factory]" in stderr and "did you mean 'make'?" in stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["--dynamic", "x0=batch"],
        ["--dynamic", "x.first=batch"],
        ["--dynamic", "x.0=seq:1"],
        ["--dynamic", "x.0=seq:one:4"],
        ["--args", "hidden"],
        ["--strategy", "strcit"],
    ],
    ids=["no-axis", "axis-not-int", "one-bound", "bound-not-int", "arg-without-value", "unknown-strategy"],
)
def test_malformed_command_lines_exit_2(factory_file, tmp_path, argv):
    code, _, stderr = run_cli("export", f"{factory_file}:make", *argv, "-o", str(tmp_path / "m.onnx"))
    assert code == 2
    assert "usage: onnx-workbench export" in stderr


def test_missing_command_and_output_exit_2(factory_file):
    assert run_cli()[0] == 2
    assert run_cli("export", f"{factory_file}:make")[0] == 2


@pytest.mark.parametrize(
    "text, expected",
    [
        ("x.0=batch", AxisRequest("x", 0, Dim("batch"))),
        ("cache.0.key.2=seq:1:4096", AxisRequest("cache.0.key", 2, Dim("seq", min=1, max=4096))),
        ("x.-1=n::64", AxisRequest("x", -1, Dim("n", max=64))),
        ("mask.1=AUTO", AxisRequest("mask", 1, AUTO)),
    ],
)
def test_dynamic_axis_syntax(text, expected):
    assert parse_axis_request(text) == expected


def test_installed_console_script_prints_help():
    script = shutil.which("onnx-workbench")
    assert script, "onnx-workbench is not on PATH: pip install -e ."
    done = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "demo" in done.stdout and "export" in done.stdout


def test_an_output_directory_that_cannot_be_created_exits_1_without_a_traceback(factory_file, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    code, _, stderr = run_cli("export", f"{factory_file}:make", "-o", str(blocker / "sub" / "m.onnx"))
    assert code == 1
    assert "[save] cannot create the directory" in stderr and "Traceback" not in stderr
