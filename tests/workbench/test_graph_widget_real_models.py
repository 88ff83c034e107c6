"""The graph widget on a real model: a 2-layer BERT from a tiny config (random weights, string
dim names ``batch``/``seq``), built once. What a person sees first (its modules, the mask &
position plumbing folded into one box), shapes and sources as a person reads them, and overlays
that say what they show (legend, tolerance, units, case). Python-side state and what is sent to
the page; the browser test measures the label size on screen."""

from __future__ import annotations

import html
import os
import re

import pytest

from exporter.graphs.pass_graphs import pass_graphs
from exporter.graphs.plumbing import PLUMBING, fold_plumbing
from workbench.graph_widget import GraphWidget
from workbench.pass_graph_widget import PassGraphWidget

pytestmark = [pytest.mark.needs_dot, pytest.mark.usefixtures("dummy_comm")]

MODULES = {PLUMBING, "embeddings", "encoder", "pooler"}


@pytest.fixture(scope="module")
def bert():
    transformers = pytest.importorskip("transformers")
    import torch

    import exporter

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2, intermediate_size=128,
                                     vocab_size=1000)
    torch.manual_seed(0)
    model = transformers.BertModel(config).eval()
    ids = torch.randint(0, 1000, (2, 8))
    dynamic = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    return exporter.export(model, input_ids=ids, attention_mask=torch.ones(2, 8, dtype=torch.long),
                           options=exporter.ExportOptions(dynamic_shapes=dynamic))


def from_page(widget, **state):
    """What the front end does with ``model.set(...); model.save_changes()``."""
    widget._handle_msg({"content": {"data": {"method": "update", "state": state, "buffer_paths": []}}, "buffers": []})


def drawn_elements(view, side):
    """(kind, path or name) of every element drawn on ``side``, graph inputs and outputs included."""
    svg = html.unescape(view.svg)
    return re.findall(rf'id="{side}-(op|module|more|cluster|input|output)-([^"]*)"', svg)


def overlay_fills(view):
    svg = html.unescape(view.svg)
    return re.findall(r'class="[^"]*wb-overlay[^"]*"[^>]*>.*?fill="(#[0-9a-f]{6})"', svg, flags=re.S)


def test_bert_first_paint_is_its_modules_one_plumbing_box_and_the_inputs_and_outputs(bert):
    view = GraphWidget(bert)
    for side in ("fx", "onnx"):
        elements = drawn_elements(view, side)
        assert {path for kind, path in elements if kind == "module"} == MODULES
        assert not [name for kind, name in elements if kind == "op"]  # no loose sym_size / unsqueeze at the top
        assert {path for kind, path in elements if kind == "input"} == {"input_ids", "attention_mask"}
        assert len(elements) == len(MODULES) + 4  # 4 modules, 2 inputs, 2 outputs
    plumbing = view.details[f"fx-module-{PLUMBING}"]
    assert plumbing["class"] == "mask & position plumbing" and plumbing["nodes"] >= 10
    assert re.search(r"mask &amp; position plumbing</text>\s*<text[^>]*>\(\d+ nodes\)", view.svg)


def test_the_plumbing_box_opens_like_a_module_and_holds_the_mask_and_position_ops(bert):
    view = GraphWidget(bert)
    from_page(view, expanded=[PLUMBING])  # a click on the box
    assert f"fx-cluster-{PLUMBING}" in view.details and f"onnx-cluster-{PLUMBING}" in view.details
    fx_ops = {d["op"] for d in view.details.values() if d["kind"] == "op" and d["side"] == "fx"}
    onnx_ops = {d["op"] for d in view.details.values() if d["kind"] == "op" and d["side"] == "onnx"}
    assert {"aten.sym_size.int", "aten.arange.default", "aten.unsqueeze.default", "aten.bitwise_and.Tensor"} <= fx_ops
    assert {"Shape", "Range", "Unsqueeze", "And"} <= onnx_ops
    assert all(d["module"] == PLUMBING for d in view.details.values() if d["kind"] == "op")
    view.search("arange")  # a plumbing node found by name opens its box on both sides
    assert view.selected == "arange" and PLUMBING in view.expanded


def test_no_shape_says_none_and_unnamed_dims_read_as_a_question_mark(bert):
    everything = sorted({n.module for g in (fold_plumbing(bert.graphs.fx_decomposed), fold_plumbing(bert.graphs.onnx_optimized))
                         for n in g.nodes if n.module})
    view = GraphWidget(bert, expand=everything)
    texts = [t for d in view.details.values() if d["kind"] == "op" for _, t in d["inputs"] + d["outputs"]]
    assert len([d for d in view.details.values() if d["kind"] == "op"]) == len(bert.graphs.fx_decomposed) + len(
        bert.graphs.onnx_optimized)
    assert texts and not [t for t in texts if "None" in t]
    assert "None" not in html.unescape(view.svg)
    assert any("?" in t for t in texts)  # the ONNX Expand/GatherND index dims nobody named
    assert any("[batch, seq" in t for t in texts)


def test_sources_shown_are_relative_to_site_packages_never_absolute(bert):
    view = GraphWidget(bert, expand=["encoder.layer.0.attention.self", PLUMBING])
    sources = [d["source"] for d in view.details.values() if d["kind"] == "op" and d["source"]]
    assert sources and not [s for s in sources if "site-packages" in s or s.startswith("/")]
    assert any(s.startswith("transformers/models/bert/modeling_bert.py:") for s in sources)
    tooltips = re.findall(r'xlink:title="([^"]*)"', html.unescape(view.svg))
    assert any("transformers/models/bert/modeling_bert.py:" in t for t in tooltips)
    assert not [t for t in tooltips if "site-packages" in t]


def test_a_passing_verify_gives_an_all_green_error_overlay_that_says_so_with_its_tolerance(bert):
    assert str(bert.verify(edge_values=False).status) == "passed"
    view = GraphWidget(bert)
    view.overlay = "error"
    assert view.wait_overlay(300)
    assert view.message["kind"] == "info" and view.selected == ""
    assert re.match(r"error: all \d+ compared nodes within tolerance \(max error [-+.e\d]+\) on case \S", view.message["text"])
    legend = view.legend
    assert legend["kind"] == "error" and legend["units"] == "× tolerance" and legend["case"]
    assert "rtol=" in legend["tolerance"] and "allowed abs error per node" in legend["tolerance"]
    assert [label for _, label in legend["stops"]][:2] == ["0", "≤ tolerance"]
    fills = overlay_fills(view)
    assert fills and all(int(f[3:5], 16) > int(f[1:3], 16) for f in fills), fills  # every box green, none red
    panel = [d for d in view.details.values() if d["kind"] == "module" and d["side"] == "onnx"]
    assert panel  # module boxes only at first paint: open one for a node's error in words
    compared = bert.compare_intermediates()  # what the overlay painted (the comparison is cached)
    view.selected = next(r.onnx_node for r in compared.rows
                         if r.status == "pass" and r.module == "encoder.layer.0.attention.self.query")
    assert "× the allowed error: within tolerance" in view.details[f"onnx-op-{view.selected}"]["value_text"]
    print(view.message["text"], view.legend, sep="\n")


def test_the_time_overlay_has_a_legend_in_ms_and_says_which_case(bert):
    view = GraphWidget(bert)
    view.overlay = "time"
    assert view.wait_overlay(300)
    case = "the example inputs (batch=2, seq=8)"  # the sizes of the dims the profile ran at
    assert view.message["text"].startswith("time: onnxruntime profile") and f"on {case}" in view.message["text"]
    legend = view.legend
    assert legend["kind"] == "time" and legend["units"] == "ms per run" and legend["case"] == case
    assert all(label.endswith(" ms") for _, label in legend["stops"]) and legend["stops"][0][1] == "0 ms"
    top = float(legend["stops"][-1][1].split()[0])
    view.expanded = ["encoder"]  # smaller boxes: the scale follows what is drawn
    assert float(view.legend["stops"][-1][1].split()[0]) <= top


def test_a_pass_drawing_uses_the_same_collapsed_layout(bert):
    changing = [r for r in bert.passes if r.ran and r.changes_model]
    assert changing
    view = PassGraphWidget(pass_graphs(bert, changing[0].index))
    for side in ("before", "after"):
        shown = {path for kind, path in re.findall(rf'id="{side}-(module|cluster)-([^"]*)"', html.unescape(view.svg))}
        assert PLUMBING in shown and {"embeddings", "encoder", "pooler"} <= shown
