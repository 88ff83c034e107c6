"""Checks that a translated model can run, so that no export reports ``ok`` for ONNX that
onnxruntime would refuse to load:

* :func:`refuse_no_tensor_output`: a ``forward`` that returns no tensor (``None``, or only
  Python constants) would give an ONNX model with no output;
* :func:`check_types`: ONNX's strict type inference over the translated model, confirmed by
  onnxruntime. A node whose inputs disagree because an input's dtype differs from the weights'
  (eager PyTorch refuses that call too) fails translate with the node, the user's source line
  and the fix; any other model onnxruntime refuses is kept, as ``torch.onnx.export`` would
  write it, and translate's status is ``warning`` with onnxruntime's reason.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from ..errors import TranslateError
from ..frames import source_of_stack
from ..inputs import BoundInputs
from ..node_metadata import STACK_TRACE_KEY, fx_name_of

if TYPE_CHECKING:
    import onnx_ir as ir

__all__ = ["MAX_CHECKED_BYTES", "check_types", "refuse_no_tensor_output"]

MAX_CHECKED_BYTES = 512 * 1024**2
"""Above these weights, :func:`check_types` is left to onnxruntime (it would copy them all)."""


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


_NODE = re.compile(r"node name: ([^)]*)\)")


def check_types(model: ir.Model, program: Any, bound: BoundInputs) -> str | None:
    """ONNX's strict type and shape inference over ``model``, and when it objects, onnxruntime
    (which decides: inference can be stricter than the runtime). Raises a
    :class:`TranslateError` naming the node, its source line and the fix when an input's dtype
    is the cause; returns a warning when onnxruntime refuses the model for another reason
    (an operator or type it lacks); None when the model loads."""
    import onnx
    import onnx_ir as ir

    from ..ort_model import ort_inference_session
    from ..serialize import initializer_bytes

    if initializer_bytes(model) > MAX_CHECKED_BYTES:
        return None
    proto = ir.to_proto(model)
    try:
        onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
        return None
    except onnx.shape_inference.InferenceError as exc:
        inferred = str(exc).strip().splitlines()[0]
    try:
        ort_inference_session(proto.SerializeToString())
        return None
    except Exception as exc:  # noqa: BLE001 - onnxruntime's refusal, whatever its class, is the finding
        refused = " ".join(str(exc).split())
    found = _NODE.search(inferred)
    node = _node_named(model, found.group(1)) if found else None
    fix = _dtype_hint(program, bound)
    if fix is None:
        return (f"onnxruntime cannot load this model ({refused[:240]}); it is kept as torch.onnx.export would "
                "write it, but verify and benchmark need onnxruntime")
    source = source_of_stack(node.metadata_props.get(STACK_TRACE_KEY)) if node is not None else None
    fx_name = fx_name_of(node) if node is not None else None
    where = f" (from the FX node {fx_name!r})" if fx_name else ""
    raise TranslateError(f"onnxruntime cannot load the translated model: {inferred}{where}", source=source, hint=fix)


def _node_named(model: ir.Model, name: str) -> ir.Node | None:
    for node in model.graph.all_nodes():
        if node.name == name:
            return node
    return None


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
