"""Cost of recording a model's calls: ``generate()`` of 16 tokens on a tiny GPT-2, with and
without ``exporter.recording.record(model)`` around it.

Run: ``python benchmarks/record_overhead.py [--rounds N]``

The model is built from a config (2 layers, 32 wide, random weights, no download). Each round
runs both variants, in alternating order, after a warm-up of both; per variant the median
over rounds is kept. The headline is the median of the per-round ratios (recorded over bare
in the same round, which cancels a machine whose load drifts); target <= 1.05. The hooks' own
time is also timed directly, by replaying them on the recorded calls, apart from the noise. The
recording keeps every call's input and output tensors by reference (no copy for a
``DynamicCache``), so the cost is the hooks, a pytree flatten per call and the grouping,
which runs when the recording is first read (timed apart: "grouping").
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import warnings

TARGET = 1.05
NEW_TOKENS = 16


def tiny_gpt2():
    import transformers

    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=4, vocab_size=100, n_positions=128,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    rounds = parser.parse_args().rounds
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    import torch

    from exporter.recording import record

    torch.set_num_threads(1)
    model = tiny_gpt2()
    ids = torch.randint(1, 100, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)

    def bare() -> float:
        start = time.perf_counter()
        model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                       do_sample=False, pad_token_id=0)
        return time.perf_counter() - start

    def recorded() -> float:
        start = time.perf_counter()
        with record(model) as rec:
            model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                           do_sample=False, pad_token_id=0)
        elapsed = time.perf_counter() - start
        start = time.perf_counter()
        assert len(rec.recording.calls) == NEW_TOKENS
        grouping.append(time.perf_counter() - start)
        return elapsed

    grouping: list[float] = []
    for _ in range(3):
        bare()
        recorded()
    times: dict[str, list[float]] = {"bare": [], "recorded": []}
    for number in range(rounds):
        order = (("bare", bare), ("recorded", recorded)) if number % 2 == 0 else (("recorded", recorded), ("bare", bare))
        for name, run in order:
            times[name].append(run())
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = statistics.median(r / b for r, b in zip(times["recorded"], times["bare"]))
    own = hooks_time(model, ids, mask)
    print(f"generate() of {NEW_TOKENS} tokens, tiny GPT-2, {rounds} interleaved rounds (torch threads: 1)")
    for name, value in medians.items():
        spread = statistics.quantiles(times[name], n=4)
        print(f"  {name:<9} median {value * 1e3:7.2f} ms  (quartiles {spread[0] * 1e3:.2f}-{spread[2] * 1e3:.2f} ms)")
    print(f"  hooks' own time: {own * 1e6:.0f} us per call, {own * NEW_TOKENS * 1e3:.2f} ms per generate() "
          f"= {own * NEW_TOKENS / medians['bare']:.1%} of the bare median")
    print(f"  grouping (once, when the recording is first read): median {statistics.median(grouping) * 1e3:.2f} ms")
    print(f"  ratio of the fastest runs (less sensitive to other load): {min(times['recorded']) / min(times['bare']):.3f}x")
    print(f"  ratio recorded/bare (median of per-round ratios): {ratio:.3f}x (target <= {TARGET:.2f}x) -> "
          f"{'ok' if ratio <= TARGET else 'over target'}")


def hooks_time(model, ids, mask, repeats: int = 20) -> float:
    """Seconds per call spent in the recording's two hooks, replayed on recorded calls."""
    from exporter.recording import record
    from exporter.recording.observe import CallObserver

    with record(model) as rec:
        model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                       do_sample=False, pad_token_id=0)
    calls = [(call.inputs(), call.outputs) for call in rec.recording.calls]
    observer = CallObserver(model)
    start = time.perf_counter()
    for _ in range(repeats):
        for (args, kwargs), outputs in calls:
            observer._before(model, args, kwargs)
            observer._after(model, args, kwargs, outputs)
    return (time.perf_counter() - start) / (repeats * len(calls))

if __name__ == "__main__":
    main()
