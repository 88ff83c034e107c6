"""The first export in a fresh kernel, against a fresh ``python`` script doing the same export.

Run: ``python benchmarks/first_export.py [--rounds N] [--pause S]``

Each round, in an order that alternates:

- **kernel**: a fresh IPython kernel (``jupyter_client.KernelManager``) runs
  ``%load_ext workbench``, a cell that imports torch and defines a small MLP, then
  ``%onnx_export --no-widget --no-verify --dynamic x.0=batch model(x)``, with ``--pause`` seconds
  between the cells where a person types. Counted: from the kernel's start to the export's
  answer, *minus the pauses* (the time the person waits); the wall time with the pauses is
  printed too. Once with the warm-up of ``%load_ext`` (the default) and once with
  ``ONNX_WORKBENCH_WARMUP=0``.
- **script**: a fresh ``python`` process that imports torch, defines the same MLP and calls
  ``torch.onnx.export(..., dynamo=True)`` with the same dynamic batch axis.

Ratios are medians of the per-round ratios (kernel / script of the same round); goal <= 0.5.

During the first pause, a cell ``1+1`` is executed every ``--probe-every`` seconds: its answer
time with the warm-up running against without it tells what the warm-up costs a user who
types and runs something meanwhile (goal: <= 100 ms more than usual).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

MODEL_CELL = textwrap.dedent("""\
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(16, 32)
            self.fc2 = torch.nn.Linear(32, 8)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    model = MLP().eval()
    x = torch.randn(4, 16)
    """)

EXPORT_CELL = "%onnx_export --no-widget --no-verify --dynamic x.0=batch model(x)"

SCRIPT = MODEL_CELL + textwrap.dedent("""\
    import warnings
    warnings.filterwarnings("ignore")
    batch = torch.export.Dim("batch")
    torch.onnx.export(model, (x,), dynamic_shapes={"x": {0: batch}}, dynamo=True, verbose=False)
    """)


@dataclass
class KernelRound:
    """One fresh kernel: seconds of each step, and the probe cells' answer times."""

    start: float = 0.0  # kernel start until it answers
    load_ext: float = 0.0
    model_cell: float = 0.0
    export_cell: float = 0.0
    paused: float = 0.0
    probes: list[float] = field(default_factory=list)

    @property
    def waited(self) -> float:
        return self.start + self.load_ext + self.model_cell + self.export_cell

    @property
    def wall(self) -> float:
        return self.waited + self.paused


def execute(client: Any, code: str, timeout: float = 300.0) -> float:
    """Run ``code`` in the kernel; seconds until its reply. Raises on an error in the cell."""
    outputs: list[str] = []

    def keep(message: dict) -> None:
        content = message["content"]
        if message["msg_type"] == "stream":
            outputs.append(content["text"])
        elif message["msg_type"] == "error":
            outputs.append("\n".join(content["traceback"]))

    start = time.perf_counter()
    reply = client.execute_interactive(code, timeout=timeout, output_hook=keep)
    seconds = time.perf_counter() - start
    if reply["content"]["status"] != "ok":
        raise RuntimeError(f"cell failed: {code!r}\n{''.join(outputs)}")
    if code == EXPORT_CELL and "onnx" not in "".join(outputs).lower():
        raise RuntimeError(f"the export cell printed no result:\n{''.join(outputs)}")
    return seconds


def pause_with_probes(client: Any, pause: float, probe_every: float) -> list[float]:
    """Wait ``pause`` seconds, running ``1+1`` every ``probe_every`` seconds (0: never)."""
    probes: list[float] = []
    end = time.perf_counter() + pause
    while probe_every > 0 and time.perf_counter() + probe_every <= end:
        time.sleep(probe_every)
        probes.append(execute(client, "1+1"))
    time.sleep(max(0.0, end - time.perf_counter()))
    return probes


def kernel_round(pause: float, warm_up: bool, probe_every: float) -> KernelRound:
    from jupyter_client import KernelManager

    env = dict(os.environ, ONNX_WORKBENCH_WARMUP="1" if warm_up else "0", PYTHONWARNINGS="ignore")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    measured = KernelRound()
    manager = KernelManager(kernel_name="python3")
    start = time.perf_counter()
    manager.start_kernel(env=env, cwd=str(REPO))
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        measured.start = time.perf_counter() - start
        measured.load_ext = execute(client, "%load_ext workbench")
        measured.probes = pause_with_probes(client, pause, probe_every)
        measured.model_cell = execute(client, MODEL_CELL)
        time.sleep(pause)
        measured.export_cell = execute(client, EXPORT_CELL)
        measured.paused = 2 * pause
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
    return measured


def describe(measured: KernelRound) -> str:
    probes = f", 1+1 max {max(measured.probes) * 1e3:.0f} ms" if measured.probes else ""
    return (f"waited {measured.waited:.2f} s (start {measured.start:.2f}, load_ext {measured.load_ext:.2f}, "
            f"model {measured.model_cell:.2f}, export {measured.export_cell:.2f}{probes})")


def script_round() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", SCRIPT], check=True, capture_output=True, cwd=REPO)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (medians are reported)")
    parser.add_argument("--pause", type=float, default=3.0, help="seconds a person types between cells")
    parser.add_argument("--probe-every", type=float, default=0.25,
                        help="run a 1+1 cell this often during the first pause (0: never)")
    options = parser.parse_args(argv)
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} cores; pause {options.pause} s; "
          f"{options.rounds} rounds")
    scripts: list[float] = []
    kernels: dict[bool, list[KernelRound]] = {True: [], False: []}
    ratios: dict[bool, list[float]] = {True: [], False: []}
    for index in range(options.rounds):
        order = [("script", None), ("kernel", True), ("kernel", False)]
        if index % 2:
            order.reverse()
        measured: dict[Any, Any] = {}
        for kind, warm in order:
            if kind == "script":
                measured["script"] = script_round()
            else:
                measured[warm] = kernel_round(options.pause, bool(warm), options.probe_every)
        scripts.append(measured["script"])
        for warm in (True, False):
            kernels[warm].append(measured[warm])
            ratios[warm].append(measured[warm].waited / measured["script"])
        print(f"  round {index + 1} (load {os.getloadavg()[0]:.1f}): script {measured['script']:.2f} s; kernel "
              f"with warm-up {describe(measured[True])}; without {describe(measured[False])}")

    def median(values: list[float]) -> float:
        return statistics.median(values)

    print(f"\nscript (import torch + torch.onnx.export, fresh python): {median(scripts):.2f} s")
    print(f"{'kernel':<16} {'start':>6} {'load_ext':>9} {'model':>6} {'export':>7} {'waited':>7} "
          f"{'wall':>6} {'ratio':>6}")
    for warm in (True, False):
        rounds = kernels[warm]
        print(f"{'warm-up' if warm else 'no warm-up':<16} {median([r.start for r in rounds]):>6.2f} "
              f"{median([r.load_ext for r in rounds]):>9.3f} {median([r.model_cell for r in rounds]):>6.2f} "
              f"{median([r.export_cell for r in rounds]):>7.2f} {median([r.waited for r in rounds]):>7.2f} "
              f"{median([r.wall for r in rounds]):>6.2f} {median(ratios[warm]):>6.2f}")
    print("(ratio: median of the per-round ratios of waited time, kernel / script; goal <= 0.5. "
          "waited = wall - pauses)")
    if options.probe_every > 0:
        with_warm = [p for r in kernels[True] for p in r.probes]
        without = [p for r in kernels[False] for p in r.probes]
        if with_warm and without:
            print(f"\n'1+1' during the first pause, ms: with warm-up median {median(with_warm) * 1e3:.0f} "
                  f"max {max(with_warm) * 1e3:.0f}; without median {median(without) * 1e3:.0f} "
                  f"max {max(without) * 1e3:.0f}; worst extra {(max(with_warm) - median(without)) * 1e3:.0f} ms "
                  "(goal <= 100)")
    print(f"load at the end: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
