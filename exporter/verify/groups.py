"""Dim groups (input axes that share one size) and the sizes a sweep tries for them."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..compat import formats
from ..axis import Axis
from ..dims import Dim
from ..shapes.solve import holds_at


@dataclass(frozen=True)
class DimGroup:
    """Input axes that must keep equal sizes, and what was asked of and obtained for them.

    ``symbol`` is the torch symbol (``s77``) when the program kept the dim dynamic, None when
    capture specialized it. ``onnx_dims`` holds the ONNX input dim of each axis: a ``dim_param``
    string, an int ``dim_value``, or None when the input is missing from the ONNX model.

    ``derived_expr``: when the model's guards tie this group to others (GPT-2 reads its
    attention mask over the cache and the new tokens: ``total = past_seq + seq``), that sympy
    expression over their labels; the sweep sizes the group from them instead of on its own,
    and ``derived_guards`` names the guards that say so. None for a group swept on its own.
    """

    label: str
    axes: tuple[Axis, ...]
    requested: str
    example: int
    requested_range: tuple[int, int | None]
    symbol: str | None
    obtained_range: tuple[int, int | None]
    onnx_dims: tuple[str | int | None, ...]
    sizes: tuple[int, ...] = ()
    causes: tuple[str, ...] = ()
    cap: int | None = None  # the largest size a guard allows (``Min(128, s)``), above the example
    symbols: tuple[str, ...] = ()  # every torch symbol of the axes (moved together: one size)
    derived_guards: tuple[str, ...] = ()
    derived_expr: Any = None  # sympy, over symbols named by the group labels
    # Sizes near the example chosen from the remainder/divisibility guards torch recorded
    # (``Mod(h, 4) == 0``): ``(kind, size, guard text)``, see :func:`guard_sizes`.
    guard_sizes: tuple[tuple[str, int, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(Axis.parse(a) for a in self.axes))

    def names(self, key: Any) -> bool:
        """Whether ``key`` names this group: its label (a Dim name, ``x.shape[0]``) or one of
        its axes in any form :meth:`Axis.parse` reads (``x.0``, ``("x", 0)``, an ``Axis``)."""
        if isinstance(key, str) and key == self.label:
            return True
        try:
            return Axis.parse(key) in self.axes
        except ValueError:
            return False

    @property
    def derived(self) -> str | None:
        """The expression this group is sized from (``"past_seq + seq"``), or None."""
        return None if self.derived_expr is None else str(self.derived_expr)

    @property
    def derived_from(self) -> tuple[str, ...]:
        """Labels of the groups a derived group's size follows from (``("past_seq", "seq")``)."""
        if self.derived_expr is None:
            return ()
        import sympy

        return tuple(s.name for s in sorted(self.derived_expr.free_symbols, key=sympy.default_sort_key))

    def derived_size(self, sizes: Mapping[str, int]) -> int:
        """A derived group's size from the sizes of the groups it follows, by label
        (``KeyError`` for one missing)."""
        return int(self.derived_expr.subs({s: sizes[s.name] for s in self.derived_expr.free_symbols}))

    @property
    def derived_text(self) -> str | None:
        """``total = past_seq + seq (from the model's guards)``, or None."""
        return None if self.derived is None else f"{self.label} = {self.derived} (from the model's guards)"

    @property
    def specialized(self) -> bool:
        """The program fixed this dim to the example size."""
        return self.symbol is None

    @property
    def auto_static(self) -> bool:
        """AUTO asked torch to decide, and torch made the dim static: the ONNX model declares the
        example size (onnxruntime refuses any other), which is what AUTO permits, not an error."""
        return (self.specialized and self.requested == "AUTO"
                and all(isinstance(d, int) for d in self.onnx_dims) and bool(self.onnx_dims))

    @property
    def onnx_accepts_any_size(self) -> bool:
        return all(isinstance(d, str) for d in self.onnx_dims)

    def in_obtained_range(self, size: int) -> bool:
        lo, hi = self.obtained_range
        return size >= lo and (hi is None or size <= hi)

    @property
    def axes_text(self) -> str:
        return ", ".join(a.label for a in self.axes)

    def describe_range(self, which: str = "obtained") -> str:
        lo, hi = self.obtained_range if which == "obtained" else self.requested_range
        return f"[{lo}, {'inf' if hi is None else hi}]"


def _range_of(value_range: Any) -> tuple[int, int | None]:
    def as_int(bound: Any) -> int | None:
        try:
            return int(bound)
        except Exception:  # noqa: BLE001 - sympy oo / torch int_oo: unbounded
            return None

    lo = as_int(getattr(value_range, "lower", 0))
    return (0 if lo is None else lo, as_int(getattr(value_range, "upper", None)))


def onnx_input_dims(model: Any) -> dict[str, tuple[str | int | None, ...]]:
    """ONNX input dims by input name: dim_param string, dim_value int, or None if unknown."""
    out: dict[str, tuple[str | int | None, ...]] = {}
    for value in model.graph.inputs:
        shape = value.shape
        if shape is None:
            continue
        dims: list[str | int | None] = []
        for dim in shape:
            if isinstance(dim, int):
                dims.append(dim)
            else:
                dims.append(getattr(dim, "value", None))
        out[value.name] = tuple(dims)
    return out


def input_dims_by_path(session: Any, model: Any) -> dict[str, tuple[str | int | None, ...]]:
    """:func:`onnx_input_dims` keyed by input path (``x``, ``cache.0.key``) instead of ONNX
    name, which differs when the ``input_names`` option renamed the inputs."""
    dims = onnx_input_dims(model)
    names = getattr(session, "onnx_input_names", None) or {}
    return {path: dims[name] for path, name in names.items() if name in dims} if names else dims


def _guards(session: Any, program: Any) -> list[tuple[str, str, str | None, tuple | None]]:
    """Guards as ``(expression, text to match, user source or None, axes or None)``: the
    session's guards (with the user's line), else the program's guard expressions."""
    from .. import compat

    out = [
        (guard.expression, f"{guard.expression} {guard.symbolic}", _short_source(guard), guard.axes or None)
        for guard in session.guards
    ]
    return out or [(code, code, None, None) for code in compat.guards_code(program)]


def _short_source(guard: Any) -> str | None:
    """``modeling_gpt2.py:581: attention_mask = attention_mask.view(...)``: the guard's line,
    its file by base name, its code cut at 60 characters."""
    if guard.location is None:
        return None
    code = (guard.code or "").strip()
    return f"{guard.location}: {code[:57] + '...' if len(code) > 60 else code}" if code else guard.location


def _source_patterns(sources: Mapping[str, str], path: str, axis: int) -> list[str]:
    """How torch guard text names ``path.shape[axis]``: by each of its torch sources
    (``L['x'].size()[0]``, ``L['flat_args'][0].size()[0]``, ``guards.input_sources``), and by
    path (``x.size()[0]``, ``x.shape[0]``)."""
    keyed = [source for source, leaf in sources.items() if leaf == path]
    return [formats.size_source(base, axis) for base in (*keyed, path)] + [Axis(path, axis).label]


def _group_causes(session: Any, program: Any, axes: Sequence[tuple[str, int]], symbol: str | None) -> tuple[str, ...]:
    from ..guards import input_sources

    causes: list[str] = []
    sources = input_sources(session.inputs)
    patterns = [p for path, axis in axes for p in _source_patterns(sources, path, axis)]
    for expr, text, source, guard_axes in _guards(session, program):
        if guard_axes is not None:
            mentions = bool(set(guard_axes) & set(axes))
        else:
            mentions = any(p in text for p in patterns) or (
                symbol is not None and re.search(rf"\b{re.escape(symbol)}\b", text) is not None
            )
        if mentions:
            causes.append(f"guard {expr}" + (f" at {source}" if source else ""))
    return tuple(dict.fromkeys(causes))


def policy_text(policy: Any) -> str:
    return repr(policy)


def _merged(groups: dict[Any, list[Any]], bound: Any, independent: bool) -> list[tuple[list[Any], list[Any]]]:
    """Groups that callers size together, merged: one Dim name (a string name torch kept as
    separate symbols, as torch.onnx.export does), and, unless ``independent``, AUTO / DYNAMIC
    axes of different inputs at the same axis index with the same example size (BERT's
    ``input_ids`` and ``attention_mask`` batch axes, which torch keeps apart when no guard
    equates them). Static (specialized) axes are never merged."""
    keys = list(groups)
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        parent[find(j)] = find(i)

    by_name: dict[str, int] = {}
    by_role: dict[tuple[int, int], list[int]] = {}
    for i in range(len(keys)):
        for entry in groups[keys[i]]:
            if isinstance(entry.policy, Dim):
                if entry.policy.name in by_name:
                    union(by_name[entry.policy.name], i)
                else:
                    by_name[entry.policy.name] = i
            elif not independent and keys[i][0] == "symbol":
                size = bound.leaf(entry.path).shape[entry.axis]
                for j in by_role.setdefault((entry.axis, size), []):
                    if all(e.path != entry.path for e in groups[keys[j]]):
                        union(j, i)
                        break
                else:
                    by_role[(entry.axis, size)].append(i)
    merged: dict[int, tuple[list[Any], list[Any]]] = {}
    for i, key in enumerate(keys):
        root = merged.setdefault(find(i), ([], []))
        root[0].append(key)
        root[1].extend(groups[key])
    return list(merged.values())


def dim_groups(
    session: Any, program: Any | None = None, onnx_model: Any | None = None, *, independent: bool = False
) -> tuple[DimGroup, ...]:
    """The dim groups of a session: every axis the user asked not to be static, grouped by
    the torch symbol it got (or by user Dim name), with requested and obtained ranges. Axes
    callers size together move together (see :func:`_merged`), and a group the model's guards
    tie to others is ``derived`` from them (see :mod:`exporter.verify.derived`);
    ``independent=True`` keeps one group per torch symbol, none derived."""
    from ..program_symbols import symbol_of

    program = program if program is not None else session.exported_program
    onnx_dims = input_dims_by_path(session, onnx_model if onnx_model is not None else session.stage_output("optimize"))
    symbols = symbol_of(program, session.inputs)
    ranges = {str(sym): _range_of(vr) for sym, vr in program.range_constraints.items()}
    from ..shapes.solve import axis_ranges

    caps = axis_ranges(session.guards, session.inputs)

    groups: dict[Any, list[Any]] = {}
    for entry in session.spec:
        symbol = symbols.get((entry.path, entry.axis))
        if symbol is not None and symbol.isidentifier():
            key: Any = ("symbol", symbol)
        elif symbol is not None and not symbol.lstrip("-").isdigit():
            continue  # a derived expression such as 2*s0: sized from its symbols
        elif isinstance(entry.policy, Dim):
            key = ("name", entry.policy.name)
        else:
            key = ("axis", entry.path, entry.axis)
        groups.setdefault(key, []).append(entry)

    out: list[DimGroup] = []
    for keys, entries in _merged(groups, session.inputs, independent):
        axes = tuple(Axis(e.path, e.axis) for e in entries)
        named = [e.policy for e in entries if isinstance(e.policy, Dim)]
        example = session.inputs.leaf(entries[0].path).shape[entries[0].axis]
        lo = max((d.min for d in named if d.min is not None), default=1)
        his = [d.max for d in named if d.max is not None]
        requested_range = (lo, min(his) if his else None)
        symbols = tuple(key[1] for key in keys if key[0] == "symbol")
        symbol = symbols[0] if symbols else None
        obtained = (example, example)
        if symbol:  # the intersection of the ranges of every symbol moved together
            found_ranges = [ranges.get(sym, (0, None)) for sym in symbols]
            uppers = [r[1] for r in found_ranges if r[1] is not None]
            obtained = (max(r[0] for r in found_ranges), min(uppers) if uppers else None)
        cap = None
        if symbol:  # Min/Max/<= guards torch keeps out of range_constraints cap the range
            for axis in axes:
                found = caps.get(axis)
                # A guard pinning a dim that stayed symbolic (``s == 1`` on a size-1 example) is
                # no cap: it is a branch taken on the example, which the sweep must check.
                if found is not None and not found.is_static:
                    lo_cap = max(obtained[0], found.min)
                    hi_cap = obtained[1] if found.max is None else found.max if obtained[1] is None else min(obtained[1], found.max)
                    obtained = (lo_cap, hi_cap)
                    if found.max is not None and found.max > example:
                        cap = found.max if cap is None else min(cap, found.max)
        label = named[0].name if named else axes[0].label
        requested = ", ".join(dict.fromkeys(policy_text(e.policy) for e in entries))
        dims = tuple(
            (onnx_dims[e.path][e.axis] if e.path in onnx_dims and e.axis < len(onnx_dims[e.path]) else None)
            for e in entries
        )
        out.append(
            DimGroup(
                label=label,
                axes=axes,
                requested=requested,
                example=example,
                requested_range=requested_range,
                symbol=symbol,
                symbols=symbols,
                obtained_range=obtained,
                onnx_dims=dims,
                causes=_group_causes(session, program, axes, symbol),
                cap=cap,
            )
        )
    if not independent:
        from .derived import derive_groups

        out = list(derive_groups(out, tuple(session.guards), session.inputs))
    return tuple(_with_guard_sizes(out, tuple(session.guards)))


_MAX_GUARDS = 24  # remainder guards read per group (each is evaluated at up to 16 sizes)
_MODULAR = frozenset({"Mod", "PythonMod", "FloorDiv", "CleanDiv", "floor", "ceiling"})


def _modular_divisors(expr: Any) -> set[int]:
    """The integer divisors of the remainder / floor-division terms of a guard (``Mod(s, 4)``,
    ``s//4``), empty when it has none."""
    import sympy

    found: set[int] = set()
    for node in sympy.preorder_traversal(expr):
        if getattr(getattr(node, "func", None), "__name__", "") in _MODULAR:
            for arg in getattr(node, "args", ())[1:]:
                if getattr(arg, "is_Integer", False) and 1 < int(arg) <= 1024:
                    found.add(int(arg))
            if not found and getattr(node, "func", None) is not None:
                found.add(2)  # floor(s/2): a rounding term; try both parities
    return found


def _guard_text(guard: Any) -> str:
    expression = guard.expression if len(guard.expression) <= 70 else guard.expression[:67] + "..."
    return f"{expression}" + (f" at {guard.location}" if getattr(guard, "location", None) else "")


def guard_sizes(group: DimGroup, groups: Sequence[DimGroup], guards: Sequence[Any], limit: int = 3) -> tuple[tuple[str, int, str], ...]:
    """Sizes near the example that keep and that break the remainder/divisibility guards torch
    recorded for ``group`` (Swin's window partition: ``Mod(h, 4) == 0``, no padding when
    ``(h//4) % 4 == 0``). torch checked the program only where those guards hold: the ONNX
    model keeps the branch the example took, so a size in range that breaks one (height 40 with
    a window of 4 patches of 4) is where it is wrong while eager pads and runs. Returns
    ``(kind, size, guard)``: ``guards hold`` (the nearest size other than the example where
    every guard of the group holds) and up to ``limit`` ``breaks guard`` sizes, one per guard,
    each inside the requested and obtained ranges. Other groups stay at their example."""
    if group.specialized or group.derived is not None or not group.symbols:
        return ()
    mine = set(group.symbols)
    relevant = [g for g in guards if getattr(g, "expr", None) is not None
                and mine & {s.name for s in g.expr.free_symbols}]
    modular = [(g, _modular_divisors(g.expr)) for g in relevant]
    modular = [(g, d) for g, d in modular if d][:_MAX_GUARDS]
    if not modular:
        return ()
    if len(relevant) > 2 * _MAX_GUARDS:  # a model with hundreds of guards: keep the cost bounded
        relevant = [g for g, _ in modular]
    divisors = sorted({d for _, ds in modular for d in ds})
    product = 1
    for d in divisors:
        product = min(product * d, 256)
    deltas = sorted({1, 2, 3, *(j * d for d in {*divisors, product} for j in (1, 2, 3))})
    pool = sorted({group.example + sign * d for d in deltas for sign in (1, -1)},
                  key=lambda n: (abs(n - group.example), -n))
    lo = max(group.requested_range[0], group.obtained_range[0], 1)
    his = [h for h in (group.requested_range[1], group.obtained_range[1]) if h is not None]
    pool = [n for n in pool if n >= lo and (not his or n <= min(his)) and n != group.example][:16]
    base = {sym: g.example for g in groups for sym in g.symbols}

    def at(size: int) -> dict[str, int]:
        return {**base, **{sym: size for sym in group.symbols}}

    out: list[tuple[str, int, str]] = []
    for size in pool:
        if all(holds_at(g.expr, at(size)) is not False for g in relevant):
            out.append(("guards hold", size, "every guard of the group"))
            break
    used = {size for _, size, _ in out}
    for guard, _ in modular:
        if len(out) >= limit + 1:
            break
        if holds_at(guard.expr, base) is not True:
            continue
        size = next((n for n in pool if holds_at(guard.expr, at(n)) is False), None)
        if size is not None and size not in used:
            used.add(size)
            out.append(("breaks guard", size, _guard_text(guard)))
    return tuple(out)


def _with_guard_sizes(groups: Sequence[DimGroup], guards: Sequence[Any]) -> list[DimGroup]:
    from dataclasses import replace

    out = []
    for group in groups:
        try:
            found = guard_sizes(group, groups, guards)
        except Exception:  # noqa: BLE001 - guard sizes are extra cases, never a failure
            found = ()
        out.append(replace(group, guard_sizes=found) if found else group)
    return out


def resolve_group(groups: Sequence[DimGroup], key: Any, what: str = "dim") -> DimGroup:
    """The group ``key`` names (see :meth:`DimGroup.names`); ``ValueError`` naming the groups
    when none does."""
    for group in groups:
        if group.names(key):
            return group
    if not groups:
        raise ValueError(f"unknown {what} {key!r}: no input dim is dynamic")
    known = [g.label for g in groups]
    raise ValueError(f"unknown {what} {key!r}; dim groups: {known} (or one of their axes, e.g. {groups[0].axes[0].dotted!r})")


def sizes_by_label(groups: Sequence[DimGroup], sizes: Mapping[Any, Any], what: str = "dim") -> dict[str, Any]:
    """``sizes`` keyed by group label, whatever names the groups (a label, an ``Axis``, ``"x.0"``)."""
    return {resolve_group(groups, key, what).label: value for key, value in sizes.items()}


_KINDS = ("min", "1", "2", "odd", "near", "larger", "scaled", "max", "past cap")


def _candidates(group: DimGroup, max_size: int) -> dict[str, int]:
    """Candidate sizes by kind for one group, inside its requested range."""
    lo, hi = group.requested_range
    cap = group.cap
    past_cap = None
    if cap is not None and (hi is None or cap < hi) and cap > group.example:
        # A guard caps the dim (position embeddings): generated sizes stay inside the cap, and
        # one size just past it tells the model's own limit (eager refuses it: noted, not a
        # failure) from a branch the ONNX model dropped (eager runs it: compared).
        hi, past_cap = cap, cap + 1
    top = hi if hi is not None else max_size
    example = group.example
    odd = next((n for n in range(3, top + 1, 2) if n != example and n >= lo), None)
    larger = max(2 * example, example + 4)
    if hi is not None and larger > hi:
        larger = hi if hi > example else None
    found = {
        "min": lo,
        "1": 1,
        "2": 2,
        "odd": odd,
        "larger": larger,
        "max": hi if hi is not None and hi <= max_size else None,
    }
    out = {
        kind: size
        for kind, size in found.items()
        if size is not None and size >= lo and (hi is None or size <= hi) and size <= max_size
    }
    if past_cap is not None and past_cap <= max_size:
        out["past cap"] = past_cap
    # Scaled to the example: a size of the other parity and a larger one inside the range torch
    # obtained, even past max_size (the example shows the model runs at that scale). A raw-audio
    # length of 2640 swept at 1, 2, 3 (below the obtained minimum: eager refuses them) and
    # nothing else would never show an export that fixed the parity of the frame count.
    obtained_hi = group.obtained_range[1]
    limits = [h for h in (hi, obtained_hi) if h is not None]
    limit = min(limits) if limits else None
    floor = max(lo, group.obtained_range[0], 1)
    inside = [n for n in out.values() if n != example and group.in_obtained_range(n)]
    if not group.specialized and not any((n - example) % 2 for n in inside):
        near = next((n for n in (example + 1, example - 1) if n >= floor and (limit is None or n <= limit)), None)
        if near is not None:
            out["near"] = near
    if not group.specialized and not any(n > example for n in inside):
        scaled = 2 * example + (1 if "near" not in out else 0)
        scaled = scaled if limit is None else min(scaled, limit)
        if scaled > example + 1 and scaled not in out.values():
            out["scaled"] = scaled
    return out


@dataclass(frozen=True)
class _Plan:
    name: str
    sizes: tuple[tuple[str, int], ...]  # (group label, size)


def complete_sizes(groups: Sequence[DimGroup], assignment: Mapping[str, int]) -> dict[str, int]:
    """``assignment`` (group label → size) with every group missing from it at its example
    size, and every derived group missing from it sized from the others."""
    sizes = {g.label: assignment.get(g.label, g.example) for g in groups if g.derived is None}
    for group in groups:
        if group.derived is not None:
            if group.label in assignment:
                sizes[group.label] = assignment[group.label]
            else:
                try:
                    sizes[group.label] = group.derived_size(sizes)
                except Exception:  # noqa: BLE001 - a label it follows is gone: keep the example
                    sizes[group.label] = group.example
    return sizes


def _refuse_derived(groups: Sequence[DimGroup], labels: Sequence[str]) -> None:
    for label in labels:
        group = next(g for g in groups if g.label == label)
        if group.derived is not None:
            sources = " and ".join(group.derived_from)
            raise ValueError(
                f"sizes= names {label!r}, which follows from {sources}: {group.derived_text}; "
                f"give sizes for {sources} instead, or pass independent=True to sweep {label!r} on its own"
            )


def plan_cases(groups: Sequence[DimGroup], max_size: int, sizes: Mapping[Any, Sequence[int]] | None) -> list[_Plan]:
    """The cases to run after the example: ``sizes`` exactly when given (one group at a time,
    the others at their example size), else generated. A derived group is never swept on its
    own: every case sizes it from the groups it follows (a generated case that would make it
    larger than ``max_size`` is dropped). ``ValueError`` for a ``sizes=`` key naming no group
    or a derived one."""
    plans: list[_Plan] = []
    seen: set[tuple[tuple[str, int], ...]] = {tuple((g.label, g.example) for g in groups)}
    derived = {g.label for g in groups if g.derived is not None}

    def add(name: str, assignment: tuple[tuple[str, int], ...], generated: bool = True) -> None:
        complete = complete_sizes(groups, {k: v for k, v in assignment if k not in derived})
        if generated and any(g.derived is not None and complete[g.label] > max_size for g in groups):
            return
        full = tuple((g.label, complete[g.label]) for g in groups)
        if full not in seen:
            seen.add(full)
            plans.append(_Plan(name, full))

    if sizes:
        by_label = sizes_by_label(groups, sizes, "sizes= dim group")
        _refuse_derived(groups, list(by_label))
        for label, values in by_label.items():
            for value in values:
                add(f"{label}={value}", tuple((g.label, value if g.label == label else g.example) for g in groups), False)
        return plans

    # Dynamic groups change together, kind by kind; then each alone to a larger size. A group
    # capture specialized changes alone (the module often only works at its example size, and
    # moving it with the others would leave them unchecked). A derived group follows.
    candidates = [{} if g.auto_static else _candidates(g, max_size) for g in groups]
    dynamic = [i for i, g in enumerate(groups) if not g.specialized and g.derived is None]
    for kind in _KINDS:
        if dynamic:
            add(kind, tuple((g.label, c.get(kind, g.example) if i in dynamic else g.example)
                            for i, (g, c) in enumerate(zip(groups, candidates))))
    if len(dynamic) > 1:
        for i in dynamic:
            if "larger" in candidates[i]:
                label = groups[i].label
                add(f"{label} larger", tuple((h.label, candidates[i]["larger"] if j == i else h.example) for j, h in enumerate(groups)))
    for i, g in enumerate(groups):
        for kind, size, _ in g.guard_sizes:
            add(f"{g.label}={size} {kind}", tuple((h.label, size if j == i else h.example) for j, h in enumerate(groups)))
    for i, (g, c) in enumerate(zip(groups, candidates)):
        if g.specialized:
            prefix = "" if len(groups) == 1 else f"{g.label} "
            for kind in _KINDS:
                if kind in c:
                    add(prefix + kind, tuple((h.label, c[kind] if j == i else h.example) for j, h in enumerate(groups)))
    # Sizes torch verified the program for come first: a size below the obtained minimum can
    # make the module change itself (Swin at 1x1 rebinds its window size) or refuse to run.
    by_label = {g.label: g for g in groups}
    return sorted(plans, key=lambda p: not all(by_label[label].in_obtained_range(size) for label, size in p.sizes))
