"""KV-cache decoders and T5: ``torch.onnx.export`` vs ``exporter.export``, result and time.

Run: ``python benchmarks/kv_cache_export.py [--models gpt2,llama,t5] [--tool all|torch_onnx|ours|bare]``

For each model (tiny configs from ``tests/exporter/kv_models.py``, random weights; GPT-2 and
Llama with a transformers ``DynamicCache`` of 2 layers, T5 without a cache), each tool runs in
its own process, so the pytree registration one installs cannot help another:

* ``torch_onnx``: what a user does today. ``register_dynamic_cache_export_support()``, then
  ``torch.onnx.export(model, (), kwargs=..., dynamic_shapes=<string names>, dynamo=True)``.
  When it succeeds, the ONNX model is run in onnxruntime at a second size and compared with
  eager (max abs diff of the logits).
* ``ours``: ``exporter.export(model, ..., options=ExportOptions(dynamic_shapes=...))``, then
  ``session.verify()`` (sizes including an empty cache).
* ``torch_onnx_flat``: the same after ``exporter.compat.register_kv_cache_pytree()``
  (our DynamicCache flattening, nothing else): which failures that alone removes.
* ``bare``: ``torch.export.export`` (non-strict, the same capture settings) + our
  decompose stage (``exporter.pipeline.decompose``) + translation, timed step by step, with our cache flattening: the floor
  our pipeline is measured against.

Prints one table row per (model, tool): status, seconds, and ours / bare and ours / torch.onnx
ratios where both ran. Times on a shared 2-core machine vary by ±30%.
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

SECOND = (3, 1, 5)  # (batch, seq, past) the second-size check uses


def _case(name: str):
    import torch

    import kv_models

    if name == "t5":
        model = kv_models.t5()
        kwargs = {
            "input_ids": torch.randint(2, kv_models.VOCAB, (2, 5)),
            "attention_mask": torch.ones(2, 5, dtype=torch.long),
            "decoder_input_ids": torch.randint(2, kv_models.VOCAB, (2, 4)),
            "use_cache": False,
        }
        shapes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
                  "decoder_input_ids": {0: "batch", 1: "decoder_seq"}}
        second = {
            "input_ids": torch.randint(2, kv_models.VOCAB, (3, 7)),
            "attention_mask": torch.ones(3, 7, dtype=torch.long),
            "decoder_input_ids": torch.randint(2, kv_models.VOCAB, (3, 2)),
            "use_cache": False,
        }
        return model, kwargs, shapes, lambda: second
    model = getattr(kv_models, name)()
    mask = name == "gpt2"
    shapes = kv_models.DYNAMIC_SHAPES_WITH_MASK if mask else kv_models.DYNAMIC_SHAPES
    return model, kv_models.decoder_inputs(2, 3, 4, mask=mask), shapes, lambda: kv_models.decoder_inputs(*SECOND, mask=mask, seed=3)


def run_torch_onnx_with_our_flattening(name: str) -> dict:
    """torch.onnx.export after the exporter's DynamicCache registration (no other change)."""
    import transformers.cache_utils  # noqa: F401 - the registration needs it imported

    from exporter import compat

    compat.register_kv_cache_pytree()
    return run_torch_onnx(name, ours=True)


def run_torch_onnx(name: str, ours: bool = False) -> dict:
    import torch
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    if not ours:
        register_dynamic_cache_export_support()
    model, kwargs, shapes, second = _case(name)
    if "cache" in kwargs and not ours:  # transformers' registration flattens by kind: [[keys...], [values...]]
        layers = len(kwargs["cache"].layers)
        kv = shapes["cache"][0][0]
        shapes = {**shapes, "cache": [[kv] * layers, [kv] * layers]}
    shapes = {**shapes, "use_cache": None}  # torch.export wants a key for every argument given
    start = time.perf_counter()
    try:
        program = torch.onnx.export(model, (), kwargs=kwargs, dynamic_shapes=shapes, dynamo=True, verbose=False)
    except Exception as exc:  # noqa: BLE001 - the result is the row
        return {"status": "fails", "seconds": time.perf_counter() - start, "error": _first_line(exc)}
    seconds = time.perf_counter() - start
    try:
        import numpy as np
        import onnxruntime as ort

        inputs = second()
        # Ordering follows transformers' flattening here: keys of every layer, then values.
        session = ort.InferenceSession(program.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
        flat = [v for v in inputs.values() if isinstance(v, torch.Tensor)]
        if "cache" in inputs:
            layers = inputs["cache"].layers
            by_kind = [*[layer.keys for layer in layers], *[layer.values for layer in layers]]
            by_layer = [t for layer in layers for t in (layer.keys, layer.values)]
            flat = [inputs["input_ids"], *(by_layer if ours else by_kind)]
            if "attention_mask" in inputs:
                flat.append(inputs["attention_mask"])
        feeds = {i.name: t.numpy() for i, t in zip(session.get_inputs(), flat)}
        got = session.run(None, feeds)[0]
        with torch.no_grad():
            want = model(**second()).logits
        diff = float(np.abs(got - want.numpy()).max())
        return {"status": "ok", "seconds": seconds, "second_size_max_abs": diff}
    except Exception as exc:  # noqa: BLE001
        return {"status": "exports, fails in onnxruntime at a second size", "seconds": seconds, "error": _first_line(exc)}


def run_ours(name: str) -> dict:
    from exporter import ExportOptions, export

    model, kwargs, shapes, _ = _case(name)
    start = time.perf_counter()
    try:
        session = export(model, options=ExportOptions(dynamic_shapes=shapes), **kwargs)
    except Exception as exc:  # noqa: BLE001
        return {"status": "fails", "seconds": time.perf_counter() - start, "error": _first_line(exc)}
    seconds = time.perf_counter() - start
    stages = {s.name: round(s.seconds, 2) for s in session.stages}
    import kv_models

    sizes = None if name == "t5" else {"batch": [1, 3], "seq": [1, 4], "past_seq": [0, 1, 6]}
    result = session.verify(sizes=sizes, make_inputs=kv_models.mask_follows_cache, edge_values=False)
    return {"status": "ok" if result.ok else "verify " + result.status, "seconds": seconds, "stages": stages,
            "verified_cases": len(result.cases)}


def run_bare(name: str) -> dict:
    import torch

    from exporter import compat
    from exporter.pipeline.decompose import decompose
    from exporter.pipeline.translations import onnx_registry
    from exporter.pipeline.translate import registry_opset, resolve_opset

    model, kwargs, shapes, _ = _case(name)
    compat.prepare_kv_cache_pytree(model, (), kwargs)
    from exporter.dims import DimSpec
    from exporter.inputs import bind_inputs

    bound = bind_inputs(model, (), kwargs)
    dynamic_shapes = DimSpec.parse(shapes, bound).to_torch(bound)
    opset = registry_opset(resolve_opset(None))
    times = {}
    start = time.perf_counter()
    with compat.size_oblivious_capture():
        program = torch.export.export(model, (), kwargs, dynamic_shapes=dynamic_shapes, strict=False,
                                      prefer_deferred_runtime_asserts_over_guards=True)
    times["capture"] = time.perf_counter() - start
    mark = time.perf_counter()
    decomposed = decompose(program, opset)
    times["decompose"] = time.perf_counter() - mark
    mark = time.perf_counter()
    onnx_model = compat.translate_to_onnx_ir(decomposed, onnx_registry(opset))
    compat.optimize_onnx_ir(onnx_model)
    times["translate+optimize"] = time.perf_counter() - mark
    return {"status": "ok", "seconds": time.perf_counter() - start, "stages": {k: round(v, 2) for k, v in times.items()}}


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()
    cause = exc.__cause__
    while cause is not None and cause.__cause__ is not None:
        cause = cause.__cause__
    head = text[0][:200] if text else type(exc).__name__
    if cause is not None:
        head += f" <- {type(cause).__name__}: {str(cause).splitlines()[0][:200] if str(cause) else ''}"
    return head


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="gpt2,llama,t5")
    parser.add_argument("--tool", default="all", choices=("all", "torch_onnx", "torch_onnx_flat", "ours", "bare"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    models = options.models.split(",")
    if options.child:
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.WARNING)
        run = {"torch_onnx": run_torch_onnx, "torch_onnx_flat": run_torch_onnx_with_our_flattening,
               "ours": run_ours, "bare": run_bare}[options.tool]
        print("RESULT " + json.dumps(run(models[0])))
        return
    tools = ("torch_onnx", "torch_onnx_flat", "bare", "ours") if options.tool == "all" else (options.tool,)
    print(f"load average before: {os.getloadavg()}")
    rows = {}
    for model in models:
        for tool in tools:
            out = subprocess.run([sys.executable, __file__, "--child", "--tool", tool, "--models", model],
                                 capture_output=True, text=True, env={**os.environ, "PYTHONWARNINGS": "ignore"})
            line = next((text for text in out.stdout.splitlines() if text.startswith("RESULT ")), None)
            rows[model, tool] = json.loads(line[7:]) if line else {"status": "crashed", "error": out.stderr[-300:]}
            print(f"{model:6} {tool:11} {json.dumps(rows[model, tool])}", flush=True)
    print()
    for model in models:
        ours, bare, onnx = (rows.get((model, t), {}) for t in ("ours", "bare", "torch_onnx"))
        ratios = []
        if ours.get("status") == "ok" and bare.get("status") == "ok":
            ratios.append(f"ours/bare {ours['seconds'] / bare['seconds']:.2f}")
        if ours.get("status") == "ok" and onnx.get("status") == "ok":
            ratios.append(f"ours/torch.onnx {ours['seconds'] / onnx['seconds']:.2f}")
        elif onnx:
            ratios.append(f"torch.onnx: {onnx.get('status')}")
        print(f"{model:6} " + "; ".join(ratios))
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
