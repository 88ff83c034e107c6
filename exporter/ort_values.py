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
