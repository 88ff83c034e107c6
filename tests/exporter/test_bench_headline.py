"""The benchmark's headline: one statistic for it and every figure printed beside it, a range
with its reason (never a point figure) when the rounds split in two, and a thread count that
fits the cores other processes leave free, with torch's settings restored. The bimodal case is
made deterministically (a model that sleeps in every other round), not with real load."""

from __future__ import annotations

import re
import time

import pytest
import torch

import test_bench

from exporter.bench import (BenchmarkResult, Contender, EngineTiming, FreeCores, LatencyStats, SweepResult,
                            result_of_rounds, time_rounds)
from exporter.bench.compare import eager_contender
from exporter.bench.headline import split_rounds, times
from exporter.display import render

session = test_bench.session  # the TwoLayer session fixture

POINT = re.compile(r"^onnxruntime \d[\d.]*x (faster|slower) than eager PyTorch \(95% interval ")


class SleepsEveryOtherRound(torch.nn.Module):
    """Sleeps ``fast`` seconds per call, ``slow`` in every other round (``next_round`` flips it)."""

    def __init__(self, fast: float, slow: float):
        super().__init__()
        self.fast, self.slow, self.rounds = fast, slow, 0

    def next_round(self) -> None:
        self.rounds += 1

    def forward(self, x):
        time.sleep(self.slow if self.rounds % 2 else self.fast)
        return x + 1


def rounds_of(model: SleepsEveryOtherRound, ort_seconds: float):
    """Interleaved rounds of a sleeping 'onnxruntime' and the model run eagerly; the model's
    round counter moves with each of its batches (its ``before`` hook)."""
    eager = eager_contender("eager", model, (torch.ones(2),), {}, 1)

    def before():
        eager.before()
        model.next_round()

    contenders = [Contender("onnxruntime", lambda _: time.sleep(ort_seconds)), Contender("eager", eager.call, None, before)]
    with torch.inference_mode():
        return time_rounds(contenders, budget=0.1, min_runs=4, warmup=2, min_rounds=6, precision=0.0)


def test_a_model_slow_in_every_other_round_gets_a_range_with_the_reason_not_a_point_figure():
    model = SleepsEveryOtherRound(fast=0.0005, slow=0.02)
    rounds = rounds_of(model, ort_seconds=0.0005)
    result = result_of_rounds(rounds, None)
    slow_rounds = sum(1 for low in result.eager.rounds.lows if low > 0.01)
    assert 2 <= slow_rounds < rounds.rounds  # the rounds really split
    assert result.unsteady is not None and result.unsteady.high / result.unsteady.low > 10
    headline = result.headline
    assert not POINT.match(headline), headline
    assert headline.startswith("onnxruntime ") and " to " in headline and "not one figure" in headline
    assert "eager" in result.unsteady.reason and f"in {slow_rounds} of {rounds.rounds} rounds" in headline
    section = render(result).to_text()
    assert headline in section  # the verdict line of the notebook / report section
    assert headline in result.summary()


def test_a_steady_model_gets_one_figure_with_its_interval():
    model = SleepsEveryOtherRound(fast=0.002, slow=0.002)
    result = result_of_rounds(rounds_of(model, ort_seconds=0.0005), None)
    assert result.unsteady is None and result.spread is None
    assert POINT.match(result.headline), result.headline
    assert times(result.speedup) in result.headline
    assert 2 < result.speedup < 8  # 2 ms against 0.5 ms of sleep


def test_rounds_split_only_at_a_wide_gap_with_enough_rounds_on_each_side():
    assert split_rounds([1.0, 1.1, 40.0, 0.9, 42.0, 39.0]) == ((0, 1, 3), (2, 4, 5))
    assert split_rounds([1.0, 1.1, 0.9, 1.2, 1.0, 1.05]) is None
    assert split_rounds([1.0] * 9 + [40.0]) is None  # one stalled round of ten: the median holds
    assert split_rounds([1.0, 40.0, 1.0]) is None  # too few rounds to call two clusters


def test_the_headline_and_the_figures_printed_beside_it_are_one_statistic(session):
    result = session.benchmark(budget=0.05, min_runs=10, threads=1)
    assert result.ok, result.summary()
    ort, eager = result.ort, result.eager
    assert result.speedup == pytest.approx(eager.low / ort.low)  # the printed p10s divide to the headline
    assert result.speedup_p50 == pytest.approx(eager.p50 / ort.p50)
    assert ort.rounds.rounds == eager.rounds.rounds == len(result.speedup_rounds)
    summary = result.summary()
    lines = [line.split() for line in summary.splitlines()]
    header = next(i for i, words in enumerate(lines) if words[:1] == ["engine"])
    column = lines[header].index("p10")  # "p10 ms": the figure the headline divides
    rows = {words[0]: words for words in lines[header + 1:header + 3]}
    printed = float(rows["eager"][column]) / float(rows["onnxruntime"][column])
    assert printed == pytest.approx(result.speedup, rel=2e-3)  # the figures as printed (4 digits)
    assert result.headline in summary and result.statistic in summary
    assert "p10 and p50 of each round's calls, median over" in result.statistic
    if result.spread is None:
        low, high = result.speedup_ci
        assert low <= result.speedup <= high and times(result.speedup) in result.headline
    text = render(result).to_text()
    assert result.headline in text and f"{eager.low * 1e3:.4g}" in text and f"{ort.low * 1e3:.4g}" in text
    frame = result.to_frame()
    assert frame["round_p10_ms"].iloc[1] / frame["round_p10_ms"].iloc[0] == pytest.approx(result.speedup)


def test_threads_beyond_the_free_cores_are_lowered_said_and_torch_settings_restored(session, monkeypatch):
    threads, interop = torch.get_num_threads(), torch.get_num_interop_threads()
    monkeypatch.setattr(FreeCores, "measure", classmethod(lambda cls, window=0.15: cls(4, 3.0, window)))
    fitted = session.benchmark(budget=0.03, min_runs=10, threads=2, fit_threads=True)
    assert fitted.config.threads == 1 and fitted.config.session_options["intra_op_num_threads"] == 1
    assert fitted.threads_note.startswith("timed at 1 thread(s), not 2") and "3.0 of 4 cores" in fitted.threads_note
    assert "at 1 thread(s)" in fitted.headline and fitted.threads_note in fitted.summary()
    assert torch.get_num_threads() == threads and torch.get_num_interop_threads() == interop
    asked = session.benchmark(budget=0.03, min_runs=10, threads=2)  # asked explicitly: kept, and said
    assert asked.config.threads == 2 and "2 threads asked" in asked.threads_note
    assert torch.get_num_threads() == threads


def test_free_cores_are_counted_from_what_other_processes_use():
    assert FreeCores(2, 1.2, 0.1).free == 1 and FreeCores(2, 0.3, 0.1).free == 2 and FreeCores(2, 2.0, 0.1).free == 1
    assert FreeCores(2, None, 0.1).free == 2
    assert FreeCores(2, 0.1, 0.1).fit(2) == (2, None)
    measured = FreeCores.measure(window=0.05)
    assert 1 <= measured.free <= measured.cores and (measured.others is None or measured.others >= 0)


def test_a_sweep_headline_spans_the_sizes_and_names_a_size_whose_rounds_disagreed():
    def timing(engine, scale):
        return EngineTiming(engine, LatencyStats.from_samples([scale * (1 + 0.01 * (i % 7)) for i in range(50)]))

    steady = BenchmarkResult(timing("onnxruntime", 1e-4), timing("eager", 3e-4), None, speedup_ci=(2.9, 3.1))
    split = BenchmarkResult(timing("onnxruntime", 1e-4), timing("eager", 5e-4), None, speedup_ci=(2.0, 400.0))
    sweep = SweepResult("batch", (1, 8), (steady, split))
    assert sweep.headline.startswith("onnxruntime 3.00x to 5.00x faster than eager PyTorch over batch=1..8")
    assert "no single figure at batch=8" in sweep.headline
    assert split.headline.startswith("onnxruntime 2.00x to 400x faster") and "not one figure" in split.headline
    assert sweep.headline in render(sweep).to_text() and sweep.headline in sweep.summary()


def test_a_comparison_headline_names_the_fastest_variant_on_the_rows_statistic():
    from exporter.bench import Comparison, Variant, VariantTiming

    def row(name, ratio, interval):
        return VariantTiming(Variant(name), LatencyStats.from_samples([1e-4, 2e-4]), ratio, interval)

    comparison = Comparison("onnxruntime", (row("onnxruntime", 1.0, None), row("threads=1", 0.5, (0.45, 0.55)),
                                            row("unoptimized", 1.4, (1.3, 1.5))), rounds=8)
    assert comparison.headline == "fastest: threads=1, 2x faster than onnxruntime (95% interval 0.45–0.55x the time)"
    assert comparison.headline in render(comparison).to_text()
    slower = Comparison("onnxruntime", (row("onnxruntime", 1.0, None), row("unoptimized", 1.4, (1.3, 1.5))), rounds=8)
    assert slower.headline.startswith("onnxruntime is the fastest; next: unoptimized at 1.4x its time")
    noisy = Comparison("onnxruntime", (row("onnxruntime", 1.0, None), row("unoptimized", 0.97, (0.686, 1.02))), rounds=8)
    assert noisy.headline == ("no variant is clearly faster than onnxruntime: unoptimized takes 0.69–1x its time "
                              "(95% interval)")
