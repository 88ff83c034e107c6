"""The sweep's own machinery under attack: an output it cannot flatten, an error of its own
code, a model from an installed package, helpers a unit leaves running, a worker that dies,
a zoo file that raises at import. Units run in this process (``run_unit``) where the worker
is not the point, in real worker processes where it is."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from exporter.sweep import Unit, load_results, sweep
from exporter.sweep.repro import reproduction_code
from exporter.sweep.runner import run_unit

HARNESS = str(Path(__file__).with_name("sweep_harness_models.py"))
SWEEP_MODELS = str(Path(__file__).with_name("sweep_models.py"))


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, killed and waiting to be reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2:].split()[0] != "Z"


def _run_script(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    script = cwd / "repro.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})


# -- errors of the sweep's own code are labelled records ------------------------------------------


def test_an_output_the_sweep_cannot_flatten_is_a_build_failure_at_eager_with_its_message_not_a_crash():
    record = run_unit(Unit("harness", "unflattenable", HARNESS))  # raised out of run_unit (a dead worker) before
    assert (record.status, record.failed_stage) == ("build_failed", "eager"), record
    assert dict(record.stages) == {"build": "ok", "eager": "failed"}
    assert "the outputs (Opaque) cannot be flattened: RuntimeError: Opaque outputs cannot be flattened" in record.error


@pytest.mark.parametrize(("stage", "step", "status"), [
    ("eager", "_eager", "build_failed"),
    ("capture", "_export", "export_failed"),
])
def test_any_error_of_the_sweeps_own_code_is_recorded_at_the_stage_it_was_in(monkeypatch, stage, step, status):
    import exporter.sweep.runner as runner

    def broken(case, progress, *rest):
        progress.begin(stage)
        raise KeyError("a bug of the sweep's")

    monkeypatch.setattr(runner, step, broken if step == "_eager" else lambda unit, case, progress: broken(case, progress))
    record = run_unit(Unit("tests", "mlp", SWEEP_MODELS, verify=False, baseline=False))
    assert (record.status, record.failed_stage, record.stages[stage]) == (status, stage, "failed"), record
    assert record.error == "KeyError: \"a bug of the sweep's\""


# -- the versions of the zoo's libraries ---------------------------------------------------------


def test_a_record_names_the_version_of_the_package_its_models_class_comes_from(tmp_path, monkeypatch):
    package = tmp_path / "wb_fake_models"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import torch\n\nclass Doubler(torch.nn.Module):\n    def forward(self, x):\n        return x * 2\n")
    info = tmp_path / "wb_fake_models-0.4.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: wb-fake-models\nVersion: 0.4.2\n")
    monkeypatch.setenv("SWEEP_TEST_FAKE_PACKAGE", str(tmp_path))
    monkeypatch.syspath_prepend(str(tmp_path))

    record = run_unit(Unit("harness", "from_a_package", HARNESS, verify=False, baseline=False))

    assert record.ok, record
    assert record.versions["wb_fake_models"] == "0.4.2"
    assert {"torch", "onnx", "onnxscript", "onnxruntime"} <= set(record.versions)


# -- worker processes: helpers left running, a worker that dies, the code that reproduces a unit ----


@pytest.fixture(scope="module")
def harness_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("harness")
    pid_file = directory / "helpers"
    os.environ["SWEEP_TEST_HELPER_PIDS"] = str(pid_file)
    try:
        results = sweep([HARNESS, SWEEP_MODELS], models=["unflattenable", "exits", "spawns_helpers", "baked"], workers=2,
                        output_dir=directory / "out", timeout=300, verify=False, baseline=False, progress=False)
    finally:
        del os.environ["SWEEP_TEST_HELPER_PIDS"]
    pids = [int(line) for line in pid_file.read_text().split()]
    yield results, pids
    for pid in pids:  # the helpers this test's unit started, if the sweep left them
        if _running(pid):
            os.kill(pid, 9)


def test_helpers_a_unit_started_are_killed_when_it_ends_even_in_a_session_of_their_own(harness_run):
    results, pids = harness_run
    assert results.record("spawns_helpers").ok, results.record("spawns_helpers")
    assert len(pids) == 2  # sleep 300 in the unit's group, and one in a session of its own, orphaned
    assert [pid for pid in pids if _running(pid)] == []


def test_a_unit_whose_model_ends_the_worker_crashes_in_the_stage_it_was_in(harness_run):
    results, _ = harness_run
    exits = results.record("exits")
    assert (exits.status, exits.failed_stage) == ("crashed", "eager"), exits
    assert results.record("unflattenable").status == "build_failed"  # in a worker too: a record, not a crash


@pytest.mark.parametrize("model", ["unflattenable", "exits", "baked"])
def test_the_reproduction_code_of_a_failed_or_crashed_unit_fails_as_the_unit_did(harness_run, tmp_path, model):
    results, _ = harness_run
    record = results.record(model)
    assert record.failed, record
    run = _run_script(reproduction_code(record), tmp_path)
    if record.status == "crashed":
        assert run.returncode == 7, run.stderr  # the worker's own exit: the same stages ran here
        assert "stage: eager" in run.stdout
    else:
        assert run.returncode == 1
        assert record.error.split(": ", 1)[1][:80] in run.stderr, (record.error, run.stderr[-3000:])


# -- a zoo file that raises at import --------------------------------------------------------------


def test_a_zoo_file_that_raises_at_import_is_one_line_and_a_row_and_the_other_zoos_run(tmp_path):
    bad = tmp_path / "bad_zoo.py"
    bad.write_text("import os\n\nCONFIG = {}\nSIZE = CONFIG['hidden_size']\n")
    out = tmp_path / "out"
    run = subprocess.run([sys.executable, "-m", "exporter.cli", "sweep", "--zoo", str(bad), "--zoo", HARNESS,
                          "--model", "unflattenable", "-o", str(out), "--no-progress", "--no-baseline"],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    (line,) = [line for line in run.stderr.splitlines() if "bad_zoo.py" in line]
    assert line == f"sweep: cannot import {bad}: KeyError: 'hidden_size' (line 4: SIZE = CONFIG['hidden_size'])"
    results = load_results(out)
    row = results.record("(import)")
    assert (row.zoo, row.status, row.failed_stage, row.source) == ("bad_zoo", "build_failed", "import", str(bad))
    assert row.error == "KeyError: 'hidden_size' (line 4: SIZE = CONFIG['hidden_size'])"
    assert results.record("unflattenable").failed_stage == "eager"  # the other zoo ran
    repro = _run_script(reproduction_code(row), tmp_path)
    assert repro.returncode == 1 and "KeyError: 'hidden_size'" in repro.stderr
