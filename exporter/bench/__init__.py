"""Latency of the ONNX model in onnxruntime, against eager PyTorch, measured properly.

onnxruntime runs through IO binding: inputs are bound once as ``OrtValue``s and outputs are
bound to ``OrtValue``s preallocated by a first run, so the timed loop calls
``InferenceSession.run_with_iobinding`` and nothing else (no numpy conversion, no allocation
of feeds). Eager PyTorch runs under ``torch.inference_mode()`` with ``torch.set_num_threads``
set to the same thread count as onnxruntime's ``intra_op_num_threads`` (restored afterwards).

Each engine is warmed up, then timed call by call (``time.perf_counter_ns``) in batches of about
a twentieth of the budget, the engines taking turns (:func:`time_rounds`), until each has spent
its time budget (with at least ``min_runs`` calls and 6 rounds), or earlier once there are 300
samples each (so p99 rests on a few calls) and every median's 95% interval is within
``precision`` of it. Statistics:
p50/p90/p99, mean ± stdev with a 95% confidence interval of the mean (Student t), and a
distribution-free 95% interval of the median (order statistics).

Compared engines are timed fairly: onnxruntime's pool threads do not spin after a run, both
engines get the same thread count (by default no more than the cores other processes leave
free), and they alternate in interleaved rounds (A B B A ...). One statistic serves the headline
and the figures beside it (:mod:`exporter.bench.headline`): each round's p10 and median call per
engine, median over rounds; the speedup is the ratio of the p10s with a bootstrap 95% interval
over rounds, and a range with its reason when the rounds disagree. ``result.noise`` records
how busy the machine was (run-queue wait of our threads, other processes' CPU use, load
average, a calibration loop, p90/p50) and ``result.warning`` says plainly when the figure
cannot be trusted. ``compare=`` adds variants (the unoptimized model, onnxruntime's
optimization levels, thread counts) to the same rounds.

Everything returned is a frozen dataclass with ``to_frame()`` and ``summary()``; a failure
(an engine that raises, an export that failed) is recorded in the result, never raised.
"""

from ..progress import Progress
from .compare import DEFAULT_VARIANTS, Comparison, Variant, VariantTiming
from .headline import Unsteady
from .latency import BenchmarkResult, EngineTiming, SweepResult, benchmark, benchmark_sweep, result_of_rounds
from .noise import Calibration, FreeCores, Load, LoadProbe, Noise
from .profiling import NodeTime, ProfileResult, parse_profile, profile
from .rounds import Contender, RoundFigures, Rounds, bootstrap_median_ci, time_rounds
from .runner import BenchConfig, OrtRunner
from .stats import LatencyStats

__all__ = [
    "DEFAULT_VARIANTS",
    "BenchConfig",
    "BenchmarkResult",
    "Calibration",
    "Comparison",
    "Contender",
    "EngineTiming",
    "FreeCores",
    "LatencyStats",
    "Load",
    "LoadProbe",
    "Noise",
    "NodeTime",
    "OrtRunner",
    "ProfileResult",
    "Progress",
    "RoundFigures",
    "Rounds",
    "SweepResult",
    "Unsteady",
    "Variant",
    "VariantTiming",
    "benchmark",
    "benchmark_sweep",
    "bootstrap_median_ci",
    "parse_profile",
    "profile",
    "result_of_rounds",
    "time_rounds",
]
