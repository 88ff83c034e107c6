"""The dim groups of an export, read from its spec, its captured program, its guards and its
ONNX model (:func:`dim_groups`)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .. import compat
from ..artifacts import ExportArtifacts
from ..axis import Axis
from ..compat import formats
from ..dims import Dim
from ..guards import Guard, Guards, input_sources
from ..inputs import BoundInputs
from ..program_symbols import symbol_of
from ..shapes.solve import axis_ranges
from .chunk_sizes import with_chunk_sizes
from .derived import derive_groups
from .groups import DimGroup, guard_words, policy_text
from .guarded_sizes import with_guard_sizes
from .stride_sizes import with_stride_sizes

__all__ = ["dim_groups", "input_dims_by_path", "onnx_input_dims"]


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


def input_dims_by_path(names: Mapping[str, str], model: Any) -> dict[str, tuple[str | int | None, ...]]:
    """:func:`onnx_input_dims` keyed by input path (``x``, ``cache.0.key``) instead of ONNX
    name, which differs when the ``input_names`` option renamed the inputs (``names``: the ONNX
    name of each input path, ``Session.onnx_input_names``; empty keeps the ONNX names)."""
    dims = onnx_input_dims(model)
    return {path: dims[name] for path, name in names.items() if name in dims} if names else dims


def _guards(guards: Guards, program: Any) -> list[tuple[str, str, str | None, tuple[Axis, ...] | None]]:
    """Guards as ``(expression, text to match, user source or None, axes or None)``: the
    recorded guards (with the user's line), else the program's guard expressions."""
    out: list[tuple[str, str, str | None, tuple[Axis, ...] | None]] = [
        (guard.expression, f"{guard.expression} {guard.symbolic}", _short_source(guard), guard.axes or None)
        for guard in guards
    ]
    return out or [(code, code, None, None) for code in compat.guards_code(program)]


def _short_source(guard: Guard) -> str | None:
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


def _group_causes(export: ExportArtifacts, program: Any, axes: Sequence[tuple[str, int]],
                  symbol: str | None) -> tuple[str, ...]:
    causes: list[str] = []
    sources = input_sources(export.inputs)
    patterns = [p for path, axis in axes for p in _source_patterns(sources, path, axis)]
    for expr, text, source, guard_axes in _guards(export.guards, program):
        if guard_axes is not None:
            mentions = bool(set(guard_axes) & set(axes))
        else:
            mentions = any(p in text for p in patterns) or (
                symbol is not None and re.search(rf"\b{re.escape(symbol)}\b", text) is not None
            )
        if mentions:
            causes.append(guard_words(expr) + (f" at {source}" if source else ""))
    return tuple(dict.fromkeys(causes))


def _merged(groups: dict[Any, list[Any]], bound: BoundInputs, independent: bool) -> list[tuple[list[Any], list[Any]]]:
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
    export: ExportArtifacts, program: Any | None = None, onnx_model: Any | None = None, *, independent: bool = False
) -> tuple[DimGroup, ...]:
    """The dim groups of an export (a :class:`~exporter.Session`): every axis the user asked not to be static, grouped by
    the torch symbol it got (or by user Dim name), with requested and obtained ranges. Axes
    callers size together move together (see :func:`_merged`), and a group the model's guards
    tie to others is ``derived`` from them (see :mod:`exporter.cases.derived`);
    ``independent=True`` keeps one group per torch symbol, none derived."""
    program = program if program is not None else export.exported_program
    onnx_model = onnx_model if onnx_model is not None else export.stage_output("optimize")
    onnx_dims = input_dims_by_path(export.onnx_input_names, onnx_model)
    symbol_by_axis = symbol_of(program, export.inputs)
    ranges = {str(sym): _range_of(vr) for sym, vr in program.range_constraints.items()}
    caps = axis_ranges(export.guards, export.inputs)

    groups: dict[Any, list[Any]] = {}
    for entry in export.spec:
        symbol = symbol_by_axis.get((entry.path, entry.axis))
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
    for keys, entries in _merged(groups, export.inputs, independent):
        axes = tuple(Axis(e.path, e.axis) for e in entries)
        named = [e.policy for e in entries if isinstance(e.policy, Dim)]
        example = export.inputs.leaf(entries[0].path).shape[entries[0].axis]
        lo = max((d.min for d in named if d.min is not None), default=1)
        his = [d.max for d in named if d.max is not None]
        requested_range = (lo, min(his) if his else None)
        symbols = tuple(key[1] for key in keys if key[0] == "symbol")
        symbol = symbols[0] if symbols else None
        obtained = (example, example)
        if symbol:  # the intersection of the ranges of every symbol moved together
            found_ranges: list[tuple[int, int | None]] = [ranges.get(sym, (0, None)) for sym in symbols]
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
                causes=_group_causes(export, program, axes, symbol),
                cap=cap,
            )
        )
    if not independent:
        out = list(derive_groups(out, tuple(export.guards), export.inputs))
    guards = tuple(export.guards)
    return tuple(with_stride_sizes(with_chunk_sizes(with_guard_sizes(out, guards), program), program, guards))
