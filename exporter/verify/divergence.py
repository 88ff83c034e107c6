"""Where a failing case first goes wrong: in capture, or at the first divergent ONNX node."""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..artifacts import ExportArtifacts, ExportInputs
from ..compat import formats
from ..errors import first_line
from ..serialize import needs_external_data, write_external_data
from ..frames import source_of_stack
from ..node_metadata import fx_name_of, module_path_of
from ..inputs import bind_inputs
from .tolerance import Tolerance, compare


@dataclass(frozen=True)
class Divergence:
    """Where a failing case first goes wrong.

    ``stage`` is ``capture`` when the captured program already disagrees with eager PyTorch
    at these inputs (torch.export baked in something true only at the example), ``onnx`` when
    the program agrees with eager but an ONNX node disagrees with the FX node it came from.
    """

    case: str
    stage: str
    message: str
    onnx_node: str | None = None
    op_type: str | None = None
    onnx_value: str | None = None
    fx_node: str | None = None
    fx_target: str | None = None
    module_path: str | None = None
    source: str | None = None
    max_abs: float | None = None
    compared: int = 0

    def summary(self) -> str:
        lines = [f"first divergence ({self.case}, {self.stage}): {self.message}"]
        if self.onnx_node:
            lines.append(f"  ONNX node {self.onnx_node!r} ({self.op_type}) → value {self.onnx_value!r}")
        if self.fx_node:
            lines.append(f"  FX node {self.fx_node!r} ({self.fx_target})")
        if self.module_path is not None:
            lines.append(f"  module: {self.module_path or '(top level)'}")
        if self.source:
            lines.append(f"  at: {self.source}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()


def program_inputs(program: Any, session: ExportInputs, args: tuple, kwargs: Mapping[str, Any]) -> list[Any]:
    """The flat inputs of a program's graph module, from inputs given like the model's forward:
    user inputs, parameters, buffers and constants in the signature's order."""
    user = iter(bind_inputs(session.model, args, dict(kwargs)).values)
    state = program.state_dict
    constants = getattr(program, "constants", {}) or {}
    inputs: list[Any] = []
    for spec in program.graph_signature.input_specs:
        kind = spec.kind.name
        if kind == "USER_INPUT":
            inputs.append(next(user))
        elif kind in ("PARAMETER", "BUFFER") and spec.target in state:
            inputs.append(state[spec.target])
        else:
            inputs.append(constants[spec.target])
    return inputs


def run_program(program: Any, session: ExportInputs, args: tuple, kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Run a program's FX graph directly (no input-shape checks) on inputs given like the
    model's forward. Returns its user outputs and the value of every FX node by name."""
    import torch

    inputs = program_inputs(program, session, args, kwargs)

    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, node: Any) -> Any:
            result = super().run_node(node)
            values[node.name] = result
            return result

    with torch.no_grad():
        flat = Recorder(program.graph_module, garbage_collect_values=False).run(*inputs)
    flat = list(flat) if isinstance(flat, (list, tuple)) else [flat]
    user_outputs = [
        value
        for value, spec in zip(flat, program.graph_signature.output_specs)
        if spec.kind.name == "USER_OUTPUT" and isinstance(value, torch.Tensor)
    ]
    return user_outputs, values


def _ort_intermediates(model: Any, feeds: Mapping[str, Any]) -> dict[str, Any]:
    """Run an ONNX model with every node output exposed; values by name."""
    import onnx_ir as ir
    import onnxruntime as ort

    clone = model.clone()
    existing = {v.name for v in clone.graph.outputs}
    for node in clone.graph:
        for value in node.outputs:
            if value.name and value.name not in existing and value.dtype is not None:
                clone.graph.outputs.append(value)
                existing.add(value.name)
    options = ort.SessionOptions()
    options.log_severity_level = 4
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if not needs_external_data(clone):
        session = ort.InferenceSession(ir.to_proto(clone).SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        return dict(zip(names, session.run(names, dict(feeds))))
    with tempfile.TemporaryDirectory(prefix="onnx-workbench-divergence-") as directory:  # past 2 GiB
        path = write_external_data(clone, Path(directory) / "model.onnx")
        session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values = dict(zip(names, session.run(names, dict(feeds))))
        del session
        return values


def first_divergence(
    session: ExportArtifacts,
    case: str,
    args: tuple,
    kwargs: Mapping[str, Any],
    expected: Sequence[Any],
    *,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    onnx_model: Any | None = None,
) -> Divergence:
    """Find where a case first goes wrong: in capture, or at the first ONNX node (in
    topological order) whose value differs from its FX node's value beyond tolerance."""
    program = session.decomposed_program
    model = onnx_model if onnx_model is not None else session.stage_output("optimize")
    try:
        fx_outputs, fx_values = run_program(program, session, args, kwargs)
    except Exception as exc:  # noqa: BLE001
        return Divergence(
            case, "capture",
            f"the captured program cannot run at these inputs ({first_line(exc)}): "
            "torch.export assumed something that only holds near the example (a runtime assert "
            "the ONNX model does not carry)",
        )
    names = [v.name for v in model.graph.outputs]
    for i, (got, want) in enumerate(zip(fx_outputs, expected)):
        check = compare(case, names[i] if i < len(names) else str(i), got, want, tolerances)
        if not check.ok:
            return Divergence(
                case, "capture",
                "the captured program already differs from eager PyTorch here ("
                + (f"output {check.output!r}, max abs diff {check.max_abs:.3g}" if check.max_abs is not None else check.describe())
                + "): torch.export baked in "
                "behaviour of the example size (a Python branch or a specialized dim); the ONNX "
                "model is faithful to the program",
                max_abs=check.max_abs,
            )
    try:
        feeds = session.feeds(*args, **dict(kwargs))
        onnx_values = _ort_intermediates(model, feeds)
    except Exception as exc:  # noqa: BLE001
        return Divergence(case, "onnx", f"could not run the ONNX model with its intermediate values: {first_line(exc)}")

    fx_nodes = {node.name: node for node in program.graph.nodes}
    graph_outputs = {v.name for v in model.graph.outputs}
    compared = 0
    for node in model.graph:
        fx_name = fx_name_of(node)
        candidates = [v for v in node.outputs if v.name in fx_values and v.name in onnx_values]
        if not candidates and fx_name in fx_values and len(node.outputs) == 1 and node.outputs[0].name in graph_outputs:
            candidates = [node.outputs[0]]
        for value in candidates:
            fx_key = value.name if value.name in fx_values else fx_name or ""
            fx_value = fx_values.get(fx_key)
            onnx_value = onnx_values.get(value.name)
            if onnx_value is None or not hasattr(fx_value, "shape"):
                continue
            check = compare(case, value.name, onnx_value, fx_value, tolerances)
            compared += 1
            if check.ok:
                continue
            fx_node = fx_nodes.get(fx_key)
            stack = fx_node.meta.get("stack_trace") if fx_node is not None else None
            stack = stack or formats.stack_trace_text(node)
            return Divergence(
                case, "onnx",
                f"ONNX {node.op_type} differs from FX {fx_key} ({check.describe()})",
                onnx_node=node.name,
                op_type=node.op_type,
                onnx_value=value.name,
                fx_node=fx_key,
                fx_target=str(fx_node.target) if fx_node is not None else None,
                module_path=module_path_of(formats.name_scopes_text(node)),
                source=source_of_stack(stack),
                max_abs=check.max_abs,
                compared=compared,
            )
    return Divergence(
        case, "onnx",
        f"no ONNX node value differs from its FX node ({compared} compared); the difference "
        "appears in values without an FX counterpart (fused or renamed by the optimizer)",
        compared=compared,
    )
