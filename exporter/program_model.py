"""An ``ExportedProgram`` given as the model, as ``torch.onnx.export`` takes one.

:func:`as_model` wraps it in :class:`ProgramModel`, an ``nn.Module`` whose ``forward`` is the
program's module (with its signature), so inputs bind, eager runs for verify, and capture
returns the program itself instead of capturing again. Its dynamic dims become the spec
(AUTO on every axis the program keeps symbolic) unless one is given.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import torch

from .inputs import bind_inputs
from .options import ExportOptions
from .program_symbols import symbol_of


def is_exported_program(value: Any) -> bool:
    return isinstance(value, torch.export.ExportedProgram)


class ProgramModel(torch.nn.Module):
    """``program.module()`` as the model; ``program`` is what capture returns."""

    def __init__(self, program: Any) -> None:
        super().__init__()
        self.module_ = program.module()
        object.__setattr__(self, "program", program)  # not a submodule: kept out of state_dict
        signature = inspect.signature(self.module_.forward)

        def forward(*args: Any, **kwargs: Any) -> Any:
            return self.module_(*args, **kwargs)

        forward.__signature__ = signature  # type: ignore[attr-defined]
        object.__setattr__(self, "forward", forward)


def program_of(model: Any) -> Any | None:
    """The ExportedProgram a :class:`ProgramModel` wraps, else None."""
    return model.program if isinstance(model, ProgramModel) else None


def as_model(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
             options: ExportOptions | None) -> tuple[Any, tuple[Any, ...], dict[str, Any], ExportOptions | None]:
    """``(model, args, kwargs, options)`` with an ExportedProgram wrapped: its example inputs
    when none are given, and AUTO on the axes it keeps symbolic when no spec is given."""
    if not is_exported_program(model):
        return model, args, kwargs, options
    program = model
    wrapped = ProgramModel(program)
    if not args and not kwargs and program.example_inputs is not None:
        args, kwargs = tuple(program.example_inputs[0]), dict(program.example_inputs[1] or {})
    options = options or ExportOptions()
    if options.dynamic_shapes is None and options.dynamic_axes is None:
        bound = bind_inputs(wrapped, args, kwargs)
        spec: dict[str, dict[int, Any]] = {}
        for (path, axis), symbol in symbol_of(program, bound).items():
            if not symbol.lstrip("-").isdigit():
                spec.setdefault(path, {})[axis] = True  # AUTO: what the program already decided
        options = dataclasses.replace(options, dynamic_shapes=spec or None)
    return wrapped, args, kwargs, options
