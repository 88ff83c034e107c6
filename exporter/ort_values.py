"""Tensors to onnxruntime feeds and back, for every dtype torch.onnx exports.

numpy has no bfloat16 or float8 and onnxruntime takes a complex tensor as torch.onnx writes
it (a real tensor with a trailing dim of 2), so ``tensor.numpy()`` alone fails or feeds the
wrong thing. :func:`to_feed` converts through torch: bfloat16 and float8 go in as their bits
in an ``OrtValue`` of the ONNX element type, complex as ``torch.view_as_real``.
:func:`from_outputs` goes the other way: complex outputs as complex numpy arrays, bfloat16 and
float8 as torch tensors of their dtype, from whatever onnxruntime hands over (a float32 cast,
the raw bits, an ``OrtValue``).
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


def feeds(session: ExportArtifacts, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
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


# onnxruntime's name of an element type numpy cannot hold -> torch dtype name
_ORT_BITS_TYPES = {
    "tensor(bfloat16)": "bfloat16",
    "tensor(float8e4m3fn)": "float8_e4m3fn",
    "tensor(float8e4m3fnuz)": "float8_e4m3fnuz",
    "tensor(float8e5m2)": "float8_e5m2",
    "tensor(float8e5m2fnuz)": "float8_e5m2fnuz",
}


def _is_ort_value(value: Any) -> bool:
    import onnxruntime as ort  # loaded already: the outputs came from it

    return isinstance(value, ort.OrtValue)


def ort_value_to_torch(value: Any) -> Any:
    """A CPU ``onnxruntime.OrtValue`` tensor as a torch tensor (a copy): bfloat16 and float8,
    which ``OrtValue.numpy()`` refuses or hands over as bits, reinterpreted from their bytes
    (``torch.frombuffer(...).view(dtype)``); every other type through numpy."""
    import ctypes

    import torch

    name = _ORT_BITS_TYPES.get(value.data_type())
    if name is None:
        return torch.from_numpy(value.numpy().copy())
    dtype = getattr(torch, name)
    shape = tuple(int(d) for d in value.shape())
    size = value.tensor_size_in_bytes()
    if size == 0:
        return torch.empty(shape, dtype=dtype)
    raw = bytearray(ctypes.string_at(value.data_ptr(), size))
    return torch.frombuffer(raw, dtype=torch.uint8).view(dtype).reshape(shape)


def _numpy_float(array: Any) -> bool:
    import numpy as np

    return array.dtype in (np.float16, np.float32, np.float64)


def _as_bits_dtype(value: Any, dtype: Any) -> Any:
    """An output whose dtype numpy lacks (bfloat16, float8), as a torch tensor of ``dtype``,
    from what onnxruntime hands over: a torch tensor (an ``OrtValue`` read), a numpy float
    array (its exact float32 cast, as :attr:`exporter.ort_model.OrtModel.output_session`
    reads them), or the raw bits (uint8 for float8 e4m3fn, or an ``ml_dtypes`` array)."""
    import numpy as np
    import torch

    if isinstance(value, torch.Tensor):
        return value if value.dtype == dtype else value.to(dtype)
    array = np.asarray(value)
    if _numpy_float(array):
        return torch.from_numpy(array).to(dtype)
    width = torch.empty((), dtype=dtype).element_size()
    if array.dtype.itemsize == width:  # the bits: reinterpreted, not converted
        bits = np.ascontiguousarray(array).view(np.uint8 if width == 1 else np.int16)
        return torch.from_numpy(bits.copy()).view(dtype)
    return value


def _as_complex(value: Any, dtype: Any) -> Any:
    """A complex output as a numpy complex array of ``dtype``'s width: from torch.onnx's real
    tensor with a trailing real/imaginary dim of 2, or already complex."""
    import numpy as np
    import torch

    array = value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
    if array.dtype.kind == "c":
        return array.astype(torch.empty((), dtype=dtype).numpy().dtype, copy=False)
    if array.dtype.kind == "f" and array.shape[-1:] == (2,):
        return torch.view_as_complex(torch.from_numpy(np.ascontiguousarray(array))).to(dtype).numpy()
    return value


def from_outputs(raw: list[Any], dtypes: list[Any]) -> list[Any]:
    """onnxruntime outputs as the user's dtypes: complex back from torch.onnx's trailing
    real/imaginary dim (a complex numpy array); bfloat16 and float8, which numpy cannot hold,
    as torch tensors of that dtype (read from their exact float32 cast, their raw bits, or an
    ``OrtValue``). An ``OrtValue`` of another type comes back as a numpy array."""
    out: list[Any] = []
    for index, value in enumerate(raw):
        dtype = dtypes[index] if index < len(dtypes) else None
        if _is_ort_value(value):
            value = ort_value_to_torch(value)
            if str(value.dtype).removeprefix("torch.") not in _BITS:
                value = value.numpy()
        if dtype is not None and dtype.is_complex:
            out.append(_as_complex(value, dtype))
        elif dtype is not None and str(dtype).removeprefix("torch.") in _BITS:
            out.append(_as_bits_dtype(value, dtype))
        else:
            out.append(value)
    return out
