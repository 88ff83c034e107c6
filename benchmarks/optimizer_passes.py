"""What recording the optimizer pass by pass costs, against onnxscript's optimizer as
``torch.onnx.export(optimize=True)`` runs it.

Run: ``python benchmarks/optimizer_passes.py [--repeats N] [--stack BLOCKS]``

On the translated model of the demo block (and, with ``--stack N``, of N demo blocks in a
row), alternating in one process, each on a fresh ``clone()`` of the translated model:

- plain: ``compat.optimize_onnx_ir`` (onnxscript's ``optimize``);
- recorded: ``exporter.pipeline.optimize.run_passes`` (the same passes one by one, each recorded:
  node snapshots and diff, initializer names, the structural check);
- unrecorded: ``run_passes(record=False)`` (the pass-by-pass loop alone).

Ratios are medians over medians; goal: recorded / plain <= 1.10. The final models are checked
byte-identical first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any


def translated(blocks: int) -> Any:
    import torch

    from exporter import ExportOptions, export
    from exporter.examples import TransformerBlock, demo_block

    model, args, kwargs, dims = demo_block()
    if blocks > 1:
        torch.manual_seed(0)

        class Stack(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.blocks = torch.nn.ModuleList(TransformerBlock() for _ in range(blocks))

            def forward(self, x, attention_mask=None):
                for block in self.blocks:
                    x = block(x, attention_mask)
                return x

        model = Stack().eval()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims, optimize=False), **kwargs)
    return session.stage_output("translate")


def measure(model: Any, repeats: int) -> dict[str, float]:
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
    for _ in range(repeats):
        for name, run in contenders.items():
            copy = model.clone()
            start = time.perf_counter()
            run(copy)
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--stack", type=int, default=0, help="also measure a stack of this many demo blocks")
    options = parser.parse_args()
    sizes = [1] + ([options.stack] if options.stack > 1 else [])
    for blocks in sizes:
        model = translated(blocks)
        nodes = len(list(model.graph))
        medians = measure(model, options.repeats if blocks == 1 else max(3, options.repeats // 5))
        name = "demo block" if blocks == 1 else f"{blocks} demo blocks"
        print(f"{name} ({nodes} nodes translated): plain {medians['plain'] * 1e3:.1f} ms, "
              f"recorded {medians['recorded'] * 1e3:.1f} ms, unrecorded {medians['unrecorded'] * 1e3:.1f} ms")
        ratio = medians["recorded"] / medians["plain"]
        print(f"  recorded / plain = {ratio:.3f} (goal <= 1.10); unrecorded / plain = "
              f"{medians['unrecorded'] / medians['plain']:.3f}")


if __name__ == "__main__":
    main()
