"""The tutorial notebooks in ``notebooks/``, executed top to bottom in a real Jupyter kernel
(nbclient) with widget state stored, in a temporary working directory.

Each test runs one notebook as committed, then a few check cells appended to a copy (the
committed notebook stays a tutorial, not a test), and asserts on the outputs, the files the
notebook wrote and the widgets' final state. Any error in any cell fails the test with the
cell's traceback.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import nbclient
import nbformat
import pytest


REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = REPO / "notebooks"
CELL_TIMEOUT = 300  # one cell; a notebook takes well under a minute here
# Waits on the workbenches' jobs (not on time), then sends every widget's state again from this
# cell: nbclient records only the iopub messages whose parent is the cell it is running, so an
# update the export worker sent between two cells (a loaded machine makes that likely) would be
# missing from the stored widget state.
WAIT_FOR_WIDGETS = """
import gc
from ipywidgets.widgets.widget import _instances
from workbench import Workbench

# type(), not isinstance(): a weakref.proxy whose object died (TorchDynamo leaves some) raises on __class__
workbenches = [o for o in gc.get_objects() if issubclass(type(o), Workbench)]
for each in workbenches:
    each.wait(300)
for widget in list(_instances.values()):
    widget.send_state()
print("workbenches:", len(workbenches))
"""


def execute(name: str, workdir: Path, checks: list[str] = ()) -> "nbformat.NotebookNode":
    """Run ``notebooks/<name>.ipynb`` and then ``checks`` (code cells) in one kernel whose
    working directory is ``workdir``; return the executed notebook (the checks' cells last)."""
    notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    notebook.cells.extend(nbformat.v4.new_code_cell(code) for code in checks)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": os.pathsep.join(
        filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    client = nbclient.NotebookClient(
        notebook, timeout=CELL_TIMEOUT, kernel_name="python3", store_widget_state=True,
        resources={"metadata": {"path": str(workdir)}},
    )
    start = time.perf_counter()
    client.execute(env=env)
    print(f"{name}: {time.perf_counter() - start:.1f} s")
    return notebook


def text_of(cell) -> str:
    """Everything a code cell printed or displayed as text (stdout, stderr, text/plain)."""
    parts = []
    for output in cell.get("outputs", []):
        if output.output_type == "stream":
            parts.append(output.text)
        elif "data" in output:
            parts.append(output.data.get("text/plain", ""))
    return "".join(parts)


def cell_with(notebook, source: str):
    """The first code cell whose source contains ``source``."""
    for cell in notebook.cells:
        if cell.cell_type == "code" and source in cell.source:
            return cell
    raise AssertionError(f"no code cell contains {source!r}")


def widget_states(notebook) -> dict[str, dict]:
    """``{css class: state}`` of every stored widget that has a ``wb-`` CSS class."""
    states = notebook.metadata.get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    found = {}
    for model in states.values():
        state = model.get("state", {})
        for css in state.get("_dom_classes", ()):
            if css.startswith("wb-"):
                found[css] = state
    return found


def widget_values(notebook) -> dict[str, str]:
    """``{css class: value}`` of every stored ``wb-`` widget that has a value (the text of an
    HTML widget's value, without tags)."""
    return {css: re.sub(r"<[^>]+>", "", str(state["value"]))
            for css, state in widget_states(notebook).items() if "value" in state}


def onnx_input_dims(path: Path) -> dict[str, list]:
    import onnx

    model = onnx.load(str(path))
    return {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim] for v in model.graph.input}


# -- the notebooks as committed ---------------------------------------------------------------
def test_every_notebook_has_a_test_here_and_is_committed_without_outputs():
    names = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    source = Path(__file__).read_text()
    assert names, "no notebooks found"
    for name in names:
        assert f'execute("{name}"' in source, f"{name}.ipynb is not executed by this module"
        notebook = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
        nbformat.validate(notebook)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert cell.outputs == [] and cell.execution_count is None, f"{name}: commit it with outputs cleared"
        assert notebook.metadata.kernelspec.name == "python3"


# -- 01 ---------------------------------------------------------------------------------------
@pytest.mark.needs_dot
def test_01_quickstart_exports_shows_the_widget_saves_a_named_dim_and_writes_the_report(tmp_path):
    notebook = execute("01_quickstart", tmp_path, [
        WAIT_FOR_WIDGETS,
        "assert len(workbenches) == 1 and workbenches[0].session.succeeded, workbenches\n"
        "assert workbenches[0].session.spec == session.spec",
    ])
    assert "x: ['batch', 16]" in text_of(cell_with(notebook, "saved = onnx.load(path)"))
    assert onnx_input_dims(tmp_path / "out" / "tiny.onnx") == {"x": ["batch", 16]}
    assert re.search(r"shape \(9, 3\) max difference \d", text_of(cell_with(notebook, "x9 = torch.randn(9, 16)")))
    assert "Verification PASSED" in text_of(cell_with(notebook, "verification = session.verify()"))
    graphs = cell_with(notebook, "side_by_side(session)")
    assert any("<svg" in o.data.get("text/html", "") + o.data.get("image/svg+xml", "")
               for o in graphs.outputs if "data" in o), "the graphs cell shows no SVG"
    report = (tmp_path / "out" / "tiny_report.html").read_text()
    for section in ("Stages", "Dims", "Guards", "Graphs", "Verification"):
        assert f">{section}<" in report, section
    assert "<svg" in report and "<script" not in report
    values = widget_values(notebook)
    assert "Verification PASSED" in values["wb-verify-status"], values.get("wb-verify-status")
    assert "batch" in values["wb-onnx-ports"] and "ok" in values["wb-stages-table"]
    assert values["wb-dim-result-x-0"].startswith("dynamic"), values["wb-dim-result-x-0"]


# -- 02 ---------------------------------------------------------------------------------------
def test_02_dynamic_shapes_policies_both_auto_caveats_fixed_and_the_size_one_example(tmp_path):
    notebook = execute("02_dynamic_shapes", tmp_path, [
        WAIT_FOR_WIDGETS,
        """
assert onnx_inputs(static) == {"x": [4, 3], "skip": [4, 3]}
assert dynamic.dims["x", 0].obtained == dynamic.dims["skip", 0].obtained == "dynamic"
assert dynamic.dims["x", 0].symbol == dynamic.dims["skip", 0].symbol
assert onnx_inputs(auto) == {"x": ["x_dim0", "x_dim1"], "skip": ["x_dim0", "x_dim1"]}
assert onnx_inputs(named) == {"x": ["batch", 3], "skip": ["batch", 3]}
assert onnx_inputs(by_string) == {"x": ["batch", 3], "skip": ["batch", 3]}
assert none_form.failed_stage.name == "capture" and none_form.dims["x", 0].obtained == "failed"

row = caveat1.dims["x", 0]
assert caveat1.succeeded and (row.requested, row.obtained) == ("AUTO", "static")
assert "equal to skip.shape[0], which is static" in row.reason, row.reason
assert strict.failed_stage.name == "capture" and [f.text for f in strict.suggested_fixes] == ["x.shape[0] = 4"]
assert onnx_inputs(fixed1) == {"x": ["batch", 3], "skip": ["batch", 3]}

assert caveat2.failed_stage.name == "capture"
assert [f.text.split("  #")[0] for f in caveat2.suggested_fixes] == ["batch = Dim('batch', min=5, max=64)"]
assert fixed2.succeeded and onnx_inputs(fixed2) == {"x": ["batch", 3], "skip": ["batch", 3]}
assert (fixed2.dims["x", 0].min, fixed2.dims["x", 0].max) == (5, 64)
assert "x.shape[0] > 4" in fixed2.dims["x", 0].reason

assert onnx_inputs(one) == {"input": ["input_dim0", 3]}
assert broadcast.dims["x", 0].obtained == "failed" and "make this axis STATIC" in broadcast.dims["x", 0].reason
assert fixed3.succeeded and onnx_inputs(fixed3) == {"x": [1, 3], "skip": [4, 3]}
print("checks passed")
""",
    ])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "size 5 matches PyTorch: True" in text_of(cell_with(notebook, "x_5 = torch.randn(5, 3)"))
    assert "batch = Dim('batch', min=5, max=64)" in text_of(cell_with(notebook, "caveat2.run()"))
    # the widget of %onnx_export shows the failed capture and offers the fix
    states = widget_states(notebook)
    assert states["wb-apply-fixes"]["disabled"] is False
    values = widget_values(notebook)
    assert "capture failed" in values["wb-dims-message"], values["wb-dims-message"]
    assert values["wb-dim-result-skip-0"].startswith("failed"), values["wb-dim-result-skip-0"]


# -- 03 ---------------------------------------------------------------------------------------
def test_03_debugging_exports_strategies_draft_report_guards_and_the_position_range(tmp_path):
    notebook = execute("03_debugging_exports", tmp_path, ["""
assert [(a.strategy, a.outcome) for a in session.attempts] == [("nonstrict", "failed"), ("strict", "failed"), ("draft", "ok")]
assert "data-dependent" in session.attempts[0].first_error_line
assert session.strategy == "draft" and session.succeeded
guards = session.guards.to_frame()
assert list(guards["kind"]) == ["runtime_assert"] and list(guards["code"]) == ["if x.sum() > 0:"], guards
assert fixed.strategy == "nonstrict" and [a.outcome for a in fixed.attempts] == ["ok"]

assert bounded.failed_stage.name == "capture"
assert "ids.shape[1] (seq): sizes above 16 fail" in str(bounded.failed_stage.failure)
assert "Not all values of seq" in bounded.failed_stage.failure.library_text
found = bounded.guards.to_frame()
assert "Min(16, ids.shape[1])" in found["expression"][0], found
assert "self.positions(position_ids)" in found["code"][0]
assert [f.text.split("  #")[0] for f in bounded.suggested_fixes] == ["seq = Dim('seq', max=16)"]
assert [c.status for c in beyond.cases if not c.is_edge_value] == ["pass", "eager_error"]
row = in_range.dims["ids", 1]
assert in_range.succeeded and (row.obtained, row.max, row.dim) == ("dynamic", 16, "seq")
assert verified.ok and 16 in next(g for g in verified.groups if g.label == "seq").sizes
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    shown = text_of(cell_with(notebook, "negative = -3 * torch.ones(2, 4)"))
    assert "PyTorch: [-4.0, -4.0, -4.0, -4.0]" in shown and "ONNX:    [-6.0, -6.0, -6.0, -6.0]" in shown
    assert "right for a negative sum: True" in text_of(cell_with(notebook, "class GateWhere"))
    assert "eager PyTorch raised" in text_of(cell_with(notebook, "beyond = auto.verify"))


def image_outputs(cell) -> int:
    return sum(1 for o in cell.get("outputs", []) if "data" in o and ({"image/png", "image/svg+xml"} & set(o.data)))


# -- 04 ---------------------------------------------------------------------------------------
def test_04_verify_flags_the_model_wrong_at_other_sizes_and_benchmark_sweep_profile_run(tmp_path):
    notebook = execute("04_verify_and_benchmark", tmp_path, ["""
assert [d.dim_param or d.dim_value for d in lenient.model_proto.graph.input[0].type.tensor_type.shape.dim] == ["batch", "seq", 16]
assert result.status == "failed" and result.case("example").ok
wrong = sorted(dict(f.sizes)["seq"] for f in result.findings if f.kind == "wrong_at_size")
assert wrong == [2, 3], wrong
assert "x.shape[1] > 4" in result.summary() and "dropped runtime assert" in result.summary()
assert strict.failed_stage.name == "capture"
assert safe.spec.policy("x", 1) == Dim("seq", min=5) and safe.verify().ok
assert bench.ok and bench.ort.stats.p50 > 0 and bench.eager.stats.p50 > 0, bench.summary()
assert list(sweep.to_frame()["size"]) == [4, 16, 64] and sweep.to_frame()["error"].isna().all()
assert "MatMul" in set(profile.by_op_type()["op_type"]) and "attn" in set(profile.by_module()["module"])
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "wrong at size batch=2, seq=2" in text_of(cell_with(notebook, "result = lenient.verify()"))
    for chart in ("verify_chart(result)", "latency_histogram(bench)", "latency_vs_size(sweep)", "profile_bars(profile)"):
        assert image_outputs(cell_with(notebook, chart)) == 1, chart


# -- 05 ---------------------------------------------------------------------------------------
def test_05_kv_cache_decoder_exports_with_named_dims_verifies_and_generates_as_pytorch(tmp_path):
    notebook = execute("05_transformer_kv_cache", tmp_path, ["""
assert session.succeeded
assert result.status == "passed", result.summary()
pasts = {dict(case.sizes).get("past_seq") for case in result.cases}
assert 0 in pasts and {1, 6} <= pasts  # an empty cache was tried
assert (onnx_tokens == eager_tokens).all()
assert list(sweep.to_frame()["size"]) == [8, 32, 128] and sweep.to_frame()["error"].isna().all()
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "same tokens: True" in text_of(cell_with(notebook, "onnx_tokens = onnx_generate"))
    saved = onnx_input_dims(tmp_path / "out" / "gpt2_kv_cache.onnx")
    assert saved["input_ids"] == ["batch", "seq"] and saved["attention_mask"] == ["batch", "total"]
    assert saved["past_key_values.0.key"] == ["batch", 4, "past_seq", 16]
    import onnx

    outputs = [v.name for v in onnx.load(str(tmp_path / "out" / "gpt2_kv_cache.onnx")).graph.output]
    assert outputs == ["logits", "present.0.key", "present.0.value", "present.1.key", "present.1.value"]


# -- 06 ---------------------------------------------------------------------------------------
def test_06_from_dynamic_axes_keeps_the_legacy_dim_names_in_the_migrated_model(tmp_path):
    notebook = execute("06_from_dynamic_axes", tmp_path, ["""
assert step1.succeeded and migrated.succeeded
assert step1.dims.groups() == {"batch": ("input_ids.0", "attention_mask.0"), "seq": ("input_ids.1", "attention_mask.1")}
assert migrated.spec.policy("input_ids", 1) == Dim("seq", min=1, max=512)
assert migrated.verify().ok
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "unknown input 'logits'" in text_of(cell_with(notebook, "except SpecError as error:"))
    legacy = onnx_input_dims(tmp_path / "legacy.onnx")
    migrated = onnx_input_dims(tmp_path / "migrated.onnx")
    assert legacy == migrated == {"input_ids": ["batch", "seq"], "attention_mask": ["batch", "seq"]}
    import onnx

    outputs = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
               for v in onnx.load(str(tmp_path / "migrated.onnx")).graph.output}
    assert outputs == {"logits": ["batch", 3]}


# -- 07 ---------------------------------------------------------------------------------------
def test_07_optimizer_passes_finds_the_wrong_rewrite_rule_and_the_fix_verifies(tmp_path):
    notebook = execute("07_optimizer_passes", tmp_path)
    assert "FoldConstantsPass (round 0)" in text_of(cell_with(notebook, "session.passes"))
    assert "Verification FAILED" in text_of(cell_with(notebook, "broken.verify"))
    found = text_of(cell_with(notebook, "found = broken.bisect_passes()"))
    assert "ExtraRewritePass (round 0)" in found and "skip_passes=['ExtraRewritePass']" in found
    assert "Verification PASSED" in text_of(cell_with(notebook, "fixed.verify"))
    # issue 22: the error overlay selects the red node, the one the wrong rewrite put there
    assert "selected='node_LeakyRelu_2'" in text_of(cell_with(notebook, 'GraphWidget(broken, overlay="error")'))
    clicked = text_of(cell_with(notebook, "print(\"selected:\", view.selected)"))
    assert "selected: node_LeakyRelu_2" in clicked and "op: LeakyRelu {'alpha': '0.1'}" in clicked
    assert "came from: optimizer" in clicked and "FX node: ['relu']" in clicked and "torch.relu" in clicked
    # issue 26: the culprit pass drawn before and after, its changes highlighted
    culprit = text_of(cell_with(notebook, "before_after(culprit)"))
    assert "ExtraRewritePass (round 0): 4 → 4 nodes, 1 removed, 1 added, 1 changed" in culprit
    assert "before:node_relu" in culprit and "after:node_LeakyRelu_2" in culprit


def test_08_record_then_export_exports_the_recorded_decode_step_and_onnx_generates_as_pytorch(tmp_path):
    notebook = execute("08_record_then_export", tmp_path, [WAIT_FOR_WIDGETS, """
assert [g.name for g in rec.groups] == ["prefill", "decode"]
assert decode.ok and decode.recorded.compared == 10, decode.summary()
assert prefill.recorded.ok
assert (onnx_tokens == eager_tokens).all()
(shown,) = workbenches
assert shown.session is decode_session and decode_session.succeeded, decode_session.failed_stage
calls = shown.dims_view.recording.calls
assert len(calls) == 3, calls  # generate() of 4 new tokens: a prefill, then 3 decode steps
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "same tokens: True" in text_of(cell_with(notebook, "onnx_tokens = onnx_generate"))
    assert "always 1 in the recorded calls" in text_of(cell_with(notebook, "with record(model) as rec"))


def test_09_zoo_sweep_runs_locally_and_on_ray_with_the_same_table(tmp_path):
    notebook = execute("09_zoo_sweep", tmp_path, ["""
assert [r.model for r in results.records] == ["mlp", "conv", "encoder", "halves"]
assert results.record("mlp").status == "passed" and results.record("mlp").baseline == "passed"
assert results.record("halves").status == "export_failed"
assert same, [r.outcome() for r in on_ray.records]
print("checks passed")
"""])
    assert "checks passed" in text_of(notebook.cells[-1])
    assert "4 units: 3 passed, 1 export_failed" in text_of(cell_with(notebook, 'results = sweep("tiny_zoo.py"'))
    assert "same table on both engines: True" in text_of(cell_with(notebook, "same = "))
    assert (tmp_path / "tiny_zoo.html").exists() and (tmp_path / "tiny_zoo.py").exists()
