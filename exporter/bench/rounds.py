"""Interleaved rounds: several contenders timed in alternating batches, so that whatever the
machine does meanwhile hits them alike, and their ratio is taken round by round.

A round times one batch of each contender, in the order A B C in even rounds and C B A in odd
ones (A B B A ...: neither goes first more often). Before its batch a contender runs its
``before`` hook (e.g. ``torch.set_num_threads``) and ``rewarm`` untimed calls, so that the
caches the previous contender left do not land on its first timed call. The loop body of a
batch is ``t0 = perf_counter_ns(); call(arg); append(perf_counter_ns() - t0)``: statistics and
progress run between batches, and the cancel token is checked between slices of a batch of
about :data:`CANCEL_EVERY` seconds (and between warm-up calls), so a Cancel is answered within
that plus one call, whatever the budget.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..events import Reporter
from ..progress import Progress
from .stats import median, median_ci, percentile

# Other processes only ever add time to a call: a low quantile of each round's calls is what the
# machine gives when nothing interferes (timeit recommends the minimum; p10 keeps a few calls'
# luck out of it).
LOW_QUANTILE = 10
# Seconds of calls between two checks of the cancel token inside a batch (a check is one
# Event.is_set, outside the timed window).
CANCEL_EVERY = 0.1


@dataclass(frozen=True)
class Contender:
    """One thing to time: ``call(arg)``; ``before()`` runs untimed before each of its batches."""

    name: str
    call: Callable[[Any], Any]
    arg: Any = None
    before: Callable[[], Any] | None = None


@dataclass(frozen=True)
class Rounds:
    """What :func:`time_rounds` measured: per contender, every sample and each round's median."""

    names: tuple[str, ...]
    samples: tuple[tuple[float, ...], ...]
    round_medians: tuple[tuple[float, ...], ...]  # [contender][round]
    warmup_runs: tuple[int, ...]
    stopped: str
    seconds: float
    round_lows: tuple[tuple[float, ...], ...] = ()  # [contender][round]: the round's LOW_QUANTILE call

    @property
    def rounds(self) -> int:
        return len(self.round_medians[0]) if self.round_medians else 0

    def index(self, name: str) -> int:
        return self.names.index(name)

    def round_ratios(self, numerator: str, denominator: str) -> tuple[float, ...]:
        """``numerator``'s round median over ``denominator``'s, one per round."""
        top, bottom = self.round_medians[self.index(numerator)], self.round_medians[self.index(denominator)]
        return tuple(a / b for a, b in zip(top, bottom) if b > 0)

    def figures(self, name: str) -> RoundFigures:
        """``name``'s per-round figures: each round's low-quantile call and median call."""
        i = self.index(name)
        return RoundFigures(self.round_lows[i] if self.round_lows else self.round_medians[i], self.round_medians[i])


@dataclass(frozen=True)
class RoundFigures:
    """One contender's per-round figures, in seconds: ``lows`` (each round's
    :data:`LOW_QUANTILE` call) and ``medians`` (each round's median call). ``low`` and ``p50``
    are their medians over rounds: each round weighs the same, whatever its number of calls."""

    lows: tuple[float, ...]
    medians: tuple[float, ...]

    @property
    def rounds(self) -> int:
        return len(self.lows)

    @property
    def low(self) -> float:
        return median(self.lows)

    @property
    def p50(self) -> float:
        return median(self.medians)


def bootstrap_median_ci(values: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> tuple[float, float]:
    """95% percentile-bootstrap interval of the median of ``values`` (resampled with
    replacement; a fixed seed, so the same rounds give the same interval)."""
    import numpy as np

    data = np.asarray(values, dtype=float)
    if data.size == 0:
        return (math.nan, math.nan)
    if data.size == 1:
        return (float(data[0]), float(data[0]))
    rng = np.random.default_rng(seed)
    medians = np.median(data[rng.integers(0, data.size, size=(resamples, data.size))], axis=1)
    low, high = np.percentile(medians, [2.5, 97.5])
    return float(low), float(high)


def time_rounds(
    contenders: Sequence[Contender],
    *,
    budget: float = 1.0,
    min_runs: int = 50,
    max_runs: int = 1_000_000,
    warmup: int = 5,
    precision: float = 0.01,
    min_rounds: int = 6,
    target_rounds: int = 20,
    rewarm: int = 1,
    progress: Reporter | Callable[[Progress], Any] | None = None,
) -> Rounds:
    """Time each contender in interleaved rounds until each has ``budget`` seconds of timed
    calls, ``min_runs`` samples and there were ``min_rounds`` rounds (``stopped="budget"``), or
    one reached ``max_runs``; or, after 10 rounds with 300 samples each, once every median's
    95% interval is within ``precision`` of it (``"precision"``); or at 3 budgets per contender
    of wall time (a slow model, with fewer runs). A batch lasts about ``budget / target_rounds``
    at the median call time of the contender's previous batch.
    Progress is reported after every batch, under the contender's name, as the fraction of the
    whole run done (so it only grows)."""
    if not contenders:
        raise ValueError("nothing to time")
    reporter = progress if isinstance(progress, Reporter) else Reporter(progress=progress)
    import numpy as np  # before the first batch: importing it there would land in the timed rounds

    perf = time.perf_counter_ns
    count = len(contenders)
    warm_min = min(0.1 * budget, 0.5)
    warm_cap = max(0.25 * budget, warm_min)
    warmups, per_call = [], []
    for contender in contenders:
        if contender.before is not None:
            contender.before()
        start = time.perf_counter()
        runs = 0
        while True:
            reporter.check()
            contender.call(contender.arg)
            runs += 1
            warm = time.perf_counter() - start
            if runs >= 10_000 or (runs >= warmup and warm >= warm_min) or (runs >= 2 and warm >= warm_cap):
                break
        warmups.append(runs)
        per_call.append(warm / runs)
    samples: list[list[int]] = [[] for _ in contenders]
    medians: list[list[float]] = [[] for _ in contenders]
    lows: list[list[float]] = [[] for _ in contenders]
    spent = [0.0] * count  # seconds of timed calls
    round_time = budget / max(target_rounds, 1)
    started = time.perf_counter()
    hard_deadline = started + 3 * budget * count
    stopped = "budget"
    rounds = 0
    while True:
        order = range(count) if rounds % 2 == 0 else range(count - 1, -1, -1)
        for i in order:
            contender = contenders[i]
            call, arg = contender.call, contender.arg
            if contender.before is not None:
                contender.before()
            for _ in range(rewarm):
                reporter.check()
                call(arg)
            batch = max(1, min(int(round_time / per_call[i]) if per_call[i] > 0 else 10, max_runs - len(samples[i])))
            step = max(1, int(CANCEL_EVERY / per_call[i])) if per_call[i] > 0 else batch
            chunk: list[int] = []
            append = chunk.append
            for first in range(0, batch, step):
                reporter.check()
                for _ in range(min(step, batch - first)):
                    t0 = perf()
                    call(arg)
                    append(perf() - t0)
            samples[i].extend(chunk)
            middle, low = np.percentile(np.fromiter(chunk, np.int64, len(chunk)), [50, LOW_QUANTILE])
            medians[i].append(float(middle) / 1e9)
            lows[i].append(float(low) / 1e9)
            spent[i] += sum(chunk) / 1e9
            # The next batch is sized on the typical call, not the mean: a few stalled calls
            # (a busy machine) must not shrink batches to one call each, where every timed
            # call would be the first after the other contenders ran.
            per_call[i] = medians[i][-1]
            done = min(min(spent) / budget, 1.0) if budget > 0 else 1.0
            reporter.progress(contender.name, done, 1.0, f"round {rounds + 1}, {len(samples[i])} runs")
        rounds += 1
        lengths = [len(s) for s in samples]
        if max(lengths) >= max_runs:
            stopped = "max_runs"
            break
        if min(spent) >= budget and rounds >= min_rounds and min(lengths) >= min_runs:
            break
        if time.perf_counter() >= hard_deadline and rounds >= 2:
            break
        if precision > 0 and rounds >= 10 and min(lengths) >= max(min_runs, 300) and all(
            _within(sorted(s), precision) for s in samples
        ):
            stopped = "precision"
            break
    return Rounds(
        names=tuple(c.name for c in contenders),
        samples=tuple(tuple(v / 1e9 for v in s) for s in samples),
        round_medians=tuple(tuple(m) for m in medians),
        warmup_runs=tuple(warmups),
        stopped=stopped,
        seconds=time.perf_counter() - started,
        round_lows=tuple(tuple(low) for low in lows),
    )


def _within(ordered: list[int], precision: float) -> bool:
    low, high = median_ci(ordered)
    middle = percentile(ordered, 50)
    return middle > 0 and (high - low) / 2 / middle <= precision
