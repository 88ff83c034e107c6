"""Charts of verification and benchmark results, as matplotlib Figures.

Every function takes a result object from :mod:`exporter.verify` / :mod:`exporter.bench` and
returns a new :class:`matplotlib.figure.Figure` built without pyplot: no global figure
state, nothing shown, nothing left open. Display it (a notebook shows a Figure), save it with
``fig.savefig(...)``, or embed it in a widget. Failed results give a figure saying so.
"""

from __future__ import annotations

from typing import Any

from ._figure import message_figure, new_figure

__all__ = ["latency_histogram", "latency_vs_size", "profile_bars", "verify_chart"]

ORT_COLOR = "#1f77b4"
EAGER_COLOR = "#ff7f0e"
PASS_COLOR = "#2ca02c"
FAIL_COLOR = "#d62728"




def latency_histogram(result: Any, *, bins: int = 40) -> Any:
    """Per-call latency distributions of onnxruntime and eager PyTorch (ms), p50 marked.
    The x axis stops at the larger p99 so a few outliers do not squash the histogram."""
    timings = [t for t in (result.ort, result.eager) if t is not None and t.stats is not None]
    if not timings:
        return message_figure(f"no latency to plot: {result.error or result.ort.error}")
    figure = new_figure()
    ax = figure.add_subplot()
    upper = max(t.stats.p99 for t in timings) * 1e3
    for timing in timings:
        color = ORT_COLOR if timing.engine == "onnxruntime" else EAGER_COLOR
        samples = [s * 1e3 for s in timing.stats.samples if s * 1e3 <= upper]
        ax.hist(samples, bins=bins, range=(0, upper), alpha=0.6, color=color,
                label=f"{timing.engine} (p50 {timing.stats.p50 * 1e3:.3g} ms, n={timing.stats.runs})")
        ax.axvline(timing.stats.p50 * 1e3, color=color, linestyle="--", linewidth=1)
    ax.set_xlabel("latency per call (ms)")
    ax.set_ylabel("calls")
    title = "latency distribution"
    if result.speedup is not None:
        title += f": onnxruntime {result.speedup:.2f}x eager"
    ax.set_title(title)
    ax.legend(loc="upper right", fontsize="small")
    return figure


def latency_vs_size(sweep: Any, *, log: bool = True) -> Any:
    """p50 latency (p90 as a band top) against the swept dim, onnxruntime and eager."""
    if sweep.error:
        return message_figure(f"sweep could not run: {sweep.error}")
    figure = new_figure()
    ax = figure.add_subplot()
    for engine, color in (("ort", ORT_COLOR), ("eager", EAGER_COLOR)):
        points = [
            (size, getattr(point, engine).stats)
            for size, point in zip(sweep.sizes, sweep.points)
            if getattr(point, engine) is not None and getattr(point, engine).stats is not None
        ]
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
    ax.set_xlabel(sweep.dim)
    ax.set_ylabel("latency (ms)")
    ax.set_title(f"latency vs {sweep.dim}")
    ax.legend(fontsize="small")
    return figure


def profile_bars(profile: Any, *, by: str = "op_type", top: int = 12) -> Any:
    """Horizontal bars: kernel time per run (µs) of the ``top`` op types or modules."""
    if profile.error:
        return message_figure(f"profile could not run: {profile.error}")
    frame = profile.to_frame(by).head(top)
    if frame.empty:
        return message_figure("the profile has no node events")
    figure = new_figure(6.4, max(2.0, 0.3 * len(frame) + 1.0))
    ax = figure.add_subplot()
    labels = [str(v) for v in frame[by]][::-1]
    values = list(frame["us_per_run"])[::-1]
    ax.barh(labels, values, color=ORT_COLOR)
    for y, (value, share) in enumerate(zip(values, list(frame["share"])[::-1])):
        ax.text(value, y, f" {share:.0%}", va="center", fontsize="small")
    ax.set_xlabel("kernel time per run (µs)")
    ax.set_title(f"onnxruntime time by {by.replace('_', ' ')} ({profile.runs} runs)")
    return figure


def verify_chart(result: Any) -> Any:
    """Max abs difference (ONNX vs eager) per case, green = pass, red = fail; cases where
    onnxruntime or eager raised are marked on the axis."""
    if result.status == "error":
        return message_figure(f"verification could not run: {result.error}")
    figure = new_figure(6.4, 3.2)
    ax = figure.add_subplot()
    names, values, colors, notes = [], [], [], []
    floor = 1e-12
    for case in result.cases:
        names.append(f"{case.name}\n{case.sizes_text}")
        value = case.max_abs if case.max_abs is not None else 0.0
        values.append(max(value, floor) if value != float("inf") else 1e6)
        colors.append(PASS_COLOR if case.ok else FAIL_COLOR)
        notes.append({"ort_error": "ORT error", "eager_error": "eager error", "error": "error"}.get(case.status, ""))
    bars = ax.bar(range(len(names)), values, color=colors)
    for bar, note in zip(bars, notes):
        if note:
            bar.set_hatch("//")
            ax.annotate(note, (bar.get_x() + bar.get_width() / 2, floor), ha="center", va="bottom", fontsize="x-small", rotation=90)
    ax.set_yscale("log")
    ax.set_xticks(range(len(names)), names, fontsize="x-small")
    ax.set_ylabel("max |onnx - eager|")
    ax.set_title(f"verification: {result.status}")
    return figure
