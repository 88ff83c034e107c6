"""An analysis registered with a tab shows up in the workbench with nothing else changed:
its tab after the built-in ones, its button runs it on the export worker, its result is
drawn, and after a change of spec the tab says the result is of an earlier spec."""

from __future__ import annotations

from dataclasses import dataclass

import ipywidgets as widgets
import pytest
import torch

from exporter import ExportOptions, Session
from exporter.analyses import ANALYSES, Analysis
from workbench import Workbench
from workbench.views.registry import ANALYSIS_VIEWS


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x).relu()


@dataclass(frozen=True)
class NodeCount:
    nodes: int
    status: str = "ok"


class NodeCountAnalysis(Analysis):
    name, label = "node_count", "counting nodes"

    def run(self, record, *, observer, cancel, **options):
        return NodeCount(len(record.stage_output("optimize").graph))


class NodeCountView:
    title, analyses = "Nodes", ("node_count",)

    def __init__(self, run):
        self.button = widgets.Button(description="Count nodes")
        self.button.on_click(lambda _: run("node_count"))
        self.text = widgets.HTML("not run")
        self.widget = widgets.VBox([self.button, self.text])

    def show(self, name, result, current):
        self.text.value = f"{result.nodes} ONNX nodes" + ("" if current else " (an earlier spec)")

    def not_run(self):
        self.text.value = "not run"


@pytest.fixture
def node_count_tab():
    ANALYSES.register(NodeCountAnalysis())
    ANALYSIS_VIEWS.register(NodeCountView)
    yield
    ANALYSIS_VIEWS.unregister(NodeCountView)
    ANALYSES.unregister("node_count")


def test_a_registered_analysis_gets_a_tab_whose_button_runs_it_and_shows_its_result(node_count_tab):
    session = Session(Tiny(), (torch.randn(2, 8),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    wb = Workbench(session).wait()
    assert wb.tabs.titles == ("Stages", "Dims", "Guards", "Graphs", "Verify", "Benchmark", "Nodes")
    view = wb.analysis_views["node_count"]
    assert view.text.value == "not run"

    view.button.click()
    wb.wait()
    nodes = len(wb.session.stage_output("optimize").graph)
    assert view.text.value == f"{nodes} ONNX nodes"
    assert wb.session.analyses["node_count"].nodes == nodes

    wb.axis_control("x", 0).value = "STATIC"  # another spec: the count is of the earlier one
    wb.wait()
    assert wb.session.dims["x", 0].obtained == "static"
    assert view.text.value == f"{nodes} ONNX nodes (an earlier spec)"


def test_without_the_registration_the_workbench_has_its_six_tabs():
    session = Session(Tiny(), (torch.randn(2, 8),), {})
    wb = Workbench(session, run=False)
    assert wb.tabs.titles == ("Stages", "Dims", "Guards", "Graphs", "Verify", "Benchmark")
    with pytest.raises(ValueError, match="unknown analysis 'node_count'; choose one of verify, benchmark"):
        wb.run_analysis("node_count")
