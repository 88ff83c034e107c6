"""How much to trust a benchmark: the noise it measured and the load the machine was under.

A :class:`LoadProbe` brackets the timing and reads, on Linux, what the kernel knows:

- ``cpu_wait``: of the time this process's threads were ready to run, the share they spent
  waiting for a CPU (``/proc/self/task/*/schedstat``: run-queue wait over run + wait). About 0
  on an idle machine; it grows with every other busy process.
- ``others_busy``: the share of all the machine's CPU time used by other processes
  (``/proc/stat`` minus this process's own CPU time).
- the load average before and after.

A short calibration loop (a fixed piece of pure-Python work, timed a few times before and after)
gives its own spread. :class:`Noise` holds these with the result's own dispersion (the ratio's
interval over rounds, p90/p50 per engine) and turns them into a plain warning.
"""

from __future__ import annotations

import glob
import math
import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .stats import percentile

# A figure is flagged as unreliable past any of these.
MAX_CPU_WAIT = 0.10  # threads waited for a CPU more than 10% of the time they were ready
MAX_OTHERS_BUSY = 0.50  # other processes used more than half of the machine
MAX_RATIO_SPAN = 1.5  # the ratio's 95% interval: high / low (1.25 flagged 2 of 5 calls on an idle 2-core machine)
MAX_TAIL = 2.5  # p90 / p50 of one engine
MAX_CALIBRATION_SPREAD = 3.0  # slowest / fastest run of the calibration loop (2.0 fired on an idle machine)


def _schedstat() -> tuple[int, int] | None:
    """(ns on a CPU, ns waiting on a run queue) summed over this process's threads."""
    run = wait = 0
    paths = glob.glob("/proc/self/task/*/schedstat")
    if not paths:
        return None
    for path in paths:
        try:
            with open(path, encoding="ascii") as handle:
                fields = handle.read().split()
            run += int(fields[0])
            wait += int(fields[1])
        except (OSError, ValueError, IndexError):  # a thread ended meanwhile
            continue
    return run, wait


def _cpu_jiffies() -> tuple[float, float] | None:
    """(busy, total) seconds of all CPUs since boot, from /proc/stat."""
    try:
        with open("/proc/stat", encoding="ascii") as handle:
            fields = [float(v) for v in handle.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
    total = sum(fields[:8])  # user nice system idle iowait irq softirq steal
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return (total - idle) / hz, total / hz


def _loadavg() -> tuple[float, float, float] | None:
    try:
        return os.getloadavg()
    except (OSError, AttributeError):
        return None


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def _usable_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@dataclass(frozen=True)
class FreeCores:
    """How many CPUs other processes leave free: ``others`` is the CPUs' worth they used over a
    short window (``/proc/stat`` minus this process, sampled while it sleeps), ``cores`` the
    CPUs this process may run on (its affinity). A core counts as taken when others used more
    than half of it. ``None`` for ``others`` where the OS does not tell (every core is free)."""

    cores: int
    others: float | None
    window: float

    @property
    def free(self) -> int:
        if self.others is None:
            return self.cores
        return max(1, self.cores - int(self.others + 0.5))

    @classmethod
    def measure(cls, window: float = 0.15) -> FreeCores:
        cores = _usable_cores()
        before, own = _cpu_jiffies(), _own_cpu()
        time.sleep(window)
        after = _cpu_jiffies()
        if before is None or after is None or after[1] <= before[1]:
            return cls(cores, None, window)
        busy, total = after[0] - before[0], after[1] - before[1]
        share = min(1.0, max(0.0, (busy - (_own_cpu() - own)) / total))
        return cls(cores, share * (os.cpu_count() or cores), window)

    def fit(self, threads: int) -> tuple[int, str | None]:
        """The thread count to time at for ``threads`` asked, and a sentence when it is fewer."""
        if threads <= self.free:
            return threads, None
        return self.free, (f"timed at {self.free} thread(s), not {threads}: other processes were using "
                           f"{self.others:.1f} of {self.cores} cores (more threads than free cores stall "
                           "at their barriers; threads= sets the count)")

    def crowded(self, threads: int) -> str | None:
        """For ``threads`` asked explicitly: a sentence when they exceed the free cores."""
        if threads <= self.free:
            return None
        return (f"{threads} threads asked while other processes were using {self.others:.1f} of {self.cores} cores: "
                f"threads beyond the {self.free} free core(s) stall at their barriers (eager PyTorch most); "
                "leave threads= unset to time at what is free")


@dataclass(frozen=True)
class Calibration:
    """A fixed piece of pure-Python work timed ``runs`` times: its median and spread."""

    runs: int
    p50_us: float
    spread: float  # slowest / fastest

    @classmethod
    def measure(cls, runs: int = 8, work: int = 3000) -> Calibration:
        perf = time.perf_counter_ns
        times = []
        for _ in range(runs):
            t0 = perf()
            total = 0
            for i in range(work):
                total += i * i
            times.append(perf() - t0)
        times.sort()
        return cls(runs, times[len(times) // 2] / 1e3, times[-1] / times[0] if times[0] > 0 else math.inf)

    @classmethod
    def merge(cls, first: Calibration, second: Calibration) -> Calibration:
        """Before and after: the larger spread, or the drift between the two medians."""
        drift = max(first.p50_us, second.p50_us) / max(min(first.p50_us, second.p50_us), 1e-9)
        spread = max(first.spread, second.spread, drift)
        return cls(first.runs + second.runs, (first.p50_us + second.p50_us) / 2, spread)


class LoadProbe:
    """Brackets a measurement: ``probe = LoadProbe(); ...; load = probe.stop()``."""

    def __init__(self, calibrate: bool = True) -> None:
        self.calibrate = calibrate
        self.calibration = Calibration.measure() if calibrate else None
        self.load_before = _loadavg()
        self.sched = _schedstat()
        self.jiffies = _cpu_jiffies()
        self.own = _own_cpu()
        self.wall = time.perf_counter()

    def stop(self) -> Load:
        wall = time.perf_counter() - self.wall
        own = _own_cpu() - self.own
        sched, jiffies = _schedstat(), _cpu_jiffies()
        cpu_wait = others = None
        if sched is not None and self.sched is not None:
            run, wait = sched[0] - self.sched[0], sched[1] - self.sched[1]
            cpu_wait = wait / (run + wait) if run + wait > 0 else 0.0
        if jiffies is not None and self.jiffies is not None:
            busy, total = jiffies[0] - self.jiffies[0], jiffies[1] - self.jiffies[1]
            if total > 0:
                others = min(1.0, max(0.0, (busy - own) / total))
        calibration = self.calibration
        if self.calibrate and calibration is not None:
            calibration = Calibration.merge(calibration, Calibration.measure())
        return Load(wall, cpu_wait, others, self.load_before, _loadavg(), os.cpu_count(), calibration)


@dataclass(frozen=True)
class Load:
    """The machine's load over one measurement (``None`` where this OS does not tell)."""

    seconds: float
    cpu_wait: float | None
    others_busy: float | None
    load_before: tuple[float, float, float] | None
    load_after: tuple[float, float, float] | None
    cpu_count: int | None
    calibration: Calibration | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "cpu_wait": self.cpu_wait,
            "others_busy": self.others_busy,
            "load_1min_before": self.load_before[0] if self.load_before else None,
            "load_1min_after": self.load_after[0] if self.load_after else None,
            "cpu_count": self.cpu_count,
            "calibration_spread": self.calibration.spread if self.calibration else None,
        }


@dataclass(frozen=True)
class Noise:
    """How noisy a measurement was and whether its figure can be trusted.

    ``ratio_ci`` is the 95% bootstrap interval of the headline ratio over rounds (``None``
    for a single engine); ``tails`` is p90/p50 per engine; ``round_spread`` the interquartile
    range of the per-round ratios over their median. ``reasons`` lists each threshold crossed,
    ``warning`` says it in one sentence (``None`` when the figure can be trusted)."""

    rounds: int
    ratio: float | None
    ratio_ci: tuple[float, float] | None
    round_spread: float | None
    tails: tuple[tuple[str, float], ...]
    load: Load | None
    reasons: tuple[str, ...] = field(default=())
    dispersion_reasons: int = 0  # how many of ``reasons`` (the last ones) are the figures' own spread

    @classmethod
    def assess(cls, rounds: int, ratio: float | None, ratio_ci: tuple[float, float] | None,
               round_ratios: Sequence[float], tails: Sequence[tuple[str, float]], load: Load | None) -> Noise:
        reasons = []  # load first: the warning says "busy" only when one of these is crossed
        if load is not None and load.cpu_wait is not None and load.cpu_wait > MAX_CPU_WAIT:
            reasons.append(f"its threads waited for a CPU {load.cpu_wait:.0%} of the time")
        if load is not None and load.others_busy is not None and load.others_busy > MAX_OTHERS_BUSY:
            reasons.append(f"other processes used {load.others_busy:.0%} of the CPUs")
        if load is not None and load.calibration is not None and load.calibration.spread > MAX_CALIBRATION_SPREAD:
            reasons.append(f"a fixed calibration loop varied {load.calibration.spread:.1f}x")
        dispersion = len(reasons)
        for engine, tail in tails:
            if tail > MAX_TAIL:
                reasons.append(f"{engine} p90 is {tail:.1f}x its p50")
        if ratio_ci is not None and ratio_ci[0] > 0 and ratio_ci[1] / ratio_ci[0] > MAX_RATIO_SPAN:
            reasons.append(f"the ratio varied from round to round ({_span(ratio_ci)})")
        spread = None
        if len(round_ratios) >= 2:
            ordered = sorted(round_ratios)
            middle = percentile(ordered, 50)
            spread = (percentile(ordered, 75) - percentile(ordered, 25)) / middle if middle > 0 else None
        return cls(rounds, ratio, ratio_ci, spread, tuple(tails), load, tuple(reasons), len(reasons) - dispersion)

    @property
    def busy(self) -> bool:
        return bool(self.reasons)

    @property
    def warning(self) -> str | None:
        if not self.reasons:
            return None
        interval = f": the ratio's 95% interval is {_span(self.ratio_ci)}" if self.ratio_ci else ""
        if self.dispersion_reasons == len(self.reasons):  # nothing says the machine was busy
            return (f"the figures are noisy ({'; '.join(self.reasons)}){interval}; rerun with a larger budget=, "
                    "or threads=1, for a tighter figure")
        return f"the machine was busy ({'; '.join(self.reasons)}){interval}; rerun when it is idle"

    def to_dict(self) -> dict[str, Any]:
        row: dict[str, Any] = {"rounds": self.rounds,
                               "ratio_ci_low": self.ratio_ci[0] if self.ratio_ci else None,
                               "ratio_ci_high": self.ratio_ci[1] if self.ratio_ci else None,
                               "round_spread": self.round_spread}
        row.update({f"{engine}_p90_over_p50": tail for engine, tail in self.tails})
        if self.load is not None:
            row.update(self.load.to_dict())
        row["warning"] = self.warning
        return row


def _span(interval: tuple[float, float] | None) -> str:
    if interval is None:
        return "-"
    return f"{interval[0]:.3g}–{interval[1]:.3g}x"
