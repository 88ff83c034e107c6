"""Constants baked at the example size: a dim asked dynamic that the ONNX model computes with
a number fixed at capture (``int(h ** 0.5)``, ``.item()``, ``math.*``, a shape read through
``.tolist()``, ``avg_pool2d(kernel_size=int(x.shape[-1]))``).

Such a model accepts every size (its input dim stays symbolic) and is right only at the
example: onnxruntime raises in an Add/Reshape/Concat at another size, or the output has the
wrong shape. :func:`find_baked_constants` finds them in the translated model, before it is
saved, where torch wrote the shape FX recorded on each value (:mod:`.dim_expr`): a size that
follows a dynamic dim on one side meets a fixed number equal to that size at the example on
the other. The rules, each certain to fail or mislead at some other size:

- ``broadcast``: an elementwise op, a Concat or a MatMul/Gemm whose inputs line up a dim
  that follows a dynamic dim with a fixed dim > 1 equal to it at the example (a position
  embedding interpolated to Python ints and folded to a constant, an ``arange(int(n))``);
- ``reshape``: a Reshape (or Split) whose output no longer depends on a dynamic dim its input
  depends on (a window partition or ``view`` sized with Python ints);
- ``pool``: a pooling kernel equal to a spatial size that follows a dynamic dim (global
  pooling with a kernel read from the example's shape: MobileNetV1, FocalNet).

Each finding is a :class:`BakedConstant`: the ONNX node (as named in the saved model), the
number, the example sizes it equals, the FX node and source line that introduced it, and the
choices (a patch, a static axis, the range of sizes where the number still holds).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..axis import Axis
from ..frames import short_source, source_of_stack
from ..inputs import onnx_input_names
from ..node_metadata import STACK_TRACE_KEY, fx_name_of
from .baked_rules import Conflict, Finder
from .dim_expr import DimExpr

if TYPE_CHECKING:
    from ..artifacts import ExportArtifacts
    from ..dims import DimSpec
    from ..inputs import BoundInputs

__all__ = ["BakedConstant", "DynamicDim", "baked_case_cause", "baked_constants", "baked_constants_of",
           "dynamic_dims", "find_baked_constants"]

_MAX_FOUND = 8  # a model with more says so by its first few: one cause repeats per layer


@dataclass(frozen=True)
class DynamicDim:
    """An input axis the ONNX model declares symbolic: its ``dim_param`` (``symbol``), the
    axis, its size in the example inputs and the name the user gave it (a ``Dim`` or string
    name; None for AUTO / DYNAMIC)."""

    symbol: str
    axis: Axis
    example: int
    name: str | None = None

    @property
    def label(self) -> str:
        """``pixel_values.2 (height)``, or ``pixel_values.2`` for an unnamed dim."""
        return f"{self.axis.dotted} ({self.name})" if self.name else self.axis.dotted

    @property
    def term(self) -> str:
        """How expressions name it: its name, else ``pixel_values.shape[2]``."""
        return self.name or self.axis.label


@dataclass(frozen=True)
class BakedConstant:
    """Sizes fixed at the example in an ONNX model whose input dims are dynamic.

    ``node``/``op``: the ONNX node where the fixed sizes meet the dynamic ones (its name in the
    saved model: onnxruntime names it when it fails there). ``slot``: where they are
    (``input 1 (a [1, 30, 8] tensor)``, ``kernel_shape [12, 10]``, ``shape (input 1)``).
    ``expressions``: the sizes that follow the dynamic dims, in the user's terms
    (``height // 4 * (width // 4)``); ``groups``: for each, the fixed numbers that stand for it
    (their product equals it at ``examples``, the dims' example sizes; empty when none could be
    singled out).
    ``value``: the fixed shape or kernel they sit in. ``origin``/``origin_op``: the node that
    introduced them (None for a model weight of fixed size: ``kind`` ``weight``), with its FX
    node and the user's source line (``source``); ``used_at``: the source line of ``node``.
    ``holds_in``: per dim (the others at their example), the sizes around the example where the
    numbers still hold (``hi`` None: unbounded). ``patches``: names of model patches that fix
    it (none known yet). ``pinned_by``: the guard torch recorded when the size became a
    Python int, with its line, when known. ``confidence``: ``high``, or ``low`` when a small
    pooling kernel may equal a small example size by chance."""

    kind: str  # broadcast | reshape | pool | weight
    node: str
    op: str
    slot: str
    groups: tuple[tuple[int, ...], ...]  # per expression, the fixed numbers standing for it
    expressions: tuple[str, ...]
    examples: tuple[tuple[str, int], ...]
    axes: tuple[Axis, ...]
    names: tuple[str, ...] = ()  # the user's name of each of ``axes`` ('' for none)
    value: tuple[int, ...] = ()
    fx_node: str | None = None
    source: str | None = None
    origin: str | None = None
    origin_op: str | None = None
    used_at: str | None = None
    holds_in: tuple[tuple[str, int, int | None], ...] = ()
    patches: tuple[str, ...] = ()
    pinned_by: str | None = None
    confidence: str = "high"
    related: tuple[int, ...] = ()  # every size at the example the numbers derive from

    @property
    def numbers(self) -> tuple[int, ...]:
        """Every fixed number, in order."""
        return tuple(n for group in self.groups for n in group)

    @property
    def number(self) -> int | None:
        """The first fixed number (None when none could be singled out)."""
        return self.numbers[0] if self.numbers else None

    @property
    def nodes(self) -> tuple[str, ...]:
        """The ONNX nodes involved: where it is used and where it came from."""
        return tuple(dict.fromkeys(n for n in (self.node, self.origin) if n))

    @property
    def dims_text(self) -> str:
        """``pixel_values.2 (height), pixel_values.3 (width)``."""
        names = self.names or ("",) * len(self.axes)
        return ", ".join(f"{axis.dotted} ({name})" if name else axis.dotted for axis, name in zip(self.axes, names))

    @property
    def terms(self) -> tuple[str, ...]:
        """The dims as the user named them: ``height``, else ``x.shape[1]``."""
        names = self.names or ("",) * len(self.axes)
        return tuple(name or axis.label for axis, name in zip(self.axes, names))

    @property
    def choices(self) -> tuple[str, ...]:
        """What to do, in order: a patch (when one is known), a static axis, the range."""
        out = [f"apply the patch {name!r}" for name in self.patches]
        out.append(f"make {' and '.join(self.terms)} static")
        if self.holds_in:
            ranges = " and ".join(f"{label} in [{lo}, {'inf' if hi is None else hi}]" for label, lo, hi in self.holds_in)
            out.append(f"keep {ranges}")
        if not self.patches and self.kind != "weight":
            out.append("apply a patch that computes the size from the tensor's shape")
        return tuple(out)

    @property
    def message(self) -> str:
        """One sentence: which dims, which node holds which numbers and why, where from, what to do."""
        at = ", ".join(f"{label}={size}" for label, size in self.examples)
        said = ", ".join(f"{' x '.join(map(str, group))} (= {expr})" if group else expr
                         for group, expr in zip(self.groups, self.expressions))
        fixed = f"{said} at the example {at}" if self.numbers else f"sizes fixed at the example {at} instead of {said}"
        if self.kind == "weight":
            what = f"{self.op} `{self.node}` meets a weight of fixed size: {fixed}, in its {self.slot}"
        else:
            what = f"{self.op} `{self.node}` has {fixed} baked in its {self.slot}"
        where = ""
        if self.source:
            through = f" ({self.origin_op} `{self.origin}`)" if self.origin and self.origin != self.node else ""
            where = f", from {self.source}{through}"
        pinned = f"; torch pinned it with {self.pinned_by}" if self.pinned_by else ""
        low = " (low confidence: a small kernel may equal the example size by chance)" if self.confidence == "low" else ""
        verb = "is" if len(self.axes) == 1 else "are"
        return f"{self.dims_text} {verb} dynamic, but {what}{where}{pinned}{low}: {', or '.join(self.choices)}"

    def __str__(self) -> str:
        return self.message


# -- the dynamic dims of an export -----------------------------------------------------------------


def dynamic_dims(model: Any, bound: BoundInputs, spec: DimSpec | None = None,
                 input_names: Sequence[str] | None = None) -> tuple[DynamicDim, ...]:
    """Every input axis ``model`` declares symbolic, with its example size from ``bound`` and
    its name from ``spec``."""
    paths = {name: path for path, name in onnx_input_names(bound, input_names).items()}
    out: list[DynamicDim] = []
    for value in model.graph.inputs:
        path = paths.get(value.name)
        if path is None or value.shape is None:
            continue
        shape = bound.leaf(path).shape
        for index, dim in enumerate(value.shape):
            symbol = None if isinstance(dim, int) else getattr(dim, "value", None)
            if not isinstance(symbol, str) or index >= len(shape):
                continue
            policy = spec.policy(path, index) if spec is not None else None
            name = getattr(policy, "name", None)
            out.append(DynamicDim(symbol, Axis(path, index), int(shape[index]), name if isinstance(name, str) else None))
    return tuple(out)


# -- finding them ----------------------------------------------------------------------------------

def find_baked_constants(model: Any, dims: Sequence[DynamicDim], saved: Any = None) -> tuple[BakedConstant, ...]:
    """The sizes fixed at the example in ``model`` (the *translated* model: torch wrote FX's
    symbolic shapes on its values) where ``dims`` stay dynamic, one record per node that
    introduced them. ``saved``: the model as saved (optimized): nodes are named as there, a
    node it folded away says so."""
    if not dims:
        return ()
    finder = Finder(model, {d.symbol: d.example for d in dims})
    names = _SavedNames(saved)
    by_symbol = {d.symbol: d for d in dims}
    found: dict[Any, BakedConstant] = {}
    for conflict in finder.conflicts():
        origin = finder.origin(conflict)
        key = id(origin) if origin is not None else id(conflict.operand)
        if key in found:
            continue
        found[key] = _record(finder, conflict, origin, by_symbol, names)
        if len(found) >= _MAX_FOUND:
            break
    return tuple(found.values())


class _SavedNames:
    """A translated node's name in the saved model: its own, or that of the node there that
    produces its output (a rewrite rule may have replaced it), or marked as folded away."""

    def __init__(self, saved: Any) -> None:
        self.saved = saved
        self.nodes = {n.name for n in saved.graph} if saved is not None else set()
        self.producers = {v.name: n.name for n in saved.graph for v in n.outputs} if saved is not None else {}

    def __call__(self, node: Any) -> str:
        name = node.name or node.op_type
        if self.saved is None or name in self.nodes:
            return name
        for value in node.outputs:
            if value.name in self.producers:
                return self.producers[value.name]
        return f"{name}, folded by the optimizer"


def _record(finder: Finder, conflict: Conflict, origin: Any, by_symbol: Mapping[str, DynamicDim],
            names: _SavedNames) -> BakedConstant:
    node = conflict.node
    exprs, groups = finder.groups(conflict)
    symbols = {s for e in exprs for s in e.symbols}
    used = [d for s, d in by_symbol.items() if s in symbols]
    terms = {d.symbol: d.term for d in used}
    source_node = origin if origin is not None else node
    weight = origin is None
    pool_small = conflict.kind == "pool" and all(n <= 3 for group in groups for n in group)
    return BakedConstant(
        kind="weight" if weight else conflict.kind,
        node=names(node),
        op=node.op_type,
        slot=f"{conflict.slot}, {_initializer_name(conflict.operand)}" if weight else conflict.slot,
        groups=groups,
        expressions=tuple(e.renamed(terms) for e in exprs),
        examples=tuple((d.term, d.example) for d in used),
        axes=tuple(d.axis for d in used),
        names=tuple(d.name or "" for d in used),
        value=conflict.value,
        fx_node=fx_name_of(source_node),
        source=_source(source_node),
        origin=names(origin) if origin is not None else None,
        origin_op=origin.op_type if origin is not None else None,
        used_at=_source(node),
        holds_in=_holds_in(finder, conflict, used) if conflict.kind != "reshape" else tuple(
            (d.term, d.example, d.example) for d in used),
        confidence="low" if pool_small else "high",
        related=tuple(sorted(finder.related(exprs))),
    )


def _source(node: Any) -> str | None:
    """``idioms.py:21 in forward: pos = F.interpolate(...)``: the user's line the node came from."""
    return short_source(source_of_stack(node.metadata_props.get(STACK_TRACE_KEY)))


def _holds_in(finder: Finder, conflict: Conflict, dims: Sequence[DynamicDim]) -> tuple[tuple[str, int, int | None], ...]:
    """Per dim (the others at their example), the sizes around the example where every fixed
    number still equals the size it stands for."""
    pairs = [(e, n) for e, n in conflict.pairs if n is not None]
    if not pairs:
        return ()
    out = []
    for dim in dims:
        limit = max(4 * dim.example, dim.example + 64)
        lo = dim.example
        while lo > 1 and _holds(finder.examples, dim.symbol, lo - 1, pairs):
            lo -= 1
        hi: int | None = dim.example
        while hi is not None and _holds(finder.examples, dim.symbol, hi + 1, pairs):
            hi = hi + 1 if hi + 1 < limit else None
        out.append((dim.term, lo, hi))
    return tuple(out)


def _holds(examples: Mapping[str, int], symbol: str, size: int, pairs: Sequence[tuple[DimExpr, int]]) -> bool:
    """Every fixed number equals its size with ``symbol`` at ``size``, the others at the example."""
    sizes = {**examples, symbol: size}
    return all(e.value(sizes) == n for e, n in pairs)


def _initializer_name(value: Any) -> str:
    return f"weight {value.name!r}" if value is not None and value.name else "a weight"


# -- entry points for the pipeline and verify ----------------------------------------------------------


def baked_constants(translated: Any, saved: Any, bound: BoundInputs, spec: DimSpec | None = None,
                    input_names: Sequence[str] | None = None) -> tuple[BakedConstant, ...]:
    """:func:`find_baked_constants` for a stage: the dynamic dims read from ``saved``'s inputs
    and ``bound``; never raises (a model this cannot read has no finding)."""
    try:
        dims = dynamic_dims(saved, bound, spec, input_names)
        return find_baked_constants(translated, dims, saved)
    except Exception:  # noqa: BLE001 - a check that cannot run is no finding, never a failed stage
        return ()


def baked_constants_of(export: ExportArtifacts) -> tuple[BakedConstant, ...]:
    """The baked constants of an export, each with the guard torch recorded when the size
    became a Python int (its line) when one matches; never raises."""
    try:
        translated, saved = export.stage_output("translate"), export.stage_output("optimize")
    except Exception:  # noqa: BLE001 - no model: nothing baked in it
        return ()
    found = baked_constants(translated, saved, export.inputs, export.spec, export.options.input_names)
    if not found:
        return found
    try:
        guards = tuple(export.guards)
    except Exception:  # noqa: BLE001
        guards = ()
    return tuple(replace(b, pinned_by=_pinning_guard(b, guards)) for b in found)


_EQUALS = re.compile(r"==\s*(\d+)\s*$")


def _pinning_guard(baked: BakedConstant, guards: Sequence[Any]) -> str | None:
    """The first guard ``<size> == n`` torch recorded on one of ``baked``'s axes, with ``n``
    one of its numbers or of the sizes they derive from: where the size became a Python int."""
    wanted = set(baked.numbers) | set(baked.related)
    for guard in guards:
        found = _EQUALS.search(getattr(guard, "expression", "") or "")
        if found is None or int(found.group(1)) not in wanted or not set(getattr(guard, "axes", ())) & set(baked.axes):
            continue
        location, code = getattr(guard, "location", None), getattr(guard, "code", None)
        if location and baked.source and baked.source.startswith(f"{location} "):
            return f"`{guard.expression}` there"
        return f"`{guard.expression}`" + (f" at {location}: {code.strip()}" if location and code else "")
    return None


def baked_case_cause(baked: Sequence[BakedConstant], changed_axes: Iterable[Axis], error: str | None = None) -> str | None:
    """For a verify case that failed at sizes changing ``changed_axes`` (with onnxruntime's
    ``error`` text, when it raised): the baked constants that explain it, the one in the node
    onnxruntime names first."""
    axes = set(changed_axes)
    related = [b for b in baked if axes & set(b.axes)]
    if error:
        named = [b for b in related if any(f"'{n}'" in error or f"Name:'{n}'" in error for n in b.nodes)]
        related = named + [b for b in related if b not in named]
    if not related:
        return None
    more = f" (and {len(related) - 2} more baked constant(s))" if len(related) > 2 else ""
    return "; ".join(b.message for b in related[:2]) + more
