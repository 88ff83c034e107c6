"""The ONNX model's input/output contract, checked against what the user asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .. import compat
from ..artifacts import ExportArtifacts
from ..axis import Axis
from ..cases import input_dims_by_path, policy_text
from ..dims import AUTO, Derived, Dim
from ..program_symbols import symbol_of


@dataclass(frozen=True)
class ContractCheck:
    """One contract check: ``status`` is ``ok``, ``warning`` or ``error``."""

    check: str
    subject: str
    status: str
    message: str
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "error"


@dataclass(frozen=True)
class ContractReport:
    """What the ONNX model promises about its inputs and outputs, checked against the spec."""

    checks: tuple[ContractCheck, ...]

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    @property
    def errors(self) -> tuple[ContractCheck, ...]:
        return tuple(c for c in self.checks if c.status == "error")

    @property
    def warnings(self) -> tuple[ContractCheck, ...]:
        return tuple(c for c in self.checks if c.status == "warning")

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame(
            [(c.check, c.subject, c.status, c.message, c.hint) for c in self.checks],
            columns=["check", "subject", "status", "message", "hint"],
        )

    def summary(self) -> str:
        head = "contract: ok" if self.ok else f"contract: {len(self.errors)} error(s)"
        if self.warnings:
            head += f", {len(self.warnings)} warning(s)"
        lines = [head]
        for c in self.checks:
            if c.status != "ok":
                lines.append(f"  {c.status.upper():<7} {c.subject}: {c.message}")
                if c.hint:
                    lines.append(f"          fix: {c.hint}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _is_name(dim: Any) -> bool:
    return isinstance(dim, str) and dim.isidentifier()


def check_contract(session: ExportArtifacts, onnx_model: Any | None = None, program: Any | None = None) -> ContractReport:
    """Check the ONNX model's inputs and outputs against what the user asked for:
    every requested dynamic axis is symbolic and carries the user's name, related axes share
    one name, no requested input was dropped, outputs have stable (non-FX) names."""
    model = onnx_model if onnx_model is not None else session.stage_output("optimize")
    program = program if program is not None else session.exported_program
    onnx_name = session.onnx_input_names
    dims = input_dims_by_path(onnx_name, model)
    onnx_inputs = {v.name for v in model.graph.inputs}
    checks: list[ContractCheck] = []
    symbols = symbol_of(program, session.inputs)
    requested = {(e.path, e.axis): e.policy for e in session.spec}

    for leaf in session.inputs.leaves:
        asked = [axis for (path, axis) in requested if path == leaf.path]
        if onnx_name.get(leaf.path, leaf.path) not in onnx_inputs:
            status = "error" if asked else "warning"
            checks.append(
                ContractCheck(
                    "input kept", leaf.path, status,
                    f"input {leaf.path!r} is not an input of the ONNX model"
                    + (f" although axes {asked} were requested dynamic" if asked else " (unused by the model?)"),
                    "the model never reads it; remove it from the spec, or use it in forward" if asked else "",
                )
            )
            continue
        onnx_shape = dims.get(leaf.path)
        if onnx_shape is not None and "complex" in leaf.dtype and len(onnx_shape) == leaf.rank + 1:
            onnx_shape = onnx_shape[:-1]  # torch.onnx writes a complex tensor as real with a trailing 2
        if onnx_shape is None or len(onnx_shape) != leaf.rank:
            checks.append(ContractCheck("input rank", leaf.path, "error", f"ONNX shape {onnx_shape} does not have rank {leaf.rank}"))
            continue
        for axis in range(leaf.rank):
            subject = Axis(leaf.path, axis).label
            dim = onnx_shape[axis]
            policy = requested.get((leaf.path, axis))
            program_dim = symbols.get((leaf.path, axis), "")
            if policy is None:
                if not isinstance(dim, int):
                    checks.append(ContractCheck("static kept static", subject, "warning", f"not requested dynamic, but the ONNX dim is {dim!r}"))
                continue
            asked_text = policy_text(policy)
            if isinstance(policy, Derived) and isinstance(dim, str):
                # A derived dim is an expression of its root's ONNX name: ``dx + 1``, ``2*dx``.
                expected = {repr(policy).replace(" ", ""), str(policy).replace(" ", "")}
                if dim.replace(" ", "") not in expected:
                    checks.append(ContractCheck(
                        "user's dim name", subject, "error",
                        f"requested {asked_text}; the ONNX dim is {dim!r}",
                        "the relation torch captured differs from the requested one",
                    ))
                continue
            if isinstance(dim, int):
                severity = "warning" if policy is AUTO else "error"
                checks.append(
                    ContractCheck(
                        "dynamic is symbolic", subject, severity,
                        f"requested {asked_text}, but the ONNX model fixes it to {dim}",
                        "AUTO lets torch specialize: mark it STATIC to accept that, or change the code that pins it"
                        if policy is AUTO else "the model's code pins this dim; see the capture guards",
                    )
                )
                continue
            if dim is None or not _is_name(dim):
                if isinstance(dim, str) and dim.lstrip("-").isdigit():
                    message = (
                        f"requested {asked_text}; capture specialized it to {dim}, yet the ONNX input "
                        f"declares the non-name dim_param {dim!r}, so onnxruntime accepts any size and "
                        f"computes as if it were {dim}"
                    )
                    hint = "mark it STATIC, or make the model's code work for every size (see the guards)"
                elif dim is None:
                    message, hint = f"requested {asked_text}, but the ONNX dim has no name", ""
                else:
                    message, hint = f"requested {asked_text}; the ONNX dim is the expression {dim!r}", ""
                checks.append(ContractCheck("dynamic is symbolic", subject, "error", message, hint))
                continue
            if not program_dim.isidentifier() and isinstance(policy, Dim) and dim == policy.name:
                # The code made this axis an expression of others (``torch.cat([a, b]) + c``):
                # the ONNX dim keeps the name asked for, as torch.onnx.export names it.
                checks.append(ContractCheck("dynamic is symbolic", subject, "ok",
                                            f"symbolic {dim!r} ({asked_text}), an expression of other dims in the program"))
                continue
            if not program_dim.isidentifier():
                checks.append(
                    ContractCheck(
                        "dynamic is symbolic", subject, "error",
                        f"requested {asked_text}; the program has {program_dim!r} but the ONNX dim is {dim!r}",
                    )
                )
                continue
            if isinstance(policy, Dim) and dim != policy.name:
                unified = sorted({
                    other.name for key, other in requested.items()
                    if isinstance(other, Dim) and symbols.get(key) == program_dim
                })
                if dim in unified:
                    # torch found these axes equal (one symbol): ONNX gives them one name, one of
                    # those asked for, as torch.onnx.export does.
                    together = ", ".join(Axis(p, a).label for (p, a) in requested if symbols.get((p, a)) == program_dim)
                    checks.append(ContractCheck(
                        "unified dims", subject, "ok",
                        f"torch found {together} equal ({program_dim}), so the ONNX model gives them one name: it "
                        f"carries {dim!r} (requested: {', '.join(map(repr, unified))})",
                    ))
                    continue
                checks.append(
                    ContractCheck(
                        "user's dim name", subject, "error",
                        f"the ONNX dim is named {dim!r}, not the requested {policy.name!r}",
                        "report it: translate renames symbols to the user's Dim names",
                    )
                )
                continue
            checks.append(ContractCheck("dynamic is symbolic", subject, "ok", f"symbolic {dim!r} ({asked_text})"))

    # Axes that share one torch symbol must share one ONNX name.
    by_symbol: dict[str, set[Any]] = {}
    for key in requested:
        symbol = symbols.get(key, "")
        path, axis = key
        if symbol.isidentifier() and path in dims and axis < len(dims[path]):
            by_symbol.setdefault(symbol, set()).add(dims[path][axis])
    for symbol, names in by_symbol.items():
        if len(names) > 1:
            axes = ", ".join(Axis(p, a).label for (p, a) in requested if symbols.get((p, a)) == symbol)
            checks.append(
                ContractCheck(
                    "equal dims share a name", axes, "warning",
                    f"torch found these equal ({symbol}) but the ONNX model names them {sorted(map(str, names))}",
                    "give them one Dim object so they share one name",
                )
            )

    # Outputs: present, unique, named after the output pytree rather than FX nodes.
    expected_names: list[str] = []
    try:
        expected_names = compat.output_paths(program)
    except Exception:  # noqa: BLE001
        pass
    fx_names = {node.name for node in program.graph.nodes}
    outputs = [v.name for v in model.graph.outputs]
    for name in outputs:
        if outputs.count(name) > 1:
            checks.append(ContractCheck("output names", name, "error", "output name is not unique"))
        elif not name:
            checks.append(ContractCheck("output names", "(unnamed)", "error", "an output has no name"))
        elif name in fx_names and name not in expected_names:
            checks.append(
                ContractCheck(
                    "output names", name, "warning",
                    f"output {name!r} is named after an FX node, which changes with the model's code",
                    "name outputs by returning a dict or a named tuple from forward",
                )
            )
        else:
            checks.append(ContractCheck("output names", name, "ok", "stable name"))
    return ContractReport(tuple(checks))
