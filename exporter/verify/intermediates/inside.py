"""Inside one translation: which of the ONNX nodes without an FX value of their own makes the
first bad compared node go wrong.

The first bad node's *subgraph* is the nodes between its compared ancestors and it: walking
back from its inputs, every producer that has no FX value (an inner step of a translation,
such as the Sigmoid in SiLU's ``Mul(x, Sigmoid(x))``) belongs to it; a value with an FX
counterpart, a graph input or a weight bounds it. That small graph runs in onnxruntime on the
FX values of its bounds:

* the bad node then matches its FX value: the error came in through its inputs (values within
  tolerance whose drift added up); nothing inside is named;
* it is still wrong: the fault is inside. Torch's own decomposition of the FX node the bad
  node carries (``torch.export.default_decompositions()``, e.g. ``silu`` →
  ``sigmoid``, ``mul``) gives finer FX values on the same inputs; the first inner node (in
  topological order) whose output matches none of them (verify's rule, the values flattened) is
  named. Data-movement nodes (Reshape, Transpose, Cast...) whose input matched are not
  suspects. When every inner node matches, the bad node itself (the step combining them) is
  the culprit. An FX node torch does not decompose has one step: its own value.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

from ...errors import first_line
from ..tolerance import compare
from .plan import NodePlan, Plan
from .result import InsideFinding, IntermediateRow

__all__ = ["InsideFinding", "locate_inside"]

MAX_INNER = 64  # a larger subgraph is not a translation's inside: not searched
_LAYOUT = frozenset({"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Expand", "Identity", "Flatten", "Cast",
                     "CastLike", "Slice", "Split", "Concat", "Gather", "Tile"})


def subgraph(plan: Plan, bad: NodePlan) -> tuple[list[NodePlan], dict[str, str], list[Any]]:
    """``(inner nodes in topological order, {ONNX value: FX node} bounding it, graph inputs and
    weights it reads)`` of ``bad``."""
    by_node = {id(n.node): n for n in plan.nodes}
    paired = {value: fx for n in plan.nodes for value, fx in n.pairs}
    inner: dict[int, NodePlan] = {}
    bounds: dict[str, str] = {}
    outside: dict[str, Any] = {}
    stack = [v for v in bad.node.inputs if v is not None]
    while stack:
        value = stack.pop()
        if value.name in paired:
            bounds[value.name] = paired[value.name]
            continue
        producer = value.producer()
        planned = by_node.get(id(producer)) if producer is not None else None
        if planned is None:  # a graph input or a weight
            outside[value.name] = value
            continue
        if id(producer) in inner:
            continue
        inner[id(producer)] = planned
        if len(inner) > MAX_INNER:
            break
        stack.extend(v for v in producer.inputs if v is not None)
    order = [n for n in plan.nodes if id(n.node) in inner]
    return order, bounds, list(outside.values())


def locate_inside(case: str, plan: Plan, bad_row: IntermediateRow, fetch: Callable[[set[str]], Mapping[str, Any]],
                  feeds: Mapping[str, Any], model: Any, program: Any, tolerances: Any) -> InsideFinding | None:
    """Search the subgraph of ``bad_row``'s node (see the module docstring); None when it has
    no inner node (or too many). ``fetch(names)``: those FX nodes' values on the case's inputs
    (one more run of the program)."""
    bad = next((n for n in plan.nodes if n.name == bad_row.onnx_node), None)
    if bad is None or bad_row.onnx_value is None or bad_row.onnx_value not in dict(bad.pairs):
        return None
    inner, bounds, outside = subgraph(plan, bad)
    if not inner or len(inner) > MAX_INNER or all(n.op == "Constant" for n in inner):
        return None
    names = tuple(n.name for n in inner)
    fx_name = dict(bad.pairs)[bad_row.onnx_value]
    fx_node = next((n for n in program.graph.nodes if n.name == fx_name), None)
    wanted = set(bounds.values()) | {fx_name} | ({a.name for a in fx_node.all_input_nodes} if fx_node is not None else set())
    try:
        fx_values = fetch(wanted)
        values = _run_subgraph(inner + [bad], bounds, outside, fx_values, feeds, model)
    except Exception as exc:  # noqa: BLE001 - a subgraph onnxruntime refuses: nothing named
        return InsideFinding(bad.name, names, True, None, f"its subgraph could not run alone ({first_line(exc)})")
    on_fx = compare(case, bad_row.onnx_value, values.get(bad_row.onnx_value), fx_values.get(fx_name), tolerances)
    found = functools.partial(InsideFinding, bad.name, names, not on_fx.ok, fx_node=fx_name, max_abs=on_fx.max_abs,
                              max_rel=on_fx.max_rel, atol_applied=on_fx.atol_applied)
    if on_fx.ok:
        return found(None, "on the FX values of its inputs it matches: the error came in through its inputs")
    finer = _finer_values(fx_node, fx_values)
    if finer is None:  # no decomposition: the FX node's own inputs and output are the only steps
        finer = [*((f"input {i}", fx_values[a.name]) for i, a in enumerate(fx_node.all_input_nodes)),
                 (fx_name, fx_values[fx_name])] if fx_node is not None else []
    steps = ", ".join(dict.fromkeys(step for step, _ in finer if not step.startswith("input"))) or "none"
    matched: set[str] = set(bounds)
    for node in inner:
        outputs = [v for v in node.node.outputs if v.name in values]
        if not outputs or not _is_float(values[outputs[0].name]):
            matched.update(v.name for v in outputs)
            continue
        data = node.node.inputs[0] if node.node.inputs else None
        if node.op in _LAYOUT and data is not None and data.name in matched:
            matched.update(v.name for v in outputs)
            continue
        if any(_matches(case, values[v.name], finer, tolerances) for v in outputs):
            matched.update(v.name for v in outputs)
            continue
        return found(node.name, f"an inner step of the translation of {fx_name}: on the FX values of the "
                                f"translation's inputs its output matches no step of torch's decomposition of "
                                f"{fx_name} ({steps}), and {bad.name} is off by {on_fx.max_abs:.3g} there",
                     onnx_value=outputs[0].name)
    return found(bad.name, f"every node inside matches a step of torch's decomposition of {fx_name} ({steps}): the "
                           "step combining them is wrong", onnx_value=bad_row.onnx_value)


def _run_subgraph(nodes: Sequence[NodePlan], bounds: Mapping[str, str], outside: Sequence[Any],
                  fx_values: Mapping[str, Any], feeds: Mapping[str, Any], model: Any) -> dict[str, Any]:
    """Every output of ``nodes`` from onnxruntime, the bounds fed with their FX values."""
    import numpy as np
    import onnx
    import onnx_ir as ir
    import onnxruntime as ort

    inputs: dict[str, Any] = {}
    types: dict[str, int] = {}
    for value_name, fx in bounds.items():
        inputs[value_name] = _numpy(fx_values[fx])
    for value in outside:
        if value.name in feeds:
            inputs[value.name] = np.asarray(feeds[value.name])
        elif value.const_value is not None:
            inputs[value.name] = value.const_value.numpy()
        else:
            raise ValueError(f"no value for {value.name!r}")
    for name, array in inputs.items():
        types[name] = onnx.helper.np_dtype_to_tensor_dtype(array.dtype)
    protos = [ir.serde.serialize_node(n.node) for n in nodes]
    outputs = [v for n in nodes for v in n.node.outputs if v.name and v.dtype is not None]
    graph = onnx.helper.make_graph(
        protos, "inside", [onnx.helper.make_tensor_value_info(n, t, None) for n, t in types.items()],
        [onnx.helper.make_tensor_value_info(v.name, int(v.dtype), None) for v in outputs])
    opsets = [onnx.helper.make_opsetid(domain, version) for domain, version in model.opset_imports.items()]
    proto = onnx.helper.make_model(graph, opset_imports=opsets, ir_version=model.ir_version)
    proto.functions.extend(ir.serde.serialize_function(f) for f in model.functions.values())
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.enable_cpu_mem_arena = False  # one run: its values go back to the system, not to an arena
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])
    names = [v.name for v in outputs]
    return dict(zip(names, session.run(names, inputs)))


def _finer_values(node: Any, fx_values: Mapping[str, Any]) -> list[tuple[str, Any]] | None:
    """``(step, value)`` of each step of torch's decomposition of FX ``node`` run on its FX
    inputs (its tensor inputs first: ``input 0``...); None without a decomposition."""
    import torch
    from torch.fx.experimental.proxy_tensor import make_fx

    table = torch.export.default_decompositions()
    if node is None or node.op != "call_function" or node.target not in table:
        return None
    tensors: list[Any] = []

    def take(arg: Any) -> Any:  # FX inputs → their values; tensors collected as the traced function's inputs
        if isinstance(arg, torch.fx.Node):
            arg = fx_values[arg.name]
        if isinstance(arg, torch.Tensor):
            tensors.append(arg)
            return _Slot(len(tensors) - 1)
        return arg

    args = _map(node.args, take)
    kwargs = _map(node.kwargs, take)

    def call(*flat: Any) -> Any:
        def put(v: Any) -> Any:
            return flat[v.index] if isinstance(v, _Slot) else v

        return node.target(*_map(args, put), **_map(kwargs, put))

    try:
        with torch.no_grad():
            traced = make_fx(call, decomposition_table=cast(Any, table))(*tensors)
            recorder = _Recorder(traced)
            recorder.run(*tensors)
    except Exception:  # noqa: BLE001 - a target make_fx cannot trace: no finer values
        return None
    steps: list[tuple[str, Any]] = [(f"input {i}", t) for i, t in enumerate(tensors)]
    steps.extend((str(getattr(n.target, "__name__", n.target)).split(".")[0], v) for n, v in recorder.seen)
    return steps


@dataclass(frozen=True)
class _Slot:
    index: int


def _map(value: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(value, (tuple, list)):
        return type(value)(_map(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map(v, fn) for k, v in value.items()}
    return fn(value)


class _Recorder:
    """Runs a traced GraphModule node by node, keeping each call's value."""

    def __init__(self, module: Any) -> None:
        import torch

        outer = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, n: Any) -> Any:
                result = super().run_node(n)
                if n.op == "call_function" and isinstance(result, torch.Tensor):
                    outer.seen.append((n, result))
                return result

        self.seen: list[tuple[Any, Any]] = []
        self._interpreter = Interpreter(module)

    def run(self, *args: Any) -> Any:
        return self._interpreter.run(*args)


def _matches(case: str, value: Any, finer: Sequence[tuple[str, Any]], tolerances: Any) -> bool:
    import numpy as np
    import torch

    flat = np.asarray(value).reshape(-1)
    for _, step in finer:
        if isinstance(step, torch.Tensor) and step.numel() == flat.size and step.is_floating_point():
            if compare(case, "inside", flat, step.detach().reshape(-1), tolerances).ok:
                return True
    return False


def _is_float(value: Any) -> bool:
    import numpy as np

    return np.asarray(value).dtype.kind == "f"


def _numpy(value: Any) -> Any:
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return np.asarray(value)
