"""The decomposed program's FX graph run directly on inputs given like the model's forward."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..artifacts import ExportInputs
from ..inputs import bind_inputs

__all__ = ["program_inputs", "run_program"]


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
