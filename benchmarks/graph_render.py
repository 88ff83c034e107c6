"""Time to draw FX and ONNX side by side for a model with ~5,000 ONNX nodes.

Run: ``python benchmarks/graph_render.py [--blocks 600] [--repeats 3]``

The model is a stack of ``--blocks`` blocks (``x + fc2(relu(norm(fc1(x)))) * 0.5`` on a 3-D
input: 8 ONNX nodes each after optimization, 4,800 for 600 blocks). It is exported once (not
timed against a budget: the export itself takes minutes at this size); then, in this process:

* graph data: the four graphs and the mapping built from the session's stage results;
* collapsed (cold): ``side_by_side`` from fresh graph data, i.e. graph data + layout + SVG:
  what a user waits for the first time (budget 3 s);
* collapsed (warm): the same with the graph data already built;
* one module expanded: ``expand=("blocks.<middle>",)`` with the graph data built, which opens
  ``blocks`` (its 600 children folded into runs) and the block (budget 1 s);
* one node selected: ``select=`` an ONNX MatMul in the middle block (its FX origin highlighted).

Each is the median of ``--repeats`` runs; the ratio is time / budget (≤ 1.0 passes).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
import warnings

BUDGETS = {"collapsed (cold)": 3.0, "one module expanded": 1.0}


def build_model(blocks: int):
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.fc1 = nn.Linear(d, d)
            self.norm = nn.LayerNorm(d)
            self.fc2 = nn.Linear(d, d)

        def forward(self, x):
            return x + self.fc2(torch.relu(self.norm(self.fc1(x)))) * 0.5

    class Stack(nn.Module):
        def __init__(self, n: int, d: int = 8) -> None:
            super().__init__()
            self.blocks = nn.ModuleList(Block(d) for _ in range(n))

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    torch.manual_seed(0)
    return Stack(blocks).eval(), (torch.randn(2, 3, 8),)


def median_time(fn, repeats: int) -> tuple[float, object]:
    times, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--blocks", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    options = parser.parse_args(argv)

    import torch  # noqa: F401

    warnings.filterwarnings("ignore")
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    from exporter import export
    from exporter.graphs import graphs_of
    from workbench.render.graph_view import side_by_side

    model, args = build_model(options.blocks)
    start = time.perf_counter()
    session = export(model, *args)
    session.run()
    session.raise_for_status()
    export_seconds = time.perf_counter() - start

    def fresh_graphs():
        graphs = graphs_of(session)
        graphs.mapping  # builds fx_decomposed, onnx, onnx_optimized and the mapping
        return graphs

    data_s, graphs = median_time(fresh_graphs, options.repeats)
    middle = f"blocks.{options.blocks // 2}"
    matmul = next(e.onnx_node for e in graphs.mapping.entries if e.onnx_op == "MatMul" and e.module and e.module.startswith(middle + "."))
    rows = [("graph data (4 graphs + mapping)", data_s, None)]
    cases = [
        ("collapsed (cold)", lambda: side_by_side(graphs_of(session))),
        ("collapsed (warm)", lambda: side_by_side(graphs)),
        ("one module expanded", lambda: side_by_side(graphs, expand=(middle,))),
        ("one node selected", lambda: side_by_side(graphs, select=matmul)),
    ]
    views = {}
    for name, fn in cases:
        seconds, views[name] = median_time(fn, options.repeats)
        rows.append((name, seconds, BUDGETS.get(name)))

    print(f"model: {options.blocks} blocks, {len(graphs.onnx_optimized)} ONNX nodes (optimized), "
          f"{len(graphs.onnx)} before optimization, {len(graphs.fx_decomposed)} FX nodes (decomposed); "
          f"export {export_seconds:.1f} s; mapping coverage {graphs.mapping.coverage:.1%}")
    print(f"{'case':<32} {'median s':>9} {'budget s':>9} {'ratio':>6}")
    failed = False
    for name, seconds, budget in rows:
        ratio = f"{seconds / budget:6.2f}" if budget else "     -"
        print(f"{name:<32} {seconds:9.3f} {budget if budget else '-':>9} {ratio}")
        failed |= bool(budget and seconds > budget)
    expanded = views["one module expanded"]
    print(f"expanded view: {len(expanded.svg) / 1e3:.0f} kB of SVG, modules open: {', '.join(expanded.expanded)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
