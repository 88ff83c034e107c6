"""Checks that an export can run, so that no export reports ``ok`` for ONNX that onnxruntime
would refuse to load:

* :func:`refuse_no_tensor_output` (translate): a ``forward`` that returns no tensor (``None``,
  or only Python constants) would give an ONNX model with no output;
* :func:`refuse_mixed_dtypes` (translate): a matrix product whose operands have two floating
  dtypes (a float64 input meeting float32 weights) is refused by eager PyTorch, but
  ``aten.linear``'s meta kernel lets it through capture; it fails with the FX node, the user's
  source line and the fix;
* :func:`onnxruntime_refusal` (optimize, on the final model): ONNX's strict type inference,
  confirmed by onnxruntime; a model onnxruntime refuses (an operator or type it lacks) is
  kept, as ``torch.onnx.export`` would write it, with a warning saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import TranslateError, first_line
from ..frames import source_of_stack
from ..inputs import BoundInputs

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["MAX_CHECKED_BYTES", "onnxruntime_refusal", "refuse_mixed_dtypes", "refuse_no_tensor_output"]

MAX_CHECKED_BYTES = 512 * 1024**2
"""Above these weights, :func:`onnxruntime_refusal` is left to verify (it would copy them all)."""


def refuse_no_tensor_output(program: Any) -> None:
    """Raise unless ``forward`` returns at least one tensor (or symbolic size)."""
    from torch.export.graph_signature import ConstantArgument, OutputKind

    outputs = [s.arg for s in program.graph_signature.output_specs if s.kind == OutputKind.USER_OUTPUT]
    if any(not isinstance(arg, ConstantArgument) for arg in outputs):
        return
    returned = ", ".join(repr(arg.value) for arg in outputs) or "nothing"
    raise TranslateError(
        f"forward returned no tensor (it returned {returned}): the ONNX model would have no output "
        "and onnxruntime cannot load a model without one",
        hint="return the tensor(s) to export from forward (an in-place update of a buffer is not an output)",
    )


_SAME_DTYPE_OPS = ("aten.linear.default", "aten.addmm.default", "aten.mm.default", "aten.bmm.default",
                   "aten.baddbmm.default", "aten.matmul.default")


def refuse_mixed_dtypes(program: Any, bound: BoundInputs) -> None:
    """Raise when a matrix product gets operands of two floating dtypes: eager PyTorch refuses
    it ("mat1 and mat2 must have the same dtype"), onnxruntime refuses the model."""
    for node in program.graph.nodes:
        if node.op != "call_function" or str(node.target) not in _SAME_DTYPE_OPS:
            continue
        values: list[Any] = [getattr(a, "meta", {}).get("val") for a in node.args]
        dtypes = [str(v.dtype).removeprefix("torch.") for v in values if getattr(v, "is_floating_point", lambda: False)()]
        if len(set(dtypes)) > 1:
            op = str(node.target).removeprefix("aten.").removesuffix(".default")
            raise TranslateError(
                f"{op} (FX node {node.name!r}) multiplies {' and '.join(dict.fromkeys(dtypes))} operands: eager "
                "PyTorch refuses this call, and onnxruntime would refuse the model",
                source=source_of_stack(node.meta.get("stack_trace")),
                hint=_dtype_hint(program, bound) or "cast the operands to one dtype in forward",
            )


def onnxruntime_refusal(model: ir.Model) -> str | None:
    """Why onnxruntime refuses to load ``model`` (None when it loads it). ONNX's strict type
    and shape inference runs first; onnxruntime is asked only when it objects, and decides
    (inference can be stricter than the runtime)."""
    import onnx
    import onnx_ir as ir

    from ..ort_model import ort_inference_session
    from ..serialize import initializer_bytes, needs_external_data

    if needs_external_data(model) or initializer_bytes(model) > MAX_CHECKED_BYTES:
        return None  # one protobuf cannot hold it (or a copy costs too much): verify loads it
    try:
        typed = _proto_without_weight_bytes(model)
    except Exception as exc:  # noqa: BLE001 - e.g. a FakeTensor constant left by an earlier trace
        return f"the model cannot be serialized, so onnxruntime cannot load it: {first_line(exc)}"
    try:
        onnx.shape_inference.infer_shapes(typed, check_type=True, strict_mode=True)
        return None
    except onnx.shape_inference.InferenceError:
        pass
    try:  # the weights too (they serialized above, as plain tensors): onnxruntime decides
        ort_inference_session(ir.to_proto(model).SerializeToString())
        return None
    except Exception as exc:  # noqa: BLE001 - onnxruntime's refusal, whatever its class, is the finding
        refused = " ".join(str(exc).split())
    return (f"onnxruntime cannot load this model ({refused[:240]}); it is kept as torch.onnx.export would "
            "write it, but verify and benchmark need onnxruntime")


WEIGHT_BYTES = 4096
"""Initializers above this size are weights: type inference needs their type and shape only."""


def _proto_without_weight_bytes(model: ir.Model) -> Any:
    """``model`` as a ModelProto whose weights are external-data references to no file: type
    and shape inference reads their type and shape, and copying them was most of this check
    (ResNet-50: 0.49 s). Small initializers (shape operands) keep their values, and so does
    any tensor that is not a real torch or numpy one (a tracing leftover,
    :func:`~exporter.compat.trace_tensor_kind`, must still fail to serialize). The model is this stage's own output, not yet shared: its values are put
    back before this returns."""
    import numpy
    import onnx_ir as ir
    import torch

    from ..compat import trace_tensor_kind

    swapped = []
    try:
        for value in model.graph.initializers.values():
            tensor = value.const_value
            raw = getattr(tensor, "raw", None)
            real = isinstance(raw, numpy.ndarray) or (isinstance(raw, torch.Tensor) and trace_tensor_kind(raw) is None)
            if tensor is None or not real or tensor.nbytes <= WEIGHT_BYTES:
                continue
            dims = tensor.shape.numpy()  # an initializer's shape is static
            value.const_value = ir.ExternalTensor("weights-not-written", 0, tensor.nbytes, tensor.dtype,
                                                  shape=ir.Shape(dims), name=tensor.name or value.name or "")
            swapped.append((value, tensor))
        return ir.to_proto(model)
    finally:
        for value, tensor in swapped:
            value.const_value = tensor


def _dtype_hint(program: Any, bound: BoundInputs) -> str | None:
    """When a floating input's dtype differs from the model's floating weights' dtype, the fix
    that eager PyTorch would ask for too."""
    weights = {str(p.dtype).removeprefix("torch.") for p in program.parameters() if p.is_floating_point()}
    if len(weights) != 1:
        return None
    (weight,) = weights
    floating = ("float16", "bfloat16", "float32", "float64")
    for leaf in bound.leaves:
        dtype = leaf.dtype.removeprefix("torch.")
        if dtype in floating and dtype != weight:
            cast = {"float32": "float()", "float64": "double()", "float16": "half()", "bfloat16": "bfloat16()"}[weight]
            return (f"the input {leaf.path!r} is {dtype} while the model's weights are {weight} (eager PyTorch "
                    f"refuses this call too): pass {leaf.path}.{cast} as the example")
    return None
