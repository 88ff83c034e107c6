"""Shape guards with provenance: what torch assumed about the input sizes, and which line of
the user's code made it assume it.

Every capture attempt records the guards torch's ShapeEnv added while tracing (see
``compat.record_shape_guards``); :func:`guards_of` turns those events into
:class:`Guard` records in the inputs' own terms::

    kind            expression                        symbolic          file:line  code
    guard           x.shape[0] > 2                    s77 > 2           m.py:9     if x.shape[0] > 2:
    equality        x.shape[0] == y.shape[0]          Eq(s77, s17)      m.py:11    z = x + y
    specialization  x.shape[1] == 4                   s27 == 4          m.py:12    if x.shape[1] == 4:
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .axis import Axis
from .frames import source_label
from .presentation import Presentable
from .compat import formats, pytree_keystr, tree_flatten_with_path
from .inputs import key_path_to_str

if TYPE_CHECKING:
    from .pipeline.records import CaptureAttempt
    from .inputs import BoundInputs

__all__ = [
    "symbols_of_axes",
    "EQUALITY",
    "GUARD",
    "KINDS",
    "RUNTIME_ASSERT",
    "SPECIALIZATION",
    "Guard",
    "Guards",
    "axes_in_text",
    "axis_of_source",
    "guards_from_events",
    "guards_of",
    "input_sources",
]

GUARD = "guard"  # a condition on sizes (x.shape[0] > 2, a divisibility, x.shape[0] != 1)
RUNTIME_ASSERT = "runtime_assert"  # checked when the program runs instead of at export
SPECIALIZATION = "specialization"  # a dim pinned to a constant (x.shape[0] == 4)
EQUALITY = "equality"  # two dims found equal (x.shape[0] == y.shape[0])
KINDS = (SPECIALIZATION, EQUALITY, GUARD, RUNTIME_ASSERT)

FRAME_COLUMNS = ["kind", "expression", "symbolic", "axes", "file", "line", "code", "function", "strategy"]


@dataclass(frozen=True)
class Guard:
    """One shape guard or runtime assert, with the user's line that introduced it.

    ``expression`` names inputs (``x.shape[0] > 2``), ``symbolic`` uses torch's symbols
    (``s77 > 2``). ``axes`` are every input axis involved, as :class:`~exporter.axis.Axis`
    (equal to ``(input, axis)`` pairs), including dims torch had already found equal to them. ``value`` is the constant of a specialization.
    ``file``/``line``/``function``/``code`` locate the innermost user frame; ``stack`` lists
    the user frames around it (outermost first, ``file:line in function``).
    """

    kind: str
    expression: str
    symbolic: str
    axes: tuple[Axis, ...] = ()
    symbols: tuple[str, ...] = ()
    value: int | None = None
    file: str | None = None
    line: int | None = None
    function: str | None = None
    code: str | None = None
    stack: tuple[str, ...] = ()
    strategy: str = ""
    expr: Any = field(default=None, compare=False, repr=False)  # torch's sympy boolean (``symbolic``)

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(Axis.parse(a) for a in self.axes))

    @property
    def source(self) -> str | None:
        """``file:line: code`` of the user line, or None when torch added it on its own."""
        if self.file is None:
            return None
        where = source_label(self.file, self.line)
        return f"{where}: {self.code}" if self.code else where

    @property
    def location(self) -> str | None:
        """Short ``basename:line``."""
        return None if self.file is None else source_label(self.file, self.line, short=True)

    def involves(self, path: str | Axis, axis: int | None = None) -> bool:
        """Whether the guard involves an axis: ``involves("x", 0)`` or ``involves(Axis("x", 0))``."""
        return Axis.of(path, axis) in self.axes

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expression": self.expression,
            "symbolic": self.symbolic,
            "axes": ", ".join(a.dotted for a in self.axes),
            "file": self.file,
            "line": self.line,
            "code": self.code,
            "function": self.function,
            "strategy": self.strategy,
        }

    def __str__(self) -> str:
        where = f"  at {self.location}: {self.code}" if self.file else ""
        return f"[{self.kind}] {self.expression}{where}"


@dataclass(frozen=True, repr=False)
class Guards(Presentable):
    """The guards of one capture attempt (the one that succeeded, else the one that failed)."""

    records: tuple[Guard, ...] = ()
    strategy: str | None = None

    def __iter__(self) -> Iterator[Guard]:
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)

    def __getitem__(self, index: int) -> Guard:
        return self.records[index]

    def for_axis(self, path: str | Axis, axis: int | None = None) -> tuple[Guard, ...]:
        """The guards involving one axis: ``for_axis("x", 0)`` or ``for_axis(Axis("x", 0))``."""
        key = Axis.of(path, axis)
        return tuple(g for g in self.records if g.involves(key))

    def for_axes(self, axes: Iterable[Any]) -> tuple[Guard, ...]:
        wanted = {Axis.parse(a) for a in axes}
        return tuple(g for g in self.records if wanted.intersection(g.axes))

    def of_kind(self, kind: str) -> tuple[Guard, ...]:
        return tuple(g for g in self.records if g.kind == kind)

    def to_frame(self) -> Any:
        """One row per guard: kind, expression, symbolic, axes, file, line, code, function, strategy."""
        import pandas as pd

        return pd.DataFrame([g.to_dict() for g in self.records], columns=FRAME_COLUMNS)


# -- sources --------------------------------------------------------------------------------

def input_sources(bound: BoundInputs) -> dict[str, str]:
    """Every way torch names a tensor input in a source, mapped to its leaf path: in
    non-strict mode ``L['<parameter>']`` followed by the pytree key path (``L['x']``,
    ``L['cache'][0]['key']``, ``L['nt'].b``, ``L['args'][0]`` for ``*args``, ``L['kw']['y']``
    for ``**kw``), the same under ``inputs`` (torch's dynamic_shapes messages), and in strict
    mode ``L['flat_args'][i]`` by pytree leaf position."""
    paths = set(bound.paths)
    out: dict[str, str] = {}
    for name, value in bound.by_signature().items():
        for key_path, _ in tree_flatten_with_path(value):
            path = key_path_to_str(name, key_path)
            if name == bound.var_keyword:  # **kw: its entries are inputs of their own name
                path = path[len(name) + 1 :]
            if path in paths:
                for source in formats.parameter_sources(name, pytree_keystr(key_path)):
                    out[source] = path
    for leaf in bound.leaves:
        out[formats.flat_arg_source(leaf.index)] = leaf.path
    return out


def axis_of_source(source: str, bound: BoundInputs, sources: dict[str, str] | None = None) -> Axis | None:
    """The :class:`~exporter.axis.Axis` a torch source names: ``<input source>.size()[i]`` or
    ``<input source>.shape[i]``, the input source being one of :func:`input_sources`
    (pass ``sources`` to reuse them). None for anything else (strides, unbacked values)."""
    split = formats.split_size_source(source)
    if split is None:
        return None
    sources = input_sources(bound) if sources is None else sources
    path = sources.get(split[0])
    return Axis(path, split[1]) if path is not None else None


def symbols_of_axes(events: Iterable[Any], bound: BoundInputs) -> dict[tuple[str, int], str]:
    """The torch symbol of every input axis recorded guard ``events`` name through their
    sources (``{("x", 1): "s70"}``), in the inputs' order."""
    sources = input_sources(bound)
    found: dict[tuple[str, int], str] = {}
    for event in events:
        for symbol, named in event.sources:
            for source in named:
                axis = axis_of_source(source, bound, sources)
                if axis is not None:
                    found.setdefault((axis.path, axis.index), str(symbol))
    order = list(bound.paths)
    return dict(sorted(found.items(), key=lambda item: (order.index(item[0][0]), item[0][1])))


def axes_in_text(text: str, bound: BoundInputs, sources: dict[str, str] | None = None) -> list[Axis]:
    """Every :class:`~exporter.axis.Axis` a torch message names by source, in order of appearance."""
    sources = input_sources(bound) if sources is None else sources
    found: list[Axis] = []
    for base, index in formats.size_sources_in(text, sources):
        axis = Axis(sources[base], index)
        if axis not in found:
            found.append(axis)
    return found


# -- events → records -----------------------------------------------------------------------


def _printer() -> Any:
    from sympy.printing.str import StrPrinter

    class GuardPrinter(StrPrinter):
        def _print_Equality(self, expr: Any) -> str:
            return f"{self._print(expr.lhs)} == {self._print(expr.rhs)}"

        def _print_Unequality(self, expr: Any) -> str:
            return f"{self._print(expr.lhs)} != {self._print(expr.rhs)}"

    return GuardPrinter()


def _is_linear_in_one_symbol(side: Any) -> bool:
    import sympy

    if len(side.free_symbols) != 1 or side.atoms(sympy.Function):
        return False
    symbol = next(iter(side.free_symbols))
    try:
        return sympy.Poly(side, symbol).degree() == 1
    except sympy.PolynomialError:
        return False


def _classify(prefix: str, expr: Any) -> tuple[str, int | None]:
    import sympy

    if prefix.startswith("runtime_assert"):
        return RUNTIME_ASSERT, None
    if isinstance(expr, sympy.Eq):
        sides = (expr.lhs, expr.rhs)
        for side, other in (sides, sides[::-1]):
            if isinstance(side, sympy.Symbol) and isinstance(other, sympy.Integer):
                return SPECIALIZATION, int(other)
        if all(_is_linear_in_one_symbol(side) for side in sides):
            return EQUALITY, None
    return GUARD, None


def _word_in(name: str, code: str | None) -> bool:
    return bool(code) and re.search(rf"(?<![\w.]){re.escape(name)}\b", code or "") is not None


def _record(event: Any, bound: BoundInputs, strategy: str, printer: Any, inputs: dict[str, str]) -> Guard:
    kind, value = _classify(event.prefix, event.expr)
    symbolic = printer.doprint(event.expr)
    frames = tuple(event.frames)
    file, line, function, code = frames[-1] if frames else (None, None, None, None)
    axes: list[Axis] = []
    labels: dict[str, str] = {}
    for symbol, sources in event.sources:
        candidates: list[Axis] = []
        for source in sources:
            found = axis_of_source(source, bound, inputs)
            if found is not None and found not in candidates:
                candidates.append(found)
        if not candidates:
            continue
        # Name the symbol after the input the user's line mentions, when it mentions one.
        named = next((c for c in candidates if _word_in(c.path.split(".")[0], code)), candidates[0])
        labels[symbol] = named.label
        axes.extend(c for c in candidates if c not in axes)
    expression = symbolic
    if labels:
        pattern = re.compile(r"\b(" + "|".join(re.escape(s) for s in sorted(labels, key=len, reverse=True)) + r")\b")
        expression = pattern.sub(lambda m: labels[m.group(1)], symbolic)
    order = {leaf.path: leaf.index for leaf in bound.leaves}
    axes.sort(key=lambda a: (order.get(a.path, 0), a.index))
    return Guard(
        kind=kind,
        expression=expression,
        symbolic=symbolic,
        axes=tuple(axes),
        symbols=tuple(s for s, _ in event.sources),
        value=value,
        file=file,
        line=line,
        function=function,
        code=code,
        stack=tuple(f"{f}:{n} in {fn}" for f, n, fn, _ in frames[:-1]),
        strategy=strategy,
        expr=event.expr,
    )


def guards_from_events(events: Iterable[Any], bound: BoundInputs, strategy: str = "") -> Guards:
    """:class:`Guards` from ``ShapeGuardEvent``s, deduplicated, in the order torch added them."""
    printer = _printer()
    inputs = input_sources(bound)
    seen: set[tuple[Any, ...]] = set()
    records = []
    for event in events:
        guard = _record(event, bound, strategy, printer, inputs)
        key = (guard.kind, guard.symbolic, guard.file, guard.line)
        if key in seen:
            continue
        seen.add(key)
        records.append(guard)
    return Guards(tuple(records), strategy or None)


def reported_attempt(attempts: Iterable[CaptureAttempt]) -> CaptureAttempt | None:
    """The attempt a session reports on: the one that succeeded, else the first failure."""
    attempts = tuple(attempts)
    return next((a for a in attempts if a.success), None) or next((a for a in attempts if a.error is not None), None)


def guards_of(attempts: Iterable[CaptureAttempt], bound: BoundInputs) -> Guards:
    """The guards of the attempt that produced the program (or of the first failed one)."""
    attempt = reported_attempt(attempts)
    if attempt is None:
        return Guards()
    return guards_from_events(attempt.guards, bound, attempt.strategy)
