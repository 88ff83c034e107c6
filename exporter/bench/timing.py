"""The timing loop: warm up, then time one call at a time until budget or precision is reached."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..progress import Progress, report
from .stats import median_ci, percentile


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
        report(progress, task, min(now - start, budget), budget, f"{n} runs")
        if n >= max_runs:
            stopped = "max_runs"
            break
        if now >= hard_deadline or (now >= deadline and n >= min_runs):
            stopped = "budget"
            break
        if precision > 0 and n >= max(min_runs, 300):
            ordered = sorted(samples)
            low, high = median_ci(ordered)
            median = percentile(ordered, 50)
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
