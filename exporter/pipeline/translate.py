"""ExportedProgram → ONNX: translation with torchlib, opset conversion, readable names.

Graph inputs are named after the signature and pytree paths (``input_ids``, ``cache.0.key``),
outputs after the output pytree (``output``, ``logits``), and symbolic dims after the user's
``Dim`` names (unnamed dynamic dims get ``<input>_dim<axis>``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from .. import compat
from ..compat.translation import translation_failure
from ..dims import DimSpec
from ..errors import OptimizeError, TranslateError
from ..inputs import BoundInputs
from ..frames import source_of_stack
from ..hints import translation_fix, translation_headline
from ..program_symbols import dim_names, user_input_names
from .names import output_name
from .runnable import refuse_mixed_dtypes, refuse_no_tensor_output
from .translations import onnx_registry

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["check_opset_forms", "constant_outputs", "registry_opset", "resolve_opset", "translate"]


def resolve_opset(opset_version: int | None) -> int:
    return compat.default_opset() if opset_version is None else opset_version


def registry_opset(opset_version: int) -> int:
    """torchlib has no implementations below its own opset; lower opsets are converted down."""
    return max(opset_version, compat.torchlib_min_opset())


def translate(program: Any, *, opset_version: int, bound: BoundInputs, spec: DimSpec,
              input_names: Sequence[str] | None = None, output_names: Sequence[str] | None = None,
              translations: tuple[tuple[Any, Any], ...] = ()) -> ir.Model:
    """Translate a decomposed program to an ``onnx_ir.Model`` with readable names; the ONNX
    inputs and outputs take ``input_names`` / ``output_names`` in order when given
    (torch.onnx.export's options). ``translations``: ``((target, function), ...)`` used
    instead of torchlib's for those targets (``masked_attention.translations``)."""
    _refuse_lstm_projection(program)
    refuse_no_tensor_output(program)
    refuse_mixed_dtypes(program, bound)
    opset = registry_opset(opset_version)
    registry = onnx_registry(opset, translations)
    model = _translated(program, registry, opset)
    model = compat.convert_onnx_version(model, opset_version)
    check_opset_forms(model)
    _make_specialized_dims_static(model)
    _name_inputs(model, program, bound, input_names)
    _name_outputs(model, program)
    if output_names:
        _rename_outputs(model, output_names)
    mapping = dim_names(program, bound, spec)
    if mapping:
        compat.rename_onnx_axes(model, mapping)
    return model


def _translated(program: Any, registry: Any, opset: int) -> ir.Model:
    """torch.onnx's translation; a node it cannot translate fails as a TranslateError whose
    reason is the cause (torch's, onnxscript's or our translation's own words, with the op and
    the node), at the user's line that made the node, with a fix that can work."""
    try:
        return compat.translate_to_onnx_ir(program, registry)
    except Exception as exc:
        failure = translation_failure(exc)
        if failure is None:
            raise
        raise TranslateError(translation_headline(failure), source=_node_source(program, failure.node),
                             hint=translation_fix(failure, opset)) from exc


def _node_source(program: Any, name: str) -> str | None:
    """The user's line that made the FX node ``name`` (in the graph or a subgraph), if known."""
    for module in program.graph_module.modules():
        graph = getattr(module, "graph", None)
        for node in getattr(graph, "nodes", ()):
            if node.name == name and node.meta.get("stack_trace"):
                return source_of_stack(node.meta["stack_trace"])
    return None


def _refuse_lstm_projection(program: Any) -> None:
    """An ``nn.LSTM`` with ``proj_size``: torchlib's LSTM translation drops the projection
    weights (ONNX's LSTM op has none), so onnxruntime would refuse the model at run time
    ("Input initial_c must have shape ..."). Refuse it here, naming the line."""
    for node in program.graph.nodes:
        if node.op != "call_function" or "aten.lstm.input" not in str(node.target) or len(node.args) < 8:
            continue
        params, has_biases, num_layers, bidirectional = node.args[2], node.args[3], node.args[4], node.args[7]
        per_layer = len(params) / (num_layers * (2 if bidirectional else 1))
        if per_layer == (5 if has_biases else 3):  # w_ih, w_hh, (b_ih, b_hh,) w_hr
            raise TranslateError(
                "nn.LSTM with proj_size has no ONNX translation: torch.onnx's LSTM drops the projection "
                "weights (ONNX's LSTM op has none), so the model would not run in onnxruntime",
                source=source_of_stack(node.meta.get("stack_trace")),
                hint="use an nn.LSTM without proj_size (a projection inside the recurrence cannot move after it), "
                "or keep this part of the model in PyTorch",
            )


def check_opset_forms(model: ir.Model, stage: str = "translate") -> None:
    """torchlib translates at its own lowest opset and onnx's version converter takes the model
    down; the converter, and the optimizer after it, can leave a node in its newer form
    (``Split(num_outputs)`` at opset 17), which onnxruntime refuses to load. An attribute the
    older opset lacks but whose value is the newer opset's default is dropped (the older
    opset behaves that way); anything else fails here, naming the nodes, instead of handing out
    that model (torch.onnx.export does)."""
    import onnx
    import onnx_ir as ir

    opset_version = model.opset_imports.get("", compat.torchlib_min_opset())
    newest = compat.torchlib_min_opset()
    if opset_version >= newest:
        return
    problems: dict[str, None] = {}
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        if node.domain not in ("", "ai.onnx"):
            continue
        try:
            schema = onnx.defs.get_schema(node.op_type, opset_version, "")
        except onnx.defs.SchemaError:
            problems[f"{node.op_type} (not in opset {opset_version})"] = None
            continue
        unknown = [name for name in node.attributes if name not in schema.attributes]
        newer = onnx.defs.get_schema(node.op_type, newest, "") if unknown else None
        for name in unknown:
            default = newer.attributes[name].default_value if newer and name in newer.attributes else None
            value = node.attributes[name]
            if default is not None and default.name and value.value == onnx.helper.get_attribute_value(default):
                del node.attributes[name]  # e.g. ReduceMax(noop_with_empty_axes=0): the older form's behaviour
            else:
                problems[f"{node.op_type}({name})"] = None
    if problems:
        by = "the ONNX optimizer" if stage == "optimize" else "onnx's version converter"
        raise (OptimizeError if stage == "optimize" else TranslateError)(
            f"the model at opset {opset_version} has nodes in a form opset {opset_version} does not have: "
            f"{', '.join(problems)} (left by {by}); onnxruntime would refuse to load it"
            + ("; session.bisect_passes() names the pass that leaves it, to skip with skip_passes=[...]"
               if stage == "optimize" else ""),
            hint=f"export at opset_version={newest} or newer (the lowest opset torch.onnx translates at)"
            + (", or with optimize=False" if stage == "optimize" else ", or convert that model down with another tool"),
        )


def _all_values(model: Any):
    import onnx_ir as ir

    yield from model.graph.inputs
    yield from model.graph.initializers.values()
    for node in ir.traversal.RecursiveGraphIterator(model.graph):
        yield from node.outputs
    for function in model.functions.values():
        yield from function.inputs
        for node in ir.traversal.RecursiveGraphIterator(function):
            yield from node.outputs


def _make_specialized_dims_static(model: ir.Model) -> None:
    """A dim that capture specialized is still a SymInt whose expression is a number; the
    translator writes it as a symbolic dim named ``"3"``, which onnxruntime would accept at
    any size. Make such dims the static ints they are."""
    import onnx_ir as ir

    for value in _all_values(model):
        shape = value.shape
        if shape is None or not any(isinstance(d, ir.SymbolicDim) and str(d.value).isdigit() for d in shape):
            continue
        value.shape = ir.Shape(
            [int(str(d.value)) if isinstance(d, ir.SymbolicDim) and str(d.value).isdigit() else d for d in shape]
        )


def _name_inputs(model: ir.Model, program: Any, bound: BoundInputs, input_names: Sequence[str] | None) -> None:
    from ..inputs import onnx_input_names

    placeholders = user_input_names(program)
    by_name = {value.name: value for value in model.graph.inputs}
    names = onnx_input_names(bound, input_names)
    for leaf in bound.leaves:
        if leaf.index < len(placeholders) and placeholders[leaf.index] in by_name:
            by_name[placeholders[leaf.index]].name = names[leaf.path]


def _name_outputs(model: ir.Model, program: Any) -> None:
    names = compat.output_paths(program)
    from torch.export.graph_signature import ConstantArgument, OutputKind

    user_specs = [s for s in program.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    tensor_names = [name for name, s in zip(names, user_specs) if not isinstance(s.arg, ConstantArgument)]
    if len(tensor_names) != len(model.graph.outputs):
        return
    taken = {value.name for value in model.graph.inputs}
    used: set[int] = set()
    for index, (value, name) in enumerate(zip(list(model.graph.outputs), tensor_names)):
        name = output_name(name, taken)  # an output named like an input (a UNet's sample): out_sample
        if value.is_graph_input() or id(value) in used:
            # An input returned as is, or one tensor returned twice: give this output its own
            # value (an Identity) so every output keeps its name and no input is renamed.
            value = _identity_of(model, value, index)
        used.add(id(value))
        value.name = name
        taken.add(name)


def _rename_outputs(model: ir.Model, names: Sequence[str]) -> None:
    """The first ``len(names)`` ONNX outputs take these names, as in torch.onnx.export."""
    outputs = list(model.graph.outputs)
    if len(names) > len(outputs):
        raise TranslateError(
            f"output_names has {len(names)} names but the model has {len(outputs)} output(s): "
            f"{[value.name for value in outputs]}",
            hint=f"give at most {len(outputs)} name(s), in the order forward returns its tensors",
        )
    taken = {value.name for value in model.graph.inputs}
    for index, (value, name) in enumerate(zip(outputs, names)):
        if name in taken:
            raise TranslateError(f"output_names[{index}] = {name!r} is already the name of an input or output",
                                 hint="choose names that no input or other output has")
        value.name = name
        taken.add(name)


def constant_outputs(program: Any) -> list[str]:
    """Outputs of ``forward`` that are Python numbers or strings, by output name (``None``
    outputs are fine: they are simply not ONNX outputs)."""
    from torch.export.graph_signature import ConstantArgument, OutputKind

    specs = [s for s in program.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    return [
        f"{name} = {spec.arg.value!r}"
        for name, spec in zip(compat.output_paths(program), specs)
        if isinstance(spec.arg, ConstantArgument) and spec.arg.value is not None
    ]


def _identity_of(model: ir.Model, value: ir.Value, index: int) -> ir.Value:
    import onnx_ir as ir

    node = ir.Node("", "Identity", inputs=[value], num_outputs=1, name=f"output_identity_{index}")
    model.graph.append(node)
    copy = node.outputs[0]
    copy.shape, copy.type = value.shape, value.type
    model.graph.outputs[index] = copy
    return copy
