"""benchmark() and benchmark_sweep(): onnxruntime vs eager latency, and their results."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ExportError, Failure, first_line
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..progress import Progress
from .runner import BenchConfig, OrtRunner, bench_config, default_threads, inputs_for
from .stats import LatencyStats
from .timing import time_calls


@dataclass(frozen=True)
class EngineTiming:
    """One engine's measurement: ``stats`` on success, ``error`` otherwise."""

    engine: str
    stats: LatencyStats | None = None
    error: str | None = None
    warmup_runs: int = 0
    stopped: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.stats is not None


@dataclass(frozen=True)
class BenchmarkResult:
    """onnxruntime (and eager PyTorch) latency at one set of inputs."""

    ort: EngineTiming
    eager: EngineTiming | None
    config: BenchConfig | None
    sizes: tuple[tuple[str, int], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    error: str | None = None
    failure: Failure | None = None
    cancelled: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None and self.ort.ok and not self.cancelled

    @property
    def status(self) -> str:
        """``ok``, ``failed`` (see ``error``) or ``cancelled``."""
        return "cancelled" if self.cancelled else "ok" if self.ok else "failed"

    @property
    def speedup(self) -> float | None:
        """Eager p50 / onnxruntime p50: above 1 means onnxruntime is faster."""
        if self.eager is None or not (self.eager.ok and self.ort.ok):
            return None
        return self.eager.stats.p50 / self.ort.stats.p50  # type: ignore[union-attr]

    @property
    def ratio(self) -> float | None:
        """onnxruntime p50 / eager p50 (below 1 means onnxruntime is faster)."""
        speedup = self.speedup
        return None if speedup is None else 1.0 / speedup

    def to_frame(self) -> Any:
        import pandas as pd

        rows = []
        for timing in (self.ort, self.eager):
            if timing is None:
                continue
            row: dict[str, Any] = {"engine": timing.engine}
            if timing.stats is not None:
                row.update(timing.stats.to_dict())
            row.update({"warmup_runs": timing.warmup_runs, "stopped": timing.stopped, "error": timing.error})
            rows.append(row)
        return pd.DataFrame(rows)

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
            lines.append(f"  onnxruntime / eager p50 = {self.ratio:.3f} (onnxruntime {self.speedup:.2f}x {'faster' if self.speedup >= 1 else 'slower'})")
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
            row["error"] = point.error or point.ort.error or (point.eager.error if point.eager else None)
            rows.append(row)
        columns = ["size", "ort_p50_ms", "ort_p90_ms", "ort_p99_ms", "ort_runs", "eager_p50_ms", "eager_p90_ms",
                   "eager_p99_ms", "eager_runs", "speedup", "error"]
        frame = pd.DataFrame(rows)
        return frame.reindex(columns=[c for c in columns if c in frame.columns or c in ("size", "speedup", "error")])

    def summary(self) -> str:
        if self.cancelled:
            return f"Sweep over {self.dim} cancelled after {len(self.points)} size(s)"
        if self.error:
            return f"Sweep over {self.dim} could not run: {self.error}"
        lines = [f"Latency vs {self.dim}" + (f" ({self.config.describe()})" if self.config else "")]
        lines.append(f"  {'size':>6} {'ort p50 ms':>11} {'eager p50 ms':>13} {'speedup':>8}")
        for size, point in zip(self.sizes, self.points):
            ort_ms = f"{point.ort.stats.p50 * 1e3:.4g}" if point.ort.stats else "error"
            eager_ms = f"{point.eager.stats.p50 * 1e3:.4g}" if point.eager and point.eager.stats else "-"
            speed = f"{point.speedup:.2f}x" if point.speedup else "-"
            lines.append(f"  {size:>6} {ort_ms:>11} {eager_ms:>13} {speed:>8}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    def _repr_html_(self) -> str:
        from ..display import repr_html

        return repr_html(self)


def _time_ort(runner: OrtRunner, feeds: Mapping[str, Any], **timing: Any) -> EngineTiming:
    start = time.perf_counter()
    try:
        binding = runner.bind(feeds)
        result = time_calls(runner.session.run_with_iobinding, binding, task="onnxruntime", **timing)
    except Exception as exc:  # noqa: BLE001
        return EngineTiming("onnxruntime", error=first_line(exc), seconds=time.perf_counter() - start)
    return EngineTiming("onnxruntime", LatencyStats.from_samples(result.samples), None, result.warmup_runs,
                        result.stopped, time.perf_counter() - start)


def _time_eager(model: Any, args: tuple, kwargs: Mapping[str, Any], threads: int, **timing: Any) -> EngineTiming:
    import torch

    from ..eager import preserved_buffers

    start = time.perf_counter()
    previous = torch.get_num_threads()
    kwargs = dict(kwargs)

    def call(_: Any) -> None:
        model(*args, **kwargs)

    try:
        torch.set_num_threads(threads)
        with preserved_buffers(model), torch.inference_mode():
            result = time_calls(call, None, task="eager", **timing)
    except Exception as exc:  # noqa: BLE001
        return EngineTiming("eager", error=first_line(exc), seconds=time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    return EngineTiming("eager", LatencyStats.from_samples(result.samples), None, result.warmup_runs,
                        result.stopped, time.perf_counter() - start)


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
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
    runner: OrtRunner | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
) -> BenchmarkResult:
    """Time the ONNX model in onnxruntime and (``eager=True``) the module in eager PyTorch.

    Args:
        inputs: ``(args, kwargs)`` to time; default the example inputs.
        sizes: generate inputs at these dim sizes instead (``{"batch": 32}``).
        budget: seconds of timed calls per engine (warm-up excluded).
        min_runs / max_runs / precision: see :func:`time_calls`.
        threads: intra-op threads for onnxruntime and ``torch.set_num_threads`` for eager;
            default ``torch.get_num_threads()``.
        optimization_level: onnxruntime graph optimizations: disable / basic / extended / all.
        progress: called with :class:`~exporter.verify.Progress` (task ``onnxruntime`` /
            ``eager``, done/total in seconds of budget).
        runner: an :class:`OrtRunner` to reuse (one onnxruntime session for several calls);
            its own threads / provider / optimization level then apply.
        observer / cancel: an :class:`~exporter.events.Observer` told the progress between
            timing batches, and a :class:`~exporter.events.CancelToken` checked there (the
            result is then ``cancelled``).
    """
    reporter = progress if isinstance(progress, Reporter) else Reporter(observer, cancel, progress)
    threads = runner.settings["intra_op_num_threads"] if runner is not None else default_threads(threads)
    timing = dict(budget=budget, min_runs=min_runs, max_runs=max_runs, warmup=warmup, precision=precision, progress=reporter)
    try:
        reporter.check()
        model_bytes = session.model_bytes
    except Cancelled:
        return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, None, cancelled=True)
    except ExportError as exc:  # the export failed: nothing to time
        return _failed(exc)
    args, kwargs, used_sizes = inputs_for(session, sizes, inputs, seed)  # a caller's typo raises here
    try:
        runner = runner or OrtRunner(model_bytes, threads=threads, provider=provider,
                                     optimization_level=optimization_level)
        feeds = session.feeds(*args, **kwargs)
        shapes = tuple((name, tuple(int(d) for d in array.shape)) for name, array in feeds.items())
    except Exception as exc:  # noqa: BLE001 - onnxruntime refused the model or the inputs
        return _failed(exc)
    config = bench_config(runner, threads, provider, budget, min_runs, precision)
    try:
        ort_timing = _time_ort(runner, feeds, **timing)
        eager_timing = _time_eager(session.model, args, kwargs, threads, **timing) if eager else None
    except Cancelled:
        return BenchmarkResult(EngineTiming("onnxruntime", error="cancelled"), None, config, used_sizes, shapes,
                               cancelled=True)
    return BenchmarkResult(ort_timing, eager_timing, config, used_sizes, shapes)


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
    example size. One onnxruntime session serves every size. Raises ``ValueError`` at once for
    a ``dim`` that names no dynamic dim; ``cancel`` is checked between timing batches."""
    reporter = Reporter(observer, cancel, progress)
    threads = default_threads(threads)
    try:
        model_bytes = session.model_bytes
    except Cancelled:
        return SweepResult(str(dim), tuple(sizes), (), None, cancelled=True)
    except Exception as exc:  # noqa: BLE001 - the export failed: nothing to time
        return SweepResult(str(dim), tuple(sizes), (), None, first_line(exc))
    label = _resolve_dim(session, dim)  # a caller's typo raises here
    try:
        runner = OrtRunner(model_bytes, threads=threads, provider=provider, optimization_level=optimization_level)
    except Exception as exc:  # noqa: BLE001 - e.g. onnxruntime has no kernel for a dtype
        return SweepResult(label, tuple(sizes), (), None, first_line(exc))
    config = bench_config(runner, threads, provider, budget, min_runs, precision)
    points: list[BenchmarkResult] = []
    total = len(sizes)
    for i, size in enumerate(sizes):
        point = benchmark(session, sizes={label: size}, budget=budget, min_runs=min_runs, precision=precision,
                          threads=threads, provider=provider, optimization_level=optimization_level, eager=eager,
                          seed=seed, progress=reporter.scaled("sweep", i, 1.0, total, f"{label}={size}: "),
                          runner=runner)
        if point.cancelled:
            return SweepResult(label, tuple(sizes[: len(points)]), tuple(points), config, cancelled=True)
        points.append(point)
    reporter.progress("sweep", total, total, "done")
    return SweepResult(label, tuple(sizes), tuple(points), config)
