"""The side-by-side FX/ONNX drawing: real exports, real Graphviz ``dot``, the SVG parsed as XML."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest
import torch
from torch import nn

from exporter import ExportOptions, export
from exporter.graphs.draw import CHANGE_COLOURS, before_after, side_by_side
from exporter.graphs.pass_graphs import pass_graphs

pytestmark = pytest.mark.needs_dot

SVG = "{http://www.w3.org/2000/svg}"


class Block(nn.Module):
    def __init__(self, d=8):
        super().__init__()
        self.fc = nn.Linear(d, d)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + torch.relu(self.norm(self.fc(x)))


class Net(nn.Module):
    """``embed`` (Linear), ``blocks.0`` … ``blocks.N-1`` (Linear + LayerNorm), ``head`` (Linear)."""

    def __init__(self, blocks=2, d=8):
        super().__init__()
        self.embed = nn.Linear(4, d)
        self.blocks = nn.ModuleList(Block(d) for _ in range(blocks))
        self.head = nn.Linear(d, 2)

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)



def _export(model, *args, **options):
    session = export(model.eval(), *args, options=ExportOptions(**options))
    session.run()
    return session.raise_for_status()


@pytest.fixture(scope="module")
def session():
    return _export(Net(), torch.randn(2, 3, 4), dynamic_shapes={"x": {0: "batch"}})


def elements(view):
    """Every SVG element with an id, as ``{id: set of CSS classes}``."""
    root = ET.fromstring(view.svg)
    assert root.tag == f"{SVG}svg"
    return {e.get("id"): set((e.get("class") or "").split()) for e in root.iter() if e.get("id")}


def with_class(view, css):
    return {i for i, classes in elements(view).items() if css in classes}


def test_default_view_is_collapsed_to_top_level_modules_on_both_sides(session):
    view = side_by_side(session)
    boxes = with_class(view, "wb-module")
    for side in ("fx", "onnx"):
        assert {f"{side}-module-embed", f"{side}-module-blocks", f"{side}-module-head"} <= boxes
    assert not with_class(view, "wb-cluster")
    assert not with_class(view, "wb-op")  # every node is inside a module here
    ids = elements(view)
    assert {"fx-input-x", "onnx-input-x", "fx-graph", "onnx-graph"} <= set(ids)


def test_expanding_a_nested_module_opens_it_and_its_parents_as_clusters(session):
    view = side_by_side(session, expand=("blocks.1",))
    clusters = with_class(view, "wb-cluster")
    assert {"fx-cluster-blocks", "fx-cluster-blocks.1", "onnx-cluster-blocks", "onnx-cluster-blocks.1"} <= clusters
    boxes = with_class(view, "wb-module")
    assert {"fx-module-blocks.0", "fx-module-blocks.1.fc", "onnx-module-blocks.1.norm"} <= boxes
    assert "fx-module-blocks" not in boxes
    assert view.expanded == ("blocks", "blocks.1")
    # the residual add of blocks.1 is drawn as a node in the blocks.1 cluster
    assert any(i.startswith("onnx-op-") for i in with_class(view, "wb-op"))


def test_selecting_an_onnx_node_highlights_it_and_its_fx_origin(session):
    mapping = session.graphs.mapping
    matmul = next(e for e in mapping.entries if e.onnx_op == "MatMul" and e.module == "blocks.0.fc")
    view = side_by_side(session, select=matmul.onnx_node)
    selected = with_class(view, "wb-selected")
    assert f"onnx-op-{matmul.onnx_node}" in selected
    assert {f"fx-op-{f}" for f in matmul.fx_nodes} <= selected
    assert all(i.startswith(("fx-op-", "onnx-op-")) for i in selected)
    assert "fx-cluster-blocks.0.fc" in with_class(view, "wb-cluster")  # opened to show it
    assert ("onnx", matmul.onnx_node) in view.selected


def test_selecting_an_fx_node_highlights_every_onnx_node_it_became(session):
    view = side_by_side(session, select="linear")  # embed: MatMul + Add
    selected = with_class(view, "wb-selected")
    onnx = {i for i in selected if i.startswith("onnx-op-")}
    assert "fx-op-linear" in selected and len(onnx) == 2


def test_unknown_names_raise_value_errors_with_close_matches(session):
    with pytest.raises(ValueError, match=r"select='nosuchnode'.*"):
        side_by_side(session, select="nosuchnode")
    with pytest.raises(ValueError, match=r"did you mean 'linear'"):
        side_by_side(session, select="linaer")
    with pytest.raises(ValueError, match=r"no module 'blokcs.0'.*did you mean 'blocks.0'"):
        side_by_side(session, expand=("blokcs.0",))
    with pytest.raises(ValueError, match="overlay_reduce"):
        side_by_side(session, overlay_reduce="median")


def test_overlay_colours_nodes_and_their_counterparts(session):
    mapping = session.graphs.mapping
    head = [e.onnx_node for e in mapping.entries if e.module == "head"]
    view = side_by_side(session, expand=("head",), overlay={name: 5.0 for name in head})
    painted = with_class(view, "wb-overlay")
    assert {f"onnx-op-{name}" for name in head} <= painted
    assert any(i.startswith("fx-op-") for i in painted)  # carried over to the FX origin
    assert "onnx-module-embed" not in painted  # no value there


def test_overlay_takes_an_onnxruntime_profile(session):
    profile = session.profile(runs=3)
    view = side_by_side(session, overlay=profile, overlay_reduce="max")
    painted = with_class(view, "wb-overlay")
    assert {"onnx-module-blocks", "fx-module-blocks"} <= painted


def test_many_submodules_are_folded_into_runs_unless_opened():
    session = _export(Net(blocks=30), torch.randn(2, 4))
    view = side_by_side(session, expand=("blocks",), max_children=10)
    boxes = with_class(view, "wb-module")
    assert {"fx-module-blocks.0", "fx-module-blocks.29"} <= boxes
    assert "fx-module-blocks.15" not in boxes
    assert with_class(view, "wb-more")
    opened = side_by_side(session, expand=("blocks.15",), max_children=10)
    assert "onnx-cluster-blocks.15" in with_class(opened, "wb-cluster")


def test_without_dot_the_view_says_so_and_shows_the_module_table(session, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot here
    view = side_by_side(session)
    assert view.svg is None and view._repr_svg_() is None
    assert "dot" in view.message and "apt-get install graphviz" in view.message
    assert {"embed", "blocks.0.fc", "head"} <= set(view.table.module)
    assert "<table" in view._repr_html_() and "graphviz" in view._repr_html_()


def test_view_displays_as_svg_and_html(session):
    view = side_by_side(session)
    assert view._repr_svg_() == view.svg
    html = view._repr_html_()
    assert html.startswith('<div class="wb-graph-view"') and view.svg.split(">", 1)[1] in html  # the svg tag gets a style
    assert "digraph fx" in view.fx_dot and "digraph onnx" in view.onnx_dot


def test_importing_the_graph_view_loads_no_heavy_library():
    script = "import sys, exporter.graphs.draw, workbench.netron; print(' '.join(sys.modules))"
    loaded = set(subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout.split())
    assert not loaded & {"torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir", "graphviz"}


# -- one optimizer pass, before and after (issue 26) ------------------------------------------------


def test_a_pass_is_drawn_before_and_after_with_the_nodes_of_its_diff_highlighted(session):
    record = next(r for r in session.passes if r.ran and r.removed)
    step = pass_graphs(session, record.index)
    diff = record.diff()
    assert step.removed == {c.name for c in diff.removed}
    assert step.added == {c.name for c in diff.added}
    assert step.changed_after == {c.name for c in diff.changed}
    assert (len(step.before), len(step.after)) == (record.nodes_before, record.nodes_after)  # no subgraphs here

    view = before_after(step)
    highlighted = {f"before-op-{n}" for n in step.removed | step.changed_before} \
        | {f"after-op-{n}" for n in step.added | step.changed_after}
    assert with_class(view, "wb-selected") == highlighted
    assert {"before-graph", "after-graph"} <= set(elements(view))
    assert set(view.selected) == {("before", n) for n in step.highlighted_before} | {("after", n) for n in step.highlighted_after}
    assert CHANGE_COLOURS["removed"] in view.fx_dot and f"before pass {record.index}:" in view.fx_dot


def test_a_drawing_in_a_notebook_shrinks_to_its_width_but_never_below_readable_text(session):
    """JupyterLab scales an SVG output to the area's width (≈ 570 px beside the file browser):
    the HTML repr lets it shrink, down to the scale where 10 pt node text is still ≥ 10 px."""
    record = next(r for r in session.passes if r.ran and r.removed)
    view = before_after(pass_graphs(session, record.index))
    natural = float(re.search(r'<svg[^>]* width="([\d.]+)pt"', view.svg).group(1)) * 4 / 3
    style = re.search(r'<svg style="([^"]*)"', view._repr_html_()).group(1)
    assert "max-width:100%" in style and "height:auto" in style
    smallest = float(re.search(r"min-width:(\d+)px", style).group(1))
    assert natural > 570 and 10 * 4 / 3 * smallest / natural >= 10  # this drawing is wide: it scrolls past 570 px


def test_a_pass_that_changed_nothing_draws_the_same_model_twice_and_bad_indexes_raise(session):
    record = next(r for r in session.passes if r.ran and not r.changes_model)
    step = pass_graphs(session, record.index)
    assert step.before.names == step.after.names and not (step.highlighted_before or step.highlighted_after)
    assert not with_class(before_after(step), "wb-selected")
    with pytest.raises(IndexError, match="out of range"):
        pass_graphs(session, len(session.passes))
