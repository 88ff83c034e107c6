"""The cases a size sweep runs after the example (:func:`plan_cases`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .groups import DimGroup, complete_sizes, sizes_by_label

__all__ = ["CasePlan", "plan_cases"]


_KINDS = ("min", "1", "2", "odd", "near", "larger", "twice", "max", "past cap")
# Kinds not bounded by ``max_size``: the example shows the model runs at that scale.
_UNCAPPED = frozenset({"near", "twice"})


def _twice(group: DimGroup) -> int | None:
    """Twice the example (every divisibility the example has still holds: window partitions,
    strides), or the requested maximum when twice is past it; None when the requested range
    holds nothing above the example. Neither ``max_size`` nor the range torch *obtained*
    bounds it: a size past the obtained range is where a guard the ONNX model dropped shows
    (timm's halonet26t, example 256, was compared at 255 and 256 only and fails in onnxruntime
    at 512; ``tests/exporter/test_verify_twice_example.py`` has the idiom)."""
    hi = group.requested_range[1]
    twice = 2 * group.example if hi is None else min(2 * group.example, hi)
    return twice if twice > group.example else None


def _candidates(group: DimGroup, max_size: int) -> dict[str, int]:
    """Candidate sizes by kind for one group, inside its requested range; only ``near`` and
    ``twice`` may pass ``max_size``."""
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
    doubled = max(2 * example, example + 4)
    larger = (hi if hi > example else None) if hi is not None and doubled > hi else doubled
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
    if group.specialized:
        return out
    # Scaled to the example whatever max_size says (README, verify's docstring). A size of the
    # other parity when none in the obtained range has it: a raw-audio length of 2640 swept at
    # 1, 2, 3 only (below the obtained minimum: eager refuses them) would never show an export
    # that fixed the parity of the frame count.
    obtained_hi = group.obtained_range[1]
    limits = [h for h in (hi, obtained_hi) if h is not None]
    limit = min(limits) if limits else None
    floor = max(lo, group.obtained_range[0], 1)
    inside = [n for n in out.values() if n != example and group.in_obtained_range(n)]
    if not any((n - example) % 2 for n in inside):
        near = next((n for n in (example + 1, example - 1) if n >= floor and (limit is None or n <= limit)), None)
        if near is not None:
            out["near"] = near
    # And twice the example ("larger" when it goes that far: the same case, which max_size does
    # not drop when a derived group follows).
    twice = _twice(group)
    if twice is not None:
        out["twice"] = out["larger"] if out.get("larger", 0) >= twice else twice
    return out


@dataclass(frozen=True)
class CasePlan:
    """One case of a sweep: its name (``odd``, ``batch=5``) and the size of every group, by label."""

    name: str
    sizes: tuple[tuple[str, int], ...]  # (group label, size)


def _refuse_derived(groups: Sequence[DimGroup], labels: Sequence[str]) -> None:
    for label in labels:
        group = next(g for g in groups if g.label == label)
        if group.derived is not None:
            sources = " and ".join(group.derived_from)
            raise ValueError(
                f"sizes= names {label!r}, which follows from {sources}: {group.derived_text}; "
                f"give sizes for {sources} instead, or pass independent=True to sweep {label!r} on its own"
            )


def plan_cases(groups: Sequence[DimGroup], max_size: int, sizes: Mapping[Any, Sequence[int]] | None) -> list[CasePlan]:
    """The cases to run after the example: ``sizes`` exactly when given (one group at a time,
    the others at their example size), else generated. A derived group is never swept on its
    own: every case sizes it from the groups it follows (a generated case that would make it
    larger than ``max_size`` is dropped, unless it is ``near`` or ``twice``, which
    ``max_size`` never bounds). ``ValueError`` for a ``sizes=`` key naming no group
    or a derived one."""
    plans: list[CasePlan] = []
    seen: set[tuple[tuple[str, int], ...]] = {tuple((g.label, g.example) for g in groups)}
    derived = {g.label for g in groups if g.derived is not None}

    def add(name: str, assignment: tuple[tuple[str, int], ...], generated: bool = True) -> None:
        complete = complete_sizes(groups, {k: v for k, v in assignment if k not in derived})
        if generated and name not in _UNCAPPED and any(g.derived is not None and complete[g.label] > max_size for g in groups):
            return
        full = tuple((g.label, complete[g.label]) for g in groups)
        if full not in seen:
            seen.add(full)
            plans.append(CasePlan(name, full))

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
