"""The Verify tab: run the ONNX model in onnxruntime against PyTorch at the example and over a
sweep of sizes (``session.verify()``), with the result's summary, per-case table and chart.
The last result stays on screen (marked as from an earlier spec when the dims changed)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ._html import badge, failure_html, figure_svg, frame_html, note, pre

__all__ = ["VerifyView"]


class VerifyView:
    title = "Verify"

    def __init__(self, on_run: Callable[[], None]) -> None:
        self.button = widgets.Button(description="Run verify", icon="check")
        self.button.add_class("wb-run-verify")
        self.button.on_click(lambda _: on_run())
        self.status = widgets.HTML(note("not run"))
        self.status.add_class("wb-verify-status")
        self.summary = widgets.HTML()
        self.table = widgets.HTML()
        self.chart = widgets.HTML()
        self.widget = widgets.VBox([widgets.HBox([self.button, self.status]), self.summary, self.table, self.chart])

    def show(self, result: Any, current: bool = True) -> None:
        stale = "" if current else " " + note("(for an earlier dim spec)")
        self.status.value = badge(result.status) + f" in {result.seconds:.2f} s" + stale
        self.summary.value = pre(result.summary())
        if result.status == "error":
            self.summary.value += failure_html(result.failure, "verify could not run")
            self.table.value = self.chart.value = ""
            return
        self.table.value = frame_html(result.to_frame())
        from workbench.render.bench_charts import verify_chart

        self.chart.value = figure_svg(verify_chart(result))
