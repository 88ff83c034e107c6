"""What decompose's retrace does to the ops that alone make a captured program retrace, done
on a copy of its graph instead (decompose's copy path, a fraction of the time).

Each rule handles a few ATen ops and does to the node what the retrace's decomposition and
functionalization do: an eval ``dropout`` is its input, ``unflatten`` is a ``view``, an
in-place ``relu_`` of a fresh value is ``relu``, an eval ``batch_norm`` is the op torch's
decomposition gives... :func:`rules` maps each op to its rule. A rule returns False when the
copy cannot do what the retrace does (a ``-1`` standing for a size only an expression
gives, a mutation of a value something else reads): the caller then retraces.

Each rule is proven against the retrace itself (``tests/exporter/test_decompose.py``): the
same optimized ONNX ops in the same order and bit-equal outputs, on BERT, GPT-2, Llama,
Qwen2, T5, ViT and Whisper's encoder (one no-op reshape fewer) from tiny configs,
``nn.MultiheadAttention`` and inline modules (a conv net with torchvision's idioms). Checked
the same way outside CI, where torchvision and timm import: ResNet-50, MobileNetV3,
EfficientNet-B0, RegNetY, ShuffleNetV2, DenseNet and timm's ResNet, ViT, DeiT, RegNet
(ConvNeXt: the retrace adds an ``as_strided``, ten ONNX ops more).
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable
from typing import Any

__all__ = ["CopiedGraph", "rules", "undo_retrace_work", "undone"]


class CopiedGraph:
    """The copied graph a rule edits, and the nodes that compute its symbolic sizes."""

    def __init__(self, graph: Any) -> None:
        self.graph = graph
        self.sizes: dict[Any, Any] = {}  # a symbolic size's expression -> the first node computing it

    def note(self, node: Any) -> None:
        import torch

        value = node.meta.get("val")
        if isinstance(value, torch.SymInt):
            self.sizes.setdefault(value.node.expr, node)

    def replace(self, node: Any, by: Any) -> None:
        node.replace_all_uses_with(by)
        self.graph.erase_node(node)

    def size(self, size: Any) -> Any:
        """``size`` as the retrace writes it in a size list: an int as itself, a symbolic one as
        the earlier node that computes it, else a new ``sym_size`` of the input that has it as
        a dim (after the inputs, where the retrace puts it); None when only an expression
        gives it."""
        import torch

        if isinstance(size, int):
            return size
        expr = size.node.expr
        if expr not in self.sizes:
            placeholders = [n for n in self.graph.nodes if n.op == "placeholder"]
            carrier = next(((n, axis) for n in placeholders for axis, s in enumerate(_shape(n))
                            if not isinstance(s, int) and s.node.expr == expr), None)
            if carrier is None:
                return None
            with self.graph.inserting_after(placeholders[-1]):
                node = self.graph.call_function(torch.ops.aten.sym_size.int, carrier)
            node.meta["val"] = size
            self.sizes[expr] = node
        return self.sizes[expr]

    def insert_before(self, node: Any, target: Any, args: tuple[Any, ...], value: Any = None) -> Any:
        """A new node before ``node`` with its metadata (source line, module) and ``value``, or,
        with no ``value``, the value its target computes on its inputs' recorded values."""
        import torch

        with self.graph.inserting_before(node):
            new = self.graph.call_function(target, args)
        new.meta.update((key, item) for key, item in node.meta.items() if key != "val")
        if value is None:
            fake_mode = node.meta["val"].fake_mode
            with fake_mode:
                value = target(*torch.fx.node.map_arg(args, lambda n: n.meta["val"]))
        new.meta["val"] = value
        return new


Rule = Callable[[Any, CopiedGraph], bool]


def undo_retrace_work(graph_module: Any, *, recompile: bool = True) -> bool:
    """Apply every rule to the copied ``graph_module`` (in place) in graph order, then drop
    the nodes left without users, as the retrace does. A graph output may become another
    node: the caller renames the signature's outputs after them. False when a rule cannot
    do its op's work (the caller retraces). ``recompile=False``: the caller regenerates the
    module's code after its own changes (milliseconds per call on a large graph)."""
    graph = graph_module.graph
    copied = CopiedGraph(graph)
    table = rules()
    for node in list(graph.nodes):
        copied.note(node)
        rule = table.get(node.target) if node.op == "call_function" else None
        if rule is None:
            continue
        try:
            done = rule(node, copied)
        except Exception:  # noqa: BLE001 - a form the rule does not know: the retrace does it
            done = False
        if not done:
            return False
    graph.eliminate_dead_code()
    if recompile:
        graph_module.recompile()
    return True


# -- the rules --------------------------------------------------------------------------------


def eval_dropout(node: Any, copied: CopiedGraph) -> bool:
    """An eval ``dropout`` (or ``dropout_``) is its input; a training one stays (retrace)."""
    train = node.args[2] if len(node.args) > 2 else node.kwargs.get("train")
    if train:
        return False
    copied.replace(node, node.args[0])
    return True


def unused_assert(node: Any, copied: CopiedGraph) -> bool:
    """``_assert_tensor_metadata`` goes (the assertion pass would remove it)."""
    if not node.users:
        copied.graph.erase_node(node)
    return True


def conversion(node: Any, copied: CopiedGraph) -> bool:
    """A ``to`` that keeps dtype and device is its input; another one a ``_to_copy`` to its dtype."""
    import torch

    source, out = node.args[0], node.meta.get("val")
    value = _value(source)
    if out is None or value is None:
        return False
    if (out.dtype, out.device) != (value.dtype, value.device):
        node.target, node.args, node.kwargs = torch.ops.aten._to_copy.default, (source,), {"dtype": out.dtype}
    else:
        copied.replace(node, source)
    return True


def renamed(target: Any) -> Rule:
    """The op the retrace writes for this one with the same arguments (``__and__`` is
    ``bitwise_and``, a two-tensor ``min`` is ``minimum``)."""

    def rule(node: Any, copied: CopiedGraph) -> bool:
        node.target = target
        return True

    return rule


def contiguous(node: Any, copied: CopiedGraph) -> bool:
    """``contiguous`` is its input when that is contiguous, else a ``clone`` to the contiguous format."""
    import torch

    value = _value(node.args[0])
    if value is None or node.kwargs.get("memory_format", torch.contiguous_format) is not torch.contiguous_format:
        return False
    is_contiguous = _is_contiguous(value)
    if is_contiguous is None:
        return False
    if is_contiguous:
        copied.replace(node, node.args[0])
    else:
        node.target, node.kwargs = torch.ops.aten.clone.default, {"memory_format": torch.contiguous_format}
    return True


def functionalized(target: Any) -> Rule:
    """An in-place op (``add_``, ``relu_``...) of a fresh value nothing else reads is its
    functional op, as functionalization writes it (:func:`_functional_alike`)."""

    def rule(node: Any, copied: CopiedGraph) -> bool:
        if not _functional_alike(node):
            return False
        node.target = target
        return True

    return rule


def view_to_output_shape(node: Any, copied: CopiedGraph) -> bool:
    """``flatten``/``unflatten`` are the ``view`` to their output's shape."""
    import torch

    out = node.meta.get("val")
    if out is None:
        return False
    shape = [copied.size(size) for size in out.shape]
    if any(size is None for size in shape):
        return False
    node.target, node.args, node.kwargs = torch.ops.aten.view.default, (node.args[0], shape), {}
    return True


def reshape(node: Any, copied: CopiedGraph) -> bool:
    """A ``reshape`` to its input's own shape is its input; a ``-1`` in one of a contiguous
    input stays (ATen views it, as in ``view`` and ``expand``); in one of another input it is
    the static size it stands for (so the optimizer sees a reshape to the same shape as one),
    or, when symbolic, only the retrace's expression gives it."""
    source, out = _value(node.args[0]), node.meta.get("val")
    if source is None or out is None:
        return False
    if len(source.shape) == len(out.shape) and all(map(_same_size, source.shape, out.shape)):
        copied.replace(node, node.args[0])
        return True
    sizes = list(node.args[1]) if len(node.args) > 1 else []
    if -1 not in sizes:
        return True
    is_contiguous = _is_contiguous(source)
    if is_contiguous is None:
        return False
    if is_contiguous:
        return True
    for index, size in enumerate(sizes):
        if isinstance(size, int) and size == -1:
            if not isinstance(out.shape[index], int):
                return False
            sizes[index] = out.shape[index]
    node.args = (node.args[0], sizes, *node.args[2:])
    return True


def eval_batch_norm(node: Any, copied: CopiedGraph) -> bool:
    """An eval ``batch_norm`` with running statistics is ``_native_batch_norm_legit_no_training``
    and the first of its outputs, as torch's decomposition writes it."""
    import torch

    if len(node.args) < 8:
        return False
    x, weight, bias, mean, var, training, momentum, eps = node.args[:8]
    if training or mean is None or var is None:
        return False
    norm = copied.insert_before(node, torch.ops.aten._native_batch_norm_legit_no_training.default,
                                (x, weight, bias, mean, var, momentum, eps))
    first = copied.insert_before(node, operator.getitem, (norm, 0), value=norm.meta["val"][0])
    copied.replace(node, first)
    return True


def chunk(node: Any, copied: CopiedGraph) -> bool:
    """``chunk(x, n, dim)`` is ``split(x, ceil(size / n), dim)`` over a static size (ATen's own
    definition); over a symbolic one only the retrace's expression gives the piece size."""
    import torch

    value = _value(node.args[0])
    chunks = node.args[1]
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    size = value.shape[dim] if value is not None else None
    if not isinstance(size, int) or size == 0:
        return False
    node.target, node.args, node.kwargs = torch.ops.aten.split.Tensor, (node.args[0], -(-size // chunks), dim), {}
    return True


def global_average_pool(node: Any, copied: CopiedGraph) -> bool:
    """``adaptive_avg_pool2d`` to 1x1 is the ``mean`` over the last two dims, kept (ATen's
    own shortcut); another output size stays (retrace)."""
    import torch

    if list(node.args[1]) != [1, 1]:
        return False
    node.target, node.args = torch.ops.aten.mean.dim, (node.args[0], [-1, -2], True)
    return True


@functools.lru_cache(maxsize=1)
def rules() -> dict[Any, Rule]:
    """Every rule by the ATen op it handles."""
    import torch

    aten = torch.ops.aten
    table: dict[Any, Rule] = {
        aten.dropout.default: eval_dropout,
        aten.dropout_.default: eval_dropout,
        aten._assert_tensor_metadata.default: unused_assert,
        aten.to.dtype_layout: conversion,
        aten.to.device: conversion,
        aten.to.dtype: conversion,
        aten.__and__.Tensor: renamed(aten.bitwise_and.Tensor),
        aten.min.other: renamed(aten.minimum.default),
        aten.contiguous.default: contiguous,
        aten.unflatten.int: view_to_output_shape,
        aten.flatten.using_ints: view_to_output_shape,
        aten.reshape.default: reshape,
        aten.batch_norm.default: eval_batch_norm,
        aten.adaptive_avg_pool2d.default: global_average_pool,
        aten.chunk.default: chunk,
    }
    in_place = {
        aten.add_.Tensor: aten.add.Tensor, aten.sub_.Tensor: aten.sub.Tensor, aten.mul_.Tensor: aten.mul.Tensor,
        aten.div_.Tensor: aten.div.Tensor, aten.relu_.default: aten.relu.default,
        aten.hardswish_.default: aten.hardswish.default, aten.silu_.default: aten.silu.default,
        aten.hardtanh_.default: aten.hardtanh.default, aten.hardsigmoid_.default: aten.hardsigmoid.default,
        aten.sigmoid_.default: aten.sigmoid.default, aten.tanh_.default: aten.tanh.default,
    }
    table.update((op, functionalized(target)) for op, target in in_place.items())
    return table


@functools.lru_cache(maxsize=1)
def undone() -> frozenset[Any]:
    """Ops the retrace decomposes whose decomposition the copy path turns back into them: a
    ``reshape`` becomes a ``view`` (with a ``clone`` first for a non-contiguous input, which
    ONNX does not see), and decompose's ``views_as_reshapes`` makes it a ``reshape`` again."""
    import torch

    return frozenset({torch.ops.aten.reshape.default})


# -- helpers -----------------------------------------------------------------------------------


def _value(node: Any) -> Any:
    return getattr(node, "meta", {}).get("val")


def _shape(node: Any) -> tuple[Any, ...]:
    value = _value(node)
    return tuple(getattr(value, "shape", ()))


def _same_size(a: Any, b: Any) -> bool:
    return (a if isinstance(a, int) else a.node.expr) == (b if isinstance(b, int) else b.node.expr)


def _is_contiguous(value: Any) -> bool | None:
    """Whether a node's example value is contiguous; None when torch cannot say without a guard."""
    try:
        return bool(value.is_contiguous())
    except Exception:  # noqa: BLE001 - a symbolic stride torch cannot decide: the caller retraces
        return None


def _functional_alike(node: Any) -> bool:
    """Whether an in-place node computes what its functional op would, as the retrace's
    functionalization writes it: it mutates a fresh value no other node reads (not an input,
    not a view of one), and no operand would promote the result's dtype."""
    import torch

    mutated = node.args[0]
    if getattr(mutated, "op", None) != "call_function" or len(mutated.users) != 1:
        return False
    target = mutated.target
    if target is operator.getitem:  # an output of a multi-output op: fresh, as the op is functional
        target = mutated.args[0].target
    if not isinstance(target, torch._ops.OpOverload) or any(r.alias_info for r in target._schema.returns):
        return False
    value = _value(mutated)
    if value is None:
        return False
    for operand in (*node.args[1:], *node.kwargs.values()):
        other = _value(operand) if isinstance(operand, torch.fx.Node) else operand
        if isinstance(other, torch.Tensor) and other.dtype != value.dtype:
            return False
        if isinstance(other, float) and not value.dtype.is_floating_point:
            return False
    return True
