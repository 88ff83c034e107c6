"""The cases a size sweep runs after the example (:func:`plan_cases`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .groups import DimGroup, complete_sizes, sizes_by_label
from .stride_sizes import KIND_ABOVE, offset_prime

__all__ = [
    "EXTRA_SECONDS", "EXTRA_SHARE", "FAR_FACTORS", "FAR_SECONDS", "TOGETHER_UNITS", "CasePlan", "extra_cases", "ordered_cases",
    "plan_cases",
]


_KINDS = ("min", "1", "2", "odd", "near", "larger", "twice", "max", "past cap")
TOGETHER_UNITS = 256.0
"""A kind whose sizes, every dynamic group at once, make a case larger than this many examples
(its elements over the example's) runs as one case per group instead: a video transformer's
frames, height and width at their maxima at once (32 x 65 x 65 latents past 2 x 8 x 8) give
attention over 32768 tokens, gigabytes that onnxruntime refuses (``bad_alloc``) and that can
take the machine's memory, for no branch the groups one at a time cannot show."""
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
            together = {g.label: c.get(kind, g.example) if i in dynamic else g.example
                        for i, (g, c) in enumerate(zip(groups, candidates))}
            changed = [i for i in dynamic if together[groups[i].label] != groups[i].example]
            if len(changed) > 1 and _units(groups, together) > TOGETHER_UNITS:
                for i in changed:  # too large at once: each group alone at that kind's size
                    add(f"{groups[i].label} {kind}", tuple((h.label, together[h.label] if j == i else h.example)
                                                           for j, h in enumerate(groups)))
            else:
                add(kind, tuple(together.items()))
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
    return ordered_cases(groups, plans)


def ordered_cases(groups: Sequence[DimGroup], plans: Sequence[CasePlan]) -> list[CasePlan]:
    """``plans`` with the sizes torch verified the program for first (stable): a size below the
    obtained minimum can make the module change itself (Swin at 1x1 rebinds its window size)
    or refuse to run."""
    by_label = {g.label: g for g in groups}
    return sorted(plans, key=lambda p: not all(by_label[label].in_obtained_range(size) for label, size in p.sizes))


# The sizes that can see a branch the sizes above cannot (extra_cases), within a budget.
EXTRA_SHARE = 0.3
"""The extra cases' estimated time, as a share of the time the planned cases took."""
EXTRA_SECONDS = 0.1
"""The estimated seconds the extra cases may take whatever the share says: a model that runs in
a few milliseconds gets every extra case."""
ALWAYS = KIND_ABOVE
"""The extra cases run whatever the budget says (within ``max_size`` or twice the example): the sizes above the example where the
program's coarsest divisions change parity (like the sizes that break a remainder guard, which
plan_cases always runs: the program's own strides; SEW's frame parity needs the second of them)."""
FAR_FACTORS = (8, 4)
"""The far size: the example times the first of these ..."""
FAR_SECONDS = 1.0
"""... whose estimated eager + onnxruntime time is within this."""


def _always(name: str, changed: Mapping[str, int], groups: Sequence[DimGroup], max_size: int | None) -> bool:
    """Whether an extra case runs whatever the budget says: an :data:`ALWAYS` kind, at sizes
    within ``max_size`` or twice the example (a coarse stride past a small example, 4096 past
    8, is no case to run at any cost)."""
    examples = {g.label: g.example for g in groups}
    return name.endswith(ALWAYS) and all(
        size <= max(max_size or 0, 2 * examples[label]) for label, size in changed.items())


def _units(groups: Sequence[DimGroup], sizes: Mapping[str, int]) -> float:
    """A case's size in examples: its elements over the example's (see :func:`_time_model`)."""
    cost = 1.0
    for group in groups:
        cost *= max(sizes[group.label], 1) / max(group.example, 1)
    return cost


def _time_model(points: Sequence[tuple[float, float]]) -> Callable[[float], float]:
    """A case's estimated seconds from its size in examples, fitted on ``(units, seconds)`` of
    the cases run: a fixed overhead (the fastest case) plus a least-squares slope, and never
    less than the median case (a small size is no cheaper than the per-case work of a
    verify). A tiny model's cases all take its overhead, so a size 8 times the example costs
    little more."""
    overhead = min(seconds for _, seconds in points)
    mean_units = sum(u for u, _ in points) / len(points)
    mean_seconds = sum(t for _, t in points) / len(points)
    spread = sum((u - mean_units) ** 2 for u, _ in points)
    if spread > 0:  # least squares over every case compared
        slope = sum((u - mean_units) * (t - mean_seconds) for u, t in points) / spread
    else:  # every case at one size: as if its whole time grew with the size
        slope = mean_seconds / max(mean_units, 1.0)
    slope = max(slope, 0.0)
    typical = sorted(seconds for _, seconds in points)[len(points) // 2]  # no case is cheaper than the median one
    return lambda units: max(overhead + slope * units, typical)


def _top(group: DimGroup) -> int | None:
    """The largest size the group may take: its requested maximum or a guard's cap, or None."""
    tops = [h for h in (group.requested_range[1], group.cap) if h is not None]
    return min(tops) if tops else None


def _allowed(group: DimGroup, size: int) -> bool:
    top = _top(group)
    return size >= max(group.requested_range[0], 1) and (top is None or size <= top) and size != group.example


def _extra_candidates(groups: Sequence[DimGroup], far_factor: int | None, max_size: int | None) -> list[tuple[str, dict[str, int]]]:
    """``(name, sizes of the groups it changes)`` in the order they are worth a case."""
    swept = [g for g in groups if not g.specialized and g.derived is None and not g.auto_static]
    out: list[tuple[str, dict[str, int]]] = []

    def alone(kind: str, group: DimGroup, size: int) -> None:
        if _allowed(group, size):
            out.append((f"{group.label}={size} {kind}", {group.label: size}))

    # 1. Both sides of the coarsest division the program makes of each group (those above it
    # first: they run whatever the budget says, see ALWAYS).
    ranked = [sorted(((kind, size) for kind, size, _ in g.stride_sizes), key=lambda k: k[0] != KIND_ABOVE) for g in swept]
    for rank in range(max((len(r) for r in ranked), default=0)):
        for group, sizes in zip(swept, ranked):
            if rank < len(sizes):
                alone(sizes[rank][0], group, sizes[rank][1])
    # 2. Far above twice the example (a size threshold), where the model is cheap enough there
    # (and within max_size, unlike the sizes scaled to the example and the top of the range).
    bound = [max_size] if max_size is not None else []
    for group in swept:
        top = min([h for h in (_top(group), *bound) if h is not None], default=None)
        if far_factor is not None:
            size = far_factor * group.example if top is None else min(far_factor * group.example, top)
            if size > 2 * group.example:
                alone(f"far ({far_factor}x)" if size == far_factor * group.example else "far (the top)", group, size)
    # 3. Another residue modulo every stride: every group at once at the example + a prime.
    prime = offset_prime(d for g in swept for d in g.divisors)
    together = {g.label: g.example + prime for g in swept if _allowed(g, g.example + prime)}
    if together:
        out.append((f"example + {prime}", together))  # one case of that name: the only one
    # 4. Another residue above twice the example; 5. the top of a finite range.
    for group in swept:
        alone(f"twice + {prime}", group, 2 * group.example + prime)
    for group in swept:
        top = _top(group)
        if top is not None:  # past max_size too (within it, "max" already has it): the range is the user's
            alone("top of the range", group, top)
    return out


Sizes = tuple[tuple[str, int], ...]


def extra_cases(groups: Sequence[DimGroup], planned: Sequence[CasePlan], runs: Sequence[tuple[Sizes, float]] = (),
                max_size: int | None = None) -> list[CasePlan]:
    """Cases that can see a branch the planned ones cannot, in this order, while their
    estimated time stays within :data:`EXTRA_SHARE` of the time the planned cases took
    (``runs``: the sizes and seconds of each case compared, the example's included), or within
    :data:`EXTRA_SECONDS`: the sizes on both sides of the coarsest division the program makes
    of each group (:mod:`~exporter.cases.stride_sizes`; those above run whatever the budget
    says, :data:`ALWAYS`); one size far above twice the example
    for each group (the example times the first of :data:`FAR_FACTORS` whose estimated time is
    within :data:`FAR_SECONDS`, and within ``max_size``); every group at the example plus a
    prime that divides none of their strides; twice the example plus that prime; the top of a
    finite range (the requested maximum or a guard's cap, past ``max_size`` too). Each changes
    one group (the offset all), the others at their example; none repeats a planned case.
    Without ``runs`` the budget is :data:`EXTRA_SHARE` of the planned cases' sizes. The sizes
    are fixed by the groups; the measured times only decide how many run and how far "far" goes."""
    seen = {tuple((g.label, g.example) for g in groups), *(p.sizes for p in planned)}
    if runs:
        estimate = _time_model([(_units(groups, dict(sizes)), seconds) for sizes, seconds in runs])
        budget = max(EXTRA_SHARE * sum(seconds for _, seconds in runs), EXTRA_SECONDS)
    else:
        def estimate(units: float) -> float:
            return max(units, 1.0)

        budget = EXTRA_SHARE * (1.0 + sum(_units(groups, dict(p.sizes)) for p in planned))
    far = next((f for f in FAR_FACTORS if not runs or estimate(float(f)) <= FAR_SECONDS), None)
    spent = 0.0
    out: list[CasePlan] = []
    for name, changed in _extra_candidates(groups, far, max_size):
        complete = complete_sizes(groups, changed)
        full = tuple((g.label, complete[g.label]) for g in groups)
        cost = estimate(_units(groups, complete))
        if full in seen or (spent + cost > budget and not _always(name, changed, groups, max_size)):
            continue
        seen.add(full)
        spent += cost
        out.append(CasePlan(name, full))
    return ordered_cases(groups, out)
