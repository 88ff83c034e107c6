"""ONNX translations we add beyond torchlib, for FX nodes torch.onnx cannot translate.

Each entry of ``TRANSLATIONS`` maps an FX node target to a translation function, the same
form as ``torch.onnx.export(custom_translation_table=...)``; ``_torch_compat.onnx_registry``
registers them on the torchlib registry (as custom translations, so they win over any torchlib
entry). A translation is called while the graph is being built: ONNX values in, ONNX values
out, nodes recorded as they are created.

- ``torch.ops.higher_order.map_impl`` (``functorch.experimental.control_flow.map`` /
  ``torch._higher_order_ops.map``): ONNX ``Scan`` with no state variables, the mapped body as
  its subgraph.
- ``builtins.round`` on a symbolic number (``round(x.shape[0] / 2)``): ONNX ``Round`` (half to
  even, as Python's ``round``) then ``Cast`` to int64.

Importing this module imports nothing heavy; torch, onnxscript and onnx_ir load when the
table is built or a translation runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from . import _torch_compat as compat

__all__ = ["translation_table", "map_impl", "symbolic_round"]


def map_impl(body: Any, xs: Sequence[Any], args: Sequence[Any]) -> Sequence[Any]:
    """``map_impl(body, xs, args)``: ``body(x_0[i], ..., x_k[i], *args)`` for every ``i`` along
    the first axis of the ``xs``, outputs stacked along a new first axis.

    ONNX ``Scan`` with no state variables is exactly this: every ``xs`` tensor is a scan input
    (iterated along axis 0), every body output a scan output (stacked along axis 0). The Scan
    body is a one-node graph calling ``body`` (the translated FX submodule, an ONNX function in
    the model) on the per-iteration slices and on ``args``, which the subgraph reads from the
    enclosing graph. The leading dim may be dynamic. At size 0 onnxruntime's Scan fails, as
    eager ``map`` does ("Leading dimensions of mapped xs cannot be 0").
    """
    import onnx_ir as ir

    xs, args = list(xs), list(args or [])
    slices = [
        ir.Value(
            name=f"{x.name}_{body.name}__slice",
            shape=ir.Shape(list(x.shape)[1:]) if x.shape is not None else None,
            type=ir.TensorType(x.dtype),
        )
        for x in xs
    ]
    call = ir.Node(body.domain, body.name, [*slices, *args], num_outputs=len(body.outputs))
    # Every value of a model needs its own name (onnxruntime rejects duplicates across graphs).
    for function_output, output in zip(body.outputs, call.outputs):
        output.name = f"{function_output.name}_{body.name}__mapped"
    graph = ir.Graph(slices, call.outputs, nodes=[call], name=f"{body.name}_map_body")
    return compat.record_onnx_node(
        "Scan", *xs, num_outputs=len(body.outputs), body=graph, num_scan_inputs=len(xs),
    )


def symbolic_round(number: Any, ndigits: Any = None) -> Any:
    """``round(number)`` on a symbolic Python number (a SymFloat such as ``x.shape[0] / 2``,
    which reaches ONNX as a float scalar): ``Cast(Round(number), int64)``. ONNX ``Round`` rounds
    halves to even, as Python does (``round(2.5) == 2``). An integer is returned as it is.
    Only ``ndigits=None`` (an int result) is translated: with digits Python rounds the exact
    decimal value, which float arithmetic in ONNX cannot promise.
    """
    import onnx_ir as ir
    from onnxscript import opset18 as op

    if ndigits is not None:
        raise NotImplementedError(
            f"round(number, ndigits={ndigits!r}) on a symbolic number has no ONNX translation; "
            "only round(number) is translated"
        )
    if number.dtype is not None and number.dtype.is_integer():
        return op.Identity(number)
    return op.Cast(op.Round(number), to=ir.DataType.INT64)


def translation_table() -> dict[Any, Callable[..., Any]]:
    """FX node target → translation, as ``torch.onnx.export(custom_translation_table=...)``
    takes it. Imports torch."""
    import builtins

    import torch

    return {
        torch.ops.higher_order.map_impl: map_impl,
        builtins.round: symbolic_round,
    }
