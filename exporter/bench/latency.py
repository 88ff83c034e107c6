"""benchmark() and benchmark_sweep(): onnxruntime vs eager latency, and their results."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportArtifacts
from ..cases import dim_groups, resolve_group
from ..errors import AnalysisOutcome, ExportError, Failure, Status, first_line
from ..presentation import Presentable
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..ort_model import OrtModel
from ..ort_values import feed_shape
from ..progress import Progress
from .compare import (Comparison, Variant, VariantTiming, comparison_of, eager_contender, ort_contender, rss_bytes,
                      rss_growth_mb, state_mb, variants_of)
from .headline import MAX_SPAN, Unsteady, bootstrap_ratio_ci, range_text, ratio_of, speed_text, statistic, times, unsteady
from .noise import FreeCores, LoadProbe, Noise
from .rounds import LOW_QUANTILE, Contender, RoundFigures, Rounds, time_rounds
from .runner import BenchConfig, OrtRunner, bench_config, default_threads, inputs_for, source_mb
from .stats import LatencyStats, percentile
from ..eager import preserved_buffers
from ..model_twin import twin_of


@dataclass(frozen=True)
class EngineTiming:
    """One engine's measurement: ``stats`` on success, ``error`` otherwise. ``stats`` pools
    every call; ``rounds`` holds the per-round figures the headline is made of (``low`` and
    ``p50``: the p10 and median call of each round, median over rounds)."""

    engine: str
    stats: LatencyStats | None = None
    error: str | None = None
    warmup_runs: int = 0
    stopped: str = ""
    seconds: float = 0.0
    rss_growth_mb: float | None = None  # see VariantTiming.rss_growth_mb
    rounds: RoundFigures | None = None

    @property
    def ok(self) -> bool:
        return self.stats is not None

    @property
    def low(self) -> float | None:
        """Seconds: the p10 call of each round, median over rounds (pooled p10 without rounds)."""
        if self.rounds is not None:
            return self.rounds.low
        return None if self.stats is None else _pooled(self.stats, LOW_QUANTILE)

    @property
    def p50(self) -> float | None:
        """Seconds: the median call of each round, median over rounds (pooled p50 without rounds)."""
        if self.rounds is not None:
            return self.rounds.p50
        return None if self.stats is None else self.stats.p50


def _pooled(stats: LatencyStats, q: float) -> float:
    return percentile(sorted(stats.samples), q) if stats.samples else stats.p50


@dataclass(frozen=True, repr=False)
class BenchmarkResult(AnalysisOutcome, Presentable):
    """onnxruntime (and eager PyTorch) latency at one set of inputs.

    With eager, both engines were timed in interleaved rounds. One statistic throughout (see
    :mod:`exporter.bench.headline`): per engine, each round's p10 and median call, median over
    rounds (``EngineTiming.low`` / ``.p50``); ``speedup`` is eager low / onnxruntime low and
    ``speedup_ci`` its 95% bootstrap interval over rounds; ``speedup_p50`` the same for the
    medians. ``speedup_rounds`` holds each round's p10 ratio. ``unsteady`` is set when the
    rounds disagree (two clusters, or an interval wider than 2x): :attr:`headline` then gives a
    range with the reason. ``threads_note`` says when fewer threads than asked were used
    (cores busy). ``noise`` says how far to trust it (``warning`` is its plain sentence, ``None``
    when the machine was quiet enough); ``comparison`` holds the variants asked for with
    ``compare=``. ``seconds``: how long :func:`benchmark` took, set-up included."""

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
    speedup_p50_ci: tuple[float, float] | None = None
    unsteady: Unsteady | None = None
    threads_note: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.ort.ok and not self.cancelled

    @property
    def status(self) -> Status:
        """``ok``, ``failed`` (see ``error``, or onnxruntime's timing failed) or ``cancelled``."""
        return Status.CANCELLED if self.cancelled else Status.OK if self.ok else Status.FAILED

    @property
    def speedup(self) -> float | None:
        """Eager time / onnxruntime time: above 1 means onnxruntime is faster. Eager's
        :attr:`EngineTiming.low` over onnxruntime's when there were rounds (the figures printed
        beside it divide to it exactly), else the median of ``speedup_rounds``, else the ratio
        of the two pooled p50s. When :attr:`unsteady` is set it is one point of a range: read
        :attr:`headline`."""
        if self.eager is None or not (self.eager.ok and self.ort.ok):
            return None
        if self.eager.rounds is not None and self.ort.rounds is not None:
            return ratio_of(self.eager.rounds.lows, self.ort.rounds.lows)
        if self.speedup_rounds:
            ordered = sorted(self.speedup_rounds)
            middle = len(ordered) // 2
            return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
        return self.eager.stats.p50 / self.ort.stats.p50  # type: ignore[union-attr]

    @property
    def speedup_p50(self) -> float | None:
        """The second figure: eager's :attr:`EngineTiming.p50` over onnxruntime's (the median
        call; moved by stalls where the headline's p10 is not)."""
        if self.eager is None or not (self.eager.ok and self.ort.ok):
            return None
        eager, ort = self.eager.p50, self.ort.p50
        return eager / ort if eager is not None and ort else None

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
        statistic as every figure printed beside it (:attr:`statistic`), with its interval; a
        range with the reason when the rounds disagree; or why there is no figure."""
        if self.cancelled:
            return "benchmark cancelled"
        if not self.ok:
            return f"benchmark failed: {self.error or self.ort.error}"
        threads = _threads_clause(self.threads_note, self.config)
        speedup = self.speedup
        if speedup is None:
            low = self.ort.low or 0.0  # timed: ok says it has stats
            eager = f" (eager failed: {self.eager.error})" if self.eager is not None and self.eager.error else ""
            return f"onnxruntime {low * 1e3:.3g} ms per call (p{LOW_QUANTILE}){threads}{eager}"
        spread = self.spread
        if spread is not None:
            return f"{range_text(spread.low, spread.high)}, not one figure: {spread.reason}{threads}"
        interval = ""
        if self.speedup_ci is not None:
            interval = f" (95% interval {times(self.speedup_ci[0])}–{times(self.speedup_ci[1])}{threads})"
        elif threads:
            interval = f" ({threads[2:]})"
        return speed_text(speedup) + interval

    @property
    def spread(self) -> Unsteady | None:
        """:attr:`unsteady`, or for a result built without per-round figures an interval
        spanning more than :data:`~exporter.bench.headline.MAX_SPAN`: no point figure then."""
        if self.unsteady is not None:
            return self.unsteady
        interval = self.speedup_ci
        if self.speedup is None or interval is None or interval[0] <= 0 or interval[1] / interval[0] <= MAX_SPAN:
            return None
        return Unsteady(interval[0], interval[1], f"the rounds disagree (95% interval spans "
                                                  f"{interval[1] / interval[0]:.3g}x)")

    @property
    def statistic(self) -> str:
        """Which estimator :attr:`headline` and the figures beside it are."""
        rounds = self.ort.rounds.rounds if self.ort.rounds is not None else len(self.speedup_rounds)
        return statistic(rounds)

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
                row.update({f"round_p{LOW_QUANTILE}_ms": _ms(timing.low), "round_p50_ms": _ms(timing.p50)})
            row.update({"warmup_runs": timing.warmup_runs, "stopped": timing.stopped,
                        "rss_growth_mb": timing.rss_growth_mb, "error": timing.error})
            row.update({"speedup": self.speedup, "speedup_ci_low": self.speedup_ci[0] if self.speedup_ci else None,
                        "speedup_ci_high": self.speedup_ci[1] if self.speedup_ci else None,
                        "speedup_p50": self.speedup_p50,
                        "rounds": len(self.speedup_rounds) or (self.noise.rounds if self.noise else None),
                        "headline": self.headline, "statistic": self.statistic, "threads_note": self.threads_note,
                        "warning": self.warning})
            rows.append(row)
        frame = pd.DataFrame(rows)
        frame.attrs["warning"] = self.warning
        return frame


@dataclass(frozen=True, repr=False)
class SweepResult(AnalysisOutcome, Presentable):
    """Latency against the size of one dynamic dim (``seconds``: how long the sweep took)."""

    dim: str
    sizes: tuple[int, ...]
    points: tuple[BenchmarkResult, ...]
    config: BenchConfig | None = None
    error: str | None = None
    cancelled: bool = False
    threads_note: str | None = None
    failure: Failure | None = None
    seconds: float = 0.0


    @property
    def headline(self) -> str:
        """One line: the speedup's span over the sizes (each size's figure as
        :attr:`BenchmarkResult.headline` gives it), naming the sizes whose rounds disagreed."""
        if self.cancelled:
            return f"sweep over {self.dim} cancelled after {len(self.points)} size(s)"
        if self.error:
            return f"sweep over {self.dim} failed: {self.error}"
        figures = [(size, point.speedup) for size, point in zip(self.sizes, self.points) if point.speedup is not None]
        failed = [str(size) for size, point in zip(self.sizes, self.points) if not point.ok]
        unsteady = [str(size) for size, point in zip(self.sizes, self.points) if point.spread is not None]
        if not figures:
            text = f"latency vs {self.dim} at {len(self.points)} size(s), onnxruntime only"
        else:
            low, high = min(figures, key=lambda f: f[1]), max(figures, key=lambda f: f[1])
            if low[0] == high[0]:
                text = f"{speed_text(low[1])} at {self.dim}={low[0]}"
            else:
                text = (f"{range_text(low[1], high[1])} over {self.dim}={self.sizes[0]}..{self.sizes[-1]} "
                        f"({times(low[1])} at {low[0]}, {times(high[1])} at {high[0]})")
        if unsteady:
            text += f"; no single figure at {self.dim}={', '.join(unsteady)}: the rounds disagreed (see that size)"
        if failed:
            text += f"; failed at {self.dim}={', '.join(failed)}"
        return text + _threads_clause(self.threads_note, self.config)

    def to_frame(self) -> Any:
        import pandas as pd

        rows = []
        for size, point in zip(self.sizes, self.points):
            row: dict[str, Any] = {"size": size}
            for prefix, timing in (("ort_", point.ort), ("eager_", point.eager)):
                if timing is not None and timing.stats is not None:
                    stats = timing.stats
                    row.update({f"{prefix}p{LOW_QUANTILE}_ms": _ms(timing.low), f"{prefix}p50_ms": _ms(timing.p50),
                                f"{prefix}p90_ms": stats.p90 * 1e3, f"{prefix}p99_ms": stats.p99 * 1e3,
                                f"{prefix}runs": stats.runs})
            row["speedup"] = point.speedup
            row["speedup_ci_low"] = point.speedup_ci[0] if point.speedup_ci else None
            row["speedup_ci_high"] = point.speedup_ci[1] if point.speedup_ci else None
            row["headline"] = point.headline
            row["warning"] = point.warning
            row["error"] = point.error or point.ort.error or (point.eager.error if point.eager else None)
            rows.append(row)
        low = f"p{LOW_QUANTILE}_ms"
        columns = ["size", f"ort_{low}", "ort_p50_ms", "ort_p90_ms", "ort_p99_ms", "ort_runs", f"eager_{low}",
                   "eager_p50_ms", "eager_p90_ms", "eager_p99_ms", "eager_runs", "speedup", "speedup_ci_low",
                   "speedup_ci_high", "headline", "warning", "error"]
        always = ("size", "speedup", "speedup_ci_low", "speedup_ci_high", "headline", "warning", "error")
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


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1e3


def _threads_clause(note: str | None, config: BenchConfig | None) -> str:
    """The headline's few words on threads: fewer than asked, or more than the free cores."""
    if not note or config is None:
        return ""
    if note.startswith("timed at"):
        return f", at {config.threads} thread(s): other processes held the other cores"
    return f", {config.threads} threads on fewer free cores: expect stalls"


def _engine_timing(name: str, rounds: Rounds, rss: float | None) -> EngineTiming:
    i = rounds.index(name)
    return EngineTiming(name, LatencyStats.from_samples(rounds.samples[i]), None, rounds.warmup_runs[i], rounds.stopped,
                        rounds.seconds, rss, rounds.figures(name))


@contextlib.contextmanager
def _eager_context(model: Any) -> Any:
    """Inference mode, the buffers of ``model`` (a twin of the user's) preserved, torch's thread count restored."""
    import torch

    previous = torch.get_num_threads()
    try:
        with preserved_buffers(model), torch.inference_mode():
            yield
    finally:
        torch.set_num_threads(previous)


def _prepare_variants(session: ExportArtifacts, variants: Sequence[Variant], feeds: Mapping[str, Any], args: tuple[Any, ...],
                      kwargs: Mapping[str, Any], threads: int, provider: str,
                      reporter: Reporter | None = None, *,
                      eager_model: Any = None) -> tuple[list[Contender], list[VariantTiming]]:
    """A contender per variant that could be set up, and a row per variant (with its error,
    model size and memory). ``reporter``'s cancel token is checked before each variant (raises
    :class:`~exporter.events.Cancelled`). The unoptimized model is the translate stage's output
    (what ``optimize=False`` exports)."""
    contenders, rows = [], []
    unoptimized: OrtModel | None = None  # owns its external-data copy, if any
    for variant in variants:
        count = variant.threads or threads
        if reporter is not None:
            reporter.check()
        try:
            if variant.engine == "eager":
                contender = eager_contender(variant.name, session.model if eager_model is None else eager_model,
                                            args, kwargs, count)
                contender.before()  # type: ignore[misc]
                before = rss_bytes()
                contender.call(None)
                rows.append(VariantTiming(variant, threads=count, model_mb=state_mb(session.model),
                                          rss_growth_mb=rss_growth_mb(before)))
            else:
                if variant.model == "unoptimized":
                    if unoptimized is None:
                        unoptimized = OrtModel(session.stage_output("translate"))
                    source = unoptimized.source
                else:
                    source = session.ort_model.source
                session.ort_model.make_room()
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
    session: ExportArtifacts,
    *,
    inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
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
    progress: Reporter | Callable[[Progress], Any] | None = None,
    runner: OrtRunner | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
    fit_threads: bool | None = None,
) -> BenchmarkResult:
    """Time the ONNX model in onnxruntime and (``eager=True``) the module in eager PyTorch.

    Compared engines never disturb each other: onnxruntime runs with its pool threads not
    spinning after a run (a ``runner`` passed in is switched with :meth:`OrtRunner.parked` and
    restored afterwards), both use the same thread count, and they are timed in interleaved
    rounds (:func:`~exporter.bench.rounds.time_rounds`) so that load on the machine hits both
    alike. ``result.headline`` is eager's p10 call over onnxruntime's (each round's p10, median
    over rounds; a bootstrap interval over rounds), a range with the reason when the rounds
    disagree (:mod:`exporter.bench.headline`), and ``result.noise`` measures how busy the
    machine was (``result.warning`` says so plainly). onnxruntime alone (``eager=False``, no
    ``compare``) keeps onnxruntime's spinning default.

    Args:
        inputs: ``(args, kwargs)`` to time; default the example inputs.
        sizes: generate inputs at these dim sizes instead (``{"batch": 32}``).
        budget: seconds of timed calls per contender (warm-up excluded).
        min_runs / max_runs / precision: see :func:`~exporter.bench.rounds.time_rounds`.
        threads: intra-op threads for onnxruntime and ``torch.set_num_threads`` for eager;
            default ``torch.get_num_threads()``, lowered to the cores other processes leave
            free (see ``fit_threads``).
        fit_threads: measure, before timing, how many cores other processes leave free
            (:class:`~exporter.bench.noise.FreeCores`) and time both engines at that many
            threads when fewer than asked (``result.threads_note`` says so): more OpenMP
            threads than free cores stall at their barriers. Default: only when ``threads``
            is not given (and no ``runner``).
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
    started = time.perf_counter()
    reporter = progress if isinstance(progress, Reporter) else Reporter(observer, cancel, progress)
    fit = (threads is None if fit_threads is None else fit_threads) and runner is None
    threads = runner.settings["intra_op_num_threads"] if runner is not None else default_threads(threads)
    threads, threads_note = _fit_threads(threads, fit, runner is None)
    variants = variants_of(compare, threads)
    compared = eager or bool(variants)
    try:
        reporter.check()
        model_source = session.ort_model.source
    except Cancelled:
        return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, None, cancelled=True,
                               seconds=time.perf_counter() - started)
    except ExportError as exc:  # the export failed: nothing to time
        return _failed(exc, started)
    args, kwargs, used_sizes = inputs_for(session, sizes, inputs, seed)  # a caller's typo raises here
    rss_ort = None
    try:
        if runner is None:
            session.ort_model.make_room()
        before = rss_bytes()
        if runner is None:
            runner = OrtRunner(model_source, threads=threads, provider=provider, optimization_level=optimization_level,
                               spinning=not compared)
            rss_ort = before
        feeds = session.feeds(*args, **kwargs)
        shapes = tuple((name, feed_shape(value)) for name, value in feeds.items())
    except Exception as exc:  # noqa: BLE001 - onnxruntime refused the model or the inputs
        return _failed(exc, started)
    with contextlib.ExitStack() as stack:
        stack.enter_context(runner.parked() if compared else contextlib.nullcontext())
        eager_model = twin_of(session.model)  # eager is timed on a twin: the user's module is never called
        stack.enter_context(_eager_context(eager_model))
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
            contender = eager_contender("eager", eager_model, args, kwargs, threads)
            try:
                contender.before()  # type: ignore[misc]
                before = rss_bytes()
                contender.call(None)  # a model that raises is reported, not timed
                eager_rss = rss_growth_mb(before)
                contenders.append(contender)
            except Exception as exc:  # noqa: BLE001
                eager_timing = EngineTiming("eager", error=first_line(exc))
        try:
            extra, rows = _prepare_variants(session, variants, feeds, args, kwargs, threads, provider, reporter,
                                            eager_model=eager_model)
        except Cancelled:
            return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, config, used_sizes, shapes,
                                   cancelled=True, seconds=time.perf_counter() - started)
        contenders.extend(extra)
        if not contenders:
            return BenchmarkResult(ort_timing or EngineTiming("onnxruntime", error="nothing to time"), eager_timing,
                                   config, used_sizes, shapes, threads_note=threads_note,
                                   seconds=time.perf_counter() - started)
        probe = LoadProbe()
        try:
            rounds = time_rounds(contenders, budget=budget, min_runs=min_runs, max_runs=max_runs, warmup=warmup,
                                 precision=precision, rewarm=1 if len(contenders) > 1 else 0, progress=reporter)
        except Cancelled:
            return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, config, used_sizes, shapes,
                                   cancelled=True, seconds=time.perf_counter() - started)
        except Exception as exc:  # noqa: BLE001 - an engine raised part-way
            failed = EngineTiming("onnxruntime", error=first_line(exc))
            return BenchmarkResult(failed, EngineTiming("eager", error=first_line(exc)) if eager else None, config,
                                   used_sizes, shapes, seconds=time.perf_counter() - started)
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
    result = result_of_rounds(rounds, load, ort_timing, eager_timing, comparison_rows,
                              BenchmarkResult(ort_timing, eager_timing, config, used_sizes, shapes,
                                              threads_note=threads_note))
    return dataclasses.replace(result, seconds=time.perf_counter() - started)


def result_of_rounds(rounds: Rounds, load: Any, ort_timing: EngineTiming | None = None,
                     eager_timing: EngineTiming | None = None, comparison_rows: list[VariantTiming] | None = None,
                     base: BenchmarkResult | None = None) -> BenchmarkResult:
    """The result of rounds timing ``onnxruntime`` (and ``eager``): the headline, its interval,
    whether the rounds disagree, the noise and the comparison, added to ``base``."""
    if ort_timing is None:
        ort_timing = _engine_timing("onnxruntime", rounds, None)
    if eager_timing is None and "eager" in rounds.names:
        eager_timing = _engine_timing("eager", rounds, None)
    if base is None:
        base = BenchmarkResult(ort_timing, eager_timing, None)
    speedups: tuple[float, ...] = ()
    interval = p50_interval = None
    eager_rounds = eager_timing.rounds if eager_timing is not None else None
    ort_rounds = ort_timing.rounds
    if eager_rounds is not None and ort_rounds is not None:
        speedups = tuple(e / o for e, o in zip(eager_rounds.lows, ort_rounds.lows) if o > 0)
        interval = bootstrap_ratio_ci(eager_rounds.lows, ort_rounds.lows)
        p50_interval = bootstrap_ratio_ci(eager_rounds.medians, ort_rounds.medians)
    tails = tuple((name, stats.p90 / stats.p50) for name, stats in
                  ((t.engine, t.stats) for t in (ort_timing, eager_timing) if t is not None and t.stats is not None)
                  if stats.p50 > 0)
    speedup = ratio_of(eager_rounds.lows, ort_rounds.lows) if eager_rounds is not None and ort_rounds is not None else None
    noise = Noise.assess(rounds.rounds, speedup, interval, speedups, tails, load)
    spread = None
    if eager_rounds is not None and ort_rounds is not None:
        busy = noise.dispersion_reasons < len(noise.reasons)  # a load reason was crossed
        spread = unsteady(eager_rounds, ort_rounds, ("eager", "onnxruntime"), interval, busy)
    comparison = comparison_of(rounds, "onnxruntime", comparison_rows, noise.warning) if comparison_rows else None
    return dataclasses.replace(base, speedup_rounds=speedups, speedup_ci=interval, speedup_p50_ci=p50_interval,
                               unsteady=spread, noise=noise, comparison=comparison)


def _fit_threads(threads: int, fit: bool, measure: bool) -> tuple[int, str | None]:
    """The thread count to time at and a sentence when it differs from ``threads`` (``fit``)
    or when ``threads`` exceeds the free cores (asked explicitly)."""
    if not measure or threads <= 1:
        return threads, None
    cores = FreeCores.measure()
    return cores.fit(threads) if fit else (threads, cores.crowded(threads))


def _failed(exc: BaseException, started: float) -> BenchmarkResult:
    return BenchmarkResult(EngineTiming("onnxruntime", error=first_line(exc)), None, None, error=first_line(exc),
                           failure=Failure.from_exception(exc, "benchmark"), seconds=time.perf_counter() - started)


def _resolve_dim(session: ExportArtifacts, dim: Any) -> str:
    """The label of the dim group ``dim`` names (its label, or one of its axes as an ``Axis``,
    ``("x", 0)``, ``"x.0"`` or ``"x.shape[0]"``); the first group for None."""
    groups = dim_groups(session)
    if not groups:
        raise ValueError("no dynamic dim to sweep: every input dim is static")
    return groups[0].label if dim is None else resolve_group(groups, dim).label


def benchmark_sweep(
    session: ExportArtifacts,
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
    fit_threads: bool | None = None,
) -> SweepResult:
    """Latency of onnxruntime and eager PyTorch at each size of one dynamic dim (given by
    its label: a Dim name such as ``"batch"``, or ``"x.shape[0]"``; or by one of its axes:
    ``Axis("x", 0)``, ``("x", 0)``, ``"x.0"``); other dims stay at the
    example size. One onnxruntime session serves every size. Each size is timed as
    :func:`benchmark` does: interleaved rounds, spinning off, the ratio with its interval and
    the noise seen at that size (``SweepResult.warning`` lists the sizes measured on a busy
    machine). Threads are fitted to the free cores once, before the first size (see
    :func:`benchmark`'s ``fit_threads``). Raises ``ValueError`` at once for a ``dim`` that
    names no dynamic dim; ``cancel`` is checked between timing batches."""
    started = time.perf_counter()
    reporter = Reporter(observer, cancel, progress)
    fit = threads is None if fit_threads is None else fit_threads
    threads = default_threads(threads)
    threads, threads_note = _fit_threads(threads, fit, True)
    try:
        model_source = session.ort_model.source
    except Cancelled:
        return SweepResult(str(dim), tuple(sizes), (), None, cancelled=True, seconds=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - the export failed: nothing to time
        return _failed_sweep(str(dim), sizes, exc, started)
    label = _resolve_dim(session, dim)  # a caller's typo raises here
    try:
        session.ort_model.make_room()
        runner = OrtRunner(model_source, threads=threads, provider=provider, optimization_level=optimization_level,
                           spinning=not eager)
    except Exception as exc:  # noqa: BLE001 - e.g. onnxruntime has no kernel for a dtype
        return _failed_sweep(label, sizes, exc, started)
    config = bench_config(runner, threads, provider, budget, min_runs, precision, interleaved=eager)
    points: list[BenchmarkResult] = []
    total = len(sizes)
    for i, size in enumerate(sizes):
        point = benchmark(session, sizes={label: size}, budget=budget, min_runs=min_runs, precision=precision,
                          threads=threads, provider=provider, optimization_level=optimization_level, eager=eager,
                          seed=seed, progress=reporter.scaled("sweep", i, 1.0, total, f"{label}={size}: ", phases=()),
                          runner=runner)
        if point.cancelled:
            return SweepResult(label, tuple(sizes[: len(points)]), tuple(points), config, cancelled=True,
                               threads_note=threads_note, seconds=time.perf_counter() - started)
        points.append(point)
    reporter.progress("sweep", total, total, "done")
    return SweepResult(label, tuple(sizes), tuple(points), config, threads_note=threads_note,
                       seconds=time.perf_counter() - started)


def _failed_sweep(dim: str, sizes: Sequence[int], exc: BaseException, started: float) -> SweepResult:
    return SweepResult(dim, tuple(sizes), (), None, first_line(exc), failure=Failure.from_exception(exc, "benchmark_sweep"),
                       seconds=time.perf_counter() - started)
