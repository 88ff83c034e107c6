"""Sweep throughput: units per minute with 1 and with 2 workers on this machine.

Run: ``python benchmarks/sweep_throughput.py [--units N] [--engine local|ray] [--rounds R]``

Each unit is a real one (a fresh process that imports torch, exports a 2-layer transformer
encoder with dynamic batch and sequence, verifies it at other sizes and runs the
``torch.onnx.export`` baseline), about 10-20 s on 2 cores. The zoo is declared in this file: the
workers import it by its path, as they do a user's ``--zoo models.py``. Each round runs the same
N units with 1 worker and then with 2 (fresh output directories, so nothing is resumed); the
ratio is the median over rounds of (units/min with 2) / (units/min with 1). On a machine with
2 free cores and units that each use one thread (``threads=1``), expect close to 2x.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import torch

from exporter.sweep import SweepCase, sweep, zoo_entry

UNITS = 6


def _encoder() -> SweepCase:
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, dropout=0.0)
    model = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    return SweepCase(model, (torch.randn(2, 8, 32),), dynamic_shapes=({0: "batch", 1: "seq"},))


for _index in range(16):  # the same unit under several names: N distinct unit ids
    zoo_entry("throughput", f"encoder_{_index:02d}")(_encoder)


def _run(workers: int, units: int, engine: str) -> tuple[float, float]:
    """(seconds, units per minute) of one sweep of ``units`` units."""
    with tempfile.TemporaryDirectory(prefix="sweep-throughput-") as directory:
        started = time.perf_counter()
        results = sweep(__file__, models=[f"encoder_{i:02d}" for i in range(units)], engine=engine, workers=workers,
                        output_dir=directory, timeout=600, progress=False)
        seconds = time.perf_counter() - started
    statuses = results.counts()
    mean_unit = statistics.mean(r.seconds["total"] for r in results.records)
    print(f"  {workers} worker(s): {units} units in {seconds:6.1f} s = {60 * units / seconds:5.2f} units/min "
          f"(a unit {mean_unit:.1f} s on average; {statuses})", flush=True)
    return seconds, 60 * units / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", type=int, default=UNITS)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engine", choices=("local", "ray"), default="local")
    options = parser.parse_args()
    if options.engine == "ray":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ratios = []
    for round_index in range(options.rounds):
        print(f"round {round_index + 1}:", flush=True)
        _, one = _run(1, options.units, options.engine)
        _, two = _run(2, options.units, options.engine)
        ratios.append(two / one)
    print(f"throughput with 2 workers / with 1: {statistics.median(ratios):.2f}x "
          f"(median of {len(ratios)} round(s): {', '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
