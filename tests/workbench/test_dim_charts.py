"""Dim charts: the plotted data (bar extents, open-ended maxima, static points, example marks,
highlighted mismatches, guard counts and their source lines), rendered headlessly (Agg),
readable with 20+ axes, built without pyplot."""

from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import numpy as np
import pytest
import torch
from matplotlib.figure import Figure

from exporter import AUTO, STATIC, Dim, ExportOptions, Session
from exporter.guards import Guard, Guards
from exporter.shapes import DimOutcome
from exporter.recording import AxisRange, RangeReport
from workbench.render.dim_charts import MISMATCH_COLOR, dim_ranges_chart, guards_chart, recorded_ranges_chart

RED = matplotlib.colors.to_rgba(MISMATCH_COLOR)


def outcome(path, axis, example, policy, obtained, lo=None, hi=None, differs=False, dim=None):
    return DimOutcome(path, axis, example, policy, obtained, lo, hi, dim=dim, differs=differs,
                      symbol="s1" if obtained == "dynamic" else None)


ROWS = [
    outcome("x", 0, 5, Dim("dx", min=3, max=6), "dynamic", 3, 6, dim="dx"),
    outcome("x", 1, 4, AUTO, "static", 4, 4, differs=True),
    outcome("y", 0, 5, AUTO, "dynamic", 3, None, differs=True, dim="dx"),
    outcome("y", 1, 4, STATIC, "static", 4, 4),
]


def rendered(figure: Figure) -> Figure:
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")
    return figure


def bars_by_gid(ax):
    return {p.get_gid(): p for p in ax.patches if p.get_gid()}


def test_dim_ranges_chart_draws_bars_from_min_to_max_and_points_for_static_dims():
    figure = rendered(dim_ranges_chart(ROWS))
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x.0", "x.1", "y.0", "y.1"]
    bars = bars_by_gid(ax)
    assert set(bars) == {"x.0", "y.0"}
    assert (bars["x.0"].get_x(), bars["x.0"].get_width(), bars["x.0"].get_y() + bars["x.0"].get_height() / 2) == (3, 3, 3)
    static = next(c for c in ax.collections if c.get_gid() == "static")
    assert static.get_offsets().tolist() == [[4, 2], [4, 0]]  # x.1 (row 2 from the bottom), y.1
    examples = next(c for c in ax.collections if c.get_gid() == "examples")
    assert examples.get_offsets()[:, 0].tolist() == [5, 4, 5, 4]


def test_open_ended_max_runs_to_the_right_edge_with_an_arrow():
    figure = dim_ranges_chart(ROWS)
    (ax,) = figure.axes
    bar = bars_by_gid(ax)["y.0"]
    right = bar.get_x() + bar.get_width()
    assert bar.get_x() == 3 and bar.get_hatch() == "//"
    assert right > 6 and right <= ax.get_xlim()[1]
    (arrow,) = [line for line in ax.lines if line.get_gid() == "open:y.0"]
    assert arrow.get_marker() == ">" and arrow.get_xdata()[0] == right
    assert bars_by_gid(ax)["x.0"].get_hatch() is None


def test_requested_vs_obtained_mismatches_are_red():
    (ax,) = dim_ranges_chart(ROWS).axes
    colors = {t.get_text(): matplotlib.colors.to_rgba(t.get_color()) for t in ax.get_yticklabels()}
    assert colors["x.1"] == colors["y.0"] == RED
    assert colors["x.0"] != RED and colors["y.1"] != RED
    assert bars_by_gid(ax)["y.0"].get_edgecolor() == RED
    static = next(c for c in ax.collections if c.get_gid() == "static")
    assert [tuple(c) == RED for c in static.get_facecolors()] == [True, False]


def test_dim_ranges_chart_stays_readable_with_24_axes():
    rows = [outcome(f"input_{i // 4}", i % 4, 8, AUTO, "dynamic", 0, None if i % 3 else 4096) for i in range(24)]
    figure = rendered(dim_ranges_chart(rows))
    (ax,) = figure.axes
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert len(labels) == 24 and labels[0] == "input_0.0" and labels[-1] == "input_5.3"
    assert figure.get_figheight() >= 0.25 * 24
    assert ax.get_xscale() == "symlog"  # 4096 and 8 on one axis
    assert len(bars_by_gid(ax)) == 24


def test_guards_chart_counts_guards_per_axis_by_kind_and_lists_their_lines():
    guards = Guards((
        Guard("guard", "x.shape[0] > 2", "s1 > 2", (("x", 0),), file="/m/model.py", line=9, code="if x.shape[0] > 2:"),
        Guard("equality", "x.shape[0] == y.shape[0]", "s1 == s2", (("x", 0), ("y", 0)), file="/m/model.py", line=11,
              code="return x + y"),
        Guard("specialization", "x.shape[1] == 4", "s3 == 4", (("x", 1),), value=4, file="/m/model.py", line=12,
              code="if x.shape[1] == 4:"),
    ), "nonstrict")
    figure = rendered(guards_chart(guards, ROWS))
    ax, text_ax = figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x.0", "x.1", "y.0", "y.1"]
    bars = bars_by_gid(ax)
    assert bars["x.0:guard"].get_width() == 1 and bars["x.0:equality"].get_width() == 1
    assert bars["x.0:equality"].get_x() == 0 and bars["x.0:guard"].get_x() == 1  # stacked
    assert bars["y.0:equality"].get_width() == 1 and bars["y.0:guard"].get_width() == 0
    assert bars["x.1:specialization"].get_width() == 1
    texts = {t.get_gid(): t.get_text() for t in text_ax.texts}
    assert texts["sources:x.0"] == "model.py:9  if x.shape[0] > 2: | model.py:11  return x + y"
    assert texts["sources:y.1"] == "—"


def test_charts_from_a_real_session_use_pyplot_nowhere():
    class Branch(torch.nn.Module):
        def forward(self, x, y):
            if x.shape[0] > 2:
                x = x * 2
            return x + y

    session = Session(Branch(), (torch.randn(4, 3), torch.randn(4, 3)),
                      options=ExportOptions(strategy="nonstrict", dynamic_shapes={"x": {0: AUTO}, "y": {0: AUTO}}))
    before = plt.get_fignums()
    ranges, guards = rendered(dim_ranges_chart(session.dims)), rendered(guards_chart(session.guards))
    assert plt.get_fignums() == before
    bars = bars_by_gid(ranges.axes[0])
    assert (bars["x.0"].get_x(), bars["y.0"].get_x()) == (3, 3)
    texts = {t.get_gid(): t.get_text() for t in guards.axes[1].texts}
    assert "if x.shape[0] > 2:" in texts["sources:x.0"] and "return x + y" in texts["sources:y.0"]


@pytest.mark.parametrize("empty", [[], Guards()])
def test_nothing_to_plot_gives_a_figure_that_says_so(empty):
    figure = guards_chart(empty) if isinstance(empty, Guards) else dim_ranges_chart(empty)
    assert isinstance(figure, Figure)
    assert any("no " in t.get_text() for t in figure.axes[0].texts)
    assert np.isfinite(figure.get_figwidth())


def test_a_chart_as_a_cells_value_shows_as_svg_without_a_pyplot_backend():
    from IPython.core.formatters import DisplayFormatter

    figure = dim_ranges_chart(ROWS)
    data, _ = DisplayFormatter().format(figure)
    assert data["image/svg+xml"].lstrip().startswith("<?xml") and "<svg" in data["image/svg+xml"]


RECORDED = RangeReport("decode", (
    AxisRange("x", 0, (1, 6), "batch", "dynamic", 2, None, outside=(0,), outside_sizes=(1,), sizes=(1, 3, 6)),
    AxisRange("x", 1, (16, 16), "STATIC", "static", 16, 16, sizes=(16, 16, 16)),
    AxisRange("y", 0, (4, 9), "seq", "dynamic", 2, 8, outside=(2,), outside_sizes=(9,), sizes=(4, 5, 9)),
    AxisRange("z", 0, (3, 3), "STATIC", "failed", None, None, sizes=(3, 3, 3)),
))


def test_recorded_ranges_chart_puts_the_observed_range_over_the_exported_one():
    figure = rendered(recorded_ranges_chart(RECORDED))
    (ax,) = figure.axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["x.0", "x.1", "y.0", "z.0"]
    bars = bars_by_gid(ax)
    assert (bars["observed:x.0"].get_x(), bars["observed:x.0"].get_width()) == (1, 5)
    assert (bars["exported:y.0"].get_x(), bars["exported:y.0"].get_width()) == (2, 6)
    assert bars["exported:y.0"].get_hatch() is None
    open_bar = bars["exported:x.0"]  # [2, inf]: to the right edge, hatched, an arrow
    assert open_bar.get_x() == 2 and open_bar.get_hatch() == "//"
    assert [line.get_gid() for line in ax.lines] == ["open:x.0"]
    assert bars["observed:x.1"].get_width() > 0  # one size still shows
    assert "exported:z.0" not in bars
    collections = {c.get_gid(): c for c in ax.collections}
    assert collections["exported:x.1"].get_offsets().tolist() == [[16, 2]]
    assert collections["calls:x.0"].get_offsets()[:, 0].tolist() == [1, 3, 6]
    assert collections["outside:x.0"].get_offsets().tolist() == [[1, 3]]
    assert collections["outside:y.0"].get_offsets().tolist() == [[9, 1]]
    texts = {t.get_gid(): t.get_text() for t in ax.texts}
    assert texts["range:x.0"] == "observed [1, 6] · export [2, inf]"
    assert texts["range:x.1"] == "observed 16 · export [16, 16]"
    assert texts["failed:z.0"].strip() == "export failed"


def test_recorded_axes_with_calls_outside_are_red():
    (ax,) = recorded_ranges_chart(RECORDED).axes
    colors = {t.get_text(): matplotlib.colors.to_rgba(t.get_color()) for t in ax.get_yticklabels()}
    assert colors["x.0"] == colors["y.0"] == RED
    assert colors["x.1"] != RED and colors["z.0"] != RED
    assert tuple(next(c for c in ax.collections if c.get_gid() == "outside:x.0").get_facecolors()[0]) == RED


def test_recorded_outside_lines_name_the_call_the_size_and_the_range():
    assert RECORDED.outside_lines == ("call 0: x.0 = 1, outside [2, inf]", "call 2: y.0 = 9, outside [2, 8]")
    assert RECORDED.outside_calls == (0, 2)


def test_recorded_cache_leaves_that_saw_the_same_sizes_share_one_chart_row():
    def cache(axis, observed, exported, low, high, sizes):
        return tuple(AxisRange(f"cache.{layer}.{kind}", axis, observed, "past", exported, low, high, sizes=sizes)
                     for layer in (0, 1) for kind in ("key", "value"))

    report = RangeReport("decode", (
        AxisRange("input_ids", 0, (2, 3), "batch", "dynamic", 0, None, sizes=(2, 3)),
        *cache(2, (3, 7), "dynamic", 0, None, (3, 7)),
        *cache(3, (16, 16), "static", 16, 16, (16, 16)),
    ))
    (ax,) = recorded_ranges_chart(report).axes
    assert [t.get_text() for t in ax.get_yticklabels()] == ["input_ids.0", "cache.*.key/value.2", "cache.*.key/value.3"]
    assert "observed:cache.*.key/value.2" in bars_by_gid(ax)
