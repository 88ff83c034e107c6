"""torch's text for a violated dim constraint, said in the user's terms.

torch writes "You marked L['x'].size()[0] as dynamic but your code specialized it to be a
constant (4). If you're using mark_dynamic, either remove it or use maybe_mark_dynamic. ...":
it names a torch source, and advice about ``mark_dynamic`` the user never called. The same
violation reads here "x.shape[0] was asked to be dynamic, but the model's code makes it the
constant 4", plus the likely cause when another input has a STATIC axis of that size.

torch writes "Not all values of seq = L['x'].size()[1] in the specified range seq <= 512
satisfy the generated guard 5 <= L['x'].size()[1] and L['x'].size()[1] <= 512". The same
rejected range reads here (:class:`RejectedRange`) "x.shape[1] (seq): sizes 0–4 take another
branch at `if x.shape[1] > 4` (model.py:7); the range [0, 512] cannot hold. Fix: seq in
[5, 512]", the fix being the one :func:`~exporter.shapes.apply_suggested_fixes` applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..compat import formats
from ..axis import Axis
from ..dims import Derived, Dim, Name, STATIC
from ..guards import GUARD, RUNTIME_ASSERT, axis_of_source
from .solve import axis_ranges, holds, solve_size

if TYPE_CHECKING:
    from ..guards import Guard, Guards
    from .fixes import SuggestedFixes

__all__ = ["Exclusion", "RejectedRange", "plain_violation", "rejected_ranges"]

_BRANCH = re.compile(r"^(if|elif|while)\b|\bif\b.*\belse\b")
_CODE_WIDTH = 60


def _range(lo: int, hi: int | None) -> str:
    return f"[{lo}, {'inf' if hi is None else hi}]"


def _sizes(parts: list[tuple[int, int | None]]) -> tuple[str, bool]:
    """``[(1, 4)]`` → ``("sizes 1–4", True)``; ``[(1, 1)]`` → ``("size 1", False)``;
    ``[(0, 4), (129, None)]`` → ``("sizes 0–4 and above 128", True)``. The flag: plural."""
    words = []
    for lo, hi in parts:
        words.append(f"above {lo - 1}" if hi is None else str(lo) if lo == hi else f"{lo}–{hi}")
    plural = len(parts) > 1 or parts[0][1] != parts[0][0]
    return ("sizes " if plural else "size ") + " and ".join(words), plural


Runs = tuple[tuple[int, "int | None"], ...]  # sizes as (lo, hi) runs; hi None: unbounded


@dataclass(frozen=True)
class Exclusion:
    """Sizes one guard rejects: ``sizes`` as ``(lo, hi)`` runs (``hi`` None: unbounded)."""

    sizes: Runs
    guard: Guard

    def text(self, located: bool) -> str:
        """``sizes 1–4 take another branch at `if x.shape[1] > 4` (model.py:7)``, or
        ``size 1 fails `seq != 1` at `code` (file.py:9)`` for a guard outside a branch."""
        sizes, plural = _sizes(list(self.sizes))
        guard = self.guard
        where = f" ({guard.location})" if located and guard.location else ""
        code = (guard.code or "").strip().rstrip(":").strip()
        if len(code) > _CODE_WIDTH:
            code = code[: _CODE_WIDTH - 1] + "…"
        if code and _BRANCH.search(code):
            return f"{sizes} {'take' if plural else 'takes'} another branch at `{code}`{where}"
        at = f" at `{code}`" if code else ""
        return f"{sizes} {'fail' if plural else 'fails'} `{guard.expression}`{at}{where}"


@dataclass(frozen=True)
class RejectedRange:
    """A strict Dim's range that the model's guards narrow, in the user's terms.

    ``axis`` is the axis whose guard is cited (the Dim may name others too), ``requested``
    the Dim's range, ``allowed`` the range the guards allow (one size: the axis must be
    static), ``fix`` the policy the suggested fixes give it (what ``apply_suggested_fixes()``
    applies), ``exclusions`` the sizes each guard rejects: the guard that sets the allowed
    minimum, and the one that sets the maximum when another."""

    axis: Axis
    name: str
    requested: tuple[int, int | None]
    allowed: tuple[int, int | None]
    fix: Any
    exclusions: tuple[Exclusion, ...]

    @property
    def guard(self) -> Guard:
        """The first guard cited."""
        return self.exclusions[0].guard

    @property
    def excluded(self) -> str:
        """``sizes 1–4``, ``size 1``, ``sizes 1–4 and above 128``: the requested sizes the
        guards reject."""
        return _sizes([run for e in self.exclusions for run in e.sizes])[0]

    def _cause(self, located: bool) -> str:
        return "; ".join(e.text(located) for e in self.exclusions)

    @property
    def problem(self) -> str:
        """``x.shape[1] (seq): sizes 1–4 take another branch at `if x.shape[1] > 4`
        (model.py:7); the range [1, 512] cannot hold``."""
        return f"{self.axis.label} ({self.name}): {self._cause(located=True)}; the range {_range(*self.requested)} cannot hold"

    @property
    def fix_text(self) -> str:
        """``seq in [5, 512]``, or ``x.shape[1] static (8)`` when one size is left."""
        if isinstance(self.fix, Dim):
            return f"{self.name} in {_range(self.fix.min or 0, self.fix.max)}"
        return f"{self.axis.label} static ({self.allowed[0]})"

    @property
    def sentence(self) -> str:
        """:attr:`problem` and the fix, in one line."""
        return f"{self.problem}. Fix: {self.fix_text}"

    @property
    def row_reason(self) -> str:
        """What the axis's row says: the cause and the fix as code, without repeating the
        axis (the row is the axis) or the locations (the row has its own source column)."""
        return f"{self._cause(located=False)}; fix: {self.fix!r}"


def _failing(guard: Guard, run: tuple[int, int | None]) -> Runs:
    """The sizes of ``run`` the guard rejects, when it is on one size alone: ``s != 1``
    rejects size 1, not 0, though a range of sizes around the example must start at 2. A run
    too long to evaluate (or unbounded) is kept whole."""
    symbols: set[Any] = getattr(guard.expr, "free_symbols", set())
    lo, hi = run
    if len(symbols) != 1 or hi is None or hi - lo > _EVALUATED:
        return (run,)
    (symbol,) = symbols
    out: list[tuple[int, int | None]] = []
    current: list[int] = []
    for size in range(lo, hi + 1):
        if holds(guard.expr, symbol, size) is not True:
            current.append(size)
            continue
        if current:
            out.append((current[0], current[-1]))
        current = []
    if current:
        out.append((current[0], current[-1]))
    return tuple(out) or (run,)


_EVALUATED = 4096  # excluded sizes evaluated one by one against the guard, at most


def _guard_setting(side: int, bound_value: int | None, candidates: list[Guard], example: int) -> Guard | None:
    """The guard whose own solved range has ``bound_value`` as its min (``side`` 0) or max
    (``side`` 1): the one that sets that end of the allowed range."""
    for guard in candidates:
        symbols: set[Any] = getattr(guard.expr, "free_symbols", set())
        if len(symbols) != 1:
            continue
        solved = solve_size(guard.expr, next(iter(symbols)), example)
        if solved is not None and solved[side] == bound_value:
            return guard
    return None


def rejected_ranges(fixes: SuggestedFixes, guards: Guards | None, bound: Any) -> tuple[RejectedRange, ...]:
    """One :class:`RejectedRange` per strict Dim whose range ``fixes`` narrow (or make static)
    because of a guard, citing it. Dims the fixes leave alone, or narrow only because another
    Dim's range is equated with them (no guard), are left to torch's own words."""
    ranges = axis_ranges(guards, bound) if guards is not None else {}
    out: list[RejectedRange] = []
    seen: set[str] = set()
    for path, index, _, _ in fixes.changes():
        axis = Axis(path, index)
        before, after = fixes.before.policy(*axis), fixes.after.policy(*axis)
        if not isinstance(before, Dim) or isinstance(before, (Name, Derived)) or before.name in seen:
            continue
        example = int(bound.leaf(path).shape[index])
        if isinstance(after, Dim) and after.name == before.name:
            allowed = (after.min or 0, after.max)
        elif after is STATIC and (found := ranges.get(axis)) is not None and found.is_static:
            allowed = (found.min, found.max)
        else:
            continue
        requested = (before.min or 0, before.max)
        if allowed == requested or not (allowed[0] <= example and (allowed[1] is None or example <= allowed[1])):
            continue
        members = [Axis(e.path, e.axis) for e in fixes.before if e.policy == before] or [axis]
        candidates = _candidates(members, ranges, guards, (GUARD, RUNTIME_ASSERT))
        if not candidates:  # narrowed by an equality with another Dim, not a guard: torch's words say it
            continue
        seen.add(before.name)
        (rlo, rhi), (alo, ahi) = requested, allowed
        exclusions: list[Exclusion] = []
        for side, run, end in ((0, (rlo, alo - 1 if rhi is None else min(alo - 1, rhi)), alo),
                               (1, (ahi + 1 if ahi is not None else 0, rhi), ahi)):
            if (side == 0 and alo <= rlo) or (side == 1 and (ahi is None or (rhi is not None and ahi >= rhi))):
                continue
            guard = _guard_setting(side, end, candidates, example) or candidates[0]
            sizes = _failing(guard, run)
            if exclusions and exclusions[-1].guard == guard:
                exclusions[-1] = Exclusion(exclusions[-1].sizes + sizes, guard)
            else:
                exclusions.append(Exclusion(sizes, guard))
        shown = next((m for m in members if exclusions[0].guard.involves(m)), axis)
        out.append(RejectedRange(shown, before.name, requested, allowed, after, tuple(exclusions)))
    return tuple(out)


def _candidates(members: list[Axis], ranges: dict[Axis, Any], guards: Guards | None, kinds: tuple[str, ...]) -> list[Guard]:
    """The guards that may explain a narrowed range: those that solved it, then every other
    guard of its axes (the solver keeps the first guards that narrow, and a later one may set
    the end: Wav2Vec2's ``length // 10 - 1 > 1`` after ``1 < length``); the user's code first."""
    solved = [g for m in members if (found := ranges.get(m)) is not None for g in found.guards]
    others = [g for g in (guards.for_axes(members) if guards is not None else ()) if g.kind in kinds]
    return sorted(dict.fromkeys(solved + others), key=lambda g: not (g.file and g.code))


def plain_violation(line: str, bound: Any = None, spec: Any = None) -> str:
    """One violation line of a rejected spec (``formats.violation_lines``), rewritten when it
    is torch's "marked ... as dynamic but your code specialized it"; other lines as they are."""
    if bound is None:
        return line

    for source, constant in formats.marked_static(line):
        axis = axis_of_source(source, bound)
        if axis is None:
            continue
        text = f"{axis.label} was asked to be dynamic, but the model's code makes it the constant {constant}"
        partners = _static_axes_of_size(constant, bound, spec, besides=axis)
        if partners:
            text += (f" (it likely has to equal {', '.join(a.label for a in partners[:3])}, kept static "
                     f"with the same size: make both dynamic with one name, or this one static)")
        return text
    return line


def _static_axes_of_size(size: int, bound: Any, spec: Any, besides: Any) -> list[Any]:
    if spec is None:
        return []
    out = []
    for leaf in bound.leaves:
        for index, example in enumerate(leaf.shape):
            key = Axis(leaf.path, index)
            if key != besides and example == size and spec.policy(leaf.path, index) is STATIC:
                out.append(key)
    return out
