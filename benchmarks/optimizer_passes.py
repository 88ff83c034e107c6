"""What recording the optimizer pass by pass costs, against onnxscript's optimizer as
``torch.onnx.export(optimize=True)`` runs it.

Run: ``python benchmarks/optimizer_passes.py [--repeats N] [--stack BLOCKS]``

On the translated model of the demo block and, with ``--stack N``, of N small residual blocks
(LayerNorm, Linear, GELU, residual: ``stack_of_blocks`` of ``benchmarks/export_overhead.py``,
the issue's "400-block stack" with ``--stack 400``), alternating in one process with each
contender first in turn, each on a fresh ``clone()`` of the translated model:

- plain: ``compat.optimize_onnx_ir`` (onnxscript's ``optimize``);
- recorded: ``exporter.pipeline.optimize.run_passes`` (the same passes one by one, each recorded:
  node snapshots and diff, initializer names, the structural check);
- unrecorded: ``run_passes(record=False)`` (the pass-by-pass loop alone).

Times are the CPU time of this thread (the optimizer runs on it): on a shared machine wall time
also counts the waits for a core. Two ratios: medians over medians, and the median of each
repeat's own ratio (the three contenders of one repeat run back to back, so a slow spell of the
machine hits all three); printed with the load average. Goal: recorded / plain <= 1.10. Then
the CPU time of the recording alone (the snapshot after each pass with its structural check,
and the diff), timed inside recorded runs: what the ratios are noisy around. The final models
are checked byte-identical first.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import time
from typing import Any


def translated(blocks: int) -> Any:
    """The translated (unoptimized) ONNX model of the demo block (``blocks == 1``), or of
    export_overhead's stack of ``blocks`` small residual blocks."""
    from exporter import ExportOptions, export

    if blocks == 1:
        from exporter.examples import demo_block

        model, args, kwargs, dims = demo_block()
    else:
        from export_overhead import stack_of_blocks  # benchmarks/ is this script's sys.path[0]

        model, args, dims = stack_of_blocks(blocks)
        kwargs = {}
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims, optimize=False), **kwargs)
    return session.stage_output("translate")


def measure(model: Any, repeats: int) -> tuple[dict[str, float], dict[str, float]]:
    """(median seconds per contender, median per-repeat ratio to plain per contender)."""
    import onnx_ir as ir

    from exporter import compat
    from exporter.pipeline.optimize import run_passes

    contenders = {
        "plain": lambda m: compat.optimize_onnx_ir(m),
        "recorded": lambda m: run_passes(m)[0],
        "unrecorded": lambda m: run_passes(m, record=False)[0],
    }
    outputs = {name: ir.to_proto(run(model.clone())).SerializeToString() for name, run in contenders.items()}
    assert outputs["plain"] == outputs["recorded"] == outputs["unrecorded"], "the pass-by-pass model differs"
    times: dict[str, list[float]] = {name: [] for name in contenders}
    order = list(contenders)
    for index in range(repeats):
        for name in order[index % len(order):] + order[:index % len(order)]:  # each goes first in turn
            copy = model.clone()
            gc.collect()
            start = time.thread_time()
            contenders[name](copy)
            times[name].append(time.thread_time() - start)
    medians = {name: statistics.median(values) for name, values in times.items()}
    paired = {name: statistics.median(t / p for t, p in zip(values, times["plain"], strict=True))
              for name, values in times.items()}
    return medians, paired


def recording_seconds(model: Any, repeats: int) -> float:
    """Median CPU seconds a recorded run spends in the recording itself (the snapshots after
    each pass, with their structural check, and the diffs): a figure the machine's load moves
    less than a ratio of two timings."""
    from exporter.pipeline import optimize
    from exporter.pipeline.pass_records import Snapshot, diff

    spent = [0.0]

    class TimedSnapshot(Snapshot):
        @classmethod
        def of(cls, model: Any) -> Snapshot:
            start = time.thread_time()
            try:
                return Snapshot.of(model)
            finally:
                spent[0] += time.thread_time() - start

    def timed_diff(before: Snapshot, after: Snapshot) -> Any:
        start = time.thread_time()
        try:
            return diff(before, after)
        finally:
            spent[0] += time.thread_time() - start

    runs = []
    optimize.Snapshot, optimize.diff = TimedSnapshot, timed_diff
    try:
        for _ in range(repeats):
            spent[0] = 0.0
            optimize.run_passes(model.clone())
            runs.append(spent[0])
    finally:
        optimize.Snapshot, optimize.diff = Snapshot, diff
    return statistics.median(runs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11,
                        help="timed runs of each contender on the stack, three times as many on the demo block "
                        "(11: about 3 minutes with --stack 400 on a quiet 2-core machine)")
    parser.add_argument("--stack", type=int, default=0,
                        help="also measure a stack of this many small residual blocks (export_overhead's)")
    options = parser.parse_args()
    sizes = [1] + ([options.stack] if options.stack > 1 else [])
    for blocks in sizes:
        model = translated(blocks)
        nodes = len(list(model.graph))
        repeats = options.repeats * 3 if blocks == 1 else options.repeats
        medians, paired = measure(model, repeats)
        recording = recording_seconds(model, repeats)
        name = "demo block" if blocks == 1 else f"stack of {blocks} small blocks"
        load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
        print(f"{name} ({nodes} nodes translated; {repeats} repeats; load average {load}): "
              f"plain {medians['plain'] * 1e3:.1f} ms, recorded {medians['recorded'] * 1e3:.1f} ms, "
              f"unrecorded {medians['unrecorded'] * 1e3:.1f} ms (medians, CPU time)")
        for kind, ratios in (("medians", {k: v / medians["plain"] for k, v in medians.items()}), ("paired", paired)):
            print(f"  {kind}: recorded / plain = {ratios['recorded']:.3f} (goal <= 1.10); "
                  f"unrecorded / plain = {ratios['unrecorded']:.3f}")
        print(f"  the recording itself (snapshots, checks, diffs): {recording * 1e3:.1f} ms per run, "
              f"{recording / medians['plain']:.1%} of plain", flush=True)


if __name__ == "__main__":
    main()
