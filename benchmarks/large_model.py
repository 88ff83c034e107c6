"""A model past the 2 GiB protobuf limit, end to end, against ``torch.onnx.export``.

Run: ``python benchmarks/large_model.py [--layers 8] [--width 8192]`` (not part of the test
suite: it needs ~2.2 GB of weights, ~10 GB of free memory and ~5 GB of free disk for temporary
files).

The model is a stack of ``layers`` × ``Linear(width, width)`` with a dynamic batch: at the
default 8 × 8192 its weights are 2.15 GB (float32), past protobuf's 2 GiB. Each contender runs
in its own fresh Python process (peak RSS is a process-lifetime maximum), one after the other:

* ours: ``exporter.export()``, then ``session.run_onnx``, ``session.verify`` (a small sweep),
  a short ``session.benchmark``, then ``session.release()``;
* torch: ``torch.onnx.export(..., dynamo=True)``, then ``ONNXProgram(...)(x)`` (onnxruntime
  from the external-data copy torch saves past 1.5 GB).

After each step the child prints the process's peak RSS so far (``resource.getrusage``) and
the step's seconds; the parent prints both side by side with the ratios ours / torch.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
import warnings


def peak_rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # ru_maxrss is KiB on Linux


def build(layers: int, width: int):
    import torch

    class Stack(torch.nn.Module):
        def __init__(self, layers: int, width: int) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    torch.manual_seed(0)
    with torch.no_grad():
        model = Stack(layers, width).eval()
        for layer in model.layers:  # keep activations O(1) through the stack
            layer.weight.mul_(1.0 / (width**0.5 * layer.weight.std()))
            layer.bias.zero_()
    x = torch.randn(2, width)
    return model, x


def child(mode: str, layers: int, width: int) -> None:
    warnings.filterwarnings("ignore")
    import logging

    for name in ("torch", "torch.onnx", "torch.export", "onnxscript", "onnx_ir"):
        logging.getLogger(name).setLevel(logging.ERROR)
    import torch

    torch.set_num_threads(2)
    steps: list[dict] = []

    def step(name: str, start: float, **extra) -> None:
        steps.append({"step": name, "seconds": round(time.perf_counter() - start, 2), "peak_rss_gb": round(peak_rss_gb(), 2), **extra})
        print(json.dumps(steps[-1]), file=sys.stderr, flush=True)

    start = time.perf_counter()
    model, x = build(layers, width)
    weights = sum(p.numel() * p.element_size() for p in model.parameters())
    step("model", start, weights_gb=round(weights / 1e9, 3))
    with torch.no_grad():
        expected = model(x).numpy()
    if mode == "ours":
        from exporter import ExportOptions, export

        start = time.perf_counter()
        session = export(model, x, options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
        session.raise_for_status()
        step("export", start)
        start = time.perf_counter()
        (out,) = session.run_onnx(x)
        err = float(abs(out - expected).max())
        step("run_onnx", start, max_abs_err=err, source=type(session.ort_model_source).__name__)
        start = time.perf_counter()
        result = session.verify(max_size=4)
        step("verify", start, status=result.status, cases=len(result.cases))
        start = time.perf_counter()
        bench = session.benchmark(budget=1.0, min_runs=3, threads=2)
        step("benchmark", start, ok=bench.ok, ort_p50_ms=round(bench.ort.stats.p50 * 1e3, 2) if bench.ok else None,
             error=bench.error)
        start = time.perf_counter()
        session.release()
        step("release", start)
    else:
        start = time.perf_counter()
        program = torch.onnx.export(model, (x,), dynamic_shapes={"x": {0: torch.export.Dim("batch")}}, dynamo=True)
        step("export", start)
        start = time.perf_counter()
        (out,) = program(x)
        err = float(abs(out.numpy() - expected).max())
        step("run_onnx", start, max_abs_err=err)
        program.release()
    print(json.dumps(steps))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--child", choices=("ours", "torch"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.child, options.layers, options.width)
        return
    results = {}
    for mode in ("torch", "ours"):
        print(f"running {mode} ...", flush=True)
        done = subprocess.run([sys.executable, __file__, "--child", mode, "--layers", str(options.layers),
                               "--width", str(options.width)], capture_output=True, text=True, env=os.environ.copy())
        if done.returncode != 0:
            print(done.stderr[-4000:])
            raise SystemExit(f"{mode} failed (exit {done.returncode})")
        results[mode] = {s["step"]: s for s in json.loads(done.stdout.strip().splitlines()[-1])}
    ours, torch_ = results["ours"], results["torch"]
    print(f"\nmodel: {options.layers} x Linear({options.width}, {options.width}), "
          f"{ours['model']['weights_gb']} GB of float32 weights, dynamic batch\n")
    print(f"{'step':<10} {'ours s':>8} {'ours peak GB':>13} {'torch s':>8} {'torch peak GB':>14} {'RSS ratio':>10}")
    for name in ("model", "export", "run_onnx", "verify", "benchmark", "release"):
        mine, theirs = ours.get(name), torch_.get(name)
        if mine is None:
            continue
        ratio = f"{mine['peak_rss_gb'] / theirs['peak_rss_gb']:.2f}" if theirs else ""
        row = (f"{name:<10} {mine['seconds']:>8.1f} {mine['peak_rss_gb']:>13.2f} "
               f"{theirs['seconds'] if theirs else '':>8} {theirs['peak_rss_gb'] if theirs else '':>14} {ratio:>10}")
        print(row)
    print()
    print(f"export time ratio ours / torch: {ours['export']['seconds'] / torch_['export']['seconds']:.2f}")
    print(f"peak RSS, export: ours / torch = {ours['export']['peak_rss_gb'] / torch_['export']['peak_rss_gb']:.2f}")
    print(f"peak RSS, export + run in onnxruntime: ours / torch = "
          f"{ours['run_onnx']['peak_rss_gb'] / torch_['run_onnx']['peak_rss_gb']:.2f}")
    print(f"peak RSS, export + run + verify (ours) / export + run (torch) = "
          f"{ours['verify']['peak_rss_gb'] / torch_['run_onnx']['peak_rss_gb']:.2f}")
    print(f"run_onnx max abs err: ours {ours['run_onnx']['max_abs_err']:.2e} (from {ours['run_onnx']['source']}), "
          f"torch {torch_['run_onnx']['max_abs_err']:.2e}")
    print(f"verify: {ours['verify']['status']} ({ours['verify']['cases']} cases); "
          f"benchmark ok: {ours['benchmark']['ok']} (onnxruntime p50 {ours['benchmark']['ort_p50_ms']} ms)")


if __name__ == "__main__":
    main()
