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

from ..progress import Progress
from .latency import BenchmarkResult, EngineTiming, SweepResult, benchmark, benchmark_sweep
from .profiling import NodeTime, ProfileResult, parse_profile, profile
from .runner import BenchConfig, OrtRunner
from .stats import LatencyStats
from .timing import time_calls

__all__ = [
    "BenchConfig",
    "BenchmarkResult",
    "EngineTiming",
    "LatencyStats",
    "NodeTime",
    "OrtRunner",
    "ProfileResult",
    "Progress",
    "SweepResult",
    "benchmark",
    "benchmark_sweep",
    "parse_profile",
    "profile",
    "time_calls",
]
