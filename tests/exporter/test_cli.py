"""The ``onnx-workbench`` command line: demo, export, exit codes and messages."""

from __future__ import annotations

import contextlib
import io
import re
import shutil
import subprocess
import sys
import textwrap
import warnings

import onnx
import pytest

from exporter import STAGES
from exporter.cli import build_parser, main
from exporter.dims.grammar import AxisRequestsAction, axis_request_argument

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
    for stage in STAGES:
        assert re.search(rf"^\| {stage} \| ok \| \d+\.\d{{3}} \|", summary, re.MULTILINE), stage
    assert "| nonstrict | ok |" in summary
    assert "`[batch, seq, 64]`" in summary
    assert "batch = Dim('batch')" in summary and "'attention_mask': {0: batch, 1: seq}" in summary
    assert "| x.0 | 2 | Dim('batch') | dynamic |" in summary
    assert "| attention_mask.1 | 7 | Dim('seq') | dynamic |" in summary
    assert re.search(r"\| equality \| `attention_mask.shape\[0\] == x.shape\[0\]` \| x.0, attention_mask.0 \| `examples.py:\d+: mask = ",
                     summary)
    assert "**Verification PASSED" in summary  # the verdict line first
    swept = dict(re.findall(r"^\| (batch|seq) \| [^|]+ \| ([\d, ]+) \|$", summary, re.MULTILINE))
    assert "1" in swept["batch"].split(", ") and "1" in swept["seq"].split(", ")  # the sizes checked per dim
    assert re.search(r"^## Latency `\w+`\n\n\*\*onnxruntime [^\n]*(faster|slower)", summary, re.MULTILINE)  # the headline
    assert not re.search(r"\|\s*(None|nan)\s*\|", summary) and "e+00" not in summary  # missing values blank


def test_demo_prints_each_result_once_in_a_few_lines_and_names_the_full_summary(demo):
    _, outdir, stdout, stderr = demo
    lines = stdout.strip().splitlines()
    assert len(lines) == 5, stdout
    assert lines[0].startswith(f"exported TransformerBlock to {outdir / 'model.onnx'} (")
    assert "x [batch, seq, 64]" in lines[1] and "output [batch, seq, 64]" in lines[1]
    assert re.fullmatch(r"verify \(\d+ cases compared\): Verification PASSED.*", lines[2])
    assert lines[3].startswith("benchmark: onnxruntime ") and lines[4].endswith(str(outdir / "summary.md"))
    assert (stdout + stderr).count("Verification PASSED") == 1 and stderr.count("verify passed in") == 1


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
    assert "[spec] 'xs.0=batch': unknown input 'xs'" in stderr
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


def test_dynamic_is_the_cores_axis_grammar():
    export = build_parser()._subparsers._group_actions[0].choices["export"]
    (dynamic,) = [a for a in export._actions if "--dynamic" in a.option_strings]
    assert dynamic.type is axis_request_argument and isinstance(dynamic, AxisRequestsAction)


def test_an_axis_given_twice_exits_2_naming_both(factory_file, tmp_path):
    code, _, stderr = run_cli("export", f"{factory_file}:make", "--dynamic", "x.0=batch", "x.1=seq",
                              "--dynamic", "x.0=static", "-o", str(tmp_path / "m.onnx"))
    assert code == 2
    assert "x.0 is given twice: 'x.0=batch' and 'x.0=static'" in stderr


def test_a_bare_name_exports_where_a_guard_bounds_the_dim(tmp_path):
    """``x.0=batch`` means what ``{"x": {0: "batch"}}`` means: the guard ``batch != 1`` narrows
    the range instead of rejecting the export (a strict ``batch::`` is rejected)."""
    factory = tmp_path / "notone.py"
    factory.write_text(NOT_ONE_MODULE)
    output = tmp_path / "model.onnx"
    code, _, stderr = run_cli("export", f"{factory}:make", "--dynamic", "x.0=batch", "-o", str(output))
    assert code == 0, stderr
    assert onnx_shapes(output)["x"] == ["batch", 4]
    code, _, stderr = run_cli("export", f"{factory}:make", "--dynamic", "x.0=batch::", "-o", str(output))
    assert code == 1 and "Dim('batch', min=2)" in stderr


NOT_ONE_MODULE = textwrap.dedent(
    """
    import torch

    class NotOne(torch.nn.Module):
        def forward(self, x):
            torch._check(x.shape[0] != 1)
            return x * 2

    def make():
        return NotOne(), (torch.randn(3, 4),)
    """
)


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


# -- issue 12: what a new user tripped over ------------------------------------------------


def test_version_and_malformed_command_lines_exit_fast_without_importing_torch(tmp_path):
    script = textwrap.dedent(
        f"""
        import contextlib, io, json, sys
        from exporter.cli import main
        codes = {{}}
        for name, argv in {{
            "version": ["--version"],
            "help": ["export", "--help"],
            "opset": ["export", "m.py:make", "--opset", "3", "-o", "m.onnx"],
            "extension": ["export", "m.py:make", "-o", "m.txt"],
            "directory": ["export", "m.py:make", "-o", {str(tmp_path)!r}],
        }}.items():
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                codes[name] = main(argv)
        print(json.dumps({{"codes": codes, "torch": "torch" in sys.modules}}))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = __import__("json").loads(done.stdout)
    assert result == {
        "codes": {"version": 0, "help": 0, "opset": 2, "extension": 2, "directory": 1},
        "torch": False,
    }


def test_version_prints_the_installed_package_version():
    from importlib.metadata import version

    code, stdout, _ = run_cli("--version")
    assert code == 0 and stdout.strip() == f"onnx-workbench {version('onnx-export-workbench')}"


@pytest.mark.parametrize(
    ("argv", "verbose"),
    [
        (["export", "m.py:make", "-o", "m.onnx"], False),
        (["-v", "export", "m.py:make", "-o", "m.onnx"], True),
        (["export", "m.py:make", "-o", "m.onnx", "-v"], True),
        (["demo", "--verbose"], True),
    ],
)
def test_verbose_flag_is_accepted_before_or_after_the_command(argv, verbose):
    assert build_parser().parse_args(argv).verbose is verbose


def test_an_opset_out_of_range_exits_2_naming_the_supported_range(factory_file, tmp_path):
    code, _, stderr = run_cli("export", f"{factory_file}:make", "--opset", "3", "-o", str(tmp_path / "m.onnx"))
    assert code == 2
    assert "argument --opset: opset_version=3 is not a supported ONNX opset" in stderr and "7 to 25" in stderr


@pytest.mark.parametrize("name", ["m.txt", "model", "m.PT2"])
def test_an_unknown_output_extension_exits_2_naming_the_known_ones(factory_file, tmp_path, name):
    code, _, stderr = run_cli("export", f"{factory_file}:make", "-o", str(tmp_path / name))
    assert code == 2
    assert "unknown extension" in stderr and ".onnx (an ONNX model)" in stderr and ".pt2 (a torch.export" in stderr
    assert not (tmp_path / name).exists()


def test_a_directory_as_output_is_refused_plainly_before_exporting(factory_file, tmp_path):
    code, stdout, stderr = run_cli("export", f"{factory_file}:make", "-o", str(tmp_path))
    assert code == 1
    assert f"[save] '{tmp_path}' is a directory, not a file name" in stderr
    assert f"give a file inside it: '{tmp_path / 'model.onnx'}'" in stderr
    assert "capture" not in stderr and ".tmp" not in stderr and not stdout


def test_an_unwritable_output_is_refused_before_the_factory_is_loaded(tmp_path):
    code, _, stderr = run_cli("export", f"{tmp_path / 'no_such_file.py'}:make", "-o", "/proc/x/model.onnx")
    assert code == 1
    assert "[save] cannot create the directory '/proc/x'" in stderr
    assert "[factory]" not in stderr


def test_pt2_output_stops_after_capture_and_says_it_wrote_an_exported_program(factory_file, tmp_path):
    import torch

    output = tmp_path / "out" / "m.pt2"
    code, stdout, stderr = run_cli(
        "export", f"{factory_file}:make", "--dynamic", "x.0=batch", "cache.0.key.0=batch", "-o", str(output), "-v"
    )
    assert code == 0, stderr
    assert re.search(r"^capture ok in", stderr, re.MULTILINE)
    assert "decompose" not in stderr and "translate" not in stderr and "opset" not in stdout
    assert f"wrote {output} (a torch.export ExportedProgram, not ONNX;" in stdout
    assert re.search(r"input  x +float32 +\[batch, 5, 8\]", stdout), stdout
    program = torch.export.load(output)
    assert [n.name for n in program.graph.nodes if n.op == "placeholder"][-2:] == ["x", "cache_0_key"]


def test_a_missing_factory_names_the_users_file_and_lists_only_functions(factory_file, tmp_path):
    code, _, stderr = run_cli("export", f"{factory_file}:nosuchfactory", "-o", str(tmp_path / "m.onnx"))
    assert code == 1
    assert f"[factory] '{factory_file}' has no function 'nosuchfactory'" in stderr
    assert "functions there: make;" in stderr
    assert "_onnx_workbench" not in stderr and "CachedLinear" not in stderr


def test_a_class_given_as_the_factory_is_named_as_a_class(factory_file, tmp_path):
    code, _, stderr = run_cli("export", f"{factory_file}:CachedLinear", "-o", str(tmp_path / "m.onnx"))
    assert code == 1
    assert f"'{factory_file}' has a class 'CachedLinear', not a function" in stderr


WARNING_MODULE = textwrap.dedent(
    """
    import warnings
    import torch

    class Doubler(torch.nn.Module):
        def forward(self, x):
            warnings.warn("Doubler is deprecated, use Tripler", FutureWarning)
            return x * 2

    def make():
        return Doubler(), (torch.randn(2, 3),)
    """
)


def test_export_hides_torchs_deprecation_warnings_but_not_the_users(tmp_path):
    factory = tmp_path / "warns.py"
    factory.write_text(WARNING_MODULE)
    with warnings.catch_warnings(record=True) as log:
        warnings.simplefilter("always")  # see past pytest's own filters
        code, _, stderr = run_cli("export", f"{factory}:make", "-o", str(tmp_path / "m.onnx"))
    assert code == 0, stderr
    messages = [str(w.message) for w in log]
    assert "Doubler is deprecated, use Tripler" in messages
    assert not [m for m in messages if "LeafSpec" in m], messages


SDPA_MODULE = textwrap.dedent(
    """
    import torch
    import torch.nn.functional as F

    class Attend(torch.nn.Module):
        def forward(self, q, mask):
            return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)

    def make():
        return Attend(), (torch.randn(1, 2, 4, 8), torch.ones(4, 4, dtype=torch.bool))
    """
)


@pytest.mark.parametrize(("flags", "fully_masked_row"), [((), "zero"), (("--fully-masked-rows", "mean"), "mean")])
def test_fully_masked_rows_flag_chooses_what_a_fully_masked_query_returns(tmp_path, flags, fully_masked_row):
    import numpy as np
    import onnxruntime as ort

    factory = tmp_path / "attend.py"
    factory.write_text(SDPA_MODULE)
    output = tmp_path / "model.onnx"
    code, _, stderr = run_cli("export", f"{factory}:make", *flags, "-o", str(output))
    assert code == 0, stderr
    q = np.random.default_rng(0).standard_normal((1, 2, 4, 8)).astype(np.float32)
    mask = np.ones((4, 4), dtype=bool)
    mask[1] = False  # query 1 may attend to no key
    (out,) = ort.InferenceSession(str(output)).run(None, {"q": q, "mask": mask})
    expected = np.zeros(8) if fully_masked_row == "zero" else q[0, 0].mean(0)
    np.testing.assert_allclose(out[0, 0, 1], expected, atol=1e-5)


# -- options before the factory; output paths ----------------------------------------------


def test_options_before_the_factory_export_like_options_after_it(factory_file, tmp_path):
    output = tmp_path / "model.onnx"
    code, stdout, stderr = run_cli(
        "export", "--args", "hidden=32", "--dynamic", "x.0=batch", "x.1=seq", "cache.0.key.0=batch",
        f"{factory_file}:make", "--opset", "18", "-o", str(output),
    )
    assert code == 0, stderr
    assert onnx_shapes(output) == {"x": ["batch", "seq", 8], "cache.0.key": ["batch", 4], "output": ["batch", "seq", 32]}
    assert f"wrote {output}" in stdout


@pytest.mark.parametrize(
    "argv",
    [
        ["export", "--dynamic", "x.0=batch", "models.py:make_model", "-o", "out.onnx"],
        ["export", "--dynamic", "x.0=batch", "x.1=seq", "models.py:make_model", "-o", "out.onnx"],
        ["export", "--args", "hidden=64", "models.py:make_model", "--dynamic", "x.0=batch", "-o", "out.onnx"],
        ["export", "-o", "out.onnx", "--skip-pass", "RewritePass", "models.py:make_model", "--dynamic", "x.0=batch"],
        ["export", "models.py:make_model", "--dynamic", "x.0=batch", "-o", "out.onnx"],
        ["-v", "export", "--dynamic", "x.0=batch", "pkg.models:make_model", "-o", "out.onnx", "-v"],
    ],
    ids=["dynamic-first", "two-axes-first", "args-first", "one-value-options-first", "factory-first", "module-name"],
)
def test_the_factory_parses_wherever_it_comes_among_the_options(argv):
    options = build_parser().parse_args(argv)
    assert options.factory in (("models.py", "make_model"), ("pkg.models", "make_model"))
    assert [request.text for request in options.dynamic] == [w for w in argv if w.startswith("x.")]
    assert options.output.name == "out.onnx"


def test_a_one_value_options_value_is_never_taken_for_the_factory():
    # "a:b" after --strategy is its (wrong) value, not MODULE:FACTORY: argparse says so
    code, _, stderr = run_cli("export", "--strategy", "a:b", "-o", "out.onnx")
    assert code == 2
    assert "argument --strategy: unknown strategy 'a:b'" in stderr


def test_demo_refuses_a_directory_where_its_model_goes_before_exporting(tmp_path):
    (tmp_path / "model.onnx").mkdir()
    code, stdout, stderr = run_cli("demo", "-o", str(tmp_path))
    assert code == 1
    assert f"[save] '{tmp_path / 'model.onnx'}' is a directory, not a file name" in stderr
    assert "capture" not in stderr and not stdout


RIGHT_ONLY_AT_ONE = textwrap.dedent(
    """
    import torch

    class RightOnlyAtOne(torch.nn.Module):
        def forward(self, x):
            return x * 2 if x.shape[0] == 1 else x + 1

    def make():
        return RightOnlyAtOne(), (torch.randn(1, 4),)
    """
)


def test_export_says_failed_then_not_verified_then_passed_as_the_spec_changes(tmp_path):
    """The verdict line is the export's own (session.verdict): a failed --verify exits 1 and
    says failed; the same model with another spec and no --verify says not verified (never
    ok); that spec verified says passed."""
    factory = tmp_path / "right_at_one.py"
    factory.write_text(RIGHT_ONLY_AT_ONE)
    output = tmp_path / "model.onnx"
    code, stdout, stderr = run_cli("export", f"{factory}:make", "--dynamic", "x.0=auto", "--verify", "-o", str(output))
    assert code == 1 and output.exists(), stderr  # written all the same, and said so
    assert stdout.strip().splitlines()[-1].startswith("failed: Verification FAILED")
    assert "[verify] onnxruntime and eager PyTorch disagree" in stderr and f"{output} was written" in stderr

    code, stdout, stderr = run_cli("export", f"{factory}:make", "-o", str(output))  # the spec changed: x.0 static
    assert code == 0, stderr
    last = stdout.strip().splitlines()[-1]
    assert last.startswith("not verified: onnxruntime was not compared with PyTorch") and "--verify" in last
    assert "passed" not in stdout and " ok" not in stdout

    code, stdout, stderr = run_cli("export", f"{factory}:make", "--verify", "-o", str(output))
    assert code == 0, stderr
    assert stdout.strip().splitlines()[-1].startswith("passed: Verification PASSED")


def test_verify_with_an_exported_program_output_exits_2_before_exporting(tmp_path):
    factory = tmp_path / "right_at_one.py"
    factory.write_text(RIGHT_ONLY_AT_ONE)
    code, stdout, stderr = run_cli("export", f"{factory}:make", "--verify", "-o", str(tmp_path / "m.pt2"))
    assert code == 2 and "--verify compares an ONNX model" in stderr and "capture" not in stderr and not stdout


def test_export_benchmark_prints_the_latency_headline_and_says_the_timed_model_was_not_verified(tmp_path):
    factory = tmp_path / "right_at_one.py"
    factory.write_text(RIGHT_ONLY_AT_ONE)
    output = tmp_path / "model.onnx"
    code, stdout, stderr = run_cli("export", f"{factory}:make", "--benchmark", "-o", str(output))
    assert code == 0, stderr
    *_, timing, last = stdout.strip().splitlines()
    # one figure, or a range when the rounds disagree (a busy machine)
    assert re.match(r"benchmark: onnxruntime [\d.]+x( to [\d.]+x)? (faster|slower) than eager PyTorch", timing), timing
    assert timing.endswith("(of a model that is not verified)") and last.startswith("not verified:")

    code, stdout, stderr = run_cli("export", f"{factory}:make", "--verify", "--benchmark", "-o", str(output))
    assert code == 0, stderr
    *_, timing, last = stdout.strip().splitlines()
    assert timing.startswith("benchmark: onnxruntime ") and "(of a model" not in timing
    assert last.startswith("passed: Verification PASSED")


def test_benchmark_with_an_exported_program_output_exits_2_before_exporting(tmp_path):
    factory = tmp_path / "right_at_one.py"
    factory.write_text(RIGHT_ONLY_AT_ONE)
    code, stdout, stderr = run_cli("export", f"{factory}:make", "--benchmark", "-o", str(tmp_path / "m.pt2"))
    assert code == 2 and "--benchmark times an ONNX model" in stderr and not stdout
