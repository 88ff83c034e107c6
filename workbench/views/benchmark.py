"""The Benchmark tab: onnxruntime against eager PyTorch latency (``session.benchmark()``),
latency against the size of a dynamic dim (``session.benchmark_sweep()``), onnxruntime's
per-node profile (``session.profile()``) and variants timed in the same rounds
(``session.compare()``). Each shows its verdict line first, its chart, and the core's section
(:mod:`exporter.display`) folded below."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from exporter.bench import BenchmarkResult, Comparison, ProfileResult, SweepResult
from exporter.display import Pre, Table, number, render
from exporter.verdict import ExportVerdict, qualified_status
from workbench.render.bench_charts import latency_histogram, latency_vs_size, profile_bars

from .blocks import failure_html, figure_html, folded, pane, verdict

__all__ = ["BenchmarkView", "profile_headline", "swept_dims"]


def profile_headline(result: ProfileResult) -> str:
    """``onnxruntime kernel time 412 µs per run over 3 runs; most in MatMul (61%)``."""
    frame = result.by_op_type()
    head = f"onnxruntime kernel time {number(result.us_per_run)} µs per run over {result.runs} run(s)"
    if frame.empty:
        return head
    top = frame.iloc[0]
    return f"{head}; most in {top['op_type']} ({top['share']:.0%})"

_STALE = " (for an earlier dim spec)"


def swept_dims(session: Any) -> tuple[str, ...]:
    """The dims "Latency vs size" can move in ``session``'s export: its dynamic dim groups
    (static ones, specialized ones and those sized from others left out); none before a capture."""
    capture = next((r for r in session.stages if r.name == "capture"), None)
    if capture is None or not capture.ok:
        return ()
    from exporter.cases import dim_groups  # imports torch: the export has, already

    try:
        return tuple(g.label for g in dim_groups(session) if not g.specialized and g.derived is None)
    except Exception:  # noqa: BLE001 - no choice offered is better than a broken tab
        return ()


def _button(description: str, icon: str, css: str, **kwargs: Any) -> widgets.Button:
    button = widgets.Button(description=description, icon=icon, layout=widgets.Layout(width="auto"), **kwargs)
    button.add_class(css)
    return button


def timing_line(status: Any, text: str, verified: ExportVerdict | None) -> str:
    """A timing's status line: its own badge (a green ``ok``) only for a model verified as
    passed (or when the verdict is not known); else the verdict's badge (``not verified``,
    ``verify failed``) and a clause saying what the timing is of."""
    if str(status) != "ok" or verified is None or verified.passed:
        return verdict(status, text)
    if verified.word == "failed":
        said = "; the model timed fails verify: these are the timings of wrong numbers"
    else:
        said = f"; the model timed is {verified.word}: the timings say nothing of its numbers"
    return verdict(qualified_status(status, verified), text + said, tone=verified.tone)


class BenchmarkView:
    title = "Benchmark"
    analyses = ("benchmark", "benchmark_sweep", "profile", "compare")
    takes_verdict = True  # the Workbench gives show() the verdict of the export timed

    def __init__(self, on_run: Callable[..., None]) -> None:
        self.button = _button("Run benchmark", "tachometer-alt", "wb-run-benchmark")
        self.sweep_button = _button("Latency vs size", "chart-line", "wb-run-sweep")
        # Which dynamic dim "Latency vs size" moves (filled from the export shown: show_dims).
        self.sweep_dim = widgets.Dropdown(options=[], description="of", layout=widgets.Layout(width="auto"),
                                          style={"description_width": "initial"})
        self.sweep_dim.add_class("wb-sweep-dim")
        self.profile_button = _button("Profile", "list", "wb-run-profile")
        self.compare_button = _button("Compare variants", "balance-scale", "wb-run-compare",
                                      tooltip="the unoptimized model, onnxruntime's optimization levels and "
                                              "thread counts, in the same interleaved rounds")
        for button, name in ((self.button, "benchmark"), (self.profile_button, "profile"),
                             (self.compare_button, "compare")):
            button.on_click(lambda _, name=name: on_run(name))
        self.sweep_button.on_click(lambda _: on_run("benchmark_sweep", **(
            {"dim": self.sweep_dim.value} if self.sweep_dim.value else {})))
        self.status = widgets.HTML(verdict("not run"))
        self.status.add_class("wb-benchmark-status")
        self.summary = widgets.HTML()
        self.chart = widgets.HTML()
        self.sweep = widgets.HTML()
        self.profile = widgets.HTML()
        self.compare = widgets.HTML()
        sweep = widgets.HBox([self.sweep_button, self.sweep_dim])
        buttons = widgets.HBox([self.button, sweep, self.profile_button, self.compare_button],
                               layout=widgets.Layout(flex_flow="row wrap"))
        self.widget = widgets.VBox([self.status, buttons, self.summary, self.chart, self.sweep, self.compare,
                                    self.profile])

    def show_dims(self, labels: tuple[str, ...]) -> None:
        """The dynamic dims of the export shown, for "Latency vs size" to move (the one chosen
        stays chosen while it exists); with none, the button says why it cannot run."""
        chosen = self.sweep_dim.value
        self.sweep_dim.options = labels
        if labels:
            self.sweep_dim.value = chosen if chosen in labels else labels[0]
        self.sweep_dim.layout.display = None if len(labels) > 1 else "none"
        self.sweep_button.disabled = not labels
        self.sweep_button.tooltip = "" if labels else "every input dim is static: there is no size to move"

    def not_run(self) -> None:
        self.status.value = verdict("not run")
        for part in (self.summary, self.chart, self.sweep, self.profile, self.compare):
            part.value = ""

    def show(self, name: str, result: Any, current: bool = True, verdict: ExportVerdict | None = None) -> None:
        """Draw the result of ``name``, one of :attr:`analyses`; ``current`` False: of an earlier
        spec; ``verdict``: of the export timed (its status line is green only when it passed)."""
        draws: dict[str, Callable[[Any, bool, ExportVerdict | None], None]] = {
            "benchmark": self.show_benchmark, "benchmark_sweep": self.show_sweep,
            "profile": self.show_profile, "compare": self.show_compare}
        draws[name](result, current, verdict)

    def show_benchmark(self, result: BenchmarkResult, current: bool = True,
                       verified: ExportVerdict | None = None) -> None:
        stale = "" if current else _STALE
        self.status.value = timing_line(result.status, result.headline + stale, verified)
        if result.error and not result.cancelled:
            self.summary.value = failure_html(result.failure or result.error)
            self.chart.value = ""
            return
        self.summary.value = pane(folded("details: percentiles, setup, interval", render(result)))
        if result.ok:
            self.chart.value = figure_html(latency_histogram(result))
        else:
            self.chart.value = ""

    def show_sweep(self, result: SweepResult, current: bool = True, verified: ExportVerdict | None = None) -> None:
        stale = "" if current else _STALE
        # A run of its own: its speedups need not match the benchmark's above.
        said = f": {result.headline}" if result.status == "ok" and result.headline else ""
        head = timing_line(result.status,
                           f"latency vs {result.dim}, {len(result.points)} size(s), a separate run{said}{stale}", verified)
        if result.status != "ok":
            self.sweep.value = pane(head, render(result))
            return
        self.sweep.value = pane(head, figure_html(latency_vs_size(result)),
                                folded("details: one row per size", render(result)))

    def show_profile(self, result: ProfileResult, current: bool = True, verified: ExportVerdict | None = None) -> None:
        stale = "" if current else _STALE
        if result.error or result.cancelled:
            status = "cancelled" if result.cancelled else "failed"
            self.profile.value = pane(verdict(status, f"profile{stale}"),
                                      failure_html(result.failure or result.error) if result.error else "")
            return
        lines = result.summary().splitlines() or [""]
        self.profile.value = pane(
            timing_line("ok", profile_headline(result) + stale, verified),
            figure_html(profile_bars(result, by="op_type")),
            folded("details: time by module", Pre("\n".join(lines[1:])) if len(lines) > 1 else None,
                   Table.from_frame(result.to_frame("module"))),
        )

    def show_compare(self, result: Comparison, current: bool = True, verified: ExportVerdict | None = None) -> None:
        # The core's section starts with its own verdict line (which variant is fastest).
        stale = "" if current else verdict("earlier", _STALE.strip(" ()"), tone="muted")
        caveat = "" if verified is None or verified.passed else timing_line("ok", "variants compared", verified)
        self.compare.value = pane(stale, caveat, render(result))
