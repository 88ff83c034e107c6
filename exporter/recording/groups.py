"""Recorded calls grouped by signature, and the dims each group's axes need.

A group holds the calls that pass the same inputs with the same pytree structure, dtypes,
ranks and constants (prefill: no cache tensors; decode: with them); calls that pass the same
inputs but differ otherwise are split into groups, with a note saying how they differ.

Within a group every axis's observed sizes decide its proposal:

* an axis that never varied is STATIC ("always 4 in the recorded calls"; widen it by hand);
* axes whose sizes moved together share one name: ``batch`` (axis 0), ``past`` (a KV cache's
  sequence axis), ``seq`` (axis 1), else the exporter's default name (``x_dim2``). A name is a
  :class:`~exporter.dims.Name`, dynamic and bounded by the model's guards, as torch.onnx reads
  a string: a strict ``Dim('batch')`` fails on GPT-2's ``batch != 1`` guard;
* an axis always ``k`` more than another is that dim ``+ k``, torch's derived dim (the
  attention mask's ``past + 1`` while decoding one token); its root is then a strict
  :class:`~exporter.Dim`, since torch derives only from a ``Dim``;
* an axis always the sum of two dims is the name ``total`` (torch.export has no dim for a sum
  of two dims: the verify stage derives the relation from the guards).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..dims import Derived, Dim, Name
from ..inputs import BoundInputs, bind_inputs
from ..presentation import Presentable
from .calls import RecordedCall

__all__ = ["CallGroup", "RecordedAxis", "group_calls"]

AxisPolicyProposal = Dim | Derived | None  # None: STATIC


@dataclass(frozen=True)
class RecordedAxis:
    """One input axis of a group: its sizes in the group's calls (in order) and the proposal."""

    path: str
    axis: int
    sizes: tuple[int, ...]
    dim: AxisPolicyProposal
    note: str = ""
    inferred: bool = False  # dynamic though it never moved (a decoder's batch, its prompt length)

    @property
    def static(self) -> bool:
        return self.dim is None

    @property
    def observed(self) -> tuple[int, int]:
        """The smallest and largest size seen."""
        return min(self.sizes), max(self.sizes)

    @property
    def policy(self) -> str:
        """``STATIC``, the dim's name, or the derived expression (``past + 1``)."""
        if self.dim is None:
            return "STATIC"
        return repr(self.dim) if isinstance(self.dim, Derived) else self.dim.name


@dataclass(frozen=True, repr=False)
class CallGroup(Presentable):
    """Calls with one signature, their axes and the spec they propose."""

    name: str
    calls: tuple[RecordedCall, ...]
    inputs: tuple[str, ...]  # top-level inputs holding tensors
    axes: tuple[RecordedAxis, ...]
    constants: tuple[tuple[str, str], ...]  # (path, repr of the value) of the non-tensor inputs

    @property
    def dynamic_shapes(self) -> dict[str, dict[int, Dim | Derived]]:
        """The proposed spec, by leaf path (static axes left out: STATIC is the default)."""
        spec: dict[str, dict[int, Dim | Derived]] = {}
        for axis in self.axes:
            if axis.dim is not None:
                spec.setdefault(axis.path, {})[axis.axis] = axis.dim
        return spec

    @property
    def dims(self) -> dict[str, tuple[int, int]]:
        """Each dynamic dim's (or derived expression's) observed range."""
        out: dict[str, tuple[int, int]] = {}
        for axis in self.axes:
            if axis.dim is not None:
                low, high = out.get(axis.policy, axis.observed)
                out[axis.policy] = (min(low, axis.observed[0]), max(high, axis.observed[1]))
        return out

    @property
    def example(self) -> RecordedCall:
        """The first call whose dynamic root dims are all >= 2 (torch specializes sizes 0 and
        1), else the first call."""
        roots = [a for a in self.axes if a.dim is not None and not isinstance(a.dim, Derived)]
        for position, call in enumerate(self.calls):
            if all(a.sizes[position] >= 2 for a in roots):
                return call
        return self.calls[0]


def _signature(bound: BoundInputs, constants: tuple[tuple[str, str], ...]) -> tuple[Any, ...]:
    return (
        tuple((leaf.path, leaf.dtype, leaf.rank) for leaf in bound.leaves),
        bound.leaf_paths_of_non_tensors,
        constants,
    )


def _constants(bound: BoundInputs) -> tuple[tuple[str, str], ...]:
    """The inputs that are not tensors nor hold any (``use_cache=True``, ``cache=None``)."""
    values = dict(zip(bound.parameter_names, (*bound.args, *bound.kwargs.values())))
    return tuple(
        (name, repr(value)) for name, value in values.items()
        if value is None or isinstance(value, (bool, int, float, str))
    )


def _describe_difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    leaves_a, others_a, const_a = a
    leaves_b, others_b, const_b = b
    if const_a != const_b:
        diff = sorted(set(const_a) ^ set(const_b))
        return "constants differ (" + ", ".join(f"{p}={v}" for p, v in diff) + ")"
    if [p for p, _, _ in leaves_a] != [p for p, _, _ in leaves_b] or others_a != others_b:
        return f"pytree structures differ ({len(leaves_a)} vs {len(leaves_b)} tensors)"
    diff = [f"{p}: {d}/{r}-d vs {d2}/{r2}-d" for (p, d, r), (_, d2, r2) in zip(leaves_a, leaves_b) if (d, r) != (d2, r2)]
    return "dtypes or ranks differ (" + "; ".join(diff) + ")"


def group_calls(model: Any, calls: Sequence[RecordedCall]) -> tuple[tuple[CallGroup, ...], tuple[str, ...]]:
    """The calls grouped by signature, and notes on the groups split apart."""
    bound_calls: list[tuple[RecordedCall, BoundInputs]] = []
    keys: dict[tuple[Any, ...], list[int]] = {}
    coarse: dict[tuple[str, ...], list[tuple[Any, ...]]] = {}
    for call in calls:
        args, kwargs = call.inputs()
        bound = bind_inputs(model, args, kwargs)
        key = _signature(bound, _constants(bound))
        if key not in keys:
            keys[key] = []
            coarse.setdefault(_top_level(bound), []).append(key)
        keys[key].append(len(bound_calls))
        bound_calls.append((call, bound))
    notes = []
    for inputs, variants in coarse.items():
        if len(variants) > 1:
            notes.append(
                f"calls with the inputs {', '.join(inputs)} were split into {len(variants)} groups: "
                + _describe_difference(variants[0], variants[1])
            )
    has_cache = {key: _holds_cache_tensors(bound_calls[keys[key][0]][1]) for key in keys}
    any_cache = any(has_cache.values())
    groups: list[CallGroup] = []
    used: set[str] = set()
    for key, members in keys.items():
        base = ("decode" if has_cache[key] else "prefill") if any_cache else ("forward" if len(keys) == 1 else "group")
        name = _unique(base, used)
        chosen = [bound_calls[i] for i in members]
        groups.append(_group(name, chosen, key[2], infer=base if any_cache else "", windows=_windows(chosen[0][1])))
    inferred = sorted({axis.policy for group in groups for axis in group.axes if axis.inferred})
    if inferred:
        notes.append(
            f"{' and '.join(inferred)} never moved in the recorded calls: proposed dynamic, inferred, not observed "
            "(record two prompts of different batch size and length to observe them)"
        )
    return tuple(groups), tuple(notes)


def _windows(bound: BoundInputs) -> dict[str, int]:
    """The sliding window of each cache tensor of a ``DynamicSlidingWindowLayer``, by leaf path."""
    from ..compat.kv_cache import kv_cache_windows

    out: dict[str, int] = {}
    for name, value in zip(bound.parameter_names, (*bound.args, *bound.kwargs.values())):
        out.update(kv_cache_windows(name, value))
    return out


def _holds_cache_tensors(bound: BoundInputs) -> bool:
    return any(leaf.path in dict(bound.onnx_defaults) for leaf in bound.leaves)


def _top_level(bound: BoundInputs) -> tuple[str, ...]:
    return tuple(dict.fromkeys(leaf.path.split(".")[0] for leaf in bound.leaves))


def _unique(base: str, used: set[str]) -> str:
    name, number = base, 2
    while name in used:
        name, number = f"{base}_{number}", number + 1
    used.add(name)
    return name


def _group(
    name: str, members: list[tuple[RecordedCall, BoundInputs]], constants: tuple[tuple[str, str], ...], infer: str = "",
    windows: dict[str, int] | None = None,
) -> CallGroup:
    """One group's axes and proposals; ``infer`` (``prefill``/``decode``: the calls of a
    decoder with a KV cache) also proposes the axes another prompt would move (see
    :func:`_inferred`); ``windows`` bounds the length of sliding-window cache tensors."""
    first = members[0][1]
    cache_paths = set(dict(first.onnx_defaults))
    sizes: dict[tuple[str, int], tuple[int, ...]] = {}
    for position, leaf in enumerate(first.leaves):
        for axis in range(leaf.rank):
            sizes[(leaf.path, axis)] = tuple(bound.leaves[position].shape[axis] for _, bound in members)
    varying = {key: s for key, s in sizes.items() if len(set(s)) > 1}
    classes: dict[tuple[int, ...], list[tuple[str, int]]] = {}
    for key, s in varying.items():
        classes.setdefault(s, []).append(key)
    proposals = _propose(classes, cache_paths, {leaf.path: leaf.rank for leaf in first.leaves}, windows or {})
    guessed = _inferred(sizes, varying, infer, {d.name for d, _ in proposals.values() if isinstance(d, Dim)})
    axes = []
    for (path, axis), s in sizes.items():
        if (path, axis) in varying:
            dim, note = proposals[varying[(path, axis)]]
            axes.append(RecordedAxis(path, axis, s, dim, note))
        elif (path, axis) in guessed:
            dim, note = guessed[(path, axis)]
            axes.append(RecordedAxis(path, axis, s, dim, note, inferred=True))
        else:
            axes.append(RecordedAxis(path, axis, s, None, f"always {s[0]} in the recorded calls"))
    return CallGroup(name, tuple(c for c, _ in members), _top_level(first), tuple(axes), constants)


def _inferred(
    sizes: dict[tuple[str, int], tuple[int, ...]], varying: dict[tuple[str, int], tuple[int, ...]], infer: str,
    used: set[str],
) -> dict[tuple[str, int], tuple[Name, str]]:
    """The axes of a decoder's calls that one prompt cannot show moving, proposed dynamic
    anyway: the batch (axis 0 of every input of rank >= 2 that has the first input's batch
    size in every call), and, for the prefill, the prompt length (axis 1 of those that have
    the first input's length). Only when they never moved; each noted "inferred, not observed"."""
    if not infer or not sizes:
        return {}
    first = next(iter(sizes))[0]  # the first tensor input: input_ids
    ranks = {path: axis + 1 for path, axis in sizes}
    out: dict[tuple[str, int], tuple[Name, str]] = {}
    for axis, base in ((0, "batch"), (1, "seq")):
        if (axis == 1 and infer != "prefill") or (first, axis) not in sizes or (first, axis) in varying:
            continue
        reference = sizes[(first, axis)]
        members = [(path, a) for (path, a), s in sizes.items()
                   if a == axis and ranks[path] >= 2 and s == reference and (path, a) not in varying]
        name = _unique(base, used)
        note = f"inferred, not observed (always {reference[0]} here)"
        out.update({member: (Name(name), note) for member in members})
    return out


def _propose(
    classes: dict[tuple[int, ...], list[tuple[str, int]]], cache_paths: set[str], ranks: dict[str, int],
    windows: dict[str, int] | None = None,
) -> dict[tuple[int, ...], tuple[Dim | Derived, str]]:
    """A dim per class of axes that vary together. Roots are dim names (:class:`Name`:
    dynamic, bounded by the model's guards, as torch.onnx reads a string), except the roots
    of derived axes, which torch needs as a :class:`Dim` (``Dim('past') + 1``); such a root
    over the length of a sliding-window cache (``windows``: leaf path -> window) is bounded by
    what the window keeps, ``Dim('past', max=window - 1)`` (the model's mask guards it)."""
    names: dict[tuple[int, ...], str] = {}
    used: set[str] = set()
    pending = []
    # smaller sizes first: of two axes one apart, the smaller is the root (past, then past + 1)
    for sizes, members in sorted(classes.items(), key=lambda item: sum(item[0])):
        if _offset_of(sizes, names) is None and _sum_of(sizes, names) is None:
            names[sizes] = _unique(_name(members, cache_paths, ranks), used)
        else:
            pending.append(sizes)
    derived: dict[tuple[int, ...], tuple[tuple[int, ...], int]] = {}
    for sizes in pending:
        offset = _offset_of(sizes, names)
        if offset is not None:
            derived[sizes] = offset
    strict = {root for root, _ in derived.values()}
    out: dict[tuple[int, ...], tuple[Dim | Derived, str]] = {
        sizes: (Dim(name) if sizes in strict else Name(name), "") for sizes, name in names.items()
    }
    windows = windows or {}
    for sizes in strict:
        kept = [windows[path] - 1 for path, axis in classes[sizes] if path in windows and axis == ranks[path] - 2]
        if kept and min(kept) > max(sizes):
            out[sizes] = (Dim(names[sizes], max=min(kept)),
                          f"at most {min(kept)}: a sliding window of {min(kept) + 1} keeps {min(kept)} tokens")
    for sizes in pending:
        if sizes in derived:
            root_sizes, k = derived[sizes]
            root = out[root_sizes][0]
            assert isinstance(root, Dim)
            expression = root + k
            out[sizes] = (expression, f"{expression!r}: always {k:+d} from {root.name} in the recorded calls")
            continue
        pair = _sum_of(sizes, names)
        assert pair is not None
        total = Name(_unique("total", used))
        out[sizes] = (total, f"{total.name} = {pair[0]} + {pair[1]} in every recorded call "
                             "(torch.export has no dim for a sum of two dims: verify derives it from the guards)")
    return out


def _offset_of(sizes: tuple[int, ...], roots: dict[tuple[int, ...], str]) -> tuple[tuple[int, ...], int] | None:
    """The root class these sizes always differ from by one offset, and the offset."""
    for root_sizes in roots:
        differences = {s - r for s, r in zip(sizes, root_sizes)}
        if len(differences) == 1:
            return root_sizes, differences.pop()
    return None


def _sum_of(sizes: tuple[int, ...], roots: dict[tuple[int, ...], str]) -> tuple[str, str] | None:
    """The names of two root classes whose sizes always add up to these."""
    items = list(roots.items())
    for i, (a_sizes, a) in enumerate(items):
        for b_sizes, b in items[i + 1:]:
            if all(s == x + y for s, x, y in zip(sizes, a_sizes, b_sizes)):
                return a, b
    return None


def _name(members: list[tuple[str, int]], cache_paths: set[str], ranks: dict[str, int]) -> str:
    """``batch`` (axis 0), ``past`` (a KV cache's sequence axis), ``seq`` (axis 1), else the
    default name of the first axis (``x_dim2``)."""
    from ..dims.model import default_dim_name

    if all(axis == 0 for _, axis in members):
        return "batch"
    if any(path in cache_paths and axis == ranks[path] - 2 for path, axis in members):
        return "past"
    if all(axis == 1 for _, axis in members):
        return "seq"
    return default_dim_name(*members[0])
