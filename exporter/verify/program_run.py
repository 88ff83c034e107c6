"""The decomposed program's FX graph run directly on inputs given like the model's forward."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..artifacts import ExportInputs
from ..inputs import bind_inputs
from .intermediates.fx_side import FxRunner

__all__ = ["program_inputs", "run_program"]


def program_inputs(program: Any, session: ExportInputs, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> list[Any]:
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


def run_program(program: Any, session: ExportInputs, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """Run a program's FX graph directly (no input-shape checks) on inputs given like the
    model's forward. Returns its user outputs and the value of every FX node by name."""
    import torch

    every = {node.name for node in program.graph.nodes}
    outputs, _, values = FxRunner(program).run(program_inputs(program, session, args, kwargs), every, None)
    return [value for value in outputs if isinstance(value, torch.Tensor)], values or {}
