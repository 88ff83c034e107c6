"""What users compare next: variants of the ONNX model and of onnxruntime's settings, timed in
the same interleaved rounds as the headline (onnxruntime vs eager) and reported against a
baseline with the per-round ratio's interval, plus model size and memory.

A variant is data (:class:`Variant`); strings name the usual ones::

    "onnxruntime"            the exported model, optimized, level "all", the benchmark's threads
    "eager"                  the module in eager PyTorch
    "unoptimized"            the model before the ONNX optimizer (what the optimizer bought)
    "level=basic"            onnxruntime graph optimization level: disable / basic / extended / all
    "threads=1", "threads=all"   onnxruntime intra-op threads (all = os.cpu_count())
    "eager threads=1"        tokens combine: "unoptimized level=disable", ...
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import AnalysisOutcome, Failure
from .headline import bootstrap_ratio_ci, ratio_of
from ..presentation import Presentable
from .rounds import LOW_QUANTILE, Contender, RoundFigures, Rounds
from .stats import LatencyStats
from ..compat import tree_flatten_with_path, tree_replace_leaves

DEFAULT_VARIANTS = ("unoptimized", "level=disable", "level=basic", "level=extended", "threads=1", "threads=2",
                    "threads=all")
LEVELS = ("disable", "basic", "extended", "all")


@dataclass(frozen=True)
class Variant:
    """One contender: an engine, and for onnxruntime the model (``optimized`` by the exporter's
    ONNX optimizer or ``unoptimized``), the graph optimization level and the thread count
    (``None``: the benchmark's)."""

    name: str
    engine: str = "onnxruntime"
    model: str = "optimized"
    level: str = "all"
    threads: int | None = None

    @classmethod
    def parse(cls, spec: str | Variant) -> Variant:
        if isinstance(spec, Variant):
            return spec
        fields: dict[str, Any] = {"name": str(spec)}
        for token in str(spec).replace(",", " ").split():
            key, _, value = token.partition("=")
            if token in ("eager", "onnxruntime"):
                fields["engine"] = token
            elif token in ("optimized", "unoptimized"):
                fields["model"] = token
            elif key == "level" and value in LEVELS:
                fields["level"] = value
            elif key == "threads" and (value == "all" or value.isdigit()) and value != "0":
                fields["threads"] = (os.cpu_count() or 1) if value == "all" else int(value)
            else:
                raise ValueError(
                    f"unknown variant {spec!r} (token {token!r}); use eager, onnxruntime, unoptimized, "
                    f"level=disable|basic|extended|all, threads=N|all, or a Variant"
                )
        return cls(**fields)

    def key(self, threads: int) -> tuple[Any, ...]:
        """What makes two variants the same measurement."""
        if self.engine == "eager":
            return ("eager", self.threads or threads)
        return ("onnxruntime", self.model, self.level, self.threads or threads)


def variants_of(specs: Iterable[str | Variant] | bool | None, threads: int) -> tuple[Variant, ...]:
    """Parsed variants, without the headline pair and without duplicates (``True``: the defaults)."""
    if not specs:
        return ()
    if specs is True:
        specs = DEFAULT_VARIANTS
    elif isinstance(specs, (str, Variant)):
        specs = (specs,)
    seen = {Variant("onnxruntime").key(threads), Variant("eager", engine="eager").key(threads)}
    out = []
    for spec in specs:
        variant = Variant.parse(spec)
        if variant.key(threads) not in seen:
            seen.add(variant.key(threads))
            out.append(variant)
    return tuple(out)


def rss_bytes() -> int | None:
    """The process's resident set size (``/proc/self/statm``), ``None`` where there is none."""
    try:
        with open("/proc/self/statm", encoding="ascii") as handle:
            return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError, AttributeError):
        return None


def rss_growth_mb(before: int | None) -> float | None:
    after = rss_bytes()
    return None if before is None or after is None else max(after - before, 0) / 2**20


def ort_contender(name: str, runner: Any, binding: Any) -> Contender:
    return Contender(name, runner.session.run_with_iobinding, binding)


def eager_contender(name: str, model: Any, args: tuple[Any, ...], kwargs: Mapping[str, Any], threads: int) -> Contender:
    """Eager PyTorch as a contender. Inputs holding a container object other than a tuple,
    list or dict (a transformers ``DynamicCache``, which the model grows by the new positions
    on every call) are rebuilt around the same tensors for each call, so every call sees the
    inputs given (and the caller's object is never changed); the rebuild (microseconds) is
    timed with the call."""
    import torch

    kwargs = dict(kwargs)
    if _holds_object_container((args, kwargs)):

        inputs = (tuple(args), kwargs)
        leaves = [leaf for _, leaf in tree_flatten_with_path(inputs)]

        def call(_: Any) -> None:
            fresh_args, fresh_kwargs = tree_replace_leaves(inputs, leaves)
            model(*fresh_args, **fresh_kwargs)
    else:
        def call(_: Any) -> None:
            model(*args, **kwargs)

    return Contender(name, call, None, lambda: torch.set_num_threads(threads))


def _holds_object_container(value: Any) -> bool:
    import torch

    if isinstance(value, (tuple, list)):
        return any(_holds_object_container(v) for v in value)
    if isinstance(value, dict):
        return any(_holds_object_container(v) for v in value.values())
    return not (value is None or isinstance(value, (torch.Tensor, bool, int, float, complex, str)))


@dataclass(frozen=True)
class VariantTiming:
    """One variant's latency and its time relative to the baseline (``ratio``: variant /
    baseline, as the benchmark's headline: each round's p10 call, median over rounds, with a
    95% bootstrap interval over rounds; above 1 means slower than the baseline). ``rounds``
    holds the per-round figures (``rounds.low``, ``rounds.p50``); ``stats`` pools all calls.

    ``model_mb``: the serialized ONNX model (what ``save()`` writes); for eager, its parameters
    and buffers. ``rss_growth_mb``: what the process's resident memory grew by while building
    the variant's onnxruntime session and running it once (for eager: while running it once,
    its weights already being in memory). Freed memory is not subtracted and an allocator may
    reuse memory already held, so it is a rough lower bound of the peak, not the peak."""

    variant: Variant
    stats: LatencyStats | None = None
    ratio: float | None = None
    ratio_ci: tuple[float, float] | None = None
    threads: int | None = None
    model_mb: float | None = None
    rss_growth_mb: float | None = None
    error: str | None = None
    rounds: RoundFigures | None = None

    @property
    def name(self) -> str:
        return self.variant.name

    @property
    def low(self) -> float | None:
        """Seconds: each round's p10 call, median over rounds (the figure ``ratio`` divides)."""
        return self.rounds.low if self.rounds is not None else None

    @property
    def p50(self) -> float | None:
        """Seconds: each round's median call, median over rounds (pooled p50 without rounds)."""
        if self.rounds is not None:
            return self.rounds.p50
        return self.stats.p50 if self.stats is not None else None


@dataclass(frozen=True, repr=False)
class Comparison(AnalysisOutcome, Presentable):
    """Variants timed in the same interleaved rounds, each against ``baseline`` (``seconds``:
    how long the rounds took)."""

    baseline: str
    rows: tuple[VariantTiming, ...]
    rounds: int = 0
    warning: str | None = None
    error: str | None = None
    cancelled: bool = False
    failure: Failure | None = None
    seconds: float = 0.0


    @property
    def headline(self) -> str:
        """One line: the fastest variant against the baseline, on the rows' statistic (each
        round's p10 call, median over rounds), with its interval."""
        if self.cancelled or self.error:
            return "comparison cancelled" if self.cancelled else f"comparison failed: {self.error}"
        timed = [r for r in self.rows if r.name != self.baseline and r.ratio is not None and r.ratio > 0]
        if not timed:
            return f"nothing timed against {self.baseline}"
        best = min(timed, key=lambda r: r.ratio)  # type: ignore[arg-type,return-value]
        ratio, interval = best.ratio, best.ratio_ci
        assert ratio is not None
        within = f" (95% interval {interval[0]:.2g}–{interval[1]:.2g}x the time)" if interval else ""
        if ratio < 1 and interval and interval[1] >= 1:  # faster on the median, but within the noise
            return (f"no variant is clearly faster than {self.baseline}: {best.name} takes "
                    f"{interval[0]:.2g}–{interval[1]:.2g}x its time (95% interval)")
        if ratio < 1:
            return f"fastest: {best.name}, {1 / ratio:.2g}x faster than {self.baseline}{within}"
        return f"{self.baseline} is the fastest; next: {best.name} at {ratio:.2g}x its time{within}"

    def row(self, name: str) -> VariantTiming:
        for row in self.rows:
            if row.name == name:
                return row
        raise KeyError(f"no variant {name!r}; variants: {[r.name for r in self.rows]}")

    def to_frame(self) -> Any:
        import pandas as pd

        records = []
        for row in self.rows:
            variant = row.variant
            record: dict[str, Any] = {
                "variant": row.name, "engine": variant.engine,
                "model": variant.model if variant.engine == "onnxruntime" else None,
                "level": variant.level if variant.engine == "onnxruntime" else None, "threads": row.threads,
            }
            stats = row.stats
            record.update({f"p{LOW_QUANTILE}_ms": row.low * 1e3 if row.low is not None else None,
                           "p50_ms": row.p50 * 1e3 if row.p50 is not None else None,
                           "p90_ms": stats.p90 * 1e3 if stats else None, "runs": stats.runs if stats else None})
            record.update({f"ratio_vs_{self.baseline}": row.ratio,
                           "ratio_ci_low": row.ratio_ci[0] if row.ratio_ci else None,
                           "ratio_ci_high": row.ratio_ci[1] if row.ratio_ci else None,
                           "model_mb": row.model_mb, "rss_growth_mb": row.rss_growth_mb, "error": row.error})
            records.append(record)
        frame = pd.DataFrame(records)
        frame.attrs["warning"] = self.warning
        return frame


def comparison_of(rounds: Rounds, baseline: str, rows: Sequence[VariantTiming], warning: str | None) -> Comparison:
    """Fill each timed row's stats and its per-round ratio against ``baseline``."""
    out = []
    for row in rows:
        if row.error is not None or row.name not in rounds.names:
            out.append(row)
            continue
        stats = LatencyStats.from_samples(rounds.samples[rounds.index(row.name)])
        figures = rounds.figures(row.name)
        ratio = interval = None
        if baseline in rounds.names:
            base = rounds.figures(baseline)
            ratio = ratio_of(figures.lows, base.lows)
            interval = bootstrap_ratio_ci(figures.lows, base.lows) if row.name != baseline else None
        out.append(VariantTiming(row.variant, stats, ratio, interval, row.threads, row.model_mb, row.rss_growth_mb,
                                 rounds=figures))
    return Comparison(baseline, tuple(out), rounds.rounds, warning, seconds=rounds.seconds)


def state_mb(model: Any) -> float | None:
    try:
        tensors = list(model.parameters()) + list(model.buffers())
        return math.fsum(t.numel() * t.element_size() for t in tensors) / 2**20
    except Exception:  # noqa: BLE001 - not a torch module
        return None
