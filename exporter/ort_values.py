"""Tensors to onnxruntime feeds and back, for every dtype torch.onnx exports.

numpy has no bfloat16 or float8 and onnxruntime takes a complex tensor as torch.onnx writes
it (a real tensor with a trailing dim of 2), so ``tensor.numpy()`` alone fails or feeds the
wrong thing. :func:`to_feed` converts through torch: bfloat16 and float8 go in as their bits
in an ``OrtValue`` of the ONNX element type, complex as ``torch.view_as_real``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .session import Session

# torch dtype name -> (ONNX TensorProto element type name, integer view dtype name)
_BITS = {
    "bfloat16": ("BFLOAT16", "int16"),
    "float8_e4m3fn": ("FLOAT8E4M3FN", "uint8"),
    "float8_e4m3fnuz": ("FLOAT8E4M3FNUZ", "uint8"),
    "float8_e5m2": ("FLOAT8E5M2", "uint8"),
    "float8_e5m2fnuz": ("FLOAT8E5M2FNUZ", "uint8"),
}


def to_feed(value: Any) -> Any:
    """What onnxruntime's ``run`` takes for one input tensor (a copy: the module may write into
    its inputs afterwards)."""
    import torch

    tensor = value.detach().cpu()
    if tensor.is_complex():
        return torch.view_as_real(tensor).numpy().copy()
    name = str(tensor.dtype).removeprefix("torch.")
    if name in _BITS:
        import onnx
        import onnxruntime as ort

        onnx_type, view = _BITS[name]
        bits = tensor.contiguous().view(getattr(torch, view)).numpy().copy()
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, getattr(onnx.TensorProto, onnx_type))
    return tensor.numpy().copy()


def feed_shape(value: Any) -> tuple[int, ...]:
    """The shape of a feed: a numpy array, or an ``OrtValue`` (whose ``shape`` is a method)."""
    shape = value.shape() if callable(getattr(value, "shape", None)) else value.shape
    return tuple(int(d) for d in shape)


def feeds(session: Session, model: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """ONNX input feeds for inputs given like the model's forward (``Session.feeds`` for every
    dtype)."""
    from .inputs import bind_inputs

    bound = bind_inputs(session.model, args, kwargs)
    graph_names = {value.name for value in model.graph.inputs}
    names = session.onnx_input_names
    return {
        names.get(leaf.path, leaf.path): to_feed(bound.values[leaf.index])
        for leaf in bound.leaves
        if names.get(leaf.path, leaf.path) in graph_names
    }


# onnxruntime runs these but cannot hand them to numpy ("No corresponding Numpy type") or, for
# float8 e4m3fn, hands over the raw bits as uint8: outputs of these types are read through an
# exact Cast to float32 appended to a copy of the model.
UNREADABLE_OUTPUTS = ("BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                      "FLOAT4E2M1", "FLOAT8E8M0")


def readable_outputs_session(session: Session) -> Any | None:
    """An onnxruntime session of the final model with each output of a type in
    :data:`UNREADABLE_OUTPUTS` cast (exactly) to float32; None when every output is readable
    as it is.

    A large model (weights in external data) is edited without its weights: the small model
    file is loaded alone and the edited copy is written beside it, so it finds the same data."""
    import os

    import onnx

    from .session import ort_inference_session

    model = session.stage_output("optimize")
    if not any(value.dtype is not None and value.dtype.name in UNREADABLE_OUTPUTS for value in model.graph.outputs):
        return None
    source = session.ort_model_source
    proto = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(source, load_external_data=False)
    codes = {getattr(onnx.TensorProto, name) for name in UNREADABLE_OUTPUTS if hasattr(onnx.TensorProto, name)}
    for output in proto.graph.output:
        if output.type.tensor_type.elem_type not in codes:
            continue
        raw = output.name
        readable = f"{raw}__as_float32"
        proto.graph.node.append(onnx.helper.make_node("Cast", [raw], [readable], to=onnx.TensorProto.FLOAT))
        output.name = readable
        output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
    if isinstance(source, bytes):
        return ort_inference_session(proto.SerializeToString())
    edited = os.path.join(os.path.dirname(source), "readable_outputs.onnx")
    with open(edited, "wb") as handle:
        handle.write(proto.SerializeToString())  # weights are references: a small proto
    return ort_inference_session(edited)


def output_dtypes(session: Session) -> list[Any]:
    """The torch dtype of each tensor output of the exported program, in ONNX output order
    (None where unknown)."""
    import torch
    from torch.export.graph_signature import OutputKind

    program = session.stage_output("decompose")
    output_node = next(node for node in program.graph.nodes if node.op == "output")
    specs = program.graph_signature.output_specs
    values = list(output_node.args[0])
    out = []
    for spec, value in zip(specs, values):
        if spec.kind != OutputKind.USER_OUTPUT or not hasattr(value, "meta"):
            continue
        val = value.meta.get("val")
        out.append(val.dtype if isinstance(val, torch.Tensor) else None)
    return out


def from_outputs(raw: list[Any], dtypes: list[Any]) -> list[Any]:
    """onnxruntime outputs as the user's dtypes: complex back from torch.onnx's trailing
    real/imaginary dim (a complex numpy array); bfloat16 and float8, which numpy cannot hold,
    as torch tensors of that dtype (read from their exact float32 cast)."""
    import numpy as np
    import torch

    out = []
    for index, value in enumerate(raw):
        dtype = dtypes[index] if index < len(dtypes) else None
        array = np.asarray(value)
        if dtype is not None and dtype.is_complex and array.dtype.kind == "f" and array.shape[-1:] == (2,):
            out.append(torch.view_as_complex(torch.from_numpy(np.ascontiguousarray(array))).to(dtype).numpy())
        elif dtype is not None and str(dtype).removeprefix("torch.") in _BITS:
            out.append(torch.from_numpy(array).to(dtype))
        else:
            out.append(value)
    return out
