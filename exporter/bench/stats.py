"""Latency statistics: percentiles, mean with its confidence interval, the median's interval."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..presentation import Presentable


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


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) of ``values``, interpolated linearly between the two
    nearest (``numpy.percentile``'s default); NaN for no values."""
    if not values:
        return math.nan
    import numpy as np

    return float(np.percentile(values, q))


def median(values: Sequence[float]) -> float:
    """The median of ``values`` (the mean of the two middle ones for an even count); NaN for
    no values."""
    return statistics.median(values) if values else math.nan


def median_ci(ordered: Sequence[float]) -> tuple[float, float]:
    """A distribution-free 95% interval of the median of sorted data: the order statistics
    about ``1.96 * sqrt(n) / 2`` ranks either side of the middle (the extremes below 6 values)."""
    n = len(ordered)
    if n < 6:
        return (ordered[0], ordered[-1]) if ordered else (math.nan, math.nan)
    half = 1.96 * math.sqrt(n) / 2
    low = max(0, int(math.floor(n / 2 - half)) - 1)
    high = min(n - 1, int(math.ceil(n / 2 + half)))
    return ordered[low], ordered[high]


@dataclass(frozen=True, repr=False)
class LatencyStats(Presentable):
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
            p50=percentile(ordered, 50),
            p90=percentile(ordered, 90),
            p99=percentile(ordered, 99),
            mean=mean,
            stdev=stdev,
            min=ordered[0],
            max=ordered[-1],
            mean_ci=(mean - half, mean + half),
            median_ci=median_ci(ordered),
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
