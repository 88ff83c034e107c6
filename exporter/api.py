"""The public entry point: ``export(model, *args, options=ExportOptions(...), **kwargs)``."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

from .errors import SpecError
from .options import ExportOptions
from .serializers import Serializer
from .session import Session

__all__ = ["ExportOptions", "Serializer", "export"]

# torch.onnx.export's parameters that are not ExportOptions fields: what to write instead
# (``{value}`` is the value given).
_TORCH_ONNX_ONLY = {
    "f": "export, then save: session.save({value})",
    "kwargs": "pass forward's keyword inputs as keywords: export(model, *args, **{value})",
    "dynamo": "leave it out: exporter.export always captures with torch.export, as dynamo=True does",
    "external_data": "save with it: session.save(path, serializer=exporter.serializers.OnnxSerializer("
                     "external_data={value}))",
    "verify": "verify after exporting: session.verify()",
    "report": "write the report after exporting: session.report('report.html')",
    "profile": "profile after exporting: session.profile()",
    "dump_exported_program": "the captured program is session.exported_program; session.save('model.pt2') writes it",
    "artifacts_dir": "save where you want: session.save(path), session.report(path)",
    "verbose": "leave it out: session.stages says what each stage did",
    "do_constant_folding": "constant folding is the optimizer's: ExportOptions(optimize={value})",
    "training": "put the model in the mode to export first (model.eval()), and leave training out",
    "export_params": "leave it out (a TorchScript exporter option): the weights are always in the model",
    "keep_initializers_as_inputs": "leave it out (a TorchScript exporter option)",
    "operator_export_type": "leave it out (a TorchScript exporter option)",
    "custom_opsets": "leave it out (a TorchScript exporter option)",
    "export_modules_as_functions": "leave it out (a TorchScript exporter option)",
    "autograd_inlining": "leave it out (a TorchScript exporter option)",
    "custom_translation_table": "leave it out: exporter.export translates with torch.onnx's own table",
}
_OPTION_FIELDS = tuple(f.name for f in dataclasses.fields(ExportOptions))


def export(model: Any, /, *args: Any, options: ExportOptions | None = None, **kwargs: Any) -> Session:
    """Export ``model`` called as ``model(*args, **kwargs)`` to ONNX. ``model`` may be a
    ``torch.export.ExportedProgram``, as in ``torch.onnx.export``: it is used as captured
    (its example inputs when none are given, its dynamic dims when no spec is given).

    Runs capture → decompose → translate → optimize and returns the
    :class:`~exporter.Session`. Raises :class:`~exporter.SpecError` for an invalid dim spec
    before anything runs, and for an export option given where forward's inputs go
    (``export(m, x, dynamic_shapes=...)``, as ``torch.onnx.export`` takes it), with the code
    to write; on a stage failure the stage's :class:`~exporter.ExportError`, whose
    ``.session`` keeps every stage and capture attempt.
    """
    _check_no_option_among_inputs(model, args, kwargs, options)
    session = Session(model, args, kwargs, options)  # an ExportedProgram is taken as torch.onnx.export does
    session.run()
    return session.raise_for_status()


def _forward_parameters(model: Any) -> dict[str, inspect.Parameter]:
    try:
        return dict(inspect.signature(getattr(model, "forward", model)).parameters)
    except (TypeError, ValueError):  # no Python signature (an ExportedProgram): it names no such parameter
        return {}


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else "..."


def _check_no_option_among_inputs(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                                  options: ExportOptions | None) -> None:
    """A SpecError when a keyword is an export option (an ``ExportOptions`` field or another
    ``torch.onnx.export`` parameter) and not one of forward's own parameters: the user meant
    the option (a forward taking ``**kwargs`` does not name it)."""
    parameters = _forward_parameters(model)
    own = {name for name, p in parameters.items()
           if p.kind not in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)}
    misplaced = [name for name in kwargs if name not in own and (name in _OPTION_FIELDS or name in _TORCH_ONNX_ONLY)]
    if not misplaced:
        return
    fields = {name: kwargs[name] for name in misplaced if name in _OPTION_FIELDS}
    inputs = [name for name, p in parameters.items() if p.kind is not inspect.Parameter.VAR_KEYWORD][:len(args)]
    inputs += [f"arg{i}" for i in range(len(inputs), len(args))]
    inputs += [f"{name}={name}" for name in kwargs if name not in misplaced]
    call = ", ".join(["model", *inputs])
    fixes = []
    if fields:
        values = ", ".join(f"{name}={_shown(value)}" for name, value in fields.items())
        given = f"dataclasses.replace(options, {values})" if options is not None else f"ExportOptions({values})"
        fixes.append(f"exporter.export({call}, options={given})")
    fixes += [f"{name}=: " + _TORCH_ONNX_ONLY[name].format(value=_shown(kwargs[name]))
              for name in misplaced if name not in fields]
    signature = f"forward({', '.join(parameters)})" if parameters else "the model's forward"
    listed = ", ".join(f"{name}=" for name in misplaced)
    one = len(misplaced) == 1
    raise SpecError(
        f"export() got {listed}, {'an export option' if one else 'export options'} given where forward's inputs go "
        f"({signature} takes {'no such parameter' if one else 'none of them'})",
        hint="; ".join(fixes),
    )
