"""Cost of ``session.verify()`` on BERT, GPT-2 and a ResNet from tiny configs: with the sizes
that can see a branch (``exporter.cases.extra_cases``) against without them, or against another
checkout.

Run: ``python benchmarks/verify_cost.py [--baseline /tmp/old] [--repeats N]``. Without
``--baseline`` the baseline is this checkout with no extra case (``extra_cases`` answering
none: the sweep as it was before them, everything else equal). With it, the baseline is a
checkout of the commit to compare with (``git worktree add /tmp/old <commit>``; a worktree
leaves the shared tree alone), which measures every change since. Each model is exported once
per child process, which imports the checkout's ``exporter``; ``verify()`` is then timed
``--repeats`` times after one warm-up, and the two sides' child processes alternate, so a
busy machine slows both alike. Per model the ratio is the median over the baseline's median;
the headline is the largest ratio; target <= 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any

TARGET = 1.5
MODELS = ("bert", "gpt2", "resnet")


def build(name: str) -> tuple[Any, tuple, dict, Any]:
    """(model, args, kwargs, dynamic_shapes) from a tiny config, random weights."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    if name == "bert":
        config = tf.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                               intermediate_size=64, max_position_embeddings=64)
        ids = torch.randint(0, 128, (2, 8))
        kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        return tf.BertModel(config).eval(), (), kwargs, dims
    if name == "gpt2":
        config = tf.GPT2Config(vocab_size=128, n_embd=32, n_layer=2, n_head=2, n_positions=64)
        ids = torch.randint(0, 128, (2, 8))
        kwargs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "use_cache": False}
        dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
        return tf.GPT2Model(config).eval(), (), kwargs, dims
    if name == "resnet":
        config = tf.ResNetConfig(num_channels=3, embedding_size=16, hidden_sizes=[16, 32, 32, 64], depths=[1, 1, 1, 1])
        pixels = torch.randn(2, 3, 64, 64)
        dims = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}
        return tf.ResNetModel(config).eval(), (), {"pixel_values": pixels}, dims
    raise ValueError(name)


def child(models: list[str], repeats: int, extra: bool) -> None:
    """Time verify() in this process (whatever ``exporter`` imports here); print JSON."""
    import logging
    import warnings

    warnings.filterwarnings("ignore")
    logging.disable(logging.WARNING)
    from exporter import ExportOptions, Session

    if not extra:
        import exporter.verify.core as core

        core.extra_cases = lambda *args, **kwargs: []  # type: ignore[attr-defined]

    out: dict[str, Any] = {}
    for name in models:
        model, args, kwargs, dims = build(name)
        session = Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims))
        session.run("optimize")
        result = session.verify()  # warm-up (onnxruntime session, float64 reference)
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            result = session.verify()
            times.append(time.perf_counter() - start)
        swept = sorted({tuple(sorted(dict(c.sizes).items())) for c in result.cases})
        out[name] = {"seconds": times, "status": str(result.status), "cases": len(result.cases),
                     "sizes": [dict(s) for s in swept]}
    print(json.dumps(out))


def run_child(checkout: str, models: list[str], repeats: int, extra: bool) -> dict[str, Any]:
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (checkout, env.get("PYTHONPATH")) if p)
    command = [sys.executable, os.path.abspath(__file__), "--child", "--repeats", str(repeats), "--models", *models,
               *(() if extra else ("--no-extra",))]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="a checkout of the commit to compare with")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=2, help="alternating child processes per checkout")
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-extra", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        child(options.models, options.repeats, not options.no_extra)
        return
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sides = {"new": (here, True), "old": (options.baseline, True) if options.baseline else (here, False)}
    times: dict[str, dict[str, list[float]]] = {k: {m: [] for m in options.models} for k in sides}
    last: dict[str, dict[str, Any]] = {}
    for _ in range(options.rounds):
        for key, (path, extra) in sides.items():
            found = run_child(path, options.models, options.repeats, extra)
            last[key] = found
            for model in options.models:
                times[key][model].extend(found[model]["seconds"])
    ratios = []
    for model in options.models:
        new = statistics.median(times["new"][model])
        old = statistics.median(times["old"][model])
        ratios.append(new / old)
        print(f"{model:7s} new {new:6.2f} s ({last['new'][model]['cases']} cases, {last['new'][model]['status']})  "
              f"old {old:6.2f} s ({last['old'][model]['cases']} cases, {last['old'][model]['status']})  ratio {new / old:.2f}")
        added = [s for s in last["new"][model]["sizes"] if s not in last["old"][model]["sizes"]]
        print(f"        sizes added: {added}")
    worst = max(ratios)
    print(f"largest ratio {worst:.2f} (target <= {TARGET}): {'ok' if worst <= TARGET else 'OVER'}")


if __name__ == "__main__":
    main()
