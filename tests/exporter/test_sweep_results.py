"""The sweep's results as data: failure buckets, the diff, the dashboard, the coverage page,
unit ids, the zoos that cannot load here. No export runs: records are built by hand."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from exporter.sweep import SweepResults, Unit, UnitRecord, failure_class, load_results
from exporter.sweep.cli import add_sweep_parser
from exporter.sweep.repro import reproduction_code

SWEEP_MODELS = str(Path(__file__).with_name("sweep_models.py"))


def record(model: str, status: str, *, stage: str | None = None, error: str | None = None, spec: str = "dynamic",
           baseline: str | None = None, versus: str | None = None) -> UnitRecord:
    unit = Unit("tests", model, SWEEP_MODELS, spec)
    return UnitRecord(unit.unit_id, "tests", model, spec, status, options=unit.options, failed_stage=stage, error=error,
                      failure_class=failure_class(error), baseline=baseline, versus=versus, source=SWEEP_MODELS,
                      stages={"build": "ok"} if status != "build_failed" else {"build": "failed"})


BEFORE = SweepResults((
    record("a", "passed", baseline="passed", versus="same"),
    record("b", "passed"),
    record("c", "export_failed", stage="capture", error="RuntimeError: shape '[2, 16]' is invalid for input of size 64"),
    record("d", "verify_failed", stage="verify"),
    record("gone", "passed"),
))
AFTER = SweepResults((
    record("a", "passed", baseline="export_failed", versus="better"),
    record("b", "export_failed", stage="translate", error="DispatchError: No ONNX function found for aten.grouped_mm.default"),
    record("c", "export_failed", stage="capture", error="RuntimeError: shape '[3, 7]' is invalid for input of size 21"),
    record("d", "passed"),
    record("new", "timeout", stage="capture", error="killed after 10 s in capture"),
    record("e", "export_failed", stage="capture", error="RuntimeError: shape '[5, 5]' is invalid for input of size 25"),
))


def test_a_model_onnxruntime_refuses_at_some_size_ranks_above_no_model_and_a_silently_wrong_one_below():
    from exporter.sweep.outcome import versus

    assert versus("verify_failed", "export_failed") == "worse"  # wrong numbers, no error
    assert versus("verify_failed", "export_failed", ours_refuses_only=True) == "better"
    assert versus("verify_failed", "verify_failed", ours_refuses_only=True) == "better"
    assert versus("verify_failed", "verify_failed", baseline_refuses_only=True) == "worse"
    assert versus("verify_failed", "passed", ours_refuses_only=True) == "worse"
    assert versus("passed", "export_failed", baseline_refuses_only=True) == "better"  # only verify_failed can refuse


def test_failure_class_takes_out_what_varies_from_model_to_model():
    one = failure_class("RuntimeError: shape '[2, 16, 4, 8]' is invalid for input of size 1024")
    two = failure_class("RuntimeError: shape '[3, 11]' is invalid for input of size 33")
    assert one == two == "RuntimeError: shape '[…]' is invalid for input of size N"
    assert failure_class("Error in /usr/lib/python3/site-packages/x/y.py:12 for s41") == "Error in <file> for s?"
    assert failure_class(None) is None


def test_failures_are_bucketed_by_stage_and_root_cause_largest_first():
    buckets = AFTER.buckets()
    top = buckets.iloc[0]
    assert (top["stage"], top["count"], top["models"]) == ("capture", 2, "c, e")
    assert set(buckets["stage"]) == {"capture", "translate"}
    assert "timeout" in set(buckets["status"])
    assert "passed" not in set(buckets["status"])


def test_the_diff_lists_regressions_first_then_fixes_changes_new_and_gone():
    diff = AFTER.diff(BEFORE)
    kinds = [row.kind for row in diff.rows]
    assert kinds == sorted(kinds, key=["regression", "fixed", "changed", "new", "gone"].index)
    assert kinds[0] == "regression" and diff.rows[0].model == "b"
    assert {(r.model, r.kind) for r in diff.rows} == {
        ("b", "regression"), ("d", "fixed"), ("a", "changed"), ("new", "new"), ("e", "new"), ("gone", "gone")}
    assert diff.unchanged == 1  # c: same status and bucket, other sizes in its message
    lines = diff.summary().splitlines()
    header = next(i for i, line in enumerate(lines) if line.lstrip().startswith("change"))
    assert lines[header + 1].lstrip().startswith("regression")  # listed first
    assert list(diff.to_frame()["kind"])[0] == "regression"


def test_the_dashboard_is_one_offline_page_with_every_unit(tmp_path):
    html = AFTER.dashboard(tmp_path / "d.html")
    assert (tmp_path / "d.html").read_text() == html
    assert not re.search(r"<(script|link|img)[^>]+(src|href)\s*=\s*[\"']?(https?:)?//", html, re.I)
    assert "http://" not in html and "https://" not in html
    for r in AFTER.records:
        assert f'data-unit="{r.unit_id}"' in html
    assert "aten.grouped_mm" in html                       # the error, shown when its cell is clicked
    assert "load_case(&#x27;tests&#x27;, &#x27;b&#x27;" in html or "load_case('tests', 'b'" in html


def test_the_reproduction_code_runs_the_step_that_failed():
    build = reproduction_code(record("x", "build_failed", stage="build", error="ValueError: no"))
    assert "case.model(*case.args, **case.kwargs)" in build and "export(" not in build
    export = reproduction_code(record("x", "export_failed", stage="capture", baseline="export_failed"))
    assert "session = export(case.model" in export and "torch.onnx.export(" in export
    compile(export, "<repro>", "exec")


def test_coverage_markdown_counts_and_lists_each_unit():
    text = AFTER.coverage_markdown(scope="A subset.")
    assert text.startswith("# Export coverage\n\nA subset.")
    assert r"| export\_failed | 3 |" in text and "onnx-workbench sweep" in text
    assert "**1 better**, **0 same**, **0 worse**" in text
    for r in AFTER.records:
        assert f"| {r.model} | dynamic |" in text


def test_results_round_trip_through_the_output_directory(tmp_path):
    AFTER.save(tmp_path)
    loaded = load_results(tmp_path)
    assert loaded.records == AFTER.records
    assert (tmp_path / "records.parquet").exists()
    frame = loaded.to_frame()
    assert list(frame["model"]) == [r.model for r in AFTER.records]
    assert {"status", "failed_stage", "failure_class", "baseline", "versus", "onnx_bytes"} <= set(frame.columns)


def test_a_torn_last_line_is_skipped(tmp_path):
    AFTER.save(tmp_path)
    with open(tmp_path / "records.jsonl", "a") as out:
        out.write('{"unit_id": "tests/x')
    with pytest.warns(UserWarning, match="hold no whole record"):
        assert len(load_results(tmp_path)) == len(AFTER.records)


def test_unit_ids_are_stable_and_name_zoo_model_spec_and_options():
    unit = Unit("transformers", "bert", "exporter.sweep.zoos.transformers")
    assert unit.unit_id == Unit("transformers", "bert", "elsewhere").unit_id
    assert unit.unit_id.startswith("transformers/bert/dynamic/")
    assert Unit("transformers", "bert", "x", opset=18).unit_id != unit.unit_id
    assert Unit.from_dict(unit.to_dict()) == unit
    with pytest.raises(ValueError, match="unknown spec"):
        Unit("z", "m", "s", spec="sometimes")


def test_torchvision_that_does_not_import_gives_skipped_entries_with_the_reason(monkeypatch):
    from exporter.sweep.zoos.torchvision import TorchvisionZoo

    monkeypatch.setitem(sys.modules, "torchvision", None)  # what a failing import looks like
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    entries = TorchvisionZoo().entries()
    assert entries and all(e.factory is None for e in entries)
    assert all("torchvision does not import here" in (e.skip_reason or "") for e in entries)


def test_a_zoo_that_cannot_load_is_recorded_as_skipped_without_a_process(tmp_path, monkeypatch):
    from exporter.sweep import sweep

    monkeypatch.setitem(sys.modules, "torchvision", None)
    results = sweep("torchvision", models=["resnet18"], output_dir=tmp_path, progress=False)
    (only,) = results.records
    assert only.status == "skipped" and only.pid == 0
    assert "torchvision" in (only.error or "")


def test_a_factory_defined_in_a_notebook_is_skipped_with_what_to_do():
    from exporter.sweep.zoo import get_zoo, zoo_entry

    def scratch():
        raise AssertionError("never called")

    scratch.__module__ = "__main__"
    monkey_main = sys.modules["__main__"]
    saved = getattr(monkey_main, "__file__", None)
    try:
        if saved is not None:
            del monkey_main.__file__
        zoo_entry("scratchpad")(scratch)
    finally:
        if saved is not None:
            monkey_main.__file__ = saved
    (entry,) = get_zoo("scratchpad").entries()
    assert entry.factory is None and ".py file" in (entry.skip_reason or "")


def test_the_subcommand_parses_without_importing_torch():
    import argparse
    import subprocess

    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "--zoo", "timm", "--model", "res*", "--engine", "ray", "--workers", "3"])
    assert (args.zoo, args.model, args.engine, args.workers, args.verify) == (["timm"], ["res*"], "ray", 3, True)
    code = ("import sys, argparse\nfrom exporter.sweep.cli import add_sweep_parser\n"
            "add_sweep_parser(argparse.ArgumentParser().add_subparsers())\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_worker_that_fails_is_a_crashed_record_not_an_exception():
    from exporter.sweep.isolation import harness_failure

    crashed = harness_failure(Unit("tests", "m", SWEEP_MODELS), OSError("cannot start\nmore"))
    assert (crashed.status, crashed.error, crashed.failure_class) == ("crashed", "OSError: cannot start",
                                                                      "worker failed (OSError)")
    assert crashed.failed and UnitRecord.from_dict(crashed.to_dict()) == crashed


def test_engines_are_an_ordered_registry_of_one_interface():
    from exporter.sweep import ENGINES, Engine, get_engine

    assert list(ENGINES) == ["local", "ray"]
    assert all(issubclass(engine, Engine) for engine in ENGINES.values())
    assert get_engine("local", 3).workers == 3
    with pytest.raises(ValueError, match="choices: local, ray"):
        get_engine("dask")
