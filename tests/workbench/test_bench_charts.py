"""Charts of verification and benchmark results: each is a new matplotlib Figure built without
pyplot (nothing shown, no global figure left open), and a failed result gives a figure that
says so instead of raising."""

from __future__ import annotations

import dataclasses
import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pytest
import torch
from matplotlib.figure import Figure

from exporter import AUTO, Dim, ExportOptions, Session
from exporter.bench import BenchmarkResult, EngineTiming, LatencyStats, Noise, ProfileResult, SweepResult
from workbench.render import bench_charts


class Double(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.fc(x) * 2


class BranchOnThree(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            return x * 2
        return x + 1


@pytest.fixture(scope="module")
def session():
    s = Session(Double().eval(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    s.run()
    return s


def timing(engine, scale):
    return EngineTiming(engine, LatencyStats.from_samples([scale * (1 + 0.01 * (i % 7)) for i in range(200)]))


def renders(figure):
    assert isinstance(figure, Figure)
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")
    assert plt.get_fignums() == []  # built without pyplot: nothing left open or shown
    return figure


def test_latency_histogram_marks_each_engine_at_the_statistic_the_headline_divides(session):
    result = session.benchmark(budget=0.02, min_runs=10, threads=1)
    figure = renders(bench_charts.latency_histogram(result))
    (ax,) = figure.axes
    labels = [text.get_text() for text in ax.get_legend().get_texts()]
    assert labels[0].startswith("onnxruntime (p10") and labels[1].startswith("eager (p10")
    marked = [line.get_xdata()[0] for line in ax.lines]  # the two p10 markers, in ms
    assert marked == pytest.approx([result.ort.low * 1e3, result.eager.low * 1e3])
    assert ax.get_xlabel() == "latency per call (ms)"


def test_latency_vs_size_draws_a_line_per_engine_over_the_swept_sizes():
    sizes = (1, 4, 16)
    points = tuple(BenchmarkResult(timing("onnxruntime", 1e-4 * n), timing("eager", 3e-4 * n), None) for n in sizes)
    figure = renders(bench_charts.latency_vs_size(SweepResult("batch", sizes, points)))
    ax, ratio_ax = figure.axes
    assert [line.get_label() for line in ax.lines] == ["onnxruntime p50", "eager PyTorch p50"]
    assert list(ax.lines[0].get_xdata()) == [1, 4, 16]
    assert ax.lines[1].get_ydata()[2] == pytest.approx(3e-4 * 16 * 1e3 * 1.03, rel=0.05)
    assert ax.get_xlabel() == "batch" and ax.get_xscale() == "log"
    assert ratio_ax.get_ylabel() == "eager time / onnxruntime time"
    eager_only = SweepResult("batch", sizes, tuple(BenchmarkResult(timing("onnxruntime", 1e-4), None, None) for _ in sizes))
    assert len(renders(bench_charts.latency_vs_size(eager_only)).axes) == 1  # no ratio without eager


def test_latency_vs_size_shows_each_sizes_ratio_interval_and_a_busy_note():
    sizes = (1, 8)
    intervals = ((2.0, 3.0), (0.4, 9.8))
    busy = Noise.assess(20, 3.0, intervals[1], [0.4, 3.0, 9.8], (("eager", 1.1),), None)
    points = tuple(BenchmarkResult(timing("onnxruntime", 1e-4), timing("eager", 2.5e-4), None, speedup_rounds=(2.5,),
                                   speedup_ci=interval, noise=busy if interval == intervals[1] else None)
                   for interval in intervals)
    figure = renders(bench_charts.latency_vs_size(SweepResult("batch", sizes, points)))
    ax, ratio_ax = figure.axes
    (band,) = ratio_ax.collections[:1]
    corners = {(round(x), round(y, 3)) for x, y in band.get_paths()[0].vertices}
    assert {(1, 2.0), (1, 3.0), (8, 0.4), (8, 9.8)} <= corners  # each size's interval, not a point
    assert figure.get_suptitle() == "machine busy: rerun when idle" and not ax.texts  # above the chart, not under a legend
    # plain tick labels: the swept sizes on x, numbers (not 2^3 or 3 × 10^-2) on y, × on the speedup
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "8"]
    assert all("^" not in t.get_text() and "×10" not in t.get_text() for t in ax.get_yticklabels())
    assert all(t.get_text().endswith("×") for t in ratio_ax.get_yticklabels() if t.get_text())
    histogram = renders(bench_charts.latency_histogram(points[1]))
    assert "(95% 0.40–9.80×)" in histogram.axes[0].get_title()
    assert histogram.get_suptitle() == "machine busy: rerun when idle"


def test_profile_bars_have_one_bar_per_op_type(session):
    profile = session.profile(runs=3, threads=1, optimization_level="disable")
    figure = renders(bench_charts.profile_bars(profile, by="op_type"))
    (ax,) = figure.axes
    assert len(ax.patches) == len(profile.by_op_type())
    assert renders(bench_charts.profile_bars(profile, by="module")).axes[0].get_title().startswith("onnxruntime time by module")


def test_verify_chart_colours_failing_cases_red():
    # runtime_asserts captures as torch.onnx.export does: the branch taken at 3 is baked into a
    # graph whose batch stays dynamic, so every other size is wrong (plain AUTO now stays static).
    result = Session(BranchOnThree(), (torch.randn(3, 4),), {},
                     ExportOptions(dynamic_shapes={"x": {0: AUTO}}, runtime_asserts=True)).verify()
    figure = renders(bench_charts.verify_chart(result))
    (ax,) = figure.axes
    colours = [matplotlib.colors.to_hex(p.get_facecolor()) for p in ax.patches]
    assert colours[0] == bench_charts.PASS_COLOR and set(colours[1:]) == {bench_charts.FAIL_COLOR}
    assert ax.get_title(loc="right") == "verification: failed"
    (ticks,) = [line for line in ax.lines if line.get_label() == "allowed difference (tolerance)"]
    assert len(ticks.get_xdata()) == len(result.cases)  # one tolerance mark per compared case


def test_the_verify_charts_title_stays_inside_the_figure_beside_long_case_labels():
    # four named dims (a diffusers UNet's batch, height, width, text_seq) make the labels take
    # most of the pane: a title centred over the narrow bars ran past the figure's right edge
    result = Session(Scale(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}})).verify()
    sizes = (("batch", 2), ("height", 16), ("width", 16), ("text_seq", 8))
    result = dataclasses.replace(result, cases=tuple(dataclasses.replace(c, name=f"height={18 + i} guards hold", sizes=sizes)
                                                     for i, c in enumerate(result.cases)))
    figure = renders(bench_charts.verify_chart(result))
    (ax,) = figure.axes
    title = next(t for t in (ax.title, ax._left_title, ax._right_title) if t.get_text())
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    box = title.get_window_extent(FigureCanvasAgg(figure).get_renderer())
    assert 0 <= box.x0 and box.x1 <= figure.bbox.width, (box, figure.bbox.width)


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2  # exact in both engines: every difference is 0


def test_an_exact_zero_difference_is_labelled_0_at_the_floor_not_drawn_as_a_bar():
    result = Session(Scale(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}})).verify()
    assert result.ok and any(c.max_abs == 0.0 for c in result.cases)
    figure = renders(bench_charts.verify_chart(result))
    (ax,) = figure.axes
    zeros = [i for i, c in enumerate(result.cases) if c.max_abs == 0.0]
    nonzero = [c.max_abs for c in result.cases if c.max_abs]
    labels = [t for t in ax.texts if t.get_text() == "0"]
    assert len(labels) == len(zeros)
    assert all(ax.patches[i].get_width() == 0 for i in zeros)
    if nonzero:  # the axis starts a decade under the smallest real difference, not at 1e-12
        assert ax.get_xlim()[0] == pytest.approx(min(nonzero) / 10)


def test_failed_results_render_a_message_instead_of_raising():
    failed = BenchmarkResult(EngineTiming("onnxruntime", error="boom"), None, None, error="boom")
    for figure in (
        bench_charts.latency_histogram(failed),
        bench_charts.latency_vs_size(SweepResult("batch", (1,), (), error="no dim")),
        bench_charts.profile_bars(ProfileResult(0, (), error="no model")),
    ):
        renders(figure)
        assert figure.axes[0].texts and not figure.axes[0].axison


def test_verify_chart_labels_edge_value_cases_by_input_and_kind_one_row_per_case_at_the_panes_width():
    from exporter.examples import demo_block

    model, args, kwargs, shapes = demo_block()
    result = Session(model, args, kwargs, ExportOptions(dynamic_shapes=shapes)).verify()
    figure = renders(bench_charts.verify_chart(result))
    labels = [t.get_text() for t in figure.axes[0].get_yticklabels()]
    edges = [c for c in result.cases if c.edge is not None]
    assert edges and all(f"{c.edge.input} {c.edge.kind.replace('_', ' ')}" in labels for c in edges)
    assert labels[0].startswith(result.cases[0].name) and figure.axes[0].get_yticks()[0] == len(labels) - 1  # on top
    # the figure keeps the pane's width (its fonts are not shrunk) and grows a row per case
    assert figure.get_figwidth() == bench_charts.PANE_WIDTH and figure.get_figheight() >= 0.32 * len(result.cases)


def test_the_profile_headline_and_section_give_the_kernel_time_of_one_run_not_the_total_of_all_runs():
    from exporter.bench.profiling import NodeTime
    from exporter.display import render
    from workbench.views.benchmark import profile_headline

    nodes = (NodeTime("mm", "MatMul", "MatMul", "fc", "linear", 20, 100_000.0),
             NodeTime("add", "Add", "Add", "fc", "add", 20, 45_000.0))
    result = ProfileResult(20, nodes)
    assert profile_headline(result).startswith("onnxruntime kernel time 7250 µs per run over 20 run(s)")
    assert render(result).verdict.text.startswith("7250 µs of kernels per run")
    by_op = result.to_frame("op_type")
    assert by_op["us_per_run"].sum() == pytest.approx(result.us_per_run)  # the bars add up to the headline
