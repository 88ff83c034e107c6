"""One statistic for the headline and every figure printed beside it, and a range instead of a
point when the rounds disagree.

Per engine, each interleaved round gives its :data:`~exporter.bench.rounds.LOW_QUANTILE` call
(p10) and its median call (p50); an engine's figures are their medians over rounds (each round
weighs the same, whatever its number of calls). The speedup is eager p10 / onnxruntime p10 of
those figures, so the figures printed beside it divide to it exactly; its 95% interval
resamples whole rounds (both engines' figures of a round together). Other processes only ever
add time, so p10 moves little on a busy machine where the median measures the stall; the same
ratio of p50s is kept as the second figure.

When the per-round ratios fall into two clusters (a gap of :data:`MAX_GAP` between them, each
side holding enough rounds) or the interval spans more than :data:`MAX_SPAN`, no point figure is
given: :class:`Unsteady` holds the range and the reason.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .rounds import LOW_QUANTILE, RoundFigures
from .stats import median

MAX_GAP = 2.0  # consecutive sorted round ratios this far apart split the rounds in two
MAX_SPAN = 2.0  # an interval wider than this (high / low) gets a range, not a point
MIN_CLUSTER_SHARE = 0.15  # the smaller cluster holds at least this share of the rounds (and 2)

STATISTIC = (f"p{LOW_QUANTILE} and p50 of each round's calls, median over {{rounds}} interleaved rounds; "
             f"speedup = eager p{LOW_QUANTILE} / onnxruntime p{LOW_QUANTILE}; 95% bootstrap interval over rounds")


def statistic(rounds: int | None) -> str:
    """The sentence saying which estimator the headline and its figures are (``None``: a
    sweep, each size with its own rounds)."""
    return STATISTIC.format(rounds=rounds if rounds is not None else "each size's")


def ratio_of(top: Sequence[float], bottom: Sequence[float], rounds: Sequence[int] | None = None) -> float:
    """Median over ``rounds`` (default all) of ``top`` over the same median of ``bottom``."""
    if rounds is not None:
        top, bottom = [top[i] for i in rounds], [bottom[i] for i in rounds]
    below = median(bottom)
    return median(top) / below if below > 0 else math.nan


def bootstrap_ratio_ci(top: Sequence[float], bottom: Sequence[float], *, resamples: int = 2000,
                       seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of :func:`ratio_of`, resampling whole rounds (a fixed
    seed: the same rounds give the same interval)."""
    import numpy as np

    high_data, low_data = np.asarray(top, dtype=float), np.asarray(bottom, dtype=float)
    n = min(high_data.size, low_data.size)
    if n == 0:
        return (math.nan, math.nan)
    if n == 1:
        value = float(high_data[0] / low_data[0]) if low_data[0] > 0 else math.nan
        return (value, value)
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, n, size=(resamples, n))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.median(high_data[:n][picks], axis=1) / np.median(low_data[:n][picks], axis=1)
    low, high = np.nanpercentile(ratios, [2.5, 97.5])
    return float(low), float(high)


def split_rounds(ratios: Sequence[float]) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The rounds' indices in two clusters (low ratios, high ratios) when the sorted ratios have
    a gap of at least :data:`MAX_GAP` with enough rounds on each side, else ``None``."""
    n = len(ratios)
    smallest = max(2, math.ceil(MIN_CLUSTER_SHARE * n))
    if n < 2 * smallest or any(r <= 0 for r in ratios):
        return None
    order = sorted(range(n), key=lambda i: ratios[i])
    best, cut = 0.0, 0
    for k in range(smallest, n - smallest + 1):
        gap = ratios[order[k]] / ratios[order[k - 1]]
        if gap > best:
            best, cut = gap, k
    if best < MAX_GAP:
        return None
    return tuple(sorted(order[:cut])), tuple(sorted(order[cut:]))


@dataclass(frozen=True)
class Unsteady:
    """No point figure: the ratio lies somewhere in ``low``–``high``, for ``reason``."""

    low: float
    high: float
    reason: str


def unsteady(top: RoundFigures, bottom: RoundFigures, names: tuple[str, str], interval: tuple[float, float] | None,
             busy: bool) -> Unsteady | None:
    """Whether the ratio ``top`` / ``bottom`` (per-round p10s; ``names`` says whose) deserves a
    range: the rounds split in two clusters, or the interval spans more than :data:`MAX_SPAN`."""
    n = min(top.rounds, bottom.rounds)
    ratios = [t / b for t, b in zip(top.lows[:n], bottom.lows[:n]) if b > 0]
    cause = "another process was holding a core" if busy else "nothing else measured busy: the model's own time varies"
    clusters = split_rounds(ratios) if len(ratios) == n else None
    if clusters is not None:
        low_rounds, high_rounds = clusters
        # In the high-ratio rounds either the top engine was slow or the bottom one fast.
        top_factor = median([top.lows[i] for i in high_rounds]) / median([top.lows[i] for i in low_rounds])
        bottom_factor = median([bottom.lows[i] for i in low_rounds]) / median([bottom.lows[i] for i in high_rounds])
        if top_factor >= bottom_factor:
            engine, factor, slow = names[0], top_factor, high_rounds
        else:
            engine, factor, slow = names[1], bottom_factor, low_rounds
        return Unsteady(ratio_of(top.lows, bottom.lows, low_rounds), ratio_of(top.lows, bottom.lows, high_rounds),
                        f"{engine} {factor:.3g}x slower in {len(slow)} of {n} rounds: {cause}")
    if interval is not None and interval[0] > 0 and interval[1] / interval[0] > MAX_SPAN:
        return Unsteady(interval[0], interval[1],
                        f"the rounds disagree (95% interval spans {interval[1] / interval[0]:.3g}x): {cause}")
    return None


def times(value: float) -> str:
    """``2.85x``, ``12.3x``, ``540x``, ``1820x``."""
    if value >= 1000:
        return f"{value:.0f}x"
    return f"{value:.3g}x" if value >= 10 else f"{value:.2f}x"


def speed_text(speedup: float, other: str = "eager PyTorch") -> str:
    """``onnxruntime 2.85x faster than eager PyTorch`` (or slower)."""
    if speedup >= 1:
        return f"onnxruntime {times(speedup)} faster than {other}"
    return f"onnxruntime {times(1 / speedup)} slower than {other}"


def range_text(low: float, high: float, other: str = "eager PyTorch") -> str:
    """``onnxruntime 2.80x to 540x faster than eager PyTorch`` (or slower, or between)."""
    low, high = min(low, high), max(low, high)
    if low >= 1:
        return f"onnxruntime {times(low)} to {times(high)} faster than {other}"
    if high < 1:
        return f"onnxruntime {times(1 / high)} to {times(1 / low)} slower than {other}"
    return f"onnxruntime between {times(1 / low)} slower and {times(high)} faster than {other}"
