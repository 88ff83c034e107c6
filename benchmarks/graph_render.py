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

The graph widget (``workbench.graph_widget.GraphWidget``, Python side: layout + the node
details JSON sent to the page), with no page attached:

* widget first paint (cold): ``GraphWidget(session)`` from fresh graph data, collapsed
  (budget 3 s);
* widget expand one module: ``view.expanded = [...] + ["blocks.<middle>"]``, as a click on the
  module box sets it (budget 1 s);
* widget select a node: ``view.selected = <MatMul in another block>``, which opens its block.

With ``--intermediates``, instead: ``session.compare_intermediates()`` on a 2-layer BERT
(transformers config, random weights; the builder of ``benchmarks/compare_intermediates.py``)
against one verify case (the example inputs, as ``verify()`` runs a case), each on a fresh
export (``--repeats`` of them), in CPU seconds of this process (``time.process_time``, torch
with 1 thread: the figure does not move with the machine's load): the first call on a fresh
session (it also builds the session's graphs and FX ↔ ONNX mapping, which give each row its
module and source), the first call once the graphs are drawn (as in the graph widget), and a
repeat call; then the same two calls after ``verify()`` on a drawn export (they reuse verify's
eager outputs for the case). The issue's goal is ≤ 2× one verify case.

Each is the median of ``--repeats`` runs; the ratio is time / budget (≤ 1.0 passes). With
``--browser``, the widget's ES module is also timed in Debian's chromium (a page holding the
module and the widget's state, no Jupyter): first paint collapsed, the redraw after one module
opens, and a click → its counterpart highlighted.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import statistics
import sys
import time
import warnings

BUDGETS = {"collapsed (cold)": 3.0, "one module expanded": 1.0, "widget first paint (cold)": 3.0,
           "widget expand one module": 1.0}


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


def intermediates_timings(repeats: int) -> int:
    """compare_intermediates vs one verify case on a 2-layer BERT, CPU ms (see the docstring)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    from compare_intermediates import build_bert  # this directory's BERT builder
    from exporter import ExportOptions, export
    from exporter.verify.core import _run_case  # one case exactly as verify() runs it

    warnings.filterwarnings("ignore")
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    model, kwargs = build_bert(64, 16)
    names = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    cpu: dict[str, list[float]] = {"one verify case": [], "first call, fresh session": [],
                                   "first call, graphs drawn": [], "repeat call": [],
                                   "after verify, first call": [], "after verify, repeat call": []}

    def timed(key: str, fn) -> None:
        start = time.process_time()
        fn()
        cpu[key].append(time.process_time() - start)

    for _ in range(repeats):
        for key in ("first call, fresh session", "first call, graphs drawn"):
            session = export(model, **kwargs, options=ExportOptions(dynamic_shapes=names))
            outputs = [v.name for v in session.stage_output("optimize").graph.outputs]
            one_case = functools.partial(_run_case, session, session.output_ort_session, "example", (),
                                         session.inputs.args, session.inputs.kwargs, outputs, None)
            one_case()  # warm: eager kernels, the cached InferenceSession
            timed("one verify case", one_case)
            if key == "first call, graphs drawn":
                _ = session.graphs.mapping
            timed(key, session.compare_intermediates)
        timed("repeat call", session.compare_intermediates)
        session = export(model, **kwargs, options=ExportOptions(dynamic_shapes=names))
        _ = session.graphs.mapping
        session.verify()  # its eager outputs for the example are what the comparison reuses
        timed("after verify, first call", session.compare_intermediates)
        timed("after verify, repeat call", session.compare_intermediates)
    case = statistics.median(cpu["one verify case"])
    print(f"2-layer BERT (hidden 64, batch 2 x seq 16), torch 1 thread; CPU ms, median of {repeats} fresh exports")
    for key, values in cpu.items():
        seconds = statistics.median(values)
        print(f"{key:<28} {seconds * 1e3:8.1f} ms  {seconds / case:5.1f}x one verify case")
    return 0


PAGE = """<!doctype html><html><head><meta charset="utf-8"><style>%(css)s</style></head>
<body style="width: 570px"><div id="host"></div><script type="module">
const states = %(states)s;
const handlers = {};
const state = Object.assign({}, states.collapsed);
const model = {
  get: (k) => state[k], set: (k, v) => { state[k] = v; }, save_changes() {}, send() {},
  on: (ev, f) => { (handlers[ev] = handlers[ev] || []).push(f); }, off() {},
};
const frame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
const mod = await import(URL.createObjectURL(new Blob([states.esm], {type: "text/javascript"})));
const el = document.getElementById("host");
let t = performance.now();
mod.default.render({model, el});
await frame();
const firstPaint = performance.now() - t;
t = performance.now();
Object.assign(state, states.expanded);
for (const name of ["svg", "highlight", "expanded"]) for (const f of handlers["change:" + name] || []) f();
await frame();
const expand = performance.now() - t;
const op = [...el.querySelectorAll("g.wb-op")].find((g) => g.id.startsWith("onnx-op-") && state.details[g.id]
  && state.details[g.id].mapped.some((m) => m[2]));
const counterpart = document.getElementById(state.details[op.id].mapped.find((m) => m[2])[2]);
t = performance.now();
op.dispatchEvent(new MouseEvent("click", {bubbles: true}));
const highlighted = counterpart.classList.contains("wb-selected");
const click = performance.now() - t;
await frame();
const clickPainted = performance.now() - t;
window.result = {firstPaint, expand, click, clickPainted, highlighted,
                 elements: el.querySelectorAll("g.node").length};
</script></body></html>"""


def browser_timings(widget, expanded_state: dict) -> dict | None:
    """First paint, expand and click→highlight of the widget's ES module in Debian's chromium
    (a page with the module and the widget's state, no Jupyter); None without chromium."""
    import os
    import tempfile
    from pathlib import Path

    chromium = os.environ.get("WB_CHROMIUM", "/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    if not os.path.exists(chromium):
        return None
    from workbench.graph_widget import STATIC

    keys = ("svg", "details", "names", "selected", "expanded", "highlight", "overlay", "message", "note", "status",
            "height")
    states = {"collapsed": {k: getattr(widget, k) for k in keys}, "expanded": expanded_state,
              "esm": (STATIC / "graph_widget.js").read_text()}
    page_text = PAGE % {"css": (STATIC / "graph_widget.css").read_text(), "states": json.dumps(states)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "graph.html"
        path.write_text(page_text)
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
            try:
                page = browser.new_page(viewport={"width": 1000, "height": 900})
                page.goto(path.as_uri())
                page.wait_for_function("() => window.result !== undefined", timeout=120_000)
                return page.evaluate("() => window.result")
            finally:
                browser.close()


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
    parser.add_argument("--browser", action="store_true",
                        help="also time the widget's front end in chromium (first paint, expand, click → highlight)")
    parser.add_argument("--intermediates", action="store_true",
                        help="time compare_intermediates on a 2-layer BERT against one verify case instead")
    options = parser.parse_args(argv)
    if options.intermediates:
        return intermediates_timings(options.repeats)

    import torch  # noqa: F401

    warnings.filterwarnings("ignore")
    logging.getLogger("onnxscript").setLevel(logging.ERROR)
    from exporter import export
    from exporter.graphs import graphs_of
    from exporter.graphs.draw import side_by_side

    model, args = build_model(options.blocks)
    start = time.perf_counter()
    session = export(model, *args)
    session.run()
    session.raise_for_status()
    export_seconds = time.perf_counter() - start

    def fresh_graphs():
        graphs = graphs_of(session)
        _ = graphs.mapping  # builds fx_decomposed, onnx, onnx_optimized and the mapping
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

    from workbench.graph_widget import GraphWidget

    other = f"blocks.{options.blocks // 3}"
    other_matmul = next(e.onnx_node for e in graphs.mapping.entries
                        if e.onnx_op == "MatMul" and e.module and e.module.startswith(other + "."))
    widget_seconds, widget = median_time(lambda: GraphWidget(graphs_of(session)), options.repeats)
    rows.append(("widget first paint (cold)", widget_seconds, BUDGETS["widget first paint (cold)"]))
    first_paint_bytes = len(widget.svg) + len(json.dumps(widget.details)) + len(json.dumps(widget.names))

    def expand_one():
        widget.expanded = []
        start = time.perf_counter()
        widget.expanded = [middle]
        return time.perf_counter() - start

    def select_one():
        widget.selected = ""
        widget.expanded = []
        start = time.perf_counter()
        widget.selected = other_matmul
        return time.perf_counter() - start

    rows.append(("widget expand one module", statistics.median(expand_one() for _ in range(options.repeats)),
                 BUDGETS["widget expand one module"]))
    rows.append(("widget select a node", statistics.median(select_one() for _ in range(options.repeats)), None))
    keys = ("svg", "details", "expanded", "highlight", "selected")
    expanded_state = {k: getattr(widget, k) for k in keys}  # the node selected, its block open
    widget.selected = ""
    widget.expanded = []
    in_browser = browser_timings(widget, expanded_state) if options.browser else None

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
    if in_browser:
        print(f"in chromium (the widget's ES module, no Jupyter; {in_browser['elements']} SVG nodes after expand): "
              f"first paint {in_browser['firstPaint']:.0f} ms, expand redraw {in_browser['expand']:.0f} ms, "
              f"click → counterpart highlighted {in_browser['click']:.1f} ms "
              f"({in_browser['clickPainted']:.0f} ms to the next painted frame; highlighted: {in_browser['highlighted']})")
    print(f"widget first paint sends {first_paint_bytes / 1e3:.0f} kB (SVG + details of {len(widget.details)} "
          f"elements drawn + {len(widget.names)} search names)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
