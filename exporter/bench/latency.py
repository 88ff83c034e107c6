"""benchmark() and benchmark_sweep(): onnxruntime vs eager latency, and their results."""

from __future__ import annotations

import contextlib
import dataclasses
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ExportError, Failure, first_line
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..ort_values import feed_shape
from ..progress import Progress
from .compare import (Comparison, Variant, VariantTiming, comparison_of, eager_contender, ort_contender, rss_bytes,
                      rss_growth_mb, state_mb, variants_of)
from .noise import LoadProbe, Noise
from .rounds import Contender, Rounds, bootstrap_median_ci, time_rounds
from .runner import BenchConfig, OrtRunner, bench_config, default_threads, inputs_for, source_mb
from .stats import LatencyStats


@dataclass(frozen=True)
class EngineTiming:
    """One engine's measurement: ``stats`` on success, ``error`` otherwise."""

    engine: str
    stats: LatencyStats | None = None
    error: str | None = None
    warmup_runs: int = 0
    stopped: str = ""
    seconds: float = 0.0
    rss_growth_mb: float | None = None  # see VariantTiming.rss_growth_mb

    @property
    def ok(self) -> bool:
        return self.stats is not None


@dataclass(frozen=True)
class BenchmarkResult:
    """onnxruntime (and eager PyTorch) latency at one set of inputs.

    With eager, both engines were timed in interleaved rounds: ``speedup_rounds`` holds each
    round's eager / onnxruntime ratio, ``speedup`` is their median and ``speedup_ci`` its 95%
    bootstrap interval. ``noise`` says how far to trust it (``warning`` is its plain sentence,
    ``None`` when the machine was quiet enough); ``comparison`` holds the variants asked for
    with ``compare=``."""

    ort: EngineTiming
    eager: EngineTiming | None
    config: BenchConfig | None
    sizes: tuple[tuple[str, int], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    error: str | None = None
    failure: Failure | None = None
    cancelled: bool = False
    speedup_rounds: tuple[float, ...] = ()
    speedup_ci: tuple[float, float] | None = None
    noise: Noise | None = None
    comparison: Comparison | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.ort.ok and not self.cancelled

    @property
    def status(self) -> str:
        """``ok``, ``failed`` (see ``error``) or ``cancelled``."""
        return "cancelled" if self.cancelled else "ok" if self.ok else "failed"

    @property
    def speedup(self) -> float | None:
        """Eager time / onnxruntime time: above 1 means onnxruntime is faster. The median of the
        per-round ratios when there were rounds, else the ratio of the two p50s."""
        if self.eager is None or not (self.eager.ok and self.ort.ok):
            return None
        if self.speedup_rounds:
            ordered = sorted(self.speedup_rounds)
            middle = len(ordered) // 2
            return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        return self.eager.stats.p50 / self.ort.stats.p50  # type: ignore[union-attr]

    @property
    def ratio(self) -> float | None:
        """onnxruntime time / eager time (below 1 means onnxruntime is faster)."""
        speedup = self.speedup
        return None if speedup is None else 1.0 / speedup

    @property
    def ratio_ci(self) -> tuple[float, float] | None:
        """The 95% interval of :attr:`ratio` (the inverse of :attr:`speedup_ci`)."""
        if self.speedup_ci is None or self.speedup_ci[0] <= 0:
            return None
        return 1.0 / self.speedup_ci[1], 1.0 / self.speedup_ci[0]

    @property
    def headline(self) -> str:
        """The one line people copy: how much faster onnxruntime is than eager, from the same
        statistic as every figure printed beside it (or why there is no figure)."""
        if self.cancelled:
            return "benchmark cancelled"
        if not self.ok:
            return f"benchmark failed: {self.error or self.ort.error}"
        speedup = self.speedup
        if speedup is None:
            p50 = self.ort.stats.p50 * 1e3 if self.ort.stats is not None else float("nan")
            return f"onnxruntime p50 {p50:.3g} ms"
        faster = "faster" if speedup >= 1 else "slower"
        factor = speedup if speedup >= 1 else 1 / speedup
        return f"onnxruntime {factor:.2f}x {faster} than eager PyTorch"

    @property
    def warning(self) -> str | None:
        """A plain sentence when the machine was too busy for the figures to mean much."""
        return self.noise.warning if self.noise is not None else None

    def to_frame(self) -> Any:
        import pandas as pd

        rows = []
        for timing in (self.ort, self.eager):
            if timing is None:
                continue
            row: dict[str, Any] = {"engine": timing.engine}
            if timing.stats is not None:
                row.update(timing.stats.to_dict())
            row.update({"warmup_runs": timing.warmup_runs, "stopped": timing.stopped,
                        "rss_growth_mb": timing.rss_growth_mb, "error": timing.error})
            row.update({"speedup": self.speedup, "speedup_ci_low": self.speedup_ci[0] if self.speedup_ci else None,
                        "speedup_ci_high": self.speedup_ci[1] if self.speedup_ci else None,
                        "rounds": len(self.speedup_rounds) or (self.noise.rounds if self.noise else None),
                        "warning": self.warning})
            rows.append(row)
        frame = pd.DataFrame(rows)
        frame.attrs["warning"] = self.warning
        return frame

    def summary(self) -> str:
        if self.cancelled:
            return "Benchmark cancelled"
        if self.error:
            return f"Benchmark could not run: {self.error}"
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes)
        lines = [f"Benchmark{' at ' + sizes if sizes else ''}" + (f" ({self.config.describe()})" if self.config else "")]
        for timing in (self.ort, self.eager):
            if timing is None:
                continue
            body = timing.stats.summary() if timing.stats else f"failed: {timing.error}"
            lines.append(f"  {timing.engine:<12} {body}")
        if self.speedup is not None:
            interval, basis = "", ""
            if self.speedup_ci is not None:
                interval = (f"; 95% interval {self.speedup_ci[0]:.2f}–{self.speedup_ci[1]:.2f}x over "
                            f"{len(self.speedup_rounds)} interleaved rounds")
            if self.speedup_rounds:  # each round weighs the same, whatever its number of calls
                basis = ", median of the rounds' ratios"
            lines.append(f"  onnxruntime / eager p50{basis} = {self.ratio:.3f} (onnxruntime {self.speedup:.2f}x "
                         f"{'faster' if self.speedup >= 1 else 'slower'}{interval})")
        if self.comparison is not None:
            lines.extend("  " + line for line in self.comparison.summary().splitlines() if "WARNING" not in line)
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
            if self.config is not None and self.config.threads > 1:
                lines.append("  (several threads suffer most from a busy machine: threads=1 gives steadier figures)")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    def _repr_html_(self) -> str:
        from ..display import repr_html

        return repr_html(self)


@dataclass(frozen=True)
class SweepResult:
    """Latency against the size of one dynamic dim."""

    dim: str
    sizes: tuple[int, ...]
    points: tuple[BenchmarkResult, ...]
    config: BenchConfig | None = None
    error: str | None = None
    cancelled: bool = False

    @property
    def status(self) -> str:
        return "cancelled" if self.cancelled else "failed" if self.error else "ok"

    def to_frame(self) -> Any:
        import pandas as pd

        rows = []
        for size, point in zip(self.sizes, self.points):
            row: dict[str, Any] = {"size": size}
            for prefix, timing in (("ort_", point.ort), ("eager_", point.eager)):
                if timing is not None and timing.stats is not None:
                    stats = timing.stats
                    row.update({f"{prefix}p50_ms": stats.p50 * 1e3, f"{prefix}p90_ms": stats.p90 * 1e3,
                                f"{prefix}p99_ms": stats.p99 * 1e3, f"{prefix}runs": stats.runs})
            row["speedup"] = point.speedup
            row["speedup_ci_low"] = point.speedup_ci[0] if point.speedup_ci else None
            row["speedup_ci_high"] = point.speedup_ci[1] if point.speedup_ci else None
            row["warning"] = point.warning
            row["error"] = point.error or point.ort.error or (point.eager.error if point.eager else None)
            rows.append(row)
        columns = ["size", "ort_p50_ms", "ort_p90_ms", "ort_p99_ms", "ort_runs", "eager_p50_ms", "eager_p90_ms",
                   "eager_p99_ms", "eager_runs", "speedup", "speedup_ci_low", "speedup_ci_high", "warning", "error"]
        always = ("size", "speedup", "speedup_ci_low", "speedup_ci_high", "warning", "error")
        frame = pd.DataFrame(rows)
        frame = frame.reindex(columns=[c for c in columns if c in frame.columns or c in always])
        frame.attrs["warning"] = self.warning
        return frame

    @property
    def warning(self) -> str | None:
        """Which sizes were measured on a busy machine, and the first size's reason."""
        busy = [(size, point.warning) for size, point in zip(self.sizes, self.points) if point.warning]
        if not busy:
            return None
        names = ", ".join(str(size) for size, _ in busy)
        return f"at {self.dim}={names}: {busy[0][1]}"

    def summary(self) -> str:
        if self.cancelled:
            return f"Sweep over {self.dim} cancelled after {len(self.points)} size(s)"
        if self.error:
            return f"Sweep over {self.dim} could not run: {self.error}"
        lines = [f"Latency vs {self.dim}" + (f" ({self.config.describe()})" if self.config else "")]
        lines.append(f"  {'size':>6} {'ort p50 ms':>11} {'eager p50 ms':>13} {'speedup':>8} {'95% interval':>13}")
        for size, point in zip(self.sizes, self.points):
            ort_ms = f"{point.ort.stats.p50 * 1e3:.4g}" if point.ort.stats else "error"
            eager_ms = f"{point.eager.stats.p50 * 1e3:.4g}" if point.eager and point.eager.stats else "-"
            speed = f"{point.speedup:.2f}x" if point.speedup else "-"
            interval = f"{point.speedup_ci[0]:.2f}–{point.speedup_ci[1]:.2f}x" if point.speedup_ci else "-"
            lines.append(f"  {size:>6} {ort_ms:>11} {eager_ms:>13} {speed:>8} {interval:>13}{'  busy' if point.warning else ''}")
        if self.warning:
            lines.append(f"  WARNING: {self.warning}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    def _repr_html_(self) -> str:
        from ..display import repr_html

        return repr_html(self)


def _engine_timing(name: str, rounds: Rounds, rss: float | None) -> EngineTiming:
    i = rounds.index(name)
    return EngineTiming(name, LatencyStats.from_samples(rounds.samples[i]), None, rounds.warmup_runs[i], rounds.stopped,
                        rounds.seconds, rss)


@contextlib.contextmanager
def _eager_context(model: Any) -> Any:
    """Inference mode, the user's buffers preserved, torch's thread count restored."""
    import torch

    from ..eager import preserved_buffers

    previous = torch.get_num_threads()
    try:
        with preserved_buffers(model), torch.inference_mode():
            yield
    finally:
        torch.set_num_threads(previous)


def _prepare_variants(session: Any, variants: Sequence[Variant], feeds: Mapping[str, Any], args: tuple,
                      kwargs: Mapping[str, Any], threads: int, provider: str) -> tuple[list[Contender], list[VariantTiming]]:
    """A contender per variant that could be set up, and a row per variant (with its error,
    model size and memory)."""
    contenders, rows = [], []
    unoptimized: Any = None  # the unoptimized session: owns its external-data copy, if any
    for variant in variants:
        count = variant.threads or threads
        try:
            if variant.engine == "eager":
                contender = eager_contender(variant.name, session.model, args, kwargs, count)
                contender.before()  # type: ignore[misc]
                before = rss_bytes()
                contender.call(None)
                rows.append(VariantTiming(variant, threads=count, model_mb=state_mb(session.model),
                                          rss_growth_mb=rss_growth_mb(before)))
            else:
                if variant.model == "unoptimized" and unoptimized is None:
                    unoptimized = session.with_options(optimize=False)
                source = (unoptimized if variant.model == "unoptimized" else session).ort_model_source
                session._make_room_for_ort()
                before = rss_bytes()
                runner = OrtRunner(source, threads=count, provider=provider, optimization_level=variant.level,
                                   spinning=False)
                binding = runner.bind(feeds)
                rows.append(VariantTiming(variant, threads=count, model_mb=source_mb(source),
                                          rss_growth_mb=rss_growth_mb(before)))
                contender = ort_contender(variant.name, runner, binding)
        except Exception as exc:  # noqa: BLE001 - a variant that cannot run is a row with its error
            rows.append(VariantTiming(variant, threads=count, error=first_line(exc)))
            continue
        contenders.append(contender)
    return contenders, rows


def benchmark(
    session: Any,
    *,
    inputs: tuple[tuple, dict] | None = None,
    sizes: Mapping[str, int] | None = None,
    budget: float = 1.0,
    min_runs: int = 50,
    max_runs: int = 1_000_000,
    warmup: int = 5,
    precision: float = 0.01,
    threads: int | None = None,
    provider: str = "CPUExecutionProvider",
    optimization_level: str = "all",
    eager: bool = True,
    compare: Iterable[str | Variant] | bool | None = None,
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
    runner: OrtRunner | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
) -> BenchmarkResult:
    """Time the ONNX model in onnxruntime and (``eager=True``) the module in eager PyTorch.

    Compared engines never disturb each other: onnxruntime runs with its pool threads not
    spinning after a run (a ``runner`` passed in is switched with :meth:`OrtRunner.parked` and
    restored afterwards), both use the same thread count, and they are timed in interleaved
    rounds (:func:`~exporter.bench.rounds.time_rounds`) so that load on the machine hits both
    alike. The headline is the median of the per-round ratios with a bootstrap interval, and
    ``result.noise`` measures how busy the machine was (``result.warning`` says so plainly).
    onnxruntime alone (``eager=False``, no ``compare``) keeps onnxruntime's spinning default.

    Args:
        inputs: ``(args, kwargs)`` to time; default the example inputs.
        sizes: generate inputs at these dim sizes instead (``{"batch": 32}``).
        budget: seconds of timed calls per contender (warm-up excluded).
        min_runs / max_runs / precision: see :func:`~exporter.bench.rounds.time_rounds`.
        threads: intra-op threads for onnxruntime and ``torch.set_num_threads`` for eager;
            default ``torch.get_num_threads()``.
        optimization_level: onnxruntime graph optimizations: disable / basic / extended / all.
        compare: more contenders timed in the same rounds, reported in ``result.comparison``
            against onnxruntime: ``True`` for the usual ones (the unoptimized model, each
            graph optimization level, 1 / 2 / all threads) or a list of
            :class:`~exporter.bench.compare.Variant` or their names (``"unoptimized"``,
            ``"level=basic"``, ``"threads=1"``, ``"eager threads=1"``).
        progress: called with :class:`~exporter.verify.Progress` (task ``onnxruntime`` /
            ``eager`` / a variant's name after each of its batches, done/total the fraction
            of the whole run).
        runner: an :class:`OrtRunner` to reuse (one onnxruntime session for several calls);
            its own threads / provider / optimization level then apply.
        observer / cancel: an :class:`~exporter.events.Observer` told the progress between
            timing batches, and a :class:`~exporter.events.CancelToken` checked there (the
            result is then ``cancelled``).
    """
    reporter = progress if isinstance(progress, Reporter) else Reporter(observer, cancel, progress)
    threads = runner.settings["intra_op_num_threads"] if runner is not None else default_threads(threads)
    variants = variants_of(compare, threads)
    compared = eager or bool(variants)
    try:
        reporter.check()
        model_source = session.ort_model_source
    except Cancelled:
        return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, None, cancelled=True)
    except ExportError as exc:  # the export failed: nothing to time
        return _failed(exc)
    args, kwargs, used_sizes = inputs_for(session, sizes, inputs, seed)  # a caller's typo raises here
    rss_ort = None
    try:
        if runner is None:
            session._make_room_for_ort()
        before = rss_bytes()
        if runner is None:
            runner = OrtRunner(model_source, threads=threads, provider=provider, optimization_level=optimization_level,
                               spinning=not compared)
            rss_ort = before
        feeds = session.feeds(*args, **kwargs)
        shapes = tuple((name, feed_shape(value)) for name, value in feeds.items())
    except Exception as exc:  # noqa: BLE001 - onnxruntime refused the model or the inputs
        return _failed(exc)
    with contextlib.ExitStack() as stack:
        stack.enter_context(runner.parked() if compared else contextlib.nullcontext())
        stack.enter_context(_eager_context(session.model))
        config = bench_config(runner, threads, provider, budget, min_runs, precision, interleaved=compared)
        contenders: list[Contender] = []
        ort_timing = eager_timing = None
        try:
            binding = runner.bind(feeds)  # its first run
            ort_rss = rss_growth_mb(rss_ort)
            contenders.append(ort_contender("onnxruntime", runner, binding))
        except Exception as exc:  # noqa: BLE001
            ort_timing = EngineTiming("onnxruntime", error=first_line(exc))
        if eager:
            contender = eager_contender("eager", session.model, args, kwargs, threads)
            try:
                contender.before()  # type: ignore[misc]
                before = rss_bytes()
                contender.call(None)  # a model that raises is reported, not timed
                eager_rss = rss_growth_mb(before)
                contenders.append(contender)
            except Exception as exc:  # noqa: BLE001
                eager_timing = EngineTiming("eager", error=first_line(exc))
        extra, rows = _prepare_variants(session, variants, feeds, args, kwargs, threads, provider)
        contenders.extend(extra)
        if not contenders:
            return BenchmarkResult(ort_timing or EngineTiming("onnxruntime", error="nothing to time"), eager_timing,
                                   config, used_sizes, shapes)
        probe = LoadProbe()
        try:
            rounds = time_rounds(contenders, budget=budget, min_runs=min_runs, max_runs=max_runs, warmup=warmup,
                                 precision=precision, rewarm=1 if len(contenders) > 1 else 0, progress=reporter)
        except Cancelled:
            return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, config, used_sizes, shapes,
                                   cancelled=True)
        except Exception as exc:  # noqa: BLE001 - an engine raised part-way
            failed = EngineTiming("onnxruntime", error=first_line(exc))
            return BenchmarkResult(failed, EngineTiming("eager", error=first_line(exc)) if eager else None, config,
                                   used_sizes, shapes)
        load = probe.stop()
    if ort_timing is None:
        ort_timing = _engine_timing("onnxruntime", rounds, ort_rss)
    if eager and eager_timing is None:
        eager_timing = _engine_timing("eager", rounds, eager_rss)
    comparison_rows = None
    if variants:
        comparison_rows = [VariantTiming(Variant("onnxruntime"), threads=threads, model_mb=source_mb(model_source),
                                         rss_growth_mb=ort_timing.rss_growth_mb, error=ort_timing.error)]
        if eager_timing is not None:
            comparison_rows.append(VariantTiming(Variant("eager", engine="eager"), threads=threads,
                                                 model_mb=state_mb(session.model),
                                                 rss_growth_mb=eager_timing.rss_growth_mb, error=eager_timing.error))
        comparison_rows.extend(rows)
    return _result(rounds, load, ort_timing, eager_timing, comparison_rows,
                   BenchmarkResult(ort_timing, eager_timing, config, used_sizes, shapes))


def _result(rounds: Rounds, load: Any, ort_timing: EngineTiming, eager_timing: EngineTiming | None,
            comparison_rows: list[VariantTiming] | None, base: BenchmarkResult) -> BenchmarkResult:
    """``base`` with the per-round headline, its interval, the noise and the comparison."""
    speedups = rounds.round_ratios("eager", "onnxruntime") if ort_timing.ok and eager_timing and eager_timing.ok else ()
    interval = bootstrap_median_ci(speedups) if speedups else None
    tails = tuple((name, stats.p90 / stats.p50) for name, stats in
                  ((t.engine, t.stats) for t in (ort_timing, eager_timing) if t is not None and t.stats is not None)
                  if stats.p50 > 0)
    noise = Noise.assess(rounds.rounds, statistics.median(speedups) if speedups else None, interval, speedups, tails,
                         load)
    comparison = comparison_of(rounds, "onnxruntime", comparison_rows, noise.warning) if comparison_rows else None
    return dataclasses.replace(base, speedup_rounds=speedups, speedup_ci=interval, noise=noise, comparison=comparison)


def _failed(exc: BaseException) -> BenchmarkResult:
    return BenchmarkResult(EngineTiming("onnxruntime", error=first_line(exc)), None, None, error=first_line(exc),
                           failure=Failure.from_exception(exc, "benchmark"))


def _resolve_dim(session: Any, dim: Any) -> str:
    """The label of the dim group ``dim`` names (its label, or one of its axes as an ``Axis``,
    ``("x", 0)``, ``"x.0"`` or ``"x.shape[0]"``); the first group for None."""
    from ..verify.groups import dim_groups, resolve_group

    groups = dim_groups(session)
    if not groups:
        raise ValueError("no dynamic dim to sweep: every input dim is static")
    return groups[0].label if dim is None else resolve_group(groups, dim).label


def benchmark_sweep(
    session: Any,
    dim: Any = None,
    sizes: Sequence[int] = (1, 2, 4, 8, 16, 32, 64),
    *,
    budget: float = 0.5,
    min_runs: int = 30,
    precision: float = 0.02,
    threads: int | None = None,
    provider: str = "CPUExecutionProvider",
    optimization_level: str = "all",
    eager: bool = True,
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
) -> SweepResult:
    """Latency of onnxruntime and eager PyTorch at each size of one dynamic dim (given by
    its label: a Dim name such as ``"batch"``, or ``"x.shape[0]"``; or by one of its axes:
    ``Axis("x", 0)``, ``("x", 0)``, ``"x.0"``); other dims stay at the
    example size. One onnxruntime session serves every size. Each size is timed as
    :func:`benchmark` does: interleaved rounds, spinning off, the ratio with its interval and
    the noise seen at that size (``SweepResult.warning`` lists the sizes measured on a busy
    machine). Raises ``ValueError`` at once for a ``dim`` that names no dynamic dim;
    ``cancel`` is checked between timing batches."""
    reporter = Reporter(observer, cancel, progress)
    threads = default_threads(threads)
    try:
        model_source = session.ort_model_source
    except Cancelled:
        return SweepResult(str(dim), tuple(sizes), (), None, cancelled=True)
    except Exception as exc:  # noqa: BLE001 - the export failed: nothing to time
        return SweepResult(str(dim), tuple(sizes), (), None, first_line(exc))
    label = _resolve_dim(session, dim)  # a caller's typo raises here
    try:
        session._make_room_for_ort()
        runner = OrtRunner(model_source, threads=threads, provider=provider, optimization_level=optimization_level,
                           spinning=not eager)
    except Exception as exc:  # noqa: BLE001 - e.g. onnxruntime has no kernel for a dtype
        return SweepResult(label, tuple(sizes), (), None, first_line(exc))
    config = bench_config(runner, threads, provider, budget, min_runs, precision, interleaved=eager)
    points: list[BenchmarkResult] = []
    total = len(sizes)
    for i, size in enumerate(sizes):
        point = benchmark(session, sizes={label: size}, budget=budget, min_runs=min_runs, precision=precision,
                          threads=threads, provider=provider, optimization_level=optimization_level, eager=eager,
                          seed=seed, progress=reporter.scaled("sweep", i, 1.0, total, f"{label}={size}: ", phases=()),
                          runner=runner)
        if point.cancelled:
            return SweepResult(label, tuple(sizes[: len(points)]), tuple(points), config, cancelled=True)
        points.append(point)
    reporter.progress("sweep", total, total, "done")
    return SweepResult(label, tuple(sizes), tuple(points), config)
