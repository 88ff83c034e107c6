"""Tensors to onnxruntime feeds and back, for every dtype torch.onnx exports.

numpy has no bfloat16 or float8 and onnxruntime takes a complex tensor as torch.onnx writes
it (a real tensor with a trailing dim of 2), so ``tensor.numpy()`` alone fails or feeds the
wrong thing. :func:`to_feed` converts through torch: bfloat16 and float8 go in as their bits
in an ``OrtValue`` of the ONNX element type, complex as ``torch.view_as_real``.
"""

from __future__ import annotations

from typing import Any

from .artifacts import ExportArtifacts
from .inputs import bind_inputs

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


def feeds(session: ExportArtifacts, model: Any, args: tuple, kwargs: dict) -> dict[str, Any]:
    """ONNX input feeds for inputs given like the model's forward (``Session.feeds`` for every
    dtype)."""
    bound = bind_inputs(session.model, args, kwargs)
    graph_names = {value.name for value in model.graph.inputs}
    names = session.onnx_input_names
    return {
        names.get(leaf.path, leaf.path): to_feed(bound.values[leaf.index])
        for leaf in bound.leaves
        if names.get(leaf.path, leaf.path) in graph_names
    }


def output_dtypes(session: ExportArtifacts) -> list[Any]:
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

    out: list[Any] = []
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
