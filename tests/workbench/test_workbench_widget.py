"""The workbench widget driven as the front end drives it: control values set, buttons
clicked; every assertion reads what the widget then shows (its widgets' values)."""

from __future__ import annotations

import re
import threading
import time

import pytest
import torch

from exporter import AUTO, STATIC, Dim, ExportOptions, Session
from workbench import Workbench

GATES: dict[int, tuple[threading.Event, threading.Event]] = {}  # id(module) -> (entered, gate)


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x).relu()


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class GuardedAdd(torch.nn.Module):
    def forward(self, x, y):
        if x.shape[0] > 4:
            x = x * 2
        return x + y


class Broken(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("this model cannot be traced")


class Gated(torch.nn.Module):
    """forward waits for its gate while the gate is closed, so a test can click while a
    capture runs (the events live outside the module: torch.export restores attributes)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)
        self.key = id(self)  # in __dict__: the twin a job calls has the same key
        GATES[self.key] = (threading.Event(), threading.Event())
        GATES[self.key][1].set()

    @property
    def entered(self):
        return GATES[self.key][0]

    @property
    def gate(self):
        return GATES[self.key][1]

    def forward(self, x):
        self.entered.set()
        assert self.gate.wait(60)
        return self.linear(x)


def shown(wb, path, axis):
    """The result text of one row, as the page shows it."""
    return wb.axis_row(path, axis).result.value


def text(html):
    """What the page shows of an HTML fragment: its text, tags dropped, entities kept."""
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def stage_row(wb, stage):
    """The words of one row of the Stages table after the stage: status, seconds, cached, result."""
    for row in re.findall(r"<tr>(.*?)</tr>", wb.stages_view.table.value):
        words = text(row).split()
        if words and words[0] == stage:
            return words[1:]
    raise AssertionError(f"no row {stage!r} in the Stages table")


def onnx_input_shapes(wb):
    return text(wb.stages_view.ports.value)


def workbench(model, *args, run=True, follow="optimize", **dynamic_shapes):
    session = Session(model, args, options=ExportOptions(dynamic_shapes=dynamic_shapes or None))
    return Workbench(session, run=run, follow=follow).wait()


def test_toggling_a_dim_to_static_turns_its_row_static_and_the_onnx_input_static():
    wb = workbench(Tiny(), torch.randn(4, 8), x={0: Dim("batch")})
    assert "dynamic batch [1, inf]" in shown(wb, "x", 0)  # torch says [0, inf]: size-oblivious capture
    assert "[batch, 8]" in onnx_input_shapes(wb)
    assert wb.axis_control("x", 0).value == "Dim" and wb.axis_row("x", 0).name.value == "batch"

    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()

    assert "static 4" in shown(wb, "x", 0)
    assert "[4, 8]" in onnx_input_shapes(wb)
    assert wb.session.spec.policy("x", 0) is STATIC
    assert "dynamic_shapes = None" in wb.dims_view.code.value


def test_going_back_to_a_spec_seen_before_is_served_from_the_cache():
    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: Dim("batch")})
    first = wb.session
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    wb.axis_control("x", 0).value = "Dim"  # the name field still says batch
    wb.wait()
    assert wb.session is first
    assert "dynamic batch" in shown(wb, "x", 0)
    assert stage_row(wb, "capture")[0] == "ok"


def test_going_back_to_a_seen_spec_answers_at_once_while_the_worker_is_busy_capturing_another():
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), x={0: Dim("batch")})
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    static = wb.session
    model.gate.clear()
    model.entered.clear()
    wb.axis_control("x", 0).value = "AUTO"  # a spec never seen: its capture waits at the gate
    assert model.entered.wait(60)

    wb.axis_control("x", 0).value = "STATIC"  # back to one seen before, the worker still busy
    assert wb.session is static and "static 4" in shown(wb, "x", 0)
    assert wb.job_status.value.endswith("seen before, shown from the cache") and wb.cancel_button.disabled
    assert "[4, 8]" in onnx_input_shapes(wb)

    model.gate.set()  # the superseded capture ends without changing what is shown or said
    wb.wait()
    assert wb.session is static and wb.job_status.value.endswith("seen before, shown from the cache")


def test_a_named_dim_with_bounds_from_the_name_min_max_fields_reaches_the_row():
    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: AUTO})
    row = wb.axis_row("x", 0)
    row.name.value, row.min.value, row.max.value = "rows", "2", "64"  # typed before picking Dim
    row.policy.value = "Dim"
    wb.wait()
    assert "dynamic rows [2, 64]" in shown(wb, "x", 0)
    assert "Dim('rows', min=2, max=64)" in wb.dims_view.code.value


def test_a_bound_that_is_not_a_number_is_reported_and_nothing_is_captured():
    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: Dim("batch")})
    before = wb.session
    wb.axis_row("x", 0).max.value = "lots"
    assert "max &#x27;lots&#x27; is not an integer" in wb.dims_view.message.value
    assert not wb.busy and wb.session is before


def test_auto_dim_made_static_by_a_related_static_dim_names_it_and_its_line_and_one_change_fixes_it():
    wb = workbench(Add(), torch.randn(4, 3), torch.randn(4, 3), follow="capture", x={0: AUTO})
    text = shown(wb, "x", 0)
    assert "static 4" in text and "equal to y.shape[0], which is static" in text
    assert "return x + y" in text  # the user's line

    wb.axis_control("y", 0).value = "AUTO"
    wb.wait()
    assert "dynamic x_dim0" in shown(wb, "x", 0) and "dynamic x_dim0" in shown(wb, "y", 0)


def test_auto_mixed_with_a_named_dim_is_rejected_beside_the_last_good_result_and_one_click_exports_it():
    wb = workbench(GuardedAdd(), torch.randn(5, 3), torch.randn(5, 3), x={0: AUTO}, y={0: AUTO})
    assert "dynamic x_dim0 [5, inf]" in shown(wb, "y", 0)
    row = wb.axis_row("y", 0)
    row.name.value, row.min.value, row.max.value = "dx", "3", "6"
    row.policy.value = "Dim"
    wb.wait()

    assert "failed" in shown(wb, "y", 0) and "last good: dynamic x_dim0 [5, inf]" in shown(wb, "y", 0)
    assert "capture failed" in wb.dims_view.message.value
    assert not wb.dims_view.fixes_button.disabled and "dx = Dim(&#x27;dx&#x27;, min=5, max=6)" in wb.dims_view.fixes.value
    assert "last good export" in wb.stages_view.last_good.value
    assert "its ONNX model" in wb.stages_view.last_good.value and "[x_dim0, 3]" in text(wb.stages_view.last_good.value)

    wb.dims_view.fixes_button.click()
    wb.wait()

    assert "dynamic dx [5, 6]" in shown(wb, "x", 0) and "dynamic dx [5, 6]" in shown(wb, "y", 0)
    assert "[dx, 3]" in onnx_input_shapes(wb)
    assert (wb.axis_control("y", 0).value, wb.axis_row("y", 0).min.value) == ("Dim", "5")
    assert wb.dims_view.fixes_button.disabled and wb.session.succeeded
    assert wb.stages_view.last_good.value == "" and wb.dims_view.message.value == ""


def test_cancel_during_a_capture_leaves_the_previous_result_shown():
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), x={0: Dim("batch")})
    previous = wb.session
    model.gate.clear()
    model.entered.clear()

    wb.axis_control("x", 0).value = "STATIC"
    assert model.entered.wait(60)  # the capture is running on the worker; this thread is free
    wb.cancel_button.click()
    model.gate.set()
    wb.wait()

    assert wb.session is previous
    assert "dynamic batch" in shown(wb, "x", 0)
    assert wb.axis_control("x", 0).value == "Dim"
    assert "[batch, 8]" in onnx_input_shapes(wb)
    assert "cancelled" in wb.job_status.value and wb.cancel_button.disabled
    assert stage_row(wb, "optimize")[0] == "ok"


def test_a_capture_still_running_says_how_long_in_the_job_bar(monkeypatch):
    from exporter.pipeline import watch

    monkeypatch.setattr(watch, "NOTE_EVERY", 0.1)
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), x={0: Dim("batch")})
    model.gate.clear()
    model.entered.clear()

    wb.axis_control("x", 0).value = "STATIC"
    assert model.entered.wait(60)
    deadline = time.monotonic() + 10
    while "has run for" not in wb.job_status.value and time.monotonic() < deadline:
        time.sleep(0.05)
    status = wb.job_status.value
    model.gate.set()
    wb.wait()

    assert status.startswith("capture has run for") and "still working (Cancel or Ctrl+C stops it)" in status
    assert "0/0" not in status


def test_cancel_while_running_all_steps_of_the_shown_session_does_not_hang():
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), run=False)
    model.gate.clear()
    wb.stages_view.all_button.click()  # capture, ..., on the session already shown
    assert model.entered.wait(60)
    wb.cancel_button.click()  # returns at once although the worker holds that session
    model.gate.set()
    wb.wait(60)
    assert "cancelled" in wb.job_status.value
    assert wb.session.spec == wb.requested_session.spec


def test_a_new_change_while_capturing_supersedes_the_running_one():
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), follow="capture", x={0: Dim("batch")})
    model.gate.clear()
    model.entered.clear()
    wb.axis_control("x", 0).value = "STATIC"
    assert model.entered.wait(60)
    wb.axis_control("x", 0).value = "AUTO"
    model.gate.set()
    wb.wait()
    assert wb.session.spec.policy("x", 0) is AUTO
    assert "dynamic" in shown(wb, "x", 0)


def test_an_export_failure_is_shown_with_its_hint_and_the_widget_keeps_working():
    wb = workbench(Broken(), torch.randn(2, 8))
    assert "capture failed" in wb.stages_view.error.value
    assert "this model cannot be traced" in wb.stages_view.error.value
    assert "failed" in wb.job_status.value
    assert "static 2" in shown(wb, "x", 0)  # a STATIC axis stays static: only an axis the failure is about is "failed"
    wb.axis_control("x", 0).value = "AUTO"  # still answers
    wb.wait()
    assert wb.session.spec.policy("x", 0) is AUTO


def test_stages_tab_shows_each_stage_attempt_and_next_step_runs_one_stage():
    wb = workbench(Tiny(), torch.randn(4, 8), run=False)
    assert "not run" in wb.stages_view.table.value
    wb.stages_view.next_button.click()
    wb.wait()
    assert stage_row(wb, "capture")[0] == "ok"
    assert stage_row(wb, "decompose") == ["not", "run"]
    assert "nonstrict" in wb.stages_view.attempts.value
    wb.stages_view.all_button.click()  # every stage and verify; a benchmark only from its own button
    wb.wait(180)
    assert stage_row(wb, "optimize")[0] == "ok" and stage_row(wb, "verify")[0] in ("pass", "passed")
    assert "Verification PASSED" in " ".join(stage_row(wb, "verify"))  # the row shows the verdict
    assert stage_row(wb, "benchmark") == ["not", "run"]


def test_verify_button_shows_the_verdict_and_the_case_table():
    wb = workbench(Tiny(), torch.randn(4, 8), x={0: Dim("batch")})
    wb.verify_view.button.click()
    wb.wait()
    assert "Verification PASSED" in wb.verify_view.status.value
    assert "<table" in wb.verify_view.table.value and "<svg" in wb.verify_view.chart.value


def test_benchmark_tab_shows_latency_the_sweep_and_the_profile():
    wb = workbench(Tiny(), torch.randn(4, 8), x={0: Dim("batch")})
    wb.run_analysis("benchmark", budget=0.05, min_runs=5)
    wb.wait()
    status = text(wb.benchmark_view.status.value)  # nothing verified this model: not a green ok
    assert status.split()[:3] == ["not", "verified", "onnxruntime"] and "<svg" in wb.benchmark_view.chart.value
    wb.run_analysis("benchmark_sweep", sizes=(1, 4), budget=0.05, min_runs=5)
    wb.wait()
    assert "latency vs batch, 2 size(s), a separate run" in wb.benchmark_view.sweep.value
    assert "<svg" in wb.benchmark_view.sweep.value
    wb.benchmark_view.profile_button.click()
    wb.wait()
    assert "Gemm" in wb.benchmark_view.profile.value and "<svg" in wb.benchmark_view.profile.value
    assert "onnxruntime kernel time" in text(wb.benchmark_view.profile.value) and "Profile [ok]" not in wb.benchmark_view.profile.value
    wb.run_analysis("benchmark_sweep", sizes=(1, 4), budget=0.05, min_runs=5)
    assert "latency vs size" in wb.job_status.value  # the button's words, not benchmark_sweep
    wb.wait()


def test_guards_tab_draws_the_table_and_both_charts_when_shown():
    class Branch(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] > 2:
                return x * 2
            return x

    wb = workbench(Branch(), torch.randn(5, 3), follow="capture", x={0: AUTO})
    assert wb.guards_view.charts.value == ""  # not drawn while hidden
    wb.tabs.selected_index = wb.views.index(wb.guards_view)
    wb.wait()  # drawn on the export worker
    assert "x.shape[0] &gt; 2" in wb.guards_view.table.value
    assert wb.guards_view.charts.value.count("<svg") == 2


def test_graphs_tab_draws_the_side_by_side_view_or_says_it_is_not_available():
    wb = workbench(Tiny(), torch.randn(4, 8))
    if not wb.graphs_view.available:
        assert "not available" in wb.graphs_view.view.value
        return
    wb.graphs_view.button.click()
    wb.wait()
    view = wb.graphs_view.graph
    if view is None:  # no anywidget: the static drawing
        assert "<svg" in wb.graphs_view.view.value or "wb-graph-fallback" in wb.graphs_view.view.value
        return
    assert "<svg" in view.svg and view.session is wb.session
    # the page's search box: a module name that is not in the graphs lists the closest, raises nothing
    assert view.search("no.such.module") is None and view.message["kind"] == "warning"
    assert "no.such.module" in view.message["text"] and wb.job_status.value.startswith("done")


def test_draw_graphs_after_a_failed_capture_says_there_is_nothing_to_draw_and_why():
    wb = workbench(Broken(), torch.randn(2, 3))
    assert wb.session.failed_stage is not None and wb.session.failed_stage.name == "capture"
    if not wb.graphs_view.available:
        return
    wb.graphs_view.button.click()
    wb.wait()
    shown = text(wb.graphs_view.view.value).strip()
    assert shown.startswith("nothing to draw The export failed at capture, before there is a graph: ")
    assert "this model cannot be traced" in shown and "The Stages tab says why" in shown
    assert wb.graphs_view.graph is None or wb.graphs_view.graph.layout.display == "none"


def test_axis_control_of_an_unknown_axis_names_the_axes_there_are():
    wb = workbench(Tiny(), torch.randn(4, 8), run=False)
    with pytest.raises(KeyError, match="the axes are x.0, x.1"):
        wb.axis_control("x", 2)


def test_dom_hooks_for_the_browser_test():
    wb = workbench(Tiny(), torch.randn(4, 8), run=False)
    assert "wb-workbench" in wb._dom_classes
    assert "wb-axis-x-0" in wb.axis_control("x", 0)._dom_classes
    assert "wb-dim-result-x-0" in wb.axis_row("x", 0).result._dom_classes
    assert [value for _, value in wb.axis_control("x", 0).options] == ["AUTO", "STATIC", "DYNAMIC", "name", "Dim"]


def test_a_view_that_fails_to_draw_says_so_and_the_widget_keeps_working(monkeypatch):
    wb = workbench(Tiny(), torch.randn(4, 8), run=False)
    monkeypatch.setattr(wb.dims_view, "show", lambda *a: (_ for _ in ()).throw(RuntimeError("cannot draw")))
    wb.run("capture")
    wb.wait()
    assert "cannot draw" in wb.job_status.value and "cannot draw" in wb.stages_view.error.value
    assert stage_row(wb, "capture")[0] == "ok"  # the other views were drawn


def test_a_torch_onnx_style_dim_name_is_shown_as_a_named_dim_and_kept_when_another_axis_changes():
    wb = workbench(Add(), torch.randn(4, 3), torch.randn(4, 3), follow="capture", x={0: "n"}, y={0: "n"})
    named = wb.session.spec.policy("x", 0)
    assert wb.axis_control("x", 0).value == "name" and wb.axis_row("x", 0).name.value == "n"
    wb.axis_control("x", 1).value = "AUTO"
    wb.wait()
    assert wb.session.spec.policy("x", 0) == named and type(wb.session.spec.policy("x", 0)) is type(named)


def test_the_workbench_hides_no_ipywidgets_attribute_or_trait():
    """A helper once named ``_model_name`` hid the widget's model-name trait and the page could
    not build the widget."""
    import ipywidgets

    wb = workbench(Tiny(), torch.randn(4, 8), run=False)
    inherited = set(dir(ipywidgets.VBox)) | set(ipywidgets.VBox.class_trait_names())
    own = (set(vars(Workbench)) | set(vars(wb))) - {n for n in inherited if n.startswith("__")}
    own -= {"_trait_values", "_trait_notifiers", "_trait_validators", "_cross_validation_lock", "_model_id",
            "_property_lock", "_holding_sync", "_states_to_send", "_msg_callbacks", "_display_callbacks",
            "comm", "_all_trait_default_generators", "_descriptors", "_instance_inits",
            "_static_immutable_initial_values", "_trait_default_generators", "_traits"}
    assert not own & inherited, sorted(own & inherited)
    assert wb.get_state()["_model_name"] == "VBoxModel"


def test_compare_button_times_the_variants_in_the_benchmark_tab():
    wb = workbench(Tiny(), torch.randn(4, 8), x={0: Dim("batch")})
    wb.run_analysis("compare", budget=0.05, min_runs=5)
    wb.wait()
    shown = wb.benchmark_view.compare.value
    assert "ok" in shown and "unoptimized" in shown and "<table" in shown
    assert "wb-run-compare" in wb.benchmark_view.compare_button._dom_classes


def test_a_named_dim_is_a_torch_onnx_string_name_and_a_dim_with_bounds_is_strict():
    from exporter.dims import Name

    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: AUTO})
    row = wb.axis_row("x", 0)
    row.name.value = "rows"
    row.policy.value = "name"
    wb.wait()
    policy = wb.session.spec.policy("x", 0)
    assert type(policy) is Name and policy.name == "rows"
    assert "dynamic rows" in shown(wb, "x", 0) and "{0: 'rows'}" in wb.dims_view.code.value

    row.min.value, row.max.value = "2", "64"
    row.policy.value = "Dim"
    wb.wait()
    policy = wb.session.spec.policy("x", 0)
    assert type(policy) is Dim and (policy.name, policy.min, policy.max) == ("rows", 2, 64)


def test_the_copy_button_carries_the_code_shown_and_the_box_says_updating_during_a_capture():
    import html as html_module

    model = Gated()
    wb = workbench(model, torch.randn(4, 8), x={0: Dim("batch")})
    carried = re.search(r'data-code="([^"]*)"', wb.dims_view.copy.value).group(1)
    assert html_module.unescape(carried) == wb.dims_view.code.value and "Dim('batch')" in wb.dims_view.code.value
    assert wb.cancel_button.disabled and wb.cancel_button.button_style == ""  # idle: grey, not orange

    model.gate.clear()
    model.entered.clear()
    wb.axis_control("x", 0).value = "STATIC"
    assert model.entered.wait(60)
    assert "updating" in wb.dims_view.code_title.value and wb.dims_view.code.value.startswith("# updating")
    assert "disabled" in wb.dims_view.copy.value and wb.cancel_button.button_style == "warning"
    model.gate.set()
    wb.wait()
    assert "updating" not in wb.dims_view.code_title.value and "dynamic_shapes = None" in wb.dims_view.code.value
    assert wb.cancel_button.disabled and wb.cancel_button.button_style == ""


def test_bind_hears_every_session_the_widget_shows():
    bound = []
    session = Session(Tiny(), (torch.randn(4, 8),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    wb = Workbench(session, follow="capture", bind=bound.append).wait()
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    assert bound and bound[-1] is wb.session and wb.session.spec.policy("x", 0) is STATIC


def test_a_verify_run_in_the_widget_is_kept_on_the_session_it_ran_on():
    session = Session(Tiny(), (torch.randn(4, 8),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    wb = Workbench(session, reverify_below=0).wait()  # no re-verify after a change of spec
    wb.verify_view.button.click()
    wb.wait()
    first = wb.session
    assert first.last_verify is not None and first.last_verify.ok
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    assert text(wb.verify_view.status.value).strip() == "not run not verified for this spec: Run verify checks it"
    assert "tone-ok" not in wb.verify_view.status.value and "#dcfce7" not in wb.verify_view.status.value  # never green
    assert "the last verify, for an earlier spec: Verification PASSED" in text(wb.verify_view.summary.value)
    assert stage_row(wb, "verify")[:2] == ["not", "run"]
    wb.axis_control("x", 0).value = "Dim"  # back to the spec verified before: its verify is found again
    wb.wait()
    assert wb.session.last_verify is first.last_verify
    assert "not verified" not in wb.verify_view.status.value and "PASSED" in wb.verify_view.status.value


def test_a_change_of_spec_re_verifies_in_the_background_when_verify_was_quick():
    session = Session(Tiny(), (torch.randn(4, 8),), options=ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    wb = Workbench(session, verify=True, reverify_below=600).wait()
    first = wb.session.last_verify
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    assert wb.session.last_verify is not None and wb.session.last_verify is not first
    assert "PASSED" in wb.verify_view.status.value and "not verified" not in wb.verify_view.status.value
    assert stage_row(wb, "verify")[0] == "pass"


def test_run_next_step_after_every_step_says_so_instead_of_starting_a_benchmark():
    wb = workbench(Tiny(), torch.randn(4, 8), x={0: Dim("batch")})
    wb.run_analysis("verify")
    wb.wait()
    wb.stages_view.next_button.click()
    wb.wait()
    assert "every step has run" in wb.job_status.value
    assert "benchmark" not in wb.session.analyses


def test_cancel_puts_the_previous_result_back_at_once_while_the_worker_is_still_busy():
    model = Gated()
    wb = workbench(model, torch.randn(4, 8), x={0: Dim("batch")})
    previous = wb.session
    model.gate.clear()
    model.entered.clear()
    wb.verify_view.button.click()  # the verify's eager run waits at the gate on the worker
    assert model.entered.wait(60)
    assert stage_row(wb, "verify")[0] == "running"  # the analysis' start event reached the Stages tab

    wb.cancel_button.click()
    assert wb.busy and wb.session is previous  # shown at once: the kernel waited for nothing
    assert stage_row(wb, "optimize")[0] == "ok" and stage_row(wb, "verify")[0] != "running"
    assert "cancelling" in wb.job_status.value

    model.gate.set()
    wb.wait()
    assert wb.job_status.value.startswith("cancelled") and wb.cancel_button.disabled
    assert wb.session is previous and stage_row(wb, "verify")[0] != "running"


# -- a session exported from recorded calls (issue 27) ---------------------------------------


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def recorded_workbench():
    from exporter import record

    model = MLP().eval()
    with torch.no_grad(), record(model) as rec:
        for batch in (1, 3, 6):
            model(torch.randn(batch, 16))
    result = rec.export(sweep=False)
    return Workbench(result.session, recording=rec.group()).wait(), result


def test_a_recorded_session_shows_the_observed_range_next_to_the_exported_one():
    wb, result = recorded_workbench()
    shown_text = text(wb.dims_view.recorded.value)
    batch, features = wb.dims_view.ranges.axes
    assert (batch.label, batch.observed, batch.exported, batch.outside) == ("x.0", (1, 6), "dynamic", ())
    assert batch.accepted_text == result.ranges.axes[0].accepted_text == shown(wb, "x", 0).split("batch ")[1][:8]
    assert (features.observed, features.accepted_text) == ((16, 16), "[16, 16]")
    assert "Recorded calls (forward: 3 calls)" in shown_text
    assert "the export accepts the sizes of every recorded forward call" in shown_text
    assert "1..6" in shown_text and "16" in shown_text  # the table: observed next to exported
    assert 'id="observed:x.0"' in wb.dims_view.recorded.value and 'id="exported:x.0"' in wb.dims_view.recorded.value
    assert "outside:" not in wb.dims_view.recorded.value


def test_narrowing_a_recorded_dim_in_the_tab_names_the_recorded_calls_it_no_longer_accepts():
    wb, _ = recorded_workbench()
    row = wb.axis_row("x", 0)
    row.min.value = "2"
    row.policy.value = "Dim"
    wb.wait()
    assert "dynamic batch [2, inf]" in shown(wb, "x", 0)
    shown_text = text(wb.dims_view.recorded.value)
    assert "recorded forward calls outside what the export accepts: call 0" in shown_text
    assert "call 0: x.0 = 1, outside [2, inf]" in shown_text
    assert 'id="outside:x.0"' in wb.dims_view.recorded.value
    assert re.search(r"<details[^>]*\bopen\b[^>]*><summary[^>]*>chart:", wb.dims_view.recorded.value)  # a call outside: it opens
    assert wb.dims_view.ranges is not None and wb.dims_view.ranges.outside_calls == (0,)

    row.policy.value = "name"  # back to the recorded proposal: every call accepted again
    wb.wait()
    assert "every recorded forward call" in text(wb.dims_view.recorded.value)
    assert not re.search(r"<details[^>]*\bopen\b", wb.dims_view.recorded.value)  # nothing wrong: chart and table folded


def test_without_a_recording_the_dims_tab_has_no_recorded_section():
    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: Dim("batch")})
    assert wb.dims_view.recorded.value == "" and wb.dims_view.ranges is None
    assert wb.dims_view.recorded not in wb.dims_view.widget.children


def test_the_record_magic_gives_the_widget_its_recorded_calls(ipython_shell, monkeypatch):
    import workbench.magics

    shell = ipython_shell
    shell.run_line_magic("load_ext", "workbench")
    shell.user_ns.update(torch=torch, recorded_mlp=MLP().eval())
    shown_objects = []
    monkeypatch.setattr(workbench.magics, "shows_widgets", lambda shell: True)
    monkeypatch.setattr("IPython.display.display", lambda obj: shown_objects.append(obj))
    shell.run_cell_magic("onnx_export", "--record recorded_mlp --no-verify", (
        "with torch.no_grad():\n"
        "    for batch in (1, 3, 6):\n"
        "        recorded_mlp(torch.randn(batch, 16))\n"
    ))
    wb = shown_objects[-1].wait()  # after the recording and the verdict on its calls
    assert isinstance(wb, Workbench)
    assert wb.dims_view.recording is not None and len(wb.dims_view.recording.calls) == 3
    assert "Recorded calls (forward: 3 calls)" in text(wb.dims_view.recorded.value)


def test_the_widget_keeps_no_more_derived_sessions_than_the_stage_cache_and_never_the_shown_one():
    from exporter.session import STAGE_CACHE_ENTRIES

    wb = workbench(Tiny(), torch.randn(4, 8), follow="capture", x={0: Dim("batch")})
    exported = wb.session  # the last exported one stays: the Stages tab shows its ONNX inputs
    row = wb.axis_row("x", 0)
    derived = []
    for maximum in range(16, 16 + 3 * STAGE_CACHE_ENTRIES):
        row.max.value = str(maximum)
        wb.wait()
        derived.append(wb.session)
    assert f"dynamic batch [1, {maximum}]" in shown(wb, "x", 0)
    kept = list(wb._sessions.values())
    assert len(kept) <= STAGE_CACHE_ENTRIES
    assert wb.session in kept and exported in kept
    assert derived[0] not in kept and derived[-2] in kept  # the least recently used went first
    row.max.value = str(maximum - 1)  # going back to a range still kept is served from the cache
    wb.wait()
    assert wb.session is derived[-2]


def test_the_views_colour_through_the_widgets_stylesheet_not_inline_styles():
    import re
    from pathlib import Path

    import workbench
    from workbench.views.blocks import STYLE

    package = Path(workbench.__file__).parent
    sources = {path.name: path.read_text() for path in [*package.glob("*.py"), *package.glob("views/*.py")]}
    inline_colours = {name: re.findall(r"style=[\"'][^\"']*(?<!-)color:", text) for name, text in sources.items()}
    assert {name: found for name, found in inline_colours.items() if found} == {}
    used = {cls for text in sources.values() for attr in re.findall(r"class=[\"']([^\"'{]+)[\"']", text)
            for cls in attr.split() if cls.startswith("wb-")}
    styled = set(re.findall(r"\.(wb-[\w-]+)", STYLE))
    assert {"wb-muted", "wb-caution", "wb-error"} <= used
    assert {"wb-muted", "wb-caution", "wb-error", "wb-nowrap", "wb-where", "wb-scroll"} <= styled


class RightOnlyAtOne(torch.nn.Module):
    """Right at its example size only: with AUTO, size-oblivious capture keeps the dim and
    bakes the ``== 1`` branch in, so verify fails at size 2; made STATIC, it exports right."""

    def forward(self, x):
        if x.shape[0] == 1:
            return x * 2
        return x + 1


def badge_tone(html):
    """The tone of the first status badge in a fragment (ok is green)."""
    return re.search(r"oxw-badge oxw-(\w+)", html).group(1)


def test_stages_row_and_benchmark_tab_say_failed_then_not_verified_then_passed_as_the_spec_changes():
    session = Session(RightOnlyAtOne(), (torch.randn(1, 4),), options=ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    wb = Workbench(session, verify=True, reverify_below=0).wait()  # no verify on its own after a change
    assert stage_row(wb, "verify")[0] == "failed"
    wb.run_analysis("benchmark", budget=0.05, min_runs=5)  # the Benchmark tab's button, with a short budget
    wb.wait()
    status = wb.benchmark_view.status.value
    assert text(status).split()[:2] == ["verify", "failed"] and badge_tone(status) == "fail"  # never a green ok
    assert "the model timed fails verify: these are the timings of wrong numbers" in text(status)
    assert stage_row(wb, "benchmark")[:2] == ["verify", "failed"]

    wb.axis_control("x", 0).value = "STATIC"  # the spec changes after the failed verify
    wb.wait()
    assert " ".join(stage_row(wb, "verify")) == "not run not verified: verify has not run on this spec"
    assert stage_row(wb, "benchmark")[:2] == ["not", "run"]
    status = wb.benchmark_view.status.value  # the earlier spec's timing: said so, still not green
    assert "(for an earlier dim spec)" in text(status) and badge_tone(status) == "fail"

    wb.session.benchmark(budget=0.05, min_runs=5)  # the new spec timed in a script, not verified
    wb.run("optimize")
    wb.wait()
    status = wb.benchmark_view.status.value
    assert text(status).split()[:2] == ["not", "verified"] and badge_tone(status) == "warn"
    assert "the model timed is not verified" in text(status) and "earlier" not in text(status)
    assert stage_row(wb, "benchmark")[:2] == ["not", "verified"]

    wb.run_analysis("compare", budget=0.02, min_runs=3)  # the variants of a model not verified: said so too
    wb.wait()
    assert "the model timed is not verified" in text(wb.benchmark_view.compare.value)

    wb.verify_view.button.click()  # verified on this spec, and passing: now, and only now, ok
    wb.wait()
    assert stage_row(wb, "verify")[0] == "pass"
    status = wb.benchmark_view.status.value
    assert text(status).split()[0] == "ok" and badge_tone(status) == "ok"
    assert "the model timed" not in text(wb.benchmark_view.compare.value)
    assert stage_row(wb, "benchmark")[0] == "ok"

    wb.axis_control("x", 0).value = "AUTO"  # back to the spec that failed: its verify is found again
    wb.wait()
    assert stage_row(wb, "verify")[0] == "failed"
    assert text(wb.benchmark_view.status.value).split()[:2] == ["verify", "failed"]


def test_a_quick_verify_runs_again_after_a_change_of_spec_and_every_surface_follows():
    session = Session(RightOnlyAtOne(), (torch.randn(1, 4),), options=ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    wb = Workbench(session, verify=True, reverify_below=3600).wait()
    assert wb.session.verdict.word == "failed"
    wb.axis_control("x", 0).value = "STATIC"
    wb.wait()
    assert wb.session.verdict.passed and stage_row(wb, "verify")[0] == "pass"
    assert wb.session.summary().startswith("Session: RightOnlyAtOne [passed]")


def test_latency_vs_size_moves_the_dim_chosen_beside_its_button():
    wb = workbench(Add(), torch.randn(4, 8), torch.randn(4, 8),
                   x={0: Dim("batch"), 1: Dim("feature")}, y={0: Dim("batch"), 1: Dim("feature")})
    view = wb.benchmark_view
    assert view.sweep_dim.options == ("batch", "feature") and view.sweep_dim.value == "batch"
    view.sweep_dim.value = "feature"
    view.sweep_button.click()
    wb.wait()
    assert "latency vs feature" in text(view.sweep.value)


def test_latency_vs_size_cannot_run_on_an_export_with_every_dim_static_and_says_why():
    wb = workbench(Tiny(), torch.randn(4, 8))
    assert wb.benchmark_view.sweep_dim.options == ()
    assert wb.benchmark_view.sweep_button.disabled and "every input dim is static" in wb.benchmark_view.sweep_button.tooltip
