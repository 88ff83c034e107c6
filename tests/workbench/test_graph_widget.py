"""``GraphWidget`` without a browser: state set as the front end sets it (``update`` and
``custom`` comm messages, as in ipywidgets' own tests) and from Python, then what Python holds
and what it sent to the page. Real exports, real Graphviz ``dot``, real onnxruntime."""

from __future__ import annotations

import html
import threading

import pytest
import torch
import traitlets
from torch import nn

import exporter
from exporter.pipeline import stages as pipeline_stages
from exporter.graphs.draw import CHANGE_COLOURS
from exporter.worker import submit_work
from workbench.graph_widget import GraphWidget

from widget_page import page_sends, sent_state

pytestmark = [pytest.mark.needs_dot, pytest.mark.usefixtures("dummy_comm")]


class Layer(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(d, d), nn.Linear(d, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.ModuleList(Layer() for _ in range(2))

    def forward(self, x):
        for layer in self.layer:
            x = layer(x)
        return x


class Net(nn.Module):
    """``embed``, ``encoder.layer.0`` / ``encoder.layer.1`` (``fc1``, ``fc2``), ``head``."""

    def __init__(self):
        super().__init__()
        self.embed, self.encoder, self.head = nn.Linear(4, 8), Encoder(), nn.Linear(8, 2)

    def forward(self, x):
        return self.head(self.encoder(self.embed(x))).softmax(-1)


def _export(model, x, **options):
    torch.manual_seed(0)
    session = exporter.export(model.eval(), x, options=exporter.ExportOptions(**options))
    session.run()
    return session


@pytest.fixture(scope="module")
def session():
    return _export(Net(), torch.randn(2, 3, 4), dynamic_shapes={"x": {0: "batch"}}).raise_for_status()


def from_page(widget, **state):
    """What the front end does with ``model.set(...); model.save_changes()``."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def drawn(widget) -> str:
    return html.unescape(widget.svg)


def onnx_matmul(session, module="encoder.layer.0.fc1"):
    return next(e for e in session.graphs.mapping.entries if e.onnx_op == "MatMul" and e.module == module)


def test_first_paint_is_collapsed_to_top_level_modules_with_details_for_each_element_drawn(session):
    view = GraphWidget(session)
    assert view.expanded == [] and view.selected == ""
    assert {"fx-module-encoder", "onnx-module-encoder", "fx-module-embed", "onnx-op-node_softmax"} <= set(view.details)
    assert view.details["fx-module-encoder"]["children"] == ["encoder.layer"]
    assert all(f'id="{element}"' in drawn(view) for element in view.details)
    assert {"encoder.layer.1", "MatMul", "linear"} <= set(view.names)  # completion: modules, op types, nodes


def test_clicking_an_onnx_matmul_selects_it_and_its_fx_origin_with_shapes_by_dim_name(session):
    view = GraphWidget(session, expand=["encoder.layer.0.fc1"])
    entry = onnx_matmul(session)
    sent_state(view)
    from_page(view, selected=entry.onnx_node)

    fx_node = entry.fx_nodes[0]
    assert view.highlight == [f"fx-op-{fx_node}", f"onnx-op-{entry.onnx_node}"]
    assert sent_state(view)["highlight"] == view.highlight  # the page hears the highlight, no relayout
    details = view.details[f"onnx-op-{entry.onnx_node}"]
    assert details["op"] == "MatMul" and details["module"] == "encoder.layer.0.fc1" and details["class"] == "Linear"
    assert details["outputs"][0][1] == "float32[batch, 3, 8]"
    assert ["fx", fx_node, f"fx-op-{fx_node}"] in details["mapped"]
    assert "self.fc1(x)" in details["source"]
    assert view.details[f"fx-op-{fx_node}"]["mapped"][0][1] == entry.onnx_node


def test_fx_attributes_are_the_non_node_arguments_named_by_the_schema(session):
    view = GraphWidget(session)
    assert view.details["fx-op-softmax"]["attributes"] == [["dim", "-1"]]  # softmax(x, dim=-1): x is a node
    assert view.details["onnx-op-node_softmax"]["attributes"] == [["axis", "-1"]]


def test_selecting_from_python_opens_the_modules_of_both_sides_and_redraws_the_page(session):
    view = GraphWidget(session)
    entry = onnx_matmul(session, "encoder.layer.1.fc2")
    sent_state(view)
    view.selected = entry.onnx_node

    assert {"encoder", "encoder.layer", "encoder.layer.1", "encoder.layer.1.fc2"} <= set(view.expanded)
    assert f'id="onnx-op-{entry.onnx_node}"' in drawn(view) and f'id="fx-op-{entry.fx_nodes[0]}"' in drawn(view)
    state = sent_state(view)
    assert {"svg", "expanded", "highlight", "details"} <= set(state)
    assert state["highlight"] == [f"fx-op-{entry.fx_nodes[0]}", f"onnx-op-{entry.onnx_node}"]


def test_a_module_box_opened_and_closed_in_the_page_keeps_the_selection(session):
    view = GraphWidget(session, expand=["encoder.layer.0.fc1"])
    entry = onnx_matmul(session)
    from_page(view, selected=entry.onnx_node)
    from_page(view, expanded=list(view.expanded) + ["encoder.layer.1"])  # a click on the box
    assert "fx-cluster-encoder.layer.1" in view.details and "fx-module-encoder.layer.1.fc1" in view.details
    assert view.selected == entry.onnx_node and f"onnx-op-{entry.onnx_node}" in view.highlight

    from_page(view, expanded=[])  # a click on the frame of the open `encoder`
    assert view.expanded == [] and view.selected == entry.onnx_node
    assert view.highlight == ["fx-module-encoder", "onnx-module-encoder"]  # the boxes holding it


def test_search_a_module_path_selects_and_opens_it(session):
    view = GraphWidget(session)
    page_sends(view, {"type": "search", "text": "encoder.layer.1"})
    assert view.selected == "encoder.layer.1"
    assert "encoder.layer.1" in view.expanded and "fx-cluster-encoder.layer.1" in view.details
    assert view.highlight == ["fx-cluster-encoder.layer.1", "onnx-cluster-encoder.layer.1"]


def test_search_the_end_of_a_module_path_lists_the_modules_it_names(session):
    view = GraphWidget(session)
    assert view.search("fc1") is None
    assert view.message["names"] == ["encoder.layer.0.fc1", "encoder.layer.1.fc1"]
    assert view.search("head") == "head" and view.selected == "head"


def test_search_an_op_type_selects_its_first_node_and_lists_the_others(session):
    view = GraphWidget(session)
    first = view.search("MatMul")
    matmuls = [n.name for n in session.graphs.onnx_optimized.nodes if n.op == "MatMul"]
    assert first == matmuls[0] and view.message["names"] == matmuls


def test_a_name_that_matches_nothing_lists_the_closest_names_and_raises_nothing(session):
    view = GraphWidget(session)
    page_sends(view, {"type": "search", "text": "fc3"})
    assert view.selected == "" and view.message["kind"] == "warning"
    assert "no node, op or module is named 'fc3'" in view.message["text"]
    assert "encoder.layer.0.fc1" in view.message["names"]


def test_python_setting_an_unknown_name_raises_with_the_closest_names(session):
    view = GraphWidget(session)
    with pytest.raises(traitlets.TraitError, match="closest: encoder.layer.0.fc1"):
        view.selected = "fc1"
    with pytest.raises(traitlets.TraitError, match="no module 'encoder.layers'"):
        view.expanded = ["encoder.layers"]
    with pytest.raises(traitlets.TraitError, match="overlay must be one of none, error, time"):
        view.overlay = "memory"


def test_time_overlay_paints_nodes_with_the_profile(session):
    view = GraphWidget(session, expand=["encoder.layer.0"])
    view.overlay = "time"
    assert view.wait_overlay(120)
    assert view.message["kind"] == "info" and view.message["text"].startswith("time: onnxruntime profile")
    assert view.legend["kind"] == "time" and view.legend["units"] == "ms per run"
    assert "wb-overlay" in drawn(view)
    timed = [d for d in view.details.values() if d["kind"] == "op" and d["side"] == "onnx" and d["value"]]
    assert timed and all(d["overlay"] == "time" for d in timed)
    view.overlay = "none"
    assert "wb-overlay" not in drawn(view) and view.legend == {}


def _hold_the_worker():
    """Block the export worker until the returned event is set: what a long analysis does."""
    gate = threading.Event()
    submit_work(gate.wait, 120)
    return gate


def test_setting_an_overlay_returns_at_once_and_the_overlay_arrives_from_the_worker(session):
    view = GraphWidget(session, expand=["encoder.layer.0"])
    before = view.svg
    sent_state(view)
    gate = _hold_the_worker()
    try:
        from_page(view, overlay="error")  # returns while the worker is busy: the kernel stays free
        assert view.computing == "error" and view.status and not view.wait_overlay(0)
        assert view.svg == before and "wb-overlay" not in drawn(view)  # the previous drawing stays
        assert sent_state(view)["computing"] == "error"  # the page shows "computing…" and Cancel
        view.selected = "encoder.layer.0.fc1"  # the widget answers meanwhile
    finally:
        gate.set()
    assert view.wait_overlay(120)
    assert view.computing == "" and view.status == "" and view.overlay == "error"
    assert "wb-overlay" in drawn(view) and view.selected == "encoder.layer.0.fc1"
    painted = [d for d in view.details.values() if d["kind"] == "op" and d["side"] == "onnx" and d["value"] is not None]
    assert painted and all(d["overlay"] == "error" for d in painted)
    assert sent_state(view)["computing"] == ""


def test_a_cancel_keeps_the_previous_overlay_and_drawing_and_says_cancelled(session):
    view = GraphWidget(session, expand=["encoder.layer.0"], overlay="time")
    assert "wb-overlay" in drawn(view)
    before, details = view.svg, view.details
    gate = _hold_the_worker()
    try:
        from_page(view, overlay="error")
        assert view.computing == "error"
        page_sends(view, {"type": "cancel"})  # the Cancel button
        assert view.overlay == "time" and view.status == "cancelled" and view.computing == ""
    finally:
        gate.set()
    assert view.wait_overlay(120)
    submit_work(lambda: None).result(120)  # the cancelled job has ended on the worker
    assert view.overlay == "time" and view.status == "cancelled" and view.computing == ""
    assert view.svg == before and view.details == details
    assert not view.cancel_overlay()  # nothing computing any more


def _relu_plus_a_hundredth(x):
    from onnxscript import opset18 as op

    return op.Add(op.Relu(x), op.CastLike(op.Constant(value_float=0.01), x))


def _relu_off_past_a_batch_of_two(x):
    """A wrong translation of aten.relu: Relu(x) + 0.01 * (batch - 2), exact at the example's batch of 2."""
    from onnxscript import opset18 as op

    batch = op.CastLike(op.Gather(op.Shape(x), op.Constant(value_int=0)), x)
    off = op.Mul(op.Sub(batch, op.CastLike(op.Constant(value_float=2.0), x)), op.CastLike(op.Constant(value_float=0.01), x))
    return op.Add(op.Relu(x), off)


def _refuse_relu(x):
    raise RuntimeError("no translation for relu here")


def _with_relu_translation(monkeypatch, translation):
    original = pipeline_stages.translations  # the translate stage's source of custom translations
    monkeypatch.setattr(pipeline_stages, "translations",
                        lambda *a: original(*a) + ((torch.ops.aten.relu.default, translation),))


def test_error_overlay_after_a_failed_verify_selects_the_first_bad_node(monkeypatch):
    _with_relu_translation(monkeypatch, _relu_plus_a_hundredth)
    session = _export(Layer(), torch.randn(2, 8), dynamic_shapes={"x": {0: "batch"}})
    assert session.verify(edge_values=False).status == "failed"
    first_bad = session.compare_intermediates().first_bad.onnx_node

    view = GraphWidget(session)
    page_sends(view, {"type": "noise"})  # an unknown message is ignored
    from_page(view, overlay="error")
    assert view.wait_overlay(120)
    assert view.selected == first_bad and view.message["kind"] == "error" and view.message["names"] == [first_bad]
    assert f"onnx-op-{first_bad}" in view.highlight and "wb-overlay" in drawn(view)
    assert view.details[f"onnx-op-{first_bad}"]["value"] == pytest.approx(1e-2, rel=1e-3)


def test_error_overlay_after_verify_failed_at_another_size_paints_that_case_and_selects_its_first_bad_node(monkeypatch):
    _with_relu_translation(monkeypatch, _relu_off_past_a_batch_of_two)
    session = _export(Layer(), torch.randn(2, 8), dynamic_shapes={"x": {0: "batch"}})
    verified = session.verify(edge_values=False)
    failing = next(c for c in verified.cases if c.status == "fail")
    assert session.compare_intermediates().first_bad is None  # the example computes right
    first_bad = session.compare_intermediates(failing.name).first_bad.onnx_node

    view = GraphWidget(session)
    from_page(view, overlay="error")
    assert view.wait_overlay(120)
    assert view.selected == first_bad and view.message["names"] == [first_bad]
    assert view.message["text"].startswith(f"verify failed at case {failing.name} ({failing.sizes_text})")


def test_a_model_whose_translate_failed_shows_the_fx_side_alone_and_overlay_errors_in_the_panel(monkeypatch):
    _with_relu_translation(monkeypatch, _refuse_relu)
    session = exporter.Session(Layer().eval(), (torch.randn(2, 8),), {}, exporter.ExportOptions())
    view = GraphWidget(session)
    assert "The ONNX side is not drawn" in view.note and "translate" in view.note.lower()
    assert "fx-op-relu" in view.details or "fx-module-fc1" in view.details
    assert not any(element.startswith("onnx-") for element in view.details)
    view.selected = "relu"
    assert view.highlight == ["fx-op-relu"] and view.details["fx-op-relu"]["mapped"] == []
    view.overlay = "time"  # no ONNX model to profile: said in the panel, not raised
    assert view.wait_overlay(120)
    assert view.message["kind"] == "error" and "time overlay could not be computed" in view.message["text"]


def test_the_front_end_module_and_css_are_package_files():
    from workbench import graph_widget

    esm, css = graph_widget.STATIC / "graph_widget.js", graph_widget.STATIC / "graph_widget.css"
    assert esm.is_file() and css.is_file()
    text = esm.read_text()
    assert "export default" in text and "change:highlight" in text


def test_the_graphs_tab_of_a_model_whose_translate_failed_draws_the_fx_side_alone(monkeypatch):
    from workbench import Workbench

    _with_relu_translation(monkeypatch, _refuse_relu)
    session = exporter.Session(Layer().eval(), (torch.randn(2, 8),), {}, exporter.ExportOptions())
    wb = Workbench(session).wait()
    assert wb.session.failed_stage.name == "translate"
    wb.graphs_view.button.click()
    wb.wait()
    view = wb.graphs_view.graph
    assert "The ONNX side is not drawn" in view.note and "fx-module-fc1" in view.details
    assert not any(element.startswith("onnx-") for element in view.details)


def test_the_stages_tab_draws_a_picked_pass_before_and_after_with_the_nodes_of_its_diff_highlighted(session):
    from workbench import Workbench

    stages = Workbench(session).wait().stages_view
    changing = [r for r in session.passes if r.ran and r.changes_model]
    assert changing and [value for _, value in stages.pass_picker.options[1:]] == [r.index for r in changing]
    assert stages.pass_box.layout.display != "none" and stages.pass_step is None

    record = max(changing, key=lambda r: len(r.diff().changes))
    stages.pass_picker.value = record.index  # what picking it in the page does
    stages.wait_pass()
    step, view = stages.pass_step, stages.pass_view
    assert step is not None and view is not None and step.record.index == record.index
    assert len(step.before) == record.nodes_before and len(step.after) == record.nodes_after
    diff = record.diff()
    assert step.removed == {c.name for c in diff.removed} and step.added == {c.name for c in diff.added}
    assert step.changed_after == {c.name for c in diff.changed}
    assert set(view.selected) == ({("before", n) for n in step.removed | step.changed_before}
                                  | {("after", n) for n in step.added | step.changed_after})
    assert record.label in stages.pass_graphs.value and "removed" in stages.pass_graphs.value  # caption, legend
    widget = stages.pass_widget  # the graph widget's front end draws it
    assert widget.step is step and widget.layout.display != "none" and not widget.show_overlays
    changes = {f"before-op-{n}" for n in step.removed | step.changed_before} | {f"after-op-{n}" for n in step.added | step.changed_after}
    assert set(widget.highlight) == changes
    shown = drawn(widget)
    for name in step.added:
        assert f'id="after-op-{name}"' in shown and widget.details[f"after-op-{name}"]["change"] == "added by this pass"
    for name in step.removed:
        assert widget.details[f"before-op-{name}"]["change"] == "removed by this pass"

    # a click on a node on both sides: it is highlighted on both (the changes keep their fill)
    kept = next(n for n in step.after.names if n in step.before)
    from_page(widget, selected=kept)
    assert set(widget.highlight) == {f"before-op-{kept}", f"after-op-{kept}"}
    assert CHANGE_COLOURS["removed"] in widget.svg
    assert widget.details[f"after-op-{kept}"]["mapped"] == [["before", kept, f"before-op-{kept}"]]

    stages.show_pass(-1)
    assert stages.pass_picker.value == -1 and stages.pass_step is None and stages.pass_graphs.value == ""
    assert widget.layout.display == "none"


def test_importing_the_graph_widget_loads_no_heavy_library():
    import subprocess
    import sys

    script = "import sys, workbench.graph_widget; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split())
    assert "anywidget" in loaded
    assert not loaded & {"torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir", "graphviz"}
