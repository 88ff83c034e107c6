"""The Benchmark tab: onnxruntime against eager PyTorch latency (``session.benchmark()``) and
latency against the size of a dynamic dim (``session.benchmark_sweep()``), onnxruntime's
per-node profile by op type and module (``session.profile()``) and variants of the model and
its runtime settings timed in the same rounds (``session.compare()``), with their tables and
the charts of :mod:`workbench.render.bench_charts`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ._html import badge, failure_html, figure_svg, frame_html, note, pre

__all__ = ["BenchmarkView"]


class BenchmarkView:
    title = "Benchmark"

    def __init__(self, on_run: Callable[[str], None]) -> None:
        self.button = widgets.Button(description="Run benchmark", icon="tachometer-alt")
        self.sweep_button = widgets.Button(description="Latency vs size", icon="chart-line")
        self.profile_button = widgets.Button(description="Profile", icon="list")
        self.profile_button.add_class("wb-run-profile")
        self.profile_button.on_click(lambda _: on_run("profile"))
        self.compare_button = widgets.Button(description="Compare variants", icon="balance-scale",
                                             tooltip="the unoptimized model, onnxruntime's optimization "
                                                     "levels and thread counts, in the same interleaved rounds")
        self.compare_button.add_class("wb-run-compare")
        self.compare_button.on_click(lambda _: on_run("compare"))
        self.button.add_class("wb-run-benchmark")
        self.sweep_button.add_class("wb-run-sweep")
        self.button.on_click(lambda _: on_run("benchmark"))
        self.sweep_button.on_click(lambda _: on_run("benchmark_sweep"))
        self.status = widgets.HTML(note("not run"))
        self.status.add_class("wb-benchmark-status")
        self.summary = widgets.HTML()
        self.chart = widgets.HTML()
        self.sweep = widgets.HTML()
        self.profile = widgets.HTML()
        self.compare = widgets.HTML()
        self.widget = widgets.VBox([
            widgets.HBox([self.button, self.sweep_button, self.profile_button, self.compare_button, self.status]),
            self.summary, self.chart, self.sweep, self.compare, self.profile,
        ])

    def show(self, result: Any, current: bool = True) -> None:
        stale = "" if current else " " + note("(for an earlier dim spec)")
        self.status.value = badge(result.status) + stale
        self.summary.value = pre(result.summary()) + (failure_html(result.failure) if result.failure else "")
        if result.ok:
            from workbench.render.bench_charts import latency_histogram

            self.chart.value = figure_svg(latency_histogram(result))
        else:
            self.chart.value = ""

    def show_sweep(self, result: Any, current: bool = True) -> None:
        stale = "" if current else " " + note("(for an earlier dim spec)")
        parts = [f"<b>latency vs {result.dim}</b> {badge(result.status)}{stale}", pre(result.summary())]
        if result.status == "ok":
            from workbench.render.bench_charts import latency_vs_size

            parts.append(frame_html(result.to_frame()))
            parts.append(figure_svg(latency_vs_size(result)))
        self.sweep.value = "".join(parts)

    def show_profile(self, result: Any, current: bool = True) -> None:
        stale = "" if current else " " + note("(for an earlier dim spec)")
        if result.error or result.cancelled:
            status = "cancelled" if result.cancelled else "failed"
            self.profile.value = (f"<b>profile</b> {badge(status)}{stale}"
                                  + (failure_html(result.failure) if result.failure else pre(result.error or "")))
            return
        from workbench.render.bench_charts import profile_bars

        self.profile.value = "".join([
            f"<b>profile</b> {badge('ok')}{stale}", pre(result.summary()),
            figure_svg(profile_bars(result, by="op_type")), frame_html(result.to_frame("module")),
        ])

    def show_compare(self, result: Any, current: bool = True) -> None:
        stale = "" if current else " " + note("(for an earlier dim spec)")
        head = f"<b>variants</b> {badge(result.status)}{stale}"
        body = result._repr_html_() if result.status == "ok" else pre(result.summary())
        self.compare.value = head + body
