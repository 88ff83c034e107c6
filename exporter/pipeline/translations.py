"""ONNX translations we add beyond torchlib, for FX nodes torch.onnx cannot translate.

Each entry of ``TRANSLATIONS`` maps an FX node target to a translation function, the same
form as ``torch.onnx.export(custom_translation_table=...)``; :func:`onnx_registry` is
torchlib's registry with them registered (as custom translations, so they win over any
torchlib entry). A translation is called while the graph is being built: ONNX values in, ONNX values
out, nodes recorded as they are created.

- ``torch.ops.higher_order.map_impl`` (``functorch.experimental.control_flow.map`` /
  ``torch._higher_order_ops.map``): ONNX ``Scan`` with no state variables, the mapped body as
  its subgraph.
- ``builtins.round`` on a symbolic number (``round(x.shape[0] / 2)``): ONNX ``Round`` (half to
  even, as Python's ``round``) then ``Cast`` to int64.
- ``aten._grouped_mm`` (``torch.nn.functional.grouped_mm``) and transformers' custom op
  ``transformers::grouped_mm_fallback`` (what transformers 5's default "grouped_mm" experts
  run under torch.export for non-bfloat16 weights; the decompose step makes its calls
  ``aten._grouped_mm`` calls): the mixture-of-experts matmul, one ``Split`` of the rows by the
  per-expert token counts, one ``MatMul`` per expert (their number is static), ``Concat``.

- ``aten._is_all_true`` (``torch._check_tensor_all``, VITS): ``ReduceMin`` of the
  values as integers, cast back to bool.

- ``aten.unsqueeze`` on a complex tensor (Llama 4's rotary embedding: ``freqs_cis[:, :,
  None, :]``): torchlib translates unsqueeze for real tensors only. ONNX carries a complex
  tensor as a real one with a trailing dim of 2, so a negative dim moves one further left.

One more entry wraps a translation instead of adding one: ``aten.scaled_dot_product_attention``
on more than 4 dims (timm's Twins and Hiera attend over 5-D tensors; torchlib takes 4-D only)
folds the extra leading dims into the batch around the 4-D translation that would otherwise win
(torchlib's, or an ``extra`` one such as ``masked_attention``'s), see :mod:`.sdpa_nd`. It is
registered last by :func:`onnx_registry`, so it is the outermost; a 4-D call goes to the wrapped
translation as it is.

Importing this module imports nothing heavy; torch, onnxscript and onnx_ir load when the
table is built or a translation runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from .. import compat
from .sdpa_nd import fold_leading_dims

__all__ = [
    "translation_table", "project_translations", "onnx_registry", "map_impl", "symbolic_round", "grouped_mm",
    "use_translated_equivalents", "attention_translation", "unsqueeze_complex", "is_all_true",
]


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


def grouped_mm(mat_a: Any, mat_b: Any, offs: Any = None, bias: Any = None, out_dtype: Any = None) -> Any:
    """``torch._grouped_mm(mat_a, mat_b, offs=, bias=, out_dtype=)``, and transformers'
    ``grouped_mm_fallback(input, weight, offs)``: one matmul per group, ``offs[g]`` the end
    of group ``g`` along the jagged dim (groups are contiguous and in order).

    - ``mat_a (M, K)``, ``mat_b (G, K, N)``: rows ``offs[g-1]:offs[g]`` of ``mat_a`` times
      ``mat_b[g]``; ``(M, N)``. The mixture-of-experts case (rows sorted by expert).
    - ``mat_a (G, M, K)``, ``mat_b (G, K, N)``, no ``offs``: ``MatMul``; ``(G, M, N)``.
    - ``mat_a (M, K)``, ``mat_b (K, N)``: ``K`` split by ``offs``; ``(G, M, N)``.
    - ``mat_a (G, M, K)``, ``mat_b (K, N)``: ``N`` split by ``offs``; ``(M, N)``.

    The number of groups ``G`` is static (a weight's dim, or ``offs``' length); the split
    sizes are not: one ``Split`` by the counts ``offs[g] - offs[g-1]`` (zero-sized parts
    allowed), so any token count and routing works with one node per group, without
    gathering a weight per token (an ``(M, K, N)`` tensor). What lies beyond ``offs[-1]``
    is a part of its own: rows there come out as 0, as transformers' fallback writes them
    (torch's kernel leaves them uninitialized).

    Half-precision operands (bfloat16, the only type torch's kernel takes, or float16) are
    multiplied in float32 and the result cast back (or to ``out_dtype``): the kernel also
    accumulates in float32, and onnxruntime's CPU MatMul has no bfloat16 kernel.
    """
    import onnx_ir as ir
    from onnxscript import opset18 as op

    ranks = len(mat_a.shape), len(mat_b.shape)  # (a Cast's output has no shape yet)
    narrow = {ir.DataType.BFLOAT16, ir.DataType.FLOAT16}
    result_type = ir.DataType(int(out_dtype)) if out_dtype is not None else mat_a.dtype
    if mat_a.dtype in narrow or result_type != mat_a.dtype:
        compute_type = ir.DataType.FLOAT if mat_a.dtype in narrow or result_type in narrow else result_type
        mat_a, mat_b = op.Cast(mat_a, to=compute_type), op.Cast(mat_b, to=compute_type)
        bias = op.Cast(bias, to=compute_type) if bias is not None else None
        return op.Cast(_grouped_matmuls(mat_a, mat_b, offs, bias, compute_type, ranks), to=result_type)
    return _grouped_matmuls(mat_a, mat_b, offs, bias, mat_a.dtype, ranks)


def _grouped_matmuls(mat_a: Any, mat_b: Any, offs: Any, bias: Any, dtype: Any, ranks: tuple[int, int]) -> Any:
    """:func:`grouped_mm` on operands of one type ``dtype``, of ranks ``ranks``."""
    import onnx_ir as ir
    from onnxscript import opset18

    # Any: onnxscript types each op's inputs by ONNX type constraints, which values of a graph
    # being built (their type known only at run time) cannot state.
    op: Any = opset18

    def refuse(what: str) -> NotImplementedError:
        return NotImplementedError(
            f"grouped_mm {what} has no ONNX translation. For a transformers mixture-of-experts model, "
            'export with its per-token experts instead: model.set_experts_implementation("batched_mm") '
            "before exporting (weights are gathered per token: more memory, same results)"
        )

    rank_a, rank_b = ranks
    if offs is None:
        if rank_a != 3 or rank_b != 3:
            raise refuse(f"without offs on {rank_a}-D by {rank_b}-D operands (only 3-D by 3-D is defined)")
        out = op.MatMul(mat_a, mat_b)
        return out if bias is None else op.Add(out, op.Unsqueeze(bias, op.Constant(value_ints=[1])))
    if bias is not None and not (rank_a == 2 and rank_b == 3):
        raise refuse(f"with a bias on {rank_a}-D by {rank_b}-D operands (translated for 2-D by 3-D)")
    groups = offs.shape[0] if offs.shape is not None else None
    if not isinstance(groups, int):
        raise refuse("with a dynamic number of groups (offs has no static length; one MatMul per group needs it)")
    ends = op.Cast(offs, to=ir.DataType.INT64)
    zero = op.Constant(value_ints=[0])
    starts = op.Concat(zero, op.Slice(ends, zero, op.Constant(value_ints=[-1])), axis=0)
    counts = op.Sub(ends, starts)

    def split(value: Any, axis: int, with_rest: bool) -> list[Any]:
        """``value`` cut along ``axis`` into the groups (plus what lies past ``offs[-1]``)."""
        sizes = counts
        if with_rest:
            total = op.Shape(value, start=axis, end=axis + 1)
            sizes = op.Concat(counts, op.Sub(total, op.Slice(ends, op.Constant(value_ints=[-1]),
                                                                 op.Constant(value_ints=[groups]))), axis=0)
        parts = groups + 1 if with_rest else groups
        return list(compat.record_onnx_node("Split", value, sizes, num_outputs=parts, axis=axis))

    def group(value: Any, g: int) -> Any:
        return op.Gather(value, op.Constant(value_int=g), axis=0)

    if rank_a == 2 and rank_b == 3:
        pieces = split(mat_a, 0, with_rest=True)
        outs = []
        for g in range(groups):
            out = op.MatMul(pieces[g], group(mat_b, g))
            outs.append(out if bias is None else op.Add(out, group(bias, g)))
        # rows past offs[-1]: zeros of (rest, N)
        rest = op.Concat(op.Shape(pieces[groups], start=0, end=1), op.Shape(mat_b, start=2, end=3), axis=0)
        outs.append(op.ConstantOfShape(rest, value=ir.tensor([0], dtype=dtype)))
        return op.Concat(*outs, axis=0)
    if rank_a == 2 and rank_b == 2:
        lefts, rights = split(mat_a, 1, with_rest=False), split(mat_b, 0, with_rest=False)
        axis0 = op.Constant(value_ints=[0])
        return op.Concat(*(op.Unsqueeze(op.MatMul(a, b), axis0) for a, b in zip(lefts, rights)), axis=0)
    if rank_a == 3 and rank_b == 2:
        pieces = split(mat_b, 1, with_rest=True)
        outs = [op.MatMul(group(mat_a, g), pieces[g]) for g in range(groups)]
        rest = op.Concat(op.Shape(mat_a, start=1, end=2), op.Shape(pieces[groups], start=1, end=2), axis=0)
        outs.append(op.ConstantOfShape(rest, value=ir.tensor([0], dtype=dtype)))
        return op.Concat(*outs, axis=1)
    raise refuse(f"of {rank_a}-D by {rank_b}-D operands")

def unsqueeze_complex(self: Any, dim: int) -> Any:
    """``aten.unsqueeze(self, dim)`` for a complex ``self``, carried as real values with a
    trailing dim of 2: ``dim`` counts from the end of the complex shape when negative."""
    from onnxscript import opset18 as op

    axes: Any = [dim - 1 if dim < 0 else dim]  # a constant input, as torchlib's own unsqueeze passes it
    return op.Unsqueeze(self, axes)


unsqueeze_complex.handles_complex = True  # type: ignore[attr-defined]


def is_all_true(self: Any) -> Any:
    """``aten._is_all_true(self)``: whether every element of a bool tensor is true, a bool
    scalar (what ``torch._check_tensor_all``, transformers' ``torch_compilable_check``, reads:
    VITS's spline flow). The minimum of the values as integers; an empty tensor gives the
    largest int64, so true, as in torch."""
    from onnxscript import opset18

    op: Any = opset18  # onnxscript's per-op type variables do not know the value's type here
    int64, boolean = 7, 9  # onnx.TensorProto.INT64, BOOL
    return op.Cast(op.ReduceMin(op.Cast(self, to=int64), keepdims=0), to=boolean)


# Custom ops that compute exactly what a translated op computes, by their qualified name: the
# decomposed graph calls the translated op instead (see ``use_translated_equivalents``).
# transformers' fallback writes 0 past ``offs[-1]``, which :func:`grouped_mm` also does.
EQUIVALENT_OPS = {"transformers::grouped_mm_fallback": ("_grouped_mm", "default")}


def use_translated_equivalents(graph_module: Any) -> int:
    """Make every call of an op in :data:`EQUIVALENT_OPS` call its translated equivalent
    (``aten``), in place; returns how many. transformers registers its ``grouped_mm_fallback``
    only when its MoE code is imported, possibly after our registry was built (once per
    process); ``aten._grouped_mm`` is always there, so the translation is registered once."""
    import torch

    total = 0
    for module in graph_module.modules():  # with the subgraphs of higher-order ops
        if not isinstance(module, torch.fx.GraphModule):
            continue
        count = 0
        for node in module.graph.nodes:
            name = getattr(node.target, "name", None) if node.op == "call_function" else None
            equivalent = EQUIVALENT_OPS.get(name()) if callable(name) else None  # OpOverload.name()
            if equivalent is not None:
                packet, overload = equivalent
                node.target = getattr(getattr(torch.ops.aten, packet), overload)
                count += 1
        if count:
            module.recompile()
        total += count
    return total


def translation_table() -> dict[Any, Callable[..., Any]]:
    """FX node target → translation, as ``torch.onnx.export(custom_translation_table=...)``
    takes it. Imports torch."""
    import builtins

    import torch

    return {
        torch.ops.higher_order.map_impl: map_impl,
        builtins.round: symbolic_round,
        torch.ops.aten._grouped_mm.default: grouped_mm,
        torch.ops.aten.unsqueeze.default: unsqueeze_complex,
        torch.ops.aten._is_all_true.default: is_all_true,
    }


@functools.lru_cache(maxsize=1)
def project_translations() -> compat.Translations:
    """:func:`translation_table` as ``((target, translation), ...)`` pairs. Imports torch."""
    return tuple(translation_table().items())


def attention_translation(opset_version: int, extra: compat.Translations = ()) -> compat.Translations:
    """The ``aten.scaled_dot_product_attention`` entry for any rank (:func:`.sdpa_nd.fold_leading_dims`)
    around the translation that wins without it: the last ``extra`` one for that op, else
    torchlib's at ``opset_version``. ``()`` when there is none to wrap. Imports torch."""
    import torch

    target = torch.ops.aten.scaled_dot_product_attention.default
    inner = next((function for key, function in reversed(tuple(extra)) if key == target), None)
    if inner is None:
        inner = compat.registered_translation(opset_version, target)
    return () if inner is None else ((target, fold_leading_dims(inner)),)


def onnx_registry(opset_version: int, extra: compat.Translations = ()) -> Any:
    """The registry the exporter translates with: torchlib's for ``opset_version``, with our
    translations and then ``extra`` ones (``masked_attention.translations``) registered as
    custom translations, each winning over what came before, and last the N-D attention
    around whichever attention translation won (:func:`attention_translation`). Built once
    per opset and table."""
    extra = tuple(extra)
    return compat.onnx_registry_with(
        opset_version, project_translations() + extra + attention_translation(opset_version, extra),
    )
