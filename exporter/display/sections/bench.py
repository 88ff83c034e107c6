"""Timings: the benchmark, the latency sweep, variants compared in the same rounds, and
onnxruntime's kernel profile."""

from __future__ import annotations

from ...bench.compare import Comparison
from ...bench.headline import speed_text, statistic, times
from ...bench.latency import BenchmarkResult, SweepResult
from ...bench.profiling import ProfileResult
from ...bench.rounds import LOW_QUANTILE
from ...bench.stats import LatencyStats
from ...presentation import presents
from ..blocks import Badge, Block, Cell, KeyValues, Note, Section, Table, Verdict
from ..cells import number
from ..failures import failure_blocks
from ..style import tone_of

__all__ = ["benchmark_section", "comparison_section", "latency_stats_section", "profile_section", "sweep_section"]


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.4g}"


def _bench_tone(result: BenchmarkResult | SweepResult) -> str:
    """ok for a steady figure on a quiet machine, warn for a range or a warning, fail otherwise."""
    if result.status != "ok":
        return tone_of(result.status)
    points = result.points if isinstance(result, SweepResult) else (result,)
    steady = all(p.spread is None for p in points)
    return "ok" if steady and not result.warning else "warn"


@presents(BenchmarkResult)
def benchmark_section(result: BenchmarkResult, title: str = "Benchmark") -> Section:
    """Latency of onnxruntime and eager PyTorch: the headline as the verdict, then the figures it
    is made of (each round's p10 and p50 call, median over rounds: the same statistic), the
    median call's ratio as the second figure, and the tail over all calls."""
    badge = Badge.status(result.status)
    verdict = Verdict(result.headline, _bench_tone(result))
    if result.cancelled:
        return Section(title, badge, (Note("benchmark cancelled", "warn"),), verdict=verdict)
    if result.error:
        return Section(title, badge, tuple([Note("benchmark could not run", "fail"),
                                            *failure_blocks(result.failure, result.error)]), verdict=verdict)
    items: list[tuple[str, Cell]] = []
    if result.sizes:
        items.append(("sizes", ", ".join(f"{k}={v}" for k, v in result.sizes)))
    if result.config is not None:
        items.append(("setup", result.config.describe()))
    if result.threads_note:
        items.append(("threads", result.threads_note))
    items.append(("statistic", result.statistic))
    if result.speedup_p50 is not None:
        interval = result.speedup_p50_ci
        items.append(("median call", speed_text(result.speedup_p50) + " (p50 ratio"
                      + (f", 95% interval {times(interval[0])}–{times(interval[1])})" if interval else ")")))
    rows = []
    for timing in (result.ort, result.eager):
        if timing is None:
            continue
        s = timing.stats
        if s is None:
            rows.append((timing.engine, "", "", "", "", "", timing.error))
        else:
            rounds = timing.rounds.rounds if timing.rounds is not None else ""
            rows.append((timing.engine, str(s.runs), str(rounds), _ms(timing.low), _ms(timing.p50), _ms(s.p99), ""))
    body: list[Block] = [KeyValues(tuple(items))] if items else []
    body.append(Table.from_rows(("engine", "calls", "rounds", f"p{LOW_QUANTILE} ms", "p50 ms", "p99 ms (all calls)",
                                 "error"), rows))
    if result.warning:
        body.insert(0, Note(result.warning, "warn"))
    if result.comparison is not None:
        body.append(comparison_section(result.comparison))
    return Section(title, badge, tuple(body), verdict=verdict)


@presents(LatencyStats)
def latency_stats_section(stats: LatencyStats, title: str = "Latency") -> Section:
    """Per-call statistics of one engine: the percentiles and the mean in one line, then the
    extremes and the 95% intervals."""
    half = (stats.mean_ci[1] - stats.mean_ci[0]) / 2
    line = (f"p50 {_ms(stats.p50)} ms  p90 {_ms(stats.p90)}  p99 {_ms(stats.p99)}  "
            f"mean {_ms(stats.mean)} ± {stats.stdev * 1e3:.2g} ms (95% CI ±{half * 1e3:.2g})  n={stats.runs}")
    items: tuple[tuple[str, Cell], ...] = (
        ("min, max", f"{_ms(stats.min)}, {_ms(stats.max)} ms"),
        ("median 95% interval", f"{_ms(stats.median_ci[0])}–{_ms(stats.median_ci[1])} ms"),
        ("mean 95% interval", f"{_ms(stats.mean_ci[0])}–{_ms(stats.mean_ci[1])} ms"),
    )
    return Section(title, None, (KeyValues(items),), verdict=Verdict(line, "muted"))


@presents(SweepResult)
def sweep_section(result: SweepResult, title: str | None = None) -> Section:
    """Latency against the size of one dynamic dim: one row per size."""
    title = title or f"Latency vs {result.dim}"
    badge = Badge.status(result.status)
    verdict = Verdict(result.headline, _bench_tone(result))
    body: list[Block] = []
    if result.cancelled:
        body.append(Note(f"cancelled after {len(result.points)} size(s)", "warn"))
    if result.error:
        return Section(title, badge, (Note(f"sweep could not run: {result.error}", "fail"),), verdict=verdict)
    items: list[tuple[str, Cell]] = []
    if result.config is not None:
        items.append(("setup", result.config.describe()))
    if result.threads_note:
        items.append(("threads", result.threads_note))
    items.append(("statistic", statistic(None)))
    body.append(KeyValues(tuple(items)))
    rows = []
    for size, point in zip(result.sizes, result.points):
        ort = point.ort if point.ort is not None and point.ort.ok else None
        eager = point.eager if point.eager is not None and point.eager.ok else None
        error = point.error or (point.ort.error if point.ort else None) or (point.eager.error if point.eager else None)
        if point.spread is not None:
            speed = f"{times(point.spread.low)}–{times(point.spread.high)} (rounds disagree)"
        else:
            speed = times(point.speedup) if point.speedup else ""
        rows.append((size, _ms(ort.low if ort else None), _ms(ort.p50 if ort else None),
                     _ms(eager.low if eager else None), _ms(eager.p50 if eager else None), speed,
                     f"{point.speedup_ci[0]:.2f}–{point.speedup_ci[1]:.2f}x" if point.speedup_ci else "",
                     error))
    low = f"p{LOW_QUANTILE}"
    body.append(Table.from_rows(("size", f"ort {low} ms", "ort p50 ms", f"eager {low} ms", "eager p50 ms", "speedup",
                                 "95% interval", "error"), rows))
    if result.warning:
        body.append(Note(result.warning, "warn"))
    return Section(title, badge, tuple(body), verdict=verdict)


def comparison_section(result: Comparison, title: str = "Variants") -> Section:
    """Variants timed in the same rounds (``session.compare()``): one row per variant with its
    p50 and its time relative to the baseline."""
    badge = Badge.status(result.status)
    if result.cancelled or result.error:
        text = "cancelled" if result.cancelled else f"comparison could not run: {result.error}"
        return Section(title, badge, (Note(text, "warn" if result.cancelled else "fail"),))
    rows = []
    for row in result.rows:
        if row.name == result.baseline:
            ratio = "baseline"
        elif row.ratio is not None and row.ratio_ci is not None:
            ratio = f"{row.ratio:.3f} ({row.ratio_ci[0]:.3f}–{row.ratio_ci[1]:.3f})"
        else:
            ratio = ""
        rows.append((row.name, _ms(row.low), _ms(row.p50), ratio,
                     "" if row.model_mb is None else f"{row.model_mb:.3g}",
                     "" if row.rss_growth_mb is None else f"{row.rss_growth_mb:.3g}", row.error))
    low = f"p{LOW_QUANTILE}"
    body: list[Block] = [
        KeyValues((("rounds", str(result.rounds)),
                   ("ratio", f"variant {low} / {result.baseline} {low}, 95% interval over rounds"),
                   ("statistic", f"each round's {low} and p50 call, median over rounds"))),
        Table.from_rows(("variant", f"{low} ms", "p50 ms", "ratio", "model MB", "RSS growth MB", "error"), rows),
    ]
    if result.warning:
        body.append(Note(result.warning, "warn"))
    verdict = Verdict(result.headline, "warn" if result.warning else "ok")
    return Section(title, badge, tuple(body), verdict=verdict)


@presents(Comparison)
def variants_section(result: Comparison) -> Section:
    """A comparison on its own: :func:`comparison_section` titled after its baseline."""
    return comparison_section(result, title=f"Variants against {result.baseline}")


@presents(ProfileResult)
def profile_section(result: ProfileResult, title: str = "Profile", top: int = 5) -> Section:
    """onnxruntime's kernel time per run, by op type and by module (the ``top`` largest)."""
    badge = Badge.status(result.status)
    if result.cancelled:
        return Section(title, badge, (), verdict=Verdict("profile cancelled", "warn"))
    if result.error:
        return Section(title, badge, tuple(failure_blocks(result.failure, result.error)),
                       verdict=Verdict("profile could not run", "fail"))
    verdict = Verdict(f"{number(result.us_per_run)} µs of kernels per run over {result.runs} run(s)", "ok")
    body: list[Block] = []
    for by, label in (("op_type", "by op type"), ("module", "by module")):
        frame = result.to_frame(by).head(top)
        rows = [(row[by], row["nodes"], row["us_per_run"], f"{row['share']:.0%}") for _, row in frame.iterrows()]
        body.append(Table.from_rows((by.replace("_", " "), "nodes", "µs per run", "share"), rows, caption=label))
    return Section(title, badge, tuple(body), verdict=verdict)
