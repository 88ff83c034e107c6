"""``session.compare_intermediates()`` on a 2-layer BERT against one verify case, and the memory it holds.

Run: ``HF_HUB_OFFLINE=1 python benchmarks/compare_intermediates.py [--hidden 64] [--seq 16] [--repeats 7] [--processes 3]``

A ``BertModel`` from a transformers config (2 layers, random weights) is exported and verified
once (``session.verify()``: the flow in which a comparison is asked for, on a case verify
ran). Then, in interleaved rounds (each round times every row once, back to back):

* one verify case: what ``verify()`` does per case (ONNX feeds, the eager forward under
  ``preserved``, one onnxruntime run through the session's cached InferenceSession, the outputs
  compared), the example inputs;
* one verify case, cold: the same after building a new InferenceSession of the model (what
  verify's first case pays once per export);
* compare_intermediates after verify: the FX interpreter run, onnxruntime with every node
  output exposed (that session kept, one entry, as verify keeps its own), every pair compared;
  eager PyTorch's outputs are verify's for this case (``eager_from="verify"``);
* the same, cold: a new exposed-outputs InferenceSession (the first call of an export);
* the same on fresh graphs: a session whose graphs were never read, so the FX and ONNX graphs,
  the FX <-> ONNX mapping and the comparison plan are built too (the parsed stack traces and
  module paths are cached per process, as after an earlier export in the same kernel), cold;
* without a verify result for the inputs (explicit ``args``/``kwargs``): the call runs eager
  PyTorch itself (``eager_from="this call"``), warm;
* streamed: ``max_bytes`` small enough for about 8 chunks (cold: every chunk is another model).

And the first call in a fresh process, ``--processes`` times (each a new Python that imports,
exports, verifies, times one case three times and then the first compare_intermediates):
nothing cached but what the export and verify left.

``--threads`` sets torch's intra-op threads (default: torch's own). On a busy 2-core machine
eager PyTorch with 2 threads stalls at its barriers (FIELD-NOTES), which inflates both sides.

Ratios (goal ≤ 2×): a warm row over one verify case, a cold row over one verify case cold;
from the fastest round of each, and from the medians (noise only adds time). In fresh
processes, the fastest first call over the fastest case. Peak RSS growth is sampled every
millisecond from ``/proc/self/statm`` during the first call in a fresh process (after the
export and verify), above the RSS just before it; ``peak_bytes`` is what the result says it
held (intermediate values, both sides).
"""

from __future__ import annotations

import argparse
import logging
import os
import statistics
import threading
import time
import warnings


def build_bert(hidden: int, seq: int):
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(vocab_size=1000, hidden_size=hidden, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=2 * hidden, max_position_embeddings=128)
    model = BertModel(config).eval()
    kwargs = {"input_ids": torch.randint(0, 1000, (2, seq)), "attention_mask": torch.ones(2, seq, dtype=torch.long)}
    return model, kwargs


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def peak_rss_growth(fn) -> tuple[int, object]:
    """RSS above the level before ``fn``, at its highest while ``fn`` ran (1 ms sampling)."""
    base = rss_bytes()
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], rss_bytes())
            time.sleep(0.001)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        result = fn()
    finally:
        done.set()
        thread.join()
    return max(peak[0], rss_bytes()) - base, result


def in_fresh_process(argv: list[str] | None, *extra: str) -> list[str]:
    """The words this script prints when run again in a new process with ``extra`` arguments."""
    import subprocess
    import sys

    args = [a for a in (sys.argv[1:] if argv is None else argv)]
    return subprocess.run([sys.executable, __file__, *args, *extra], check=True, capture_output=True,
                          text=True).stdout.split()


def fresh_process_rss(argv: list[str] | None, max_bytes: int) -> int:
    """The peak RSS growth of one first call in a new process (this one's heap already holds
    the memory earlier calls freed, so growth measured here reads about 0)."""
    return int(in_fresh_process(argv, "--rss-only", str(max_bytes))[-3])


def fresh_process_first_calls(argv: list[str] | None, processes: int) -> list[tuple[float, float, float]]:
    """(fastest one verify case, the same with its session built, first compare_intermediates)
    of each of ``processes`` new processes, in seconds."""
    runs = [in_fresh_process(argv, "--first-only") for _ in range(processes)]
    return [(float(out[-3]), float(out[-2]), float(out[-1])) for out in runs]


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--seq", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=0, help="torch intra-op threads (0: torch's default)")
    parser.add_argument("--processes", type=int, default=3, help="fresh processes timing a first call")
    parser.add_argument("--first-only", action="store_true",
                        help="(internal) print one verify case's time and the first call's, in a fresh process")
    parser.add_argument("--rss-only", type=int, default=None, metavar="MAX_BYTES",
                        help="(internal) print the peak RSS growth of one call with this max_bytes, in a fresh process")
    options = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    warnings.filterwarnings("ignore")
    logging.getLogger("onnxscript").setLevel(logging.ERROR)

    import torch

    import exporter
    from exporter.verify.intermediates import ort_side
    from exporter.ort_model import ort_inference_session
    from exporter.verify.core import _run_case  # one case exactly as verify() runs it

    if options.threads:
        torch.set_num_threads(options.threads)

    model, kwargs = build_bert(options.hidden, options.seq)
    names = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    session = exporter.export(model, **kwargs, options=exporter.ExportOptions(dynamic_shapes=names))
    onnx_nodes = len(session.graphs.onnx_optimized)
    output_names = [v.name for v in session.stage_output("optimize").graph.outputs]
    verified = session.verify()
    assert verified.ok, verified.summary()

    def one_case(ort_session=None):
        result, _ = _run_case(session, ort_session or session.output_ort_session, "example", (), session.inputs.args,
                              session.inputs.kwargs, output_names, None)
        assert result.status == "pass", result.describe()

    def one_case_cold():
        one_case(ort_inference_session(session.ort_model.source))

    def cold(**kw):
        ort_side.forget_sessions()
        return session.compare_intermediates(**kw)

    def fresh_graphs():
        session.__dict__.pop("graphs", None)  # as on a session whose graphs were never read
        return cold()

    def no_verify_result():
        result = session.compare_intermediates(args=session.inputs.args, kwargs=session.inputs.kwargs)
        assert result.eager_from == "this call"
        return result

    one_case()  # warm: the InferenceSession, eager kernels
    if options.first_only:
        case = min(median_time(one_case, 1) for _ in range(3))
        case_cold = min(median_time(one_case_cold, 1) for _ in range(3))
        print(f"{case} {case_cold} {median_time(session.compare_intermediates, 1)}")
        return 0
    if options.rss_only is not None:
        growth, result = peak_rss_growth(lambda: session.compare_intermediates(max_bytes=options.rss_only))
        print(f"{growth} {result.peak_bytes} {result.chunks}")
        return 0
    first = session.compare_intermediates()
    assert first.ok and first.eager_from == "verify", first.summary()
    small = max(first.peak_bytes // 16, 1)  # about 8 chunks (the peak counts both sides)
    streamed_first = session.compare_intermediates(max_bytes=small)

    runs = {"case": one_case, "case cold": one_case_cold, "cold": cold, "warm": session.compare_intermediates,
            "fresh": fresh_graphs, "no verify": no_verify_result, "streamed": lambda: cold(max_bytes=small)}
    timings: dict[str, list[float]] = {key: [] for key in runs}
    for _ in range(options.repeats):
        for key, fn in runs.items():
            timings[key].append(median_time(fn, 1))
    low = {k: min(v) for k, v in timings.items()}
    mid = {k: statistics.median(v) for k, v in timings.items()}
    result, streamed = session.compare_intermediates(), session.compare_intermediates(max_bytes=small)
    growth = fresh_process_rss(argv, result.peak_bytes * 4)
    streamed_growth = fresh_process_rss(argv, small)
    processes = fresh_process_first_calls(argv, options.processes)

    print(f"2-layer BERT, hidden {options.hidden}, batch 2 x seq {options.seq}: {onnx_nodes} ONNX nodes, "
          f"{result.compared} compared, {len(result.rows) - result.compared} not compared")
    print(f"torch threads {torch.get_num_threads()}; {options.repeats} interleaved rounds")
    print(f"{'':46}{'fastest':>9}  {'median':>9}  ratio (fastest, median)")
    rows = [("case", "one verify case", None), ("case cold", "one verify case, its session built", None),
            ("warm", "compare_intermediates after verify", "case"),
            ("cold", "  cold (its session built)", "case cold"),
            ("fresh", "  fresh graphs, cold", "case cold"),
            ("no verify", "  no verify result (eager run again)", "case"),
            ("streamed", f"  {streamed.chunks} chunks, cold", "case cold")]
    for key, label, over in rows:
        ratio = "" if over is None else f"  {low[key] / low[over]:5.1f}x, {mid[key] / mid[over]:5.1f}x  (over {over})"
        print(f"{label + ':':46}{low[key] * 1e3:7.1f}ms  {mid[key] * 1e3:7.1f}ms{ratio}")
    if processes:
        case_low, case_cold_low, first_low = (min(p[i] for p in processes) for i in range(3))
        print(f"first call in a fresh process, after export and verify ({len(processes)} processes): "
              f"{first_low * 1e3:.1f}ms; one verify case {case_low * 1e3:.1f}ms ({first_low / case_low:.1f}x), "
              f"with its session built {case_cold_low * 1e3:.1f}ms ({first_low / case_cold_low:.1f}x)")
    print(f"values held (result.peak_bytes):  {result.peak_bytes / 2**20:.2f} MiB in 1 chunk, "
          f"{streamed.peak_bytes / 2**20:.2f} MiB in {streamed.chunks} chunks (max_bytes {small / 2**20:.2f} MiB)")
    print(f"peak RSS growth, first call in a fresh process (after export and verify): {growth / 2**20:.1f} MiB in 1 chunk, "
          f"{streamed_growth / 2**20:.1f} MiB in {streamed.chunks} chunks")
    assert streamed_first.values() == first.values()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
