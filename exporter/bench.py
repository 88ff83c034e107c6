"""Latency of the ONNX model in onnxruntime, against eager PyTorch, measured properly.

onnxruntime runs through IO binding: inputs are bound once as ``OrtValue``s and outputs are
bound to ``OrtValue``s preallocated by a first run, so the timed loop calls
``InferenceSession.run_with_iobinding`` and nothing else (no numpy conversion, no allocation
of feeds). Eager PyTorch runs under ``torch.inference_mode()`` with ``torch.set_num_threads``
set to the same thread count as onnxruntime's ``intra_op_num_threads`` (restored afterwards).

Each engine is warmed up, then timed call by call (``time.perf_counter_ns``) in growing batches
until the time budget is spent (and at least ``min_runs`` calls are done), or earlier once
there are 300 samples (so p99 rests on a few calls) and the 95% confidence interval of the
median is within ``precision`` of it. Statistics:
p50/p90/p99, mean ± stdev with a 95% confidence interval of the mean (Student t), and a
distribution-free 95% interval of the median (order statistics).

Everything returned is a frozen dataclass with ``to_frame()`` and ``summary()``; a failure
(an engine that raises, an export that failed) is recorded in the result, never raised.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import first_line
from .verify import Progress, _report

__all__ = [
    "BenchConfig",
    "BenchmarkResult",
    "EngineTiming",
    "LatencyStats",
    "NodeTime",
    "OrtRunner",
    "ProfileResult",
    "SweepResult",
    "benchmark",
    "benchmark_sweep",
    "profile",
    "time_calls",
]


# -- statistics ---------------------------------------------------------------------------------

_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
        2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
        2.052, 2.048, 2.045, 2.042)


def _t95(df: int) -> float:
    """Two-sided 95% Student t quantile."""
    if df <= 0:
        return math.inf
    if df <= len(_T95):
        return _T95[df - 1]
    return 1.96 + 2.4 / df  # within 0.3% of the exact quantile above 30 degrees of freedom


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (numpy's default) of sorted data."""
    if not ordered:
        return math.nan
    position = (len(ordered) - 1) * q / 100.0
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _median_ci(ordered: Sequence[float]) -> tuple[float, float]:
    n = len(ordered)
    if n < 6:
        return (ordered[0], ordered[-1]) if ordered else (math.nan, math.nan)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, int(math.floor(n / 2 - half)) - 1)
    high = min(n - 1, int(math.ceil(n / 2 + half)))
    return ordered[low], ordered[high]


@dataclass(frozen=True)
class LatencyStats:
    """Per-call latency statistics, in seconds (``*_ms`` properties for milliseconds)."""

    runs: int
    p50: float
    p90: float
    p99: float
    mean: float
    stdev: float
    min: float
    max: float
    mean_ci: tuple[float, float]
    median_ci: tuple[float, float]
    samples: tuple[float, ...] = field(default=(), repr=False)

    @classmethod
    def from_samples(cls, samples: Sequence[float]) -> LatencyStats:
        values = [float(s) for s in samples]
        if not values:
            raise ValueError("no samples")
        ordered = sorted(values)
        n = len(values)
        mean = math.fsum(values) / n
        stdev = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1)) if n > 1 else 0.0
        half = _t95(n - 1) * stdev / math.sqrt(n) if n > 1 else math.inf
        return cls(
            runs=n,
            p50=_percentile(ordered, 50),
            p90=_percentile(ordered, 90),
            p99=_percentile(ordered, 99),
            mean=mean,
            stdev=stdev,
            min=ordered[0],
            max=ordered[-1],
            mean_ci=(mean - half, mean + half),
            median_ci=_median_ci(ordered),
            samples=tuple(values),
        )

    @property
    def relative_median_ci(self) -> float:
        """Half-width of the median's 95% interval relative to the median."""
        low, high = self.median_ci
        return (high - low) / 2 / self.p50 if self.p50 > 0 else math.inf

    def to_dict(self, prefix: str = "") -> dict[str, float]:
        ms = 1e3
        return {
            f"{prefix}runs": self.runs,
            f"{prefix}p50_ms": self.p50 * ms,
            f"{prefix}p90_ms": self.p90 * ms,
            f"{prefix}p99_ms": self.p99 * ms,
            f"{prefix}mean_ms": self.mean * ms,
            f"{prefix}stdev_ms": self.stdev * ms,
            f"{prefix}mean_ci_low_ms": self.mean_ci[0] * ms,
            f"{prefix}mean_ci_high_ms": self.mean_ci[1] * ms,
            f"{prefix}median_ci_low_ms": self.median_ci[0] * ms,
            f"{prefix}median_ci_high_ms": self.median_ci[1] * ms,
            f"{prefix}min_ms": self.min * ms,
            f"{prefix}max_ms": self.max * ms,
        }

    def summary(self) -> str:
        ms = 1e3
        half = (self.mean_ci[1] - self.mean_ci[0]) / 2 * ms
        return (
            f"p50 {self.p50 * ms:.4g} ms  p90 {self.p90 * ms:.4g}  p99 {self.p99 * ms:.4g}  "
            f"mean {self.mean * ms:.4g} ± {self.stdev * ms:.2g} ms (95% CI ±{half:.2g})  n={self.runs}"
        )

    def __repr__(self) -> str:
        return f"LatencyStats({self.summary()})"


# -- the timing loop ----------------------------------------------------------------------------


@dataclass(frozen=True)
class _Timing:
    samples: tuple[float, ...]
    warmup_runs: int
    stopped: str


def time_calls(
    call: Callable[[Any], Any],
    arg: Any = None,
    *,
    budget: float = 1.0,
    min_runs: int = 50,
    max_runs: int = 1_000_000,
    warmup: int = 5,
    precision: float = 0.01,
    progress: Callable[[Progress], Any] | None = None,
    task: str = "benchmark",
) -> _Timing:
    """Time ``call(arg)`` one call at a time.

    Warm-up: ``warmup`` calls and at least 10% of the budget (at most 0.5 s); a slow model
    stops warming up after 2 calls once a quarter of the budget is spent. Then batches of
    growing size until the budget is spent (``stopped="budget"``) with at least ``min_runs``
    samples (a slow model stops at 3x the budget with fewer), or ``max_runs``, or, after 300
    samples, once the median's 95% CI is within ``precision`` of the median (``"precision"``;
    ``precision=0`` always runs the whole budget).
    The loop body is ``t0 = perf_counter_ns(); call(arg); append(perf_counter_ns() - t0)``:
    statistics and progress run between batches."""
    perf = time.perf_counter_ns
    warm_start = time.perf_counter()
    warm_min = min(0.1 * budget, 0.5)
    warm_cap = max(0.25 * budget, warm_min)
    warmup_runs = 0
    while True:
        call(arg)
        warmup_runs += 1
        warm = time.perf_counter() - warm_start
        if warmup_runs >= 10_000 or (warmup_runs >= warmup and warm >= warm_min) or (warmup_runs >= 2 and warm >= warm_cap):
            break
    per_call = warm / warmup_runs
    samples: list[int] = []
    append = samples.append
    start = time.perf_counter()
    deadline = start + budget
    hard_deadline = start + 3 * budget
    batch = max(1, min(10, max_runs, int(0.1 * budget / per_call) if per_call > 0 else 10))
    stopped = "budget"
    while True:
        for _ in range(batch):
            t0 = perf()
            call(arg)
            append(perf() - t0)
        n = len(samples)
        now = time.perf_counter()
        _report(progress, task, min(now - start, budget), budget, f"{n} runs")
        if n >= max_runs:
            stopped = "max_runs"
            break
        if now >= hard_deadline or (now >= deadline and n >= min_runs):
            stopped = "budget"
            break
        if precision > 0 and n >= max(min_runs, 300):
            ordered = sorted(samples)
            low, high = _median_ci(ordered)
            median = _percentile(ordered, 50)
            if median > 0 and (high - low) / 2 / median <= precision:
                stopped = "precision"
                break
        per_call = (now - start) / n
        target = deadline if n >= min_runs else hard_deadline
        batch = max(10, n // 2)
        if per_call > 0:
            batch = min(batch, int(max(target - now, 0.0) / per_call) + 1)
        batch = max(1, min(batch, max_runs - n))
    return _Timing(tuple(s / 1e9 for s in samples), warmup_runs, stopped)


# -- engines ------------------------------------------------------------------------------------

_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}


class OrtRunner:
    """One onnxruntime session with explicit options; :meth:`bind` prepares an IO binding."""

    def __init__(
        self,
        model_bytes: bytes,
        *,
        threads: int,
        provider: str = "CPUExecutionProvider",
        optimization_level: str = "all",
        profile_prefix: str | None = None,
    ) -> None:
        import onnxruntime as ort

        if optimization_level not in _LEVELS:
            raise ValueError(f"optimization_level must be one of {sorted(_LEVELS)}, not {optimization_level!r}")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[optimization_level])
        options.log_severity_level = 3
        if profile_prefix is not None:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        self.options = options
        self._alive: list[Any] = []
        self.session = ort.InferenceSession(model_bytes, options, providers=[provider])
        self.provider = self.session.get_providers()[0]
        self.settings = {
            "intra_op_num_threads": threads,
            "inter_op_num_threads": 1,
            "execution_mode": "sequential",
            "graph_optimization_level": _LEVELS[optimization_level],
            "io_binding": True,
            "enable_cpu_mem_arena": bool(options.enable_cpu_mem_arena),
            "enable_mem_pattern": bool(options.enable_mem_pattern),
        }

    def bind(self, feeds: Mapping[str, Any]) -> Any:
        """An IO binding with inputs as OrtValues and outputs preallocated by one run."""
        import numpy as np
        import onnxruntime as ort

        binding = self.session.io_binding()
        kept = []
        for item in self.session.get_inputs():
            value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(feeds[item.name]))
            binding.bind_ortvalue_input(item.name, value)
            kept.append(value)
        outputs = [o.name for o in self.session.get_outputs()]
        for name in outputs:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        produced = binding.get_outputs()
        binding.clear_binding_outputs()
        for name, value in zip(outputs, produced):
            binding.bind_ortvalue_output(name, value)
        self._alive.append((binding, kept, produced))  # the OrtValues must outlive the binding
        return binding

    def run(self, binding: Any) -> None:
        self.session.run_with_iobinding(binding)


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
class BenchConfig:
    """What the numbers were measured under."""

    threads: int
    provider: str
    session_options: Mapping[str, Any]
    budget: float
    min_runs: int
    precision: float
    onnxruntime_version: str
    torch_version: str
    cpu_count: int | None = None

    def describe(self) -> str:
        level = self.session_options.get("graph_optimization_level", "?")
        return (
            f"{self.threads} thread(s), {self.provider}, {level}, IO binding; eager in inference_mode "
            f"with torch.set_num_threads({self.threads}); onnxruntime {self.onnxruntime_version}, "
            f"torch {self.torch_version}"
        )


@dataclass(frozen=True)
class BenchmarkResult:
    """onnxruntime (and eager PyTorch) latency at one set of inputs."""

    ort: EngineTiming
    eager: EngineTiming | None
    config: BenchConfig | None
    sizes: tuple[tuple[str, int], ...] = ()
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.ort.ok

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


@dataclass(frozen=True)
class SweepResult:
    """Latency against the size of one dynamic dim."""

    dim: str
    sizes: tuple[int, ...]
    points: tuple[BenchmarkResult, ...]
    config: BenchConfig | None = None
    error: str | None = None

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


def _config(runner: OrtRunner | None, threads: int, provider: str, budget: float, min_runs: int, precision: float) -> BenchConfig:
    import onnxruntime as ort
    import torch

    return BenchConfig(
        threads=threads,
        provider=runner.provider if runner else provider,
        session_options=dict(runner.settings) if runner else {},
        budget=budget,
        min_runs=min_runs,
        precision=precision,
        onnxruntime_version=ort.__version__,
        torch_version=torch.__version__,
        cpu_count=os.cpu_count(),
    )


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

    start = time.perf_counter()
    previous = torch.get_num_threads()
    kwargs = dict(kwargs)

    def call(_: Any) -> None:
        model(*args, **kwargs)

    try:
        torch.set_num_threads(threads)
        with torch.inference_mode():
            result = time_calls(call, None, task="eager", **timing)
    except Exception as exc:  # noqa: BLE001
        return EngineTiming("eager", error=first_line(exc), seconds=time.perf_counter() - start)
    finally:
        torch.set_num_threads(previous)
    return EngineTiming("eager", LatencyStats.from_samples(result.samples), None, result.warmup_runs,
                        result.stopped, time.perf_counter() - start)


def _default_threads(threads: int | None) -> int:
    if threads is not None:
        return int(threads)
    import torch

    return torch.get_num_threads()


def _inputs_for(session: Any, sizes: Mapping[str, int] | None, inputs: tuple[tuple, dict] | None, seed: int) -> tuple[tuple, dict, tuple[tuple[str, int], ...]]:
    if inputs is not None:
        return tuple(inputs[0]), dict(inputs[1]), ()
    if not sizes:
        return session.inputs.args, dict(session.inputs.kwargs), ()
    from .verify import dim_groups, make_case_inputs

    program = session.exported_program
    groups = dim_groups(session, program)
    labels = {g.label for g in groups}
    unknown = [k for k in sizes if k not in labels]
    if unknown:
        raise ValueError(f"unknown dim {unknown[0]!r}; dynamic dims: {sorted(labels)}")
    args, kwargs, _ = make_case_inputs(session, program, groups, dict(sizes), seed=seed)
    return args, kwargs, tuple(sizes.items())


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
    """
    threads = runner.settings["intra_op_num_threads"] if runner is not None else _default_threads(threads)
    timing = dict(budget=budget, min_runs=min_runs, max_runs=max_runs, warmup=warmup, precision=precision, progress=progress)
    try:
        args, kwargs, used_sizes = _inputs_for(session, sizes, inputs, seed)
        runner = runner or OrtRunner(session.model_proto.SerializeToString(), threads=threads, provider=provider,
                                     optimization_level=optimization_level)
        feeds = session.feeds(*args, **kwargs)
        shapes = tuple((name, tuple(int(d) for d in array.shape)) for name, array in feeds.items())
    except Exception as exc:  # noqa: BLE001 - export failed, bad sizes, onnxruntime refused the model
        return BenchmarkResult(EngineTiming("onnxruntime", error=first_line(exc)), None, None, error=first_line(exc))
    config = _config(runner, threads, provider, budget, min_runs, precision)
    ort_timing = _time_ort(runner, feeds, **timing)
    eager_timing = _time_eager(session.model, args, kwargs, threads, **timing) if eager else None
    return BenchmarkResult(ort_timing, eager_timing, config, used_sizes, shapes)


def _resolve_dim(session: Any, dim: Any) -> str:
    from .verify import dim_groups

    groups = dim_groups(session)
    if not groups:
        raise ValueError("no dynamic dim to sweep: every input dim is static")
    if dim is None:
        return groups[0].label
    if isinstance(dim, tuple):
        dim = f"{dim[0]}.shape[{dim[1]}]"
    for group in groups:
        if dim == group.label or dim in (f"{p}.shape[{a}]" for p, a in group.axes) or dim in (f"{p}.{a}" for p, a in group.axes):
            return group.label
    raise ValueError(f"unknown dim {dim!r}; dynamic dims: {[g.label for g in groups]}")


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
) -> SweepResult:
    """Latency of onnxruntime and eager PyTorch at each size of one dynamic dim (given by
    its label: a Dim name such as ``"batch"``, or ``"x.shape[0]"``); other dims stay at the
    example size. One onnxruntime session serves every size."""
    threads = _default_threads(threads)
    try:
        label = _resolve_dim(session, dim)
        runner = OrtRunner(session.model_proto.SerializeToString(), threads=threads, provider=provider,
                           optimization_level=optimization_level)
    except Exception as exc:  # noqa: BLE001
        return SweepResult(str(dim), tuple(sizes), (), None, first_line(exc))
    points = []
    total = len(sizes)

    def forward(index: int) -> Callable[[Progress], Any] | None:
        if progress is None:
            return None
        return lambda p: _report(progress, "sweep", index + p.fraction * 0.5 + (0.5 if p.task == "eager" else 0.0), total,
                                 f"{label}={sizes[index]}: {p.task} {p.message}")

    for i, size in enumerate(sizes):
        points.append(
            benchmark(session, sizes={label: size}, budget=budget, min_runs=min_runs, precision=precision,
                      threads=threads, provider=provider, optimization_level=optimization_level, eager=eager,
                      seed=seed, progress=forward(i), runner=runner)
        )
    _report(progress, "sweep", total, total, "done")
    return SweepResult(label, tuple(sizes), tuple(points), _config(runner, threads, provider, budget, min_runs, precision))


# -- per-node profiling -------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeTime:
    """Kernel time of one onnxruntime node over the profiled runs."""

    node: str
    kernel: str  # the op onnxruntime ran (may be a fused op such as FusedGemm)
    op_type: str | None  # the ONNX op of the model node it maps to
    module: str | None  # the torch module path of that node ("" = top level)
    fx_node: str | None
    calls: int
    total_us: float


@dataclass(frozen=True)
class ProfileResult:
    """onnxruntime per-node kernel times, aggregated by op type and by module path."""

    runs: int
    nodes: tuple[NodeTime, ...]
    config: BenchConfig | None = None
    error: str | None = None

    @property
    def total_us(self) -> float:
        return math.fsum(n.total_us for n in self.nodes)

    def to_frame(self, by: str = "node") -> Any:
        """``by``: ``node`` (one row per node), ``op_type`` (by the kernel onnxruntime ran) or ``module``."""
        import pandas as pd

        frame = pd.DataFrame(
            [(n.node, n.kernel, n.op_type, n.module, n.fx_node, n.calls, n.total_us) for n in self.nodes],
            columns=["node", "kernel", "op_type", "module", "fx_node", "calls", "total_us"],
        )
        runs = max(self.runs, 1)
        total = frame["total_us"].sum() or 1.0
        if by == "node":
            frame["us_per_run"] = frame["total_us"] / runs
            frame["share"] = frame["total_us"] / total
            return frame.sort_values("total_us", ascending=False, ignore_index=True)
        key = {"op_type": "kernel", "kernel": "kernel", "module": "module"}.get(by)
        if key is None:
            raise ValueError("by must be 'node', 'op_type' or 'module'")
        frame[key] = frame[key].fillna("(unmapped)").replace("", "(top level)")
        grouped = frame.groupby(key, as_index=False).agg(nodes=("node", "nunique"), calls=("calls", "sum"), total_us=("total_us", "sum"))
        grouped["us_per_run"] = grouped["total_us"] / runs
        grouped["share"] = grouped["total_us"] / total
        grouped = grouped.rename(columns={"kernel": "op_type"})
        return grouped.sort_values("total_us", ascending=False, ignore_index=True)

    def by_op_type(self) -> Any:
        return self.to_frame("op_type")

    def by_module(self) -> Any:
        return self.to_frame("module")

    def summary(self, top: int = 5) -> str:
        if self.error:
            return f"Profile could not run: {self.error}"
        lines = [f"onnxruntime profile: {self.runs} run(s), {self.total_us / max(self.runs, 1):.1f} us of kernels per run"]
        for by in ("op_type", "module"):
            frame = self.to_frame(by).head(top)
            parts = [f"{row[by if by != 'op_type' else 'op_type']} {row['share']:.0%}" for _, row in frame.iterrows()]
            lines.append(f"  by {by.replace('_', ' ')}: " + ", ".join(parts))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _node_map(model: Any) -> dict[str, tuple[str, str | None, str | None]]:
    from .verify import _fx_name_of, _module_path_of

    out = {}
    for node in model.graph:
        if node.name:
            out[node.name] = (node.op_type, _module_path_of(node.metadata_props.get("pkg.torch.onnx.name_scopes")), _fx_name_of(node))
    return out


def _map_node(name: str, known: Mapping[str, tuple[str, str | None, str | None]]) -> tuple[str | None, str | None, str | None]:
    base = name.removeprefix("fused ")
    if base in known:
        return known[base]
    prefixes = [k for k in known if base.startswith(k)]
    if prefixes:
        return known[max(prefixes, key=len)]
    return (None, None, None)


def parse_profile(events: Sequence[Mapping[str, Any]], model: Any, skip_runs: int = 1) -> tuple[int, tuple[NodeTime, ...]]:
    """Aggregate onnxruntime profile events (``end_profiling()`` JSON) per node, skipping
    the node events of the first ``skip_runs`` ``model_run``s."""
    runs = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    cutoff = runs[skip_runs - 1][1] if skip_runs and len(runs) >= skip_runs else -1
    known = _node_map(model)
    totals: dict[str, list[Any]] = {}
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        if event.get("ts", 0) <= cutoff:
            continue
        name = event["name"][: -len("_kernel_time")]
        entry = totals.setdefault(name, [event.get("args", {}).get("op_name", "?"), 0, 0.0])
        entry[1] += 1
        entry[2] += float(event.get("dur", 0))
    nodes = []
    for name, (kernel, calls, total) in totals.items():
        op_type, module, fx_node = _map_node(name, known)
        nodes.append(NodeTime(name, kernel, op_type, module, fx_node, calls, total))
    nodes.sort(key=lambda n: -n.total_us)
    return max(0, len(runs) - skip_runs), tuple(nodes)


def profile(
    session: Any,
    *,
    inputs: tuple[tuple, dict] | None = None,
    sizes: Mapping[str, int] | None = None,
    runs: int = 20,
    threads: int | None = None,
    provider: str = "CPUExecutionProvider",
    optimization_level: str = "all",
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
) -> ProfileResult:
    """Run onnxruntime's per-node profiler for ``runs`` runs (after one warm-up run) and map
    each node to its ONNX op, torch module path and FX node through the node metadata.
    With ``optimization_level="all"`` onnxruntime may fuse nodes; a fused node is mapped
    through the model node whose name it carries."""
    import json

    threads = _default_threads(threads)
    try:
        args, kwargs, _ = _inputs_for(session, sizes, inputs, seed)
        feeds = session.feeds(*args, **kwargs)
        model = session.onnx_model
        with tempfile.TemporaryDirectory(prefix="workbench-profile-") as directory:
            runner = OrtRunner(session.model_proto.SerializeToString(), threads=threads, provider=provider,
                               optimization_level=optimization_level, profile_prefix=os.path.join(directory, "ort"))
            binding = runner.bind(feeds)  # the first (warm-up) run
            for i in range(runs):
                runner.run(binding)
                _report(progress, "profile", i + 1, runs, f"run {i + 1}/{runs}")
            path = runner.session.end_profiling()
            with open(path, encoding="utf-8") as handle:
                events = json.load(handle)
    except Exception as exc:  # noqa: BLE001
        return ProfileResult(0, (), None, first_line(exc))
    counted, nodes = parse_profile(events, model, skip_runs=1)
    return ProfileResult(counted, nodes, _config(runner, threads, provider, 0.0, runs, 0.0))
