"""Mixture-of-experts models: ``torch.onnx.export`` vs ``exporter.export``, result and time,
and onnxruntime vs eager latency of the exported model.

Run: ``python benchmarks/moe_export.py [--models mixtral,qwen2_moe] [--tool all|torch_onnx|ours]``

Tiny configs from ``tests/exporter/test_moe.py`` (2 layers, hidden 32, 4 experts, top-2,
random weights), default experts implementation ("grouped_mm"), ``input_ids`` 2x4 with
dynamic ``batch``/``seq`` (string names). Each tool runs in its own process:

* ``torch_onnx``: ``torch.onnx.export(model, (), kwargs=..., dynamic_shapes=..., dynamo=True)``
  (fails at translation on ``transformers::grouped_mm_fallback`` with torch 2.13).
* ``ours``: ``exporter.export``, the logits at 3x5 against eager, ``session.verify()`` and
  ``session.benchmark()`` (its headline: onnxruntime vs eager latency).

Times on a shared 2-core machine vary by ±30% and more when other processes run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "exporter"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

SHAPES = {"input_ids": {0: "batch", 1: "seq"}}


def _case(name: str):
    import torch

    import test_moe

    torch.manual_seed(0)
    return getattr(test_moe, name)(), {"input_ids": torch.randint(0, 100, (2, 4)), "use_cache": False}


def _first_line(exc: BaseException) -> str:
    cause = exc
    while cause.__cause__ is not None:
        cause = cause.__cause__
    text = str(cause).splitlines()
    return f"{type(cause).__name__}: {text[0][:200] if text else ''}"


def run_torch_onnx(name: str) -> dict:
    import torch

    model, kwargs = _case(name)
    start = time.perf_counter()
    try:
        torch.onnx.export(model, (), kwargs=kwargs, dynamic_shapes={**SHAPES, "use_cache": None}, dynamo=True,
                          verbose=False)
    except Exception as exc:  # noqa: BLE001 - the result is the row
        return {"status": "fails", "seconds": time.perf_counter() - start, "error": _first_line(exc)}
    return {"status": "ok", "seconds": time.perf_counter() - start}


def run_ours(name: str) -> dict:
    import numpy as np
    import torch

    from exporter import ExportOptions, export

    model, kwargs = _case(name)
    start = time.perf_counter()
    try:
        session = export(model, options=ExportOptions(dynamic_shapes=SHAPES), **kwargs)
    except Exception as exc:  # noqa: BLE001
        return {"status": "fails", "seconds": time.perf_counter() - start, "error": _first_line(exc)}
    seconds = time.perf_counter() - start
    ids = torch.randint(0, 100, (3, 5))
    with torch.no_grad():
        want = model(input_ids=ids, use_cache=False).logits.numpy()
    diff = float(np.abs(session.run_onnx(input_ids=ids, use_cache=False)[0] - want).max())
    verify = session.verify()
    bench = session.benchmark()
    return {"status": "ok" if verify.ok else "verify " + verify.status, "seconds": seconds,
            "stages": {s.name: round(s.seconds, 2) for s in session.stages}, "max_abs_3x5": diff,
            "benchmark": str(bench).splitlines()[1].strip() if len(str(bench).splitlines()) > 1 else str(bench)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="mixtral,qwen2_moe")
    parser.add_argument("--tool", default="all", choices=("all", "torch_onnx", "ours"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    models = options.models.split(",")
    if options.child:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        run = {"torch_onnx": run_torch_onnx, "ours": run_ours}[options.tool]
        print("RESULT " + json.dumps(run(models[0])))
        return
    tools = ("torch_onnx", "ours") if options.tool == "all" else (options.tool,)
    print(f"load average before: {os.getloadavg()}")
    for name in models:
        for tool in tools:
            out = subprocess.run([sys.executable, __file__, "--child", "--models", name, "--tool", tool],
                                 capture_output=True, text=True, timeout=900)
            line = next((text for text in out.stdout.splitlines() if text.startswith("RESULT ")), None)
            result = json.loads(line[7:]) if line else {"status": "crashed", "error": out.stderr[-300:]}
            print(f"{name:10s} {tool:11s} {json.dumps(result)}")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
