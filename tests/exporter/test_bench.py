"""The latency harness: statistics, onnxruntime through IO binding
against eager PyTorch under the same thread count, a sweep over one dynamic dim, and the
onnxruntime per-node profile mapped to op types and module paths. Budgets are tiny: these
tests assert structure and invariants, never speed."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
import torch

from exporter import Dim, ExportOptions, Session
from exporter.bench import LatencyStats, OrtRunner
from exporter.bench.stats import median, percentile


class TwoLayer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(16, 32)
        self.act = torch.nn.GELU()
        self.fc2 = torch.nn.Linear(32, 8)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in user code")


@pytest.fixture(scope="module")
def session():
    torch.manual_seed(0)
    s = Session(TwoLayer().eval(), (torch.randn(4, 16),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    s.run()
    return s


def test_latency_stats_match_numpy_percentiles_and_bracket_the_centre():
    rng = np.random.default_rng(0)
    samples = list(rng.lognormal(mean=-9, sigma=0.3, size=500))
    stats = LatencyStats.from_samples(samples)
    assert stats.runs == 500
    for q, value in ((50, stats.p50), (90, stats.p90), (99, stats.p99)):
        assert value == pytest.approx(np.percentile(samples, q))
    assert stats.min <= stats.p50 <= stats.p90 <= stats.p99 <= stats.max
    assert stats.mean == pytest.approx(np.mean(samples)) and stats.stdev == pytest.approx(np.std(samples, ddof=1))
    assert stats.mean_ci[0] < stats.mean < stats.mean_ci[1]
    assert stats.median_ci[0] <= stats.p50 <= stats.median_ci[1]
    assert 0 < stats.relative_median_ci < 0.1
    assert "p50" in stats.summary() and "n=500" in stats.summary()


def test_percentile_and_median_are_numpy_and_statistics_on_odd_even_and_single_samples():
    rng = np.random.default_rng(1)
    arrays = [[0.25], [3.0, 1.0], [5.0, 1.0, 4.0, 2.0], list(rng.lognormal(-9, 0.3, size=7)),
              list(rng.lognormal(-9, 0.3, size=100))]
    for values in arrays:
        for q in (0, 10, 25, 50, 75, 90, 99, 100):
            assert percentile(values, q) == float(np.percentile(values, q))
        assert median(values) == float(np.median(values))
    assert median([3.0, 1.0]) == 2.0 and median([0.25]) == 0.25
    assert np.isnan(percentile([], 50)) and np.isnan(median([]))


def test_ort_runner_preallocates_outputs_so_the_timed_call_reuses_them(session):
    runner = OrtRunner(session.model_proto.SerializeToString(), threads=1)
    binding = runner.bind(session.feeds(torch.randn(4, 16)))
    before = [value.data_ptr() for value in binding.get_outputs()]
    runner.run(binding)
    assert [value.data_ptr() for value in binding.get_outputs()] == before
    assert binding.get_outputs()[0].shape() == [4, 8]


def test_benchmark_times_both_engines_under_the_same_thread_count_and_records_it(session):
    threads_before = torch.get_num_threads()
    result = session.benchmark(budget=0.3, min_runs=20, threads=1)  # room for a loaded CI machine
    assert result.ok, result.summary()
    for timing in (result.ort, result.eager):
        stats = timing.stats
        assert stats.runs >= 20 and 0 < stats.p50 <= stats.p90 <= stats.p99
        assert timing.warmup_runs >= 5
    assert torch.get_num_threads() == threads_before  # restored after the eager run
    config = result.config
    assert config.threads == 1 and config.session_options["intra_op_num_threads"] == 1
    assert config.provider == "CPUExecutionProvider" and config.session_options["io_binding"] is True
    assert config.onnxruntime_version and config.torch_version
    assert result.speedup > 0 and result.ratio == pytest.approx(1 / result.speedup)
    frame = result.to_frame()
    assert list(frame["engine"]) == ["onnxruntime", "eager"]
    assert {"p50_ms", "p90_ms", "p99_ms", "mean_ms", "stdev_ms", "mean_ci_low_ms", "mean_ci_high_ms"} <= set(frame.columns)
    assert result.headline in result.summary() and "1 thread(s)" in result.summary()


def test_benchmark_reports_progress_for_each_engine(session):
    reports = []
    session.benchmark(budget=0.02, min_runs=10, threads=1, progress=reports.append)
    assert {p.task for p in reports} == {"onnxruntime", "eager"}
    assert all(0.0 <= p.fraction <= 1.0 for p in reports)


def test_benchmark_at_other_sizes_generates_inputs_of_that_size(session):
    result = session.benchmark(sizes={"batch": 9}, budget=0.02, min_runs=10, threads=1, eager=False)
    assert result.ok and result.eager is None
    assert result.input_shapes == (("x", (9, 16)),) and result.sizes == (("batch", 9),)


def test_sweep_over_one_dim_gives_a_row_per_size_for_both_engines(session):
    reports = []
    sweep = session.benchmark_sweep("batch", (1, 8, 32), budget=0.02, min_runs=10, threads=1, progress=reports.append)
    assert sweep.error is None and sweep.dim == "batch"
    frame = sweep.to_frame()
    assert list(frame["size"]) == [1, 8, 32]
    assert (frame["ort_p50_ms"] > 0).all() and (frame["eager_p50_ms"] > 0).all()
    assert [p.input_shapes for p in sweep.points] == [(("x", (n, 16)),) for n in (1, 8, 32)]
    assert reports[-1].fraction == 1.0 and {p.task for p in reports} == {"sweep"}
    assert "Latency vs batch" in sweep.summary()


def test_sweep_over_an_unknown_dim_raises_at_once_naming_the_dynamic_dims(session):
    with pytest.raises(ValueError, match="unknown dim 'seq'.*batch"):
        session.benchmark_sweep("seq", (1, 2))


def test_profile_aggregates_kernel_time_by_op_type_and_module_path(session):
    result = session.profile(runs=5, threads=1, optimization_level="disable")
    assert result.error is None and result.runs == 5
    by_module = result.by_module()
    assert {"fc1", "act", "fc2"} <= set(by_module["module"])
    by_op = result.by_op_type()
    assert "Gelu" in set(by_op["op_type"]) or "BiasGelu" in set(by_op["op_type"])
    assert by_op["share"].sum() == pytest.approx(1.0)
    assert (result.to_frame()["calls"] == 5).all()  # the warm-up run is not counted
    fused = session.profile(runs=3, threads=1)  # onnxruntime fuses nodes: still mapped to modules
    assert {"fc1", "fc2"} & set(fused.by_module()["module"])
    assert "by op type" in fused.summary()


def test_failed_export_gives_error_results_not_exceptions():
    s = Session(Raises(), (torch.randn(2, 2),), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    result = s.benchmark(budget=0.01)
    assert not result.ok and "boom in user code" in result.error
    assert "could not run" in result.summary()
    assert s.profile(runs=1).error and s.benchmark_sweep("batch", (1,)).error


def test_exporter_never_imports_matplotlib_or_ipython():
    code = (
        "import sys, exporter, exporter.verify, exporter.bench\n"
        "bad = [m for m in ('matplotlib', 'IPython', 'ipywidgets', 'torch', 'onnxruntime') if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
