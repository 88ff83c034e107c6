"""The inputs and outputs an ONNX model declares (name, element type, ONNX shape), read without
serializing its weights."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

from .display import Section, Table

if TYPE_CHECKING:
    import onnx
    import onnx_ir

    # A model as the exporter holds it (onnx_ir) or as a file holds it (a ModelProto).
    OnnxModel = Union[onnx.ModelProto, onnx_ir.Model]

__all__ = ["Port", "default_opset", "onnx_ports", "ports_section"]


@dataclass(frozen=True)
class Port:
    """A graph input or output as the ONNX file declares it."""

    kind: str
    name: str
    dtype: str
    shape: tuple[str | int, ...]

    @property
    def shape_text(self) -> str:
        return "[" + ", ".join(str(d) for d in self.shape) + "]"


def _interface(model: OnnxModel) -> onnx.ModelProto:
    """A ``ModelProto`` with ``model``'s graph inputs, outputs and opsets only (no nodes, no
    weights: cheap for a model of any size); a ``ModelProto`` is returned as it is."""
    import onnx

    if isinstance(model, onnx.ModelProto):
        return model
    import onnx_ir as ir

    proto = onnx.ModelProto()
    proto.graph.input.extend(ir.serde.serialize_value(v) for v in model.graph.inputs)
    proto.graph.output.extend(ir.serde.serialize_value(v) for v in model.graph.outputs)
    for domain, version in model.opset_imports.items():
        proto.opset_import.add(domain=domain, version=version)
    return proto


def onnx_ports(model_proto: OnnxModel) -> list[Port]:
    """Every graph input and output with its element type and shape (dim_param or size), of a
    ``ModelProto`` or an ``onnx_ir.Model`` (read without serializing its weights)."""
    import onnx

    interface = _interface(model_proto)

    def port(kind: str, value: onnx.ValueInfoProto) -> Port:
        tensor = value.type.tensor_type
        dims = tuple(
            d.dim_param if d.HasField("dim_param") else d.dim_value if d.HasField("dim_value") else "?"
            for d in tensor.shape.dim
        )
        return Port(kind, value.name, onnx.TensorProto.DataType.Name(tensor.elem_type), dims)

    graph = interface.graph
    return [port("input", v) for v in graph.input] + [port("output", v) for v in graph.output]


def default_opset(model_proto: OnnxModel) -> int | None:
    """The version of the default ONNX domain the model imports (None if it imports none)."""
    return next((o.version for o in _interface(model_proto).opset_import if o.domain in ("", "ai.onnx")), None)


def ports_section(model_proto: OnnxModel, title: str = "Inputs and outputs") -> Section:
    """The graph's inputs and outputs (kind, name, element type, ONNX shape) as a section."""
    rows = [(p.kind, p.name, p.dtype, p.shape_text) for p in onnx_ports(model_proto)]
    table = Table.from_rows(("kind", "name", "dtype", "ONNX shape"), rows, code=("name", "ONNX shape"))
    return Section(title, None, (table,))
