"""What a job's twin of the model costs (:func:`exporter.model_twin.twin_of`, issue 54).

Run: ``python benchmarks/model_twin.py [--repeats N]``

For a 2-layer BERT and a tiny Llama (tiny configs, random weights) and a 12-layer BERT-base-sized
model: the time to build a twin (median and minimum of N), the share of it spent cloning
buffers (a twin built with buffers aliased instead, for comparison), the bytes cloned against
the weights' bytes, and the time of one forward call for scale. Every job builds one twin per
capture attempt or eager run; an export builds 1-3, a verify one per case.
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import time
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _models() -> dict[str, tuple[Any, tuple]]:
    import torch
    import transformers

    torch.manual_seed(0)
    bert = transformers.BertModel(transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                                          intermediate_size=128, vocab_size=1000)).eval()
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2, intermediate_size=128,
        vocab_size=1000)).eval()
    base = transformers.BertModel(transformers.BertConfig()).eval()  # BERT-base sized: 110 M parameters
    ids = torch.randint(0, 1000, (2, 16))
    return {"bert-2-layer": (bert, (ids,)), "llama-tiny": (llama, (ids,)), "bert-base": (base, (ids,))}


def _timed(function: Any, repeats: int) -> tuple[float, float]:
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e3, min(samples) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=50)
    repeats = parser.parse_args().repeats

    import torch

    from exporter import model_twin

    print(f"{'model':<14} {'modules':>7} {'twin ms (median/min)':>21} {'aliased ms':>11} {'buffers/weights':>16} "
          f"{'forward ms':>11}")
    for name, (model, args) in _models().items():
        model_twin.twin_of(model)  # warm
        median, least = _timed(functools.partial(model_twin.twin_of, model), repeats)
        cloning = model_twin._twin_tensor
        model_twin._twin_tensor = lambda tensor, memo: memo.setdefault(id(tensor), tensor)  # type: ignore[assignment]
        try:
            aliased, _ = _timed(functools.partial(model_twin.twin_of, model), repeats)
        finally:
            model_twin._twin_tensor = cloning  # type: ignore[assignment]
        weights = sum(p.numel() * p.element_size() for p in model.parameters())
        buffers = sum(b.numel() * b.element_size() for b in model.buffers())
        with torch.no_grad():
            forward, _ = _timed(functools.partial(model, *args), max(3, repeats // 10))
        print(f"{name:<14} {len(list(model.modules())):>7} {median:>12.2f} / {least:<6.2f} {aliased:>11.2f} "
              f"{buffers / weights:>15.4%} {forward:>11.1f}")


if __name__ == "__main__":
    main()
