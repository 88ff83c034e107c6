"""The Verify tab: run the ONNX model in onnxruntime against PyTorch at the example and over a
sweep of sizes (``session.verify()``): the verdict on one line, the chart of differences, and
the core's verification section (findings, cases) folded below. After a change of spec the
tab says "not verified for this spec" (grey, never green) and keeps the earlier result folded
below, with its spec's verdict, until verify runs on the new spec."""

from __future__ import annotations

from collections.abc import Callable

import ipywidgets as widgets

from exporter.display import render
from exporter.verify import VerifyResult
from workbench.render.bench_charts import verify_chart

from .blocks import failure_html, figure_html, folded, pane, verdict

__all__ = ["VerifyView"]


class VerifyView:
    title = "Verify"
    analyses = ("verify",)

    def __init__(self, on_run: Callable[[str], None]) -> None:
        self.button = widgets.Button(description="Run verify", icon="check")
        self.button.add_class("wb-run-verify")
        self.button.on_click(lambda _: on_run("verify"))
        self.status = widgets.HTML(verdict("not run"))
        self.status.add_class("wb-verify-status")
        self.summary = widgets.HTML()
        self.table = widgets.HTML()
        self.chart = widgets.HTML()
        self.widget = widgets.VBox([self.status, widgets.HBox([self.button]), self.summary, self.chart, self.table])

    def not_run(self) -> None:
        self.status.value = verdict("not run")
        self.summary.value = self.table.value = self.chart.value = ""

    def show(self, name: str, result: VerifyResult, current: bool = True) -> None:
        """Draw a verify result (``name`` is ``verify``); ``current`` False: of an earlier spec."""
        if not current:
            self.show_stale(result)
            return
        if result.status == "error":
            self.status.value = verdict(result.status, "verify could not run")
            self.summary.value = failure_html(result.failure or result.error)
            self.table.value = self.chart.value = ""
            return
        self.status.value = verdict(result.status, result.verdict)
        self.summary.value = ""
        self.table.value = pane(folded(f"details: {len(result.cases)} case(s), findings, contract",
                                       render(result), open=not result.ok))
        self.chart.value = figure_html(verify_chart(result))

    def show_stale(self, result: VerifyResult) -> None:
        """``result`` ran on an earlier spec: nothing is verified for the one on screen."""
        self.status.value = verdict("not run", "not verified for this spec: Run verify checks it", tone="muted")
        earlier = "verify could not run" if result.status == "error" else result.verdict
        self.summary.value = pane(folded(f"the last verify, for an earlier spec: {earlier}", render(result)))
        self.table.value = self.chart.value = ""
