"""Charts of verification and benchmark results, as matplotlib Figures.

Every function takes a result object from :mod:`exporter.verify` / :mod:`exporter.bench` and
returns a new :class:`matplotlib.figure.Figure` built without pyplot: no global figure
state, nothing shown, nothing left open. Display it (a notebook shows a Figure), save it with
``fig.savefig(...)``, or embed it in a widget. Failed results give a figure saying so.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from exporter.bench import BenchmarkResult, ProfileResult, SweepResult
from exporter.bench.latency import EngineTiming
from exporter.verify import VerifyResult

from ._figure import PANE_WIDTH, message_figure, new_figure

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = ["latency_histogram", "latency_vs_size", "profile_bars", "verify_chart"]

ORT_COLOR = "#1f77b4"
EAGER_COLOR = "#ff7f0e"
PASS_COLOR = "#2ca02c"
FAIL_COLOR = "#d62728"
RATIO_COLOR = "#2f4f4f"


BUSY_NOTE = "machine busy: rerun when idle"


def _busy_note(ax: Any, warning: str | None) -> None:
    """A red note above the chart (the figure's top line, never under a legend) when the
    result says the machine was busy."""
    if warning:
        ax.figure.suptitle(BUSY_NOTE, x=0.01, ha="left", color=FAIL_COLOR, fontsize="small", gid="busy-note")


def _plain(value: float, _position: Any = None) -> str:
    """A tick as a plain number: ``1``, ``16``, ``0.03``, ``6`` (not ``2^4`` or ``3 × 10^-2``)."""
    return f"{value:g}"


def _times(value: float, _position: Any = None) -> str:
    return f"{value:g}×"


def _plain_log_axis(axis: Any, formatter: Any = _plain, ticks: Any = None) -> None:
    """Log-scale ticks at 1, 2, 5 per decade (or at ``ticks``), labelled as plain numbers."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter

    axis.set_major_locator(FixedLocator(list(ticks)) if ticks is not None else LogLocator(subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(formatter))
    axis.set_minor_formatter(NullFormatter())


def latency_histogram(result: BenchmarkResult, *, bins: int = 40) -> Figure:
    """Per-call latency distributions of onnxruntime and eager PyTorch (ms), each engine's
    headline statistic marked (its per-round p10, median over rounds: what the speedup divides).
    The x axis stops at the larger p99 so a few outliers do not squash the histogram."""
    timings = [(t, t.stats) for t in (result.ort, result.eager) if t is not None and t.stats is not None]
    if not timings:
        return message_figure(f"no latency to plot: {result.error or result.ort.error}")
    figure = new_figure()
    ax = figure.add_subplot()
    upper = max(stats.p99 for _, stats in timings) * 1e3
    for timing, stats in timings:
        color = ORT_COLOR if timing.engine == "onnxruntime" else EAGER_COLOR
        samples = [s * 1e3 for s in stats.samples if s * 1e3 <= upper]
        marked = timing.low if timing.low is not None else stats.p50
        ax.hist(samples, bins=bins, range=(0, upper), alpha=0.6, color=color,
                label=f"{timing.engine} (p10 {marked * 1e3:.3g} ms, n={stats.runs})")
        ax.axvline(marked * 1e3, color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("latency per call (ms)")
    ax.set_ylabel("calls")
    title = "latency distribution"
    if result.speedup is not None:
        title += f": onnxruntime {result.speedup:.2f}× eager"
        interval = result.speedup_ci
        if interval is not None:
            title += f" (95% {interval[0]:.2f}–{interval[1]:.2f}×)"
    ax.set_title(title, fontsize="medium")
    ax.legend(loc="upper right", fontsize="small")
    _busy_note(ax, result.warning)
    return figure


def _timing(point: BenchmarkResult, engine: str) -> EngineTiming | None:
    return point.ort if engine == "ort" else point.eager


def latency_vs_size(sweep: SweepResult, *, log: bool = True) -> Figure:
    """Top: p50 latency (p90 as a band top) against the swept dim, onnxruntime and eager.
    Bottom (when eager was timed): onnxruntime's speedup over eager per size, its median over
    rounds with the 95% interval as a band and error bars. A red note when any size was
    measured on a busy machine (``sweep.warning``)."""
    if sweep.error:
        return message_figure(f"sweep could not run: {sweep.error}")
    ratios = [(size, point.speedup, point.speedup_ci)
              for size, point in zip(sweep.sizes, sweep.points) if point.speedup is not None]
    figure = new_figure(PANE_WIDTH, 5.4 if ratios else 3.6)
    ax = figure.add_subplot(2, 1, 1) if ratios else figure.add_subplot()
    for engine, color in (("ort", ORT_COLOR), ("eager", EAGER_COLOR)):
        timings = [(size, _timing(point, engine)) for size, point in zip(sweep.sizes, sweep.points)]
        points = [(size, timing.stats) for size, timing in timings if timing is not None and timing.stats is not None]
        if not points:
            continue
        sizes = [size for size, _ in points]
        p50 = [stats.p50 * 1e3 for _, stats in points]
        p90 = [stats.p90 * 1e3 for _, stats in points]
        label = "onnxruntime" if engine == "ort" else "eager PyTorch"
        ax.plot(sizes, p50, marker="o", color=color, label=f"{label} p50")
        ax.fill_between(sizes, p50, p90, color=color, alpha=0.15, label=f"{label} p50–p90")
    if log:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        _plain_log_axis(ax.xaxis, ticks=sweep.sizes)
        _plain_log_axis(ax.yaxis)
    ax.set_xlabel(sweep.dim)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"latency vs {sweep.dim}")
    ax.legend(fontsize="small")
    _busy_note(ax, sweep.warning)
    if ratios:
        _speedup_axes(figure.add_subplot(2, 1, 2, sharex=ax), sweep.dim, ratios, log)
    return figure


def _speedup_axes(ax: Any, dim: str, ratios: list[tuple[int, float, tuple[float, float] | None]], log: bool) -> None:
    sizes = [size for size, _, _ in ratios]
    middle = [ratio for _, ratio, _ in ratios]
    low = [interval[0] if interval else ratio for _, ratio, interval in ratios]
    high = [interval[1] if interval else ratio for _, ratio, interval in ratios]
    ax.fill_between(sizes, low, high, color=RATIO_COLOR, alpha=0.15, label="95% interval over rounds")
    ax.errorbar(sizes, middle, yerr=[[m - lo for m, lo in zip(middle, low)], [hi - m for m, hi in zip(middle, high)]],
                fmt="o-", color=RATIO_COLOR, capsize=3, label="speedup (eager p10 / onnxruntime p10)")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    if log:
        ax.set_yscale("log")
        _plain_log_axis(ax.yaxis, _times)
        _plain_log_axis(ax.xaxis, ticks=sizes)
    ax.set_xlabel(dim)
    ax.set_ylabel("eager time / onnxruntime time")
    ax.legend(fontsize="small")


def profile_bars(profile: ProfileResult, *, by: str = "op_type", top: int = 12) -> Figure:
    """Horizontal bars: kernel time per run (µs) of the ``top`` op types or modules."""
    if profile.error:
        return message_figure(f"profile could not run: {profile.error}")
    frame = profile.to_frame(by).head(top)
    if frame.empty:
        return message_figure("the profile has no node events")
    figure = new_figure(PANE_WIDTH, max(2.0, 0.3 * len(frame) + 1.0))
    ax = figure.add_subplot()
    labels = [str(v) for v in frame[by]][::-1]
    values = list(frame["us_per_run"])[::-1]
    ax.barh(labels, values, color=ORT_COLOR)
    for y, (value, share) in enumerate(zip(values, list(frame["share"])[::-1])):
        ax.text(value, y, f" {share:.0%}", va="center", fontsize="small")
    ax.set_xlabel("kernel time per run (µs)")
    ax.set_title(f"onnxruntime time by {by.replace('_', ' ')} ({profile.runs} runs)")
    return figure


def verify_chart(result: VerifyResult) -> Figure:
    """Max abs difference (ONNX vs eager) per case as horizontal bars, one case a row (so a
    dozen cases stay readable in a narrow pane), green = pass, red = fail, with a black tick
    at the difference each case allows (its tolerance, scaled to the output); cases where
    onnxruntime or eager raised are marked."""
    if result.status == "error":
        return message_figure(f"verification could not run: {result.error}")
    cases = list(result.cases)
    figure = new_figure(PANE_WIDTH, max(2.2, 0.32 * len(cases) + 1.2))
    ax = figure.add_subplot()
    names, values, colors, notes, allowed = [], [], [], [], []
    # Exact zeros cannot sit on a log axis: they get no bar and a "0" label at the axis floor, a
    # decade under the smallest difference (a 1e-12 bar made a 1.5e-8 difference look like a spike).
    nonzero = [c.max_abs for c in cases if c.max_abs and c.max_abs != float("inf")]
    floor = min(nonzero) / 10 if nonzero else 1e-12
    zeros = []
    for case in cases:
        edge = case.edge  # an edge-value case: its input and value kind, short
        names.append(f"{edge.input} {edge.kind.replace('_', ' ')}" if edge is not None else f"{case.name} ({case.sizes_text})")
        value = case.max_abs if case.max_abs is not None else 0.0
        zeros.append(case.max_abs == 0.0 and case.status not in ("ort_error", "eager_error", "error"))
        values.append(max(value, floor) if value != float("inf") else 1e6)
        colors.append(PASS_COLOR if case.ok else FAIL_COLOR)
        notes.append({"ort_error": "ORT error", "eager_error": "eager error", "error": "error"}.get(case.status, ""))
        limits = [o.atol_applied for o in case.outputs if o.atol_applied]
        allowed.append(min(limits) if limits else None)
    rows = list(range(len(cases)))[::-1]  # the first case on top
    bars = ax.barh(rows, values, color=colors)
    for bar, note in zip(bars, notes):
        if note:
            bar.set_hatch("//")
            ax.annotate(note, (floor, bar.get_y() + bar.get_height() / 2), xytext=(3, 0), textcoords="offset points",
                        ha="left", va="center", fontsize="x-small")
    for bar, zero in zip(bars, zeros):
        if zero:
            bar.set_width(0)
            ax.annotate("0", (floor, bar.get_y() + bar.get_height() / 2), xytext=(3, 0), textcoords="offset points",
                        ha="left", va="center", fontsize="small", color=PASS_COLOR)
    marks = [(limit, row) for limit, row in zip(allowed, rows) if limit is not None]
    if marks:
        ax.plot([m for m, _ in marks], [r for _, r in marks], linestyle="none", marker="|", markersize=14,
                markeredgewidth=2, color="black", label="allowed difference (tolerance)")
    ax.set_xscale("log")
    top = max([v for v in values] + [m for m, _ in marks])
    ax.set_xlim(floor, top * 4)  # room right of the last tick
    ax.set_yticks(rows, names, fontsize="small")
    ax.set_xlabel("max |onnx − eager| per case; black tick: allowed")
    # right-aligned: long case labels leave the bars a narrow column, and a title centred over it
    # runs past the figure's edge
    ax.set_title(f"verification: {result.status}", loc="right")
    return figure
