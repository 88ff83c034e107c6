"""The rules that find sizes fixed at the example in a translated ONNX model (see
:mod:`exporter.shapes.baked`): where a dim that follows a dynamic input dim (torch's symbolic
shape on a value, :mod:`.dim_expr`) meets a fixed number equal to it at the example, in a
broadcast, a Concat, a MatMul/Gemm, an Expand, a Reshape/Split that loses it, or a pooling
kernel; and the node up the producers that introduced the fixed number."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .dim_expr import DimExpr, parse_dim

__all__ = ["Conflict", "Finder"]

_BROADCAST = frozenset({
    "Add", "Sub", "Mul", "Div", "Pow", "Mod", "Where", "Equal", "Less", "LessOrEqual", "Greater",
    "GreaterOrEqual", "And", "Or", "Xor", "Max", "Min", "Sum", "Mean", "PRelu", "BitShift",
    "BitwiseAnd", "BitwiseOr", "BitwiseXor",
})
_POOLS = frozenset({"AveragePool", "MaxPool", "LpPool"})
# The inputs that carry data (not a shape, axes or sizes) of ops that have both: the walk back
# to where a fixed number came from follows these only.
_DATA_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (0,), "Expand": (0,), "Tile": (0,), "Resize": (0,), "Upsample": (0,), "Slice": (0,),
    "Pad": (0,), "Split": (0,), "Squeeze": (0,), "Unsqueeze": (0,), "ReduceMean": (0,), "ReduceSum": (0,),
    "ReduceMax": (0,), "ReduceMin": (0,), "TopK": (0,), "Gather": (0,), "ConstantOfShape": (), "Range": (),
}

Dims = tuple[Any, ...]  # per axis: int, DimExpr, or None (unknown)


@dataclass(frozen=True)
class Conflict:
    """Where fixed numbers meet the dynamic sizes they stand for, at one node."""

    kind: str
    node: Any
    slot: str
    pairs: tuple[tuple[DimExpr, int | None], ...]  # (the dynamic size, the fixed number standing for it)
    operand: Any = None  # the input value holding the fixed numbers, when it is one
    value: tuple[int, ...] = ()


class Finder:
    """The rules over one translated model, with the example size of each dynamic dim by its
    ``dim_param`` (``examples``)."""

    def __init__(self, model: Any, examples: Mapping[str, int]) -> None:
        self.model = model
        self.examples = dict(examples)
        self.alternates = [{s: 2 * n + 1 for s, n in self.examples.items()},
                           {s: 3 * n + 2 for s, n in self.examples.items()},
                           {s: n + 1 for s, n in self.examples.items()}]
        self._shapes: dict[int, Dims | None] = {}

    def shape(self, value: Any) -> Dims | None:
        if value is None:
            return None
        key = id(value)
        if key not in self._shapes:
            self._shapes[key] = self._read_shape(value)
        return self._shapes[key]

    def _read_shape(self, value: Any) -> Dims | None:
        shape = value.shape
        if shape is None:
            return None
        out: list[Any] = []
        for dim in shape:
            if isinstance(dim, int):
                out.append(dim)
                continue
            text = getattr(dim, "value", None)
            expr = parse_dim(text) if isinstance(text, str) else None
            out.append(expr if expr is not None and expr.symbols <= self.examples.keys() else None)
        return tuple(out)

    def at_example(self, expr: DimExpr) -> int | None:
        return expr.value(self.examples)

    def varies(self, expr: DimExpr) -> bool:
        """The dim follows a dynamic dim: it takes another value at some other size."""
        here = self.at_example(expr)
        return here is not None and any(expr.value(alt) not in (None, here) for alt in self.alternates)

    def matches(self, dim: Any, number: Any) -> bool:
        """``dim`` follows a dynamic dim and equals the fixed ``number`` (> 1) at the example."""
        return (isinstance(dim, DimExpr) and isinstance(number, int) and number > 1
                and self.at_example(dim) == number and self.varies(dim))

    def related(self, exprs: Iterable[DimExpr]) -> set[int]:
        """The sizes at the example of ``exprs`` and of their parts that follow a dynamic dim."""
        values = {self.at_example(p) for e in exprs for p in e.parts() if self.varies(p)}
        return {v for v in values if v is not None and v > 1}

    # -- rules --------------------------------------------------------------------------------
    def conflicts(self) -> Iterable[Conflict]:
        for node in self.model.graph:
            if node.domain not in ("", "ai.onnx"):
                continue
            op = node.op_type
            found: Conflict | None = None
            if op in _BROADCAST:
                found = self._aligned(node, list(enumerate(node.inputs)), right=True)
            elif op == "Concat":
                axis = node.attributes.get("axis")
                found = self._aligned(node, list(enumerate(node.inputs)), right=False,
                                      skip_axis=axis.value if axis is not None else 0)
            elif op in ("MatMul", "Gemm"):
                found = self._matmul(node)
            elif op == "Expand":
                found = self._expand(node)
            elif op in ("Reshape", "Split"):
                found = self._lost(node)
            elif op in _POOLS:
                found = self._pool(node)
            if found is not None:
                yield found

    def _aligned(self, node: Any, inputs: list[tuple[int, Any]], right: bool,
                 skip_axis: int | None = None, matrices: bool = False) -> Conflict | None:
        """Inputs whose dims line up (from the right when broadcasting): a fixed dim of one
        equal at the example to a dynamic dim of another. ``matrices``: only the batch dims of
        a MatMul line up, not its last two (``[b, h, seq, 16] @ [b, h, 16, seq]`` is fine)."""
        shapes = [(i, v, self.shape(v)) for i, v in inputs if v is not None]
        if matrices:
            shapes = [(i, v, s[:-2] if s is not None else None) for i, v, s in shapes]
        known = [(i, v, s) for i, v, s in shapes if s is not None]
        if len(known) < 2:
            return None
        rank = max(len(s) for _, _, s in known)
        for i, v, s in known:
            pairs = []
            for position, number in enumerate(s):
                aligned = position + (rank - len(s) if right else 0)
                if skip_axis is not None and aligned == skip_axis % rank:
                    continue
                others = [o[aligned - (rank - len(o) if right else 0)] for j, _, o in known if j != i
                          and 0 <= aligned - (rank - len(o) if right else 0) < len(o)]
                expr = next((e for e in others if self.matches(e, number)), None)
                if expr is not None:
                    pairs.append((expr, number))
            if pairs:
                whole = self.shape(v) or s
                return Conflict("broadcast", node, f"input {i} (a {_shape_text(whole)} tensor)", tuple(pairs), v,
                                _ints(whole))
        return None

    def _matmul(self, node: Any) -> Conflict | None:
        if len(node.inputs) < 2:
            return None
        a, b = self.shape(node.inputs[0]), self.shape(node.inputs[1])
        if not a or not b:
            return None
        if node.op_type == "Gemm":
            trans_a, trans_b = node.attributes.get("transA"), node.attributes.get("transB")
            ka = a[0] if trans_a is not None and trans_a.value else a[-1]
            kb = b[-1] if trans_b is not None and trans_b.value else b[0]
        else:
            ka, kb = a[-1], (b[-2] if len(b) >= 2 else b[0])
        for expr, number, index in ((ka, kb, 1), (kb, ka, 0)):
            if self.matches(expr, number):
                value = node.inputs[index]
                shape = self.shape(value)
                return Conflict("broadcast", node, f"input {index} (a {_shape_text(shape)} tensor)",
                                 ((expr, number),), value, _ints(shape or ()))
        if len(a) > 2 and len(b) > 2:
            return self._aligned(node, [(0, node.inputs[0]), (1, node.inputs[1])], right=True, matrices=True)
        return None

    def _expand(self, node: Any) -> Conflict | None:
        data = self.shape(node.inputs[0]) if node.inputs else None
        out = self.shape(node.outputs[0])
        if not data or not out:
            return None
        pairs = [(data[-k], out[-k]) for k in range(1, min(len(data), len(out)) + 1) if self.matches(data[-k], out[-k])]
        return Conflict("broadcast", node, "shape (input 1)", tuple(pairs[::-1]), None, _ints(out)) if pairs else None

    def _lost(self, node: Any) -> Conflict | None:
        """A Reshape / Split whose outputs no longer follow a dynamic dim their input follows:
        their sizes were fixed at the example."""
        data = self.shape(node.inputs[0]) if node.inputs else None
        outs = [self.shape(v) for v in node.outputs]
        if not data or not outs or any(d is None for d in data):
            return None
        if any(o is None or any(d is None for d in o) for o in outs):
            return None
        kept = {s for o in outs for d in o if isinstance(d, DimExpr) for s in d.symbols}  # type: ignore[union-attr]
        lost = [d for d in data if isinstance(d, DimExpr) and self.varies(d) and not d.symbols <= kept]
        if not lost:
            return None
        if node.op_type == "Reshape":
            fixed = _ints(outs[0] or ())
            slot = "shape (input 1)"
        else:
            axis = _axis(node, len(data))
            fixed = tuple(o[axis] for o in outs if o is not None and isinstance(o[axis], int))
            slot = "split sizes"
        return Conflict("reshape", node, slot, tuple((e, None) for e in lost), None, fixed)

    def _pool(self, node: Any) -> Conflict | None:
        kernel = node.attributes.get("kernel_shape")
        data = self.shape(node.inputs[0]) if node.inputs else None
        if kernel is None or not data or len(data) < 3:
            return None
        pairs = tuple((dim, int(k)) for k, dim in zip(kernel.value, data[2:]) if self.matches(dim, int(k)))
        if not pairs:
            return None
        sizes = tuple(int(k) for k in kernel.value)
        return Conflict("pool", node, f"kernel_shape {list(sizes)}", pairs, None, sizes)

    # -- which fixed numbers stand for which sizes ---------------------------------------------------
    def groups(self, conflict: Conflict) -> tuple[tuple[DimExpr, ...], tuple[tuple[int, ...], ...]]:
        """The sizes the fixed numbers stand for (the smallest part of each dynamic expression
        equal to its number) and, for each, those numbers. For a Reshape: the run of fixed
        output sizes whose product is a lost size at the example (``[b, 3, 4, 2, 4, c]`` from
        ``[b, h, w, c]``: 3 x 4 = h, 4 x 2 = w)."""
        if conflict.kind != "reshape":
            return (tuple(self._part(e, n) for e, n in conflict.pairs),
                    tuple((n,) if n is not None else () for _, n in conflict.pairs))
        groups: list[tuple[int, ...]] = []
        for expr, _ in conflict.pairs:
            target = self.at_example(expr)
            groups.append((_product_run(conflict.value, target) or ()) if target is not None else ())
        return tuple(e for e, _ in conflict.pairs), tuple(groups)

    def _part(self, expr: DimExpr, number: int | None) -> DimExpr:
        return next((p for p in expr.parts() if number is not None and self.at_example(p) == number and self.varies(p)),
                    expr)

    # -- where the fixed numbers came from ---------------------------------------------------------
    def origin(self, conflict: Conflict) -> Any:
        """The node that introduced the fixed numbers: for a fixed input, the first node up its
        producers whose data inputs do not hold those sizes yet; the node itself otherwise. None:
        the numbers are the shape of a model weight."""
        if conflict.operand is None:
            return conflict.node
        wanted = self.related(e for e, _ in conflict.pairs)
        value = conflict.operand
        seen: set[int] = set()
        while id(value) not in seen and len(seen) < 64:
            seen.add(id(value))
            node = value.producer()
            if node is None:
                return None  # a graph initializer: a weight of fixed size
            slots = _DATA_INPUTS.get(node.op_type, range(len(node.inputs)))
            upstream = [node.inputs[i] for i in slots if i < len(node.inputs) and node.inputs[i] is not None]
            holding = [v for v in upstream if wanted & set(_ints(self.shape(v) or ()))]
            if not holding:
                return node
            value = holding[0]
        return value.producer()


def _product_run(numbers: Sequence[int], target: int) -> tuple[int, ...] | None:
    """The first run of consecutive ``numbers`` (each > 1) whose product is ``target``."""
    for start in range(len(numbers)):
        product = 1
        for end in range(start, len(numbers)):
            if numbers[end] <= 1:
                break
            product *= numbers[end]
            if product == target:
                return tuple(numbers[start:end + 1])
            if product > target:
                break
    return None



def _axis(node: Any, rank: int) -> int:
    attribute = node.attributes.get("axis")
    return (attribute.value if attribute is not None else 0) % rank


def _ints(dims: Sequence[Any]) -> tuple[int, ...]:
    return tuple(d for d in dims if isinstance(d, int))


def _shape_text(shape: Dims | None) -> str:
    if shape is None:
        return "?"
    return "[" + ", ".join(str(d) if d is not None else "?" for d in shape) + "]"
