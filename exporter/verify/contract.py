"""The ONNX model's input/output contract, checked against what the user asked for.

The checks are declared: :data:`CONTRACT_CHECKS` (inputs, shared names, output names) each read
the :class:`ContractFacts` gathered once, and every input axis goes through
:data:`AXIS_RULES`, small functions asked in order until one answers."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .. import compat
from ..artifacts import ExportArtifacts
from ..axis import Axis
from ..cases import input_dims_by_path, policy_text
from ..dims import AUTO, Derived, Dim
from ..errors import Status
from ..inputs import BoundInputs
from ..presentation import Presentable
from ..program_symbols import symbol_of


@dataclass(frozen=True)
class ContractCheck:
    """One contract check: ``status`` is ``ok``, ``warning`` or ``error``."""

    check: str
    subject: str
    status: Status
    message: str
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "error"


@dataclass(frozen=True, repr=False)
class ContractReport(Presentable):
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


def _is_name(dim: Any) -> bool:
    return isinstance(dim, str) and dim.isidentifier()


# -- what the checks read, gathered once ----------------------------------------------------------
@dataclass(frozen=True)
class ContractFacts:
    """The ONNX model's interface and what was asked, as the checks read them."""

    inputs: BoundInputs
    requested: Mapping[tuple[str, int], Any]     # (path, axis) -> the policy asked for
    onnx_name: Mapping[str, str]                 # input path -> ONNX input name
    onnx_inputs: frozenset[str]                  # the ONNX model's input names
    dims: Mapping[str, Any]                      # input path -> ONNX dims (ints, names, None)
    symbols: Mapping[tuple[str, int], str]       # (path, axis) -> the program's symbol or expression
    outputs: tuple[str, ...]                     # the ONNX model's output names
    output_paths: tuple[str, ...]                # the output pytree's paths (stable names)
    fx_names: frozenset[str]                     # the captured program's node names


@dataclass(frozen=True)
class AxisFacts:
    """One input axis: its ONNX dim, the policy asked for and the program's symbol."""

    path: str
    axis: int
    dim: Any
    policy: Any
    program_dim: str

    @property
    def subject(self) -> str:
        return Axis(self.path, self.axis).label

    @property
    def asked(self) -> str:
        return policy_text(self.policy)


def gather_facts(session: ExportArtifacts, model: Any, program: Any) -> ContractFacts:
    onnx_name = session.onnx_input_names
    try:
        paths = tuple(compat.output_paths(program))
    except Exception:  # noqa: BLE001 - without the paths, FX-named outputs are not told apart
        paths = ()
    return ContractFacts(
        inputs=session.inputs, requested={(e.path, e.axis): e.policy for e in session.spec}, onnx_name=onnx_name,
        onnx_inputs=frozenset(v.name for v in model.graph.inputs), dims=input_dims_by_path(onnx_name, model),
        symbols=symbol_of(program, session.inputs), outputs=tuple(v.name for v in model.graph.outputs),
        output_paths=paths, fx_names=frozenset(node.name for node in program.graph.nodes),
    )


# -- the checks of one input axis -----------------------------------------------------------------
# Each answers None (not its case: the next one is asked) or the checks it makes, possibly
# none; the first that answers decides the axis.
AxisRule = Callable[[ContractFacts, AxisFacts], "tuple[ContractCheck, ...] | None"]


def static_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """An axis not requested dynamic should stay a number."""
    if axis.policy is not None:
        return None
    if isinstance(axis.dim, int):
        return ()
    return (ContractCheck("static kept static", axis.subject, Status.WARNING,
                          f"not requested dynamic, but the ONNX dim is {axis.dim!r}"),)


def derived_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """A derived dim is an expression of its root's ONNX name: ``dx + 1``, ``2*dx``."""
    if not (isinstance(axis.policy, Derived) and isinstance(axis.dim, str)):
        return None
    expected = {repr(axis.policy).replace(" ", ""), str(axis.policy).replace(" ", "")}
    if axis.dim.replace(" ", "") in expected:
        return ()
    return (ContractCheck("user's dim name", axis.subject, Status.ERROR, f"requested {axis.asked}; the ONNX dim is {axis.dim!r}",
                          "the relation torch captured differs from the requested one"),)


def pinned_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """A requested dynamic axis the ONNX model fixes to a number: an error, a warning for AUTO."""
    if not isinstance(axis.dim, int):
        return None
    auto = axis.policy is AUTO
    return (ContractCheck(
        "dynamic is symbolic", axis.subject, Status.WARNING if auto else Status.ERROR,
        f"requested {axis.asked}, but the ONNX model fixes it to {axis.dim}",
        "AUTO lets torch specialize: mark it STATIC to accept that, or change the code that pins it"
        if auto else "the model's code pins this dim; see the capture guards"),)


def unnamed_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """A requested dynamic axis whose ONNX dim is not a name: none, a number as text, an expression."""
    dim = axis.dim
    if dim is not None and _is_name(dim):
        return None
    if isinstance(dim, str) and dim.lstrip("-").isdigit():
        message = (f"requested {axis.asked}; capture specialized it to {dim}, yet the ONNX input declares the "
                   f"non-name dim_param {dim!r}, so onnxruntime accepts any size and computes as if it were {dim}")
        hint = "mark it STATIC, or make the model's code work for every size (see the guards)"
    elif dim is None:
        message, hint = f"requested {axis.asked}, but the ONNX dim has no name", ""
    else:
        message, hint = f"requested {axis.asked}; the ONNX dim is the expression {dim!r}", ""
    return (ContractCheck("dynamic is symbolic", axis.subject, Status.ERROR, message, hint),)


def expression_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """An axis the program made an expression of others (``torch.cat([a, b]) + c``): fine when
    the ONNX dim keeps the name asked for (as torch.onnx.export names it), an error otherwise."""
    if axis.program_dim.isidentifier():
        return None
    if isinstance(axis.policy, Dim) and axis.dim == axis.policy.name:
        return (ContractCheck("dynamic is symbolic", axis.subject, Status.OK,
                              f"symbolic {axis.dim!r} ({axis.asked}), an expression of other dims in the program"),)
    return (ContractCheck("dynamic is symbolic", axis.subject, Status.ERROR,
                          f"requested {axis.asked}; the program has {axis.program_dim!r} but the ONNX dim is {axis.dim!r}"),)


def renamed_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """A named Dim whose ONNX dim carries another name: fine when torch found the axes equal
    (one symbol, one of the names asked for, as torch.onnx.export does), an error otherwise."""
    if not isinstance(axis.policy, Dim) or axis.dim == axis.policy.name:
        return None
    unified = sorted({other.name for key, other in facts.requested.items()
                      if isinstance(other, Dim) and facts.symbols.get(key) == axis.program_dim})
    if axis.dim in unified:
        together = ", ".join(Axis(p, a).label for (p, a) in facts.requested
                             if facts.symbols.get((p, a)) == axis.program_dim)
        return (ContractCheck(
            "unified dims", axis.subject, Status.OK,
            f"torch found {together} equal ({axis.program_dim}), so the ONNX model gives them one name: it "
            f"carries {axis.dim!r} (requested: {', '.join(map(repr, unified))})"),)
    return (ContractCheck("user's dim name", axis.subject, Status.ERROR,
                          f"the ONNX dim is named {axis.dim!r}, not the requested {axis.policy.name!r}",
                          "report it: translate renames symbols to the user's Dim names"),)


def symbolic_axis(facts: ContractFacts, axis: AxisFacts) -> tuple[ContractCheck, ...] | None:
    """What is left: a symbolic dim with the name asked for."""
    return (ContractCheck("dynamic is symbolic", axis.subject, Status.OK, f"symbolic {axis.dim!r} ({axis.asked})"),)


AXIS_RULES: tuple[AxisRule, ...] = (static_axis, derived_axis, pinned_axis, unnamed_axis, expression_axis,
                                    renamed_axis, symbolic_axis)
"""The checks of one input axis, in the order they are asked."""


# -- the checks of the whole contract ---------------------------------------------------------------
def input_checks(facts: ContractFacts) -> Iterator[ContractCheck]:
    """Every input is an ONNX input of its rank; every axis passes :data:`AXIS_RULES`."""
    for leaf in facts.inputs.leaves:
        asked = [axis for (path, axis) in facts.requested if path == leaf.path]
        if facts.onnx_name.get(leaf.path, leaf.path) not in facts.onnx_inputs:
            yield ContractCheck(
                "input kept", leaf.path, Status.ERROR if asked else Status.WARNING,
                f"input {leaf.path!r} is not an input of the ONNX model"
                + (f" although axes {asked} were requested dynamic" if asked else " (unused by the model?)"),
                "the model never reads it; remove it from the spec, or use it in forward" if asked else "")
            continue
        shape = facts.dims.get(leaf.path)
        if shape is not None and "complex" in leaf.dtype and len(shape) == leaf.rank + 1:
            shape = shape[:-1]  # torch.onnx writes a complex tensor as real with a trailing 2
        if shape is None or len(shape) != leaf.rank:
            yield ContractCheck("input rank", leaf.path, Status.ERROR, f"ONNX shape {shape} does not have rank {leaf.rank}")
            continue
        for index in range(leaf.rank):
            axis = AxisFacts(leaf.path, index, shape[index], facts.requested.get((leaf.path, index)),
                             facts.symbols.get((leaf.path, index), ""))
            yield from next(found for rule in AXIS_RULES if (found := rule(facts, axis)) is not None)


def shared_names(facts: ContractFacts) -> Iterator[ContractCheck]:
    """Axes that share one torch symbol share one ONNX name."""
    by_symbol: dict[str, set[Any]] = {}
    for (path, axis) in facts.requested:
        symbol = facts.symbols.get((path, axis), "")
        if symbol.isidentifier() and path in facts.dims and axis < len(facts.dims[path]):
            by_symbol.setdefault(symbol, set()).add(facts.dims[path][axis])
    for symbol, names in by_symbol.items():
        if len(names) > 1:
            axes = ", ".join(Axis(p, a).label for (p, a) in facts.requested if facts.symbols.get((p, a)) == symbol)
            yield ContractCheck("equal dims share a name", axes, Status.WARNING,
                                f"torch found these equal ({symbol}) but the ONNX model names them {sorted(map(str, names))}",
                                "give them one Dim object so they share one name")


def output_names(facts: ContractFacts) -> Iterator[ContractCheck]:
    """Outputs are present, unique, and named after the output pytree rather than FX nodes."""
    for name in facts.outputs:
        if facts.outputs.count(name) > 1:
            yield ContractCheck("output names", name, Status.ERROR, "output name is not unique")
        elif not name:
            yield ContractCheck("output names", "(unnamed)", Status.ERROR, "an output has no name")
        elif name in facts.fx_names and name not in facts.output_paths:
            yield ContractCheck("output names", name, Status.WARNING,
                                f"output {name!r} is named after an FX node, which changes with the model's code",
                                "name outputs by returning a dict or a named tuple from forward")
        else:
            yield ContractCheck("output names", name, Status.OK, "stable name")


CONTRACT_CHECKS: tuple[Callable[[ContractFacts], Iterable[ContractCheck]], ...] = (input_checks, shared_names,
                                                                                  output_names)
"""The contract's checks, in the order the report lists them."""


def check_contract(session: ExportArtifacts, onnx_model: Any | None = None, program: Any | None = None) -> ContractReport:
    """Check the ONNX model's inputs and outputs against what the user asked for:
    every requested dynamic axis is symbolic and carries the user's name, related axes share
    one name, no requested input was dropped, outputs have stable (non-FX) names."""
    model = onnx_model if onnx_model is not None else session.stage_output("optimize")
    program = program if program is not None else session.exported_program
    facts = gather_facts(session, model, program)
    return ContractReport(tuple(check for run in CONTRACT_CHECKS for check in run(facts)))
