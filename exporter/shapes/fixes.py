"""torch's suggested fixes for a rejected spec, mapped onto the dim-policy model and applied."""

from __future__ import annotations

import dataclasses
import difflib
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, Self, TypeVar

from ..artifacts import CapturedExport
from ..compat import formats
from ..axis import Axis
from ..dims import AUTO, STATIC, AxisPolicy, Derived, Dim, DimSpec, Name
from ..errors import SpecError
from ..presentation import Presentable
from ..guards import EQUALITY, Guards, axis_of_source, reported_attempt
from .common import spec_from
from .solve import axis_ranges

if TYPE_CHECKING:
    from ..inputs import BoundInputs
    from ..patches import SuggestedPatch
    from ..options import ExportOptions
    from ..pipeline.records import StageResult


def is_size_one_broadcast(text: str) -> bool:
    return formats.is_size_mismatch(text)


@dataclass(frozen=True)
class DimFix:
    """One of torch's suggested fixes in dim-policy terms.

    ``kind``: ``range`` (``dx = Dim('dx', min=3, max=6)``), ``equal`` (``dy = dx``: the same
    dim), ``static`` (``d = 32``), ``derived`` (``dy = dx + 1``: not expressible here, the axes
    become AUTO so torch finds the relation), ``static-broadcast`` (the exporter's own fix for
    a size-1 example that must broadcast). ``axes`` are the axes it changes, ``policy`` the
    policy they get."""

    text: str
    name: str
    kind: str
    axes: tuple[Axis, ...]
    policy: AxisPolicy | None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(Axis.parse(a) for a in self.axes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "fix": self.text,
            "name": self.name,
            "kind": self.kind,
            "axes": ", ".join(a.dotted for a in self.axes),
            "policy": repr(self.policy) if self.policy is not None else None,
        }


@dataclass(frozen=True, repr=False)
class SuggestedFixes(Presentable):
    """torch's suggested fixes for a rejected spec, mapped onto the spec.

    ``before`` is the user's spec, ``after`` the spec with the fixes applied, ``diff`` a
    unified diff of their ``dynamic_shapes`` code, ``unapplied`` the lines that named no
    known dim, ``error`` why ``after`` could not be built (then ``after == before``).
    ``patches``: the model patches (:mod:`exporter.patches`) that apply to the model, offered
    when its capture or verification failed, each with the diff of what it replaces;
    :func:`apply_suggested_fixes` applies them first."""

    fixes: tuple[DimFix, ...]
    before: DimSpec
    after: DimSpec
    diff: str = ""
    unapplied: tuple[str, ...] = ()
    error: str | None = None
    before_code: str = ""
    after_code: str = ""
    patches: tuple[SuggestedPatch, ...] = ()

    def __bool__(self) -> bool:
        return self.after != self.before or bool(self.patches)

    @property
    def patch_names(self) -> tuple[str, ...]:
        """What ``ExportOptions(patches=...)`` takes to apply :attr:`patches`."""
        return tuple(p.name for p in self.patches)

    def __iter__(self) -> Iterator[DimFix]:
        return iter(self.fixes)

    def __len__(self) -> int:
        return len(self.fixes)

    def changes(self) -> list[tuple[str, int, str, str]]:
        """``(input, axis, before, after)`` for every axis whose policy changes."""
        keys = {(e.path, e.axis) for e in self.before} | {(e.path, e.axis) for e in self.after}
        out = []
        for path, axis in keys:
            old, new = self.before.policy(path, axis), self.after.policy(path, axis)
            if old != new:
                out.append((path, axis, repr(old), repr(new)))
        order = [(e.path, e.axis) for e in self.before] + [(e.path, e.axis) for e in self.after]
        return sorted(out, key=lambda row: order.index((row[0], row[1])))

    def to_frame(self) -> Any:
        """One row per changed axis: input, axis, before, after, fix (torch's line)."""
        import pandas as pd

        by_axis = {a: f.text for f in self.fixes for a in f.axes}
        rows = [
            {"input": p, "axis": a, "before": old, "after": new, "fix": by_axis.get(Axis(p, a), "")}
            for p, a, old, new in self.changes()
        ]
        return pd.DataFrame(rows, columns=["input", "axis", "before", "after", "fix"])

    def to_code(self) -> str:
        return self.after_code


def parse_fix_line(line: str) -> tuple[str, str, Any]:
    """``"dx = Dim('dx', min=3, max=6)"`` → ``("dx", "range", Dim("dx", min=3, max=6))``;
    ``"_x0 = dx"`` → ``("_x0", "equal", "dx")``; ``"d = 32"`` → ``("d", "static", 32)``;
    anything else (``"dy = dx + 1"``) → ``(name, "derived", "dx + 1")``."""
    name, _, rhs = (part.strip() for part in line.partition("="))
    rhs = rhs.split("#", 1)[0].strip()
    call = formats.dim_call(rhs)
    if call is not None:
        return name, "range", Dim(name, min=call[1], max=call[2])
    if rhs.lstrip("-").isdigit():
        return name, "static", int(rhs)
    if rhs.isidentifier():
        return name, "equal", rhs
    return name, "derived", rhs


def _derived_policy(text: Any, target_policy: Any) -> Derived | None:
    """torch's ``b = a + 1`` / ``b = 2*a`` as a :class:`Derived` of ``a``'s (fixed) Dim; None
    when the right side is not ``scale * dim + offset``."""
    parts = formats.derived_fix(text) if isinstance(text, str) else None
    if parts is None:
        return None
    name, scale, offset = parts
    root = target_policy(name)
    if not isinstance(root, Dim) or isinstance(root, Name):
        return None
    return Derived(root, scale, offset)


def _axes_of_name(name: str, spec: DimSpec, bound: BoundInputs) -> tuple[Axis, ...]:
    axes = tuple(Axis(e.path, e.axis) for e in spec if isinstance(e.policy, Dim) and e.policy.name == name)
    if axes:
        return axes
    found = axis_of_source(name, bound)
    return (found,) if found is not None else ()


def _torch_fix_lines(error: BaseException | None) -> tuple[str, ...]:
    return formats.suggested_fix_lines(error) if error is not None else ()


def suggested_fixes_of(session: CapturedExport) -> SuggestedFixes:
    """torch's suggested fixes for the session's failed capture (empty when it succeeded)."""
    capture = session.result("capture")
    bound, spec = session.inputs, session.spec
    attempt = None if capture.status == "ok" else reported_attempt(capture.attempts)
    error = attempt.error if attempt is not None else None
    return build_fixes(error, spec, bound, session.guards if error is not None else None)


def _equal_groups(guards: Guards | None) -> list[set[Axis]]:
    """Sets of input axes the guards equate (transitively)."""
    groups: list[set[Axis]] = []
    for guard in guards or ():
        if guard.kind != EQUALITY:
            continue
        merged = set(guard.axes)
        for group in [g for g in groups if g & merged]:
            merged |= group
            groups.remove(group)
        groups.append(merged)
    return groups


def _range_fixes_from_violations(
    text: str, spec: DimSpec, bound: BoundInputs, guards: Guards | None
) -> list[tuple[str, str, str, Any]]:
    """torch reports "Not all values of L['x'].size()[0] ... satisfy the generated guard
    5 <= L['x'].size()[0] and L['x'].size()[0] <= 6" without a fix when the axis is AUTO but
    equal to a named Dim: the fix is that Dim's range narrowed to the guard's."""
    out = []
    groups = _equal_groups(guards)
    for name, guard_text in formats.range_violations(text):
        axes = _axes_of_name(name, spec, bound)
        if not axes:
            continue
        lows, highs = formats.guard_bounds(guard_text)
        group = set(axes).union(*[g for g in groups if g & set(axes)])
        dims = {policy for a in group if isinstance(policy := spec.policy(*a), Dim)}
        for dim in sorted(dims, key=lambda d: d.name):
            lo = max(lows) if lows else dim.min
            hi = min(highs) if highs else dim.max
            fixed = Dim(dim.name, min=lo or None, max=hi)
            reason = f"  # {', '.join(a.label for a in sorted(axes))} is equal to it and guarded by {guard_text}"
            out.append((f"{dim.name} = {fixed!r}{reason}", dim.name, "range", fixed))
    return out


def _guard_fixes(spec: DimSpec, bound: BoundInputs, guards: Guards | None) -> list[tuple[str, str, str, Any]]:
    """Fixes solved from the guard expressions (``exporter.shapes.solve``): each strict Dim
    narrowed to the range every guard on its axes allows (``s != 1`` → ``min=2``,
    ``s == Min(128, s)`` → ``max=128``, ``1 + (s - 1) // 4 != 1`` → ``min=5``), all dims at
    once; a range of one size makes the dim static."""
    if guards is None:
        return []
    ranges = axis_ranges(guards, bound)
    out: list[tuple[str, str, str, Any]] = []
    for name, dim in spec.named_dims().items():
        if isinstance(dim, Name):
            continue  # a name is bounded by the guards already: nothing to fix
        axes = [Axis(e.path, e.axis) for e in spec if isinstance(e.policy, Dim) and e.policy.name == name]
        lo, hi = dim.min or 0, dim.max
        cited: list[str] = []
        for axis in axes:
            found = ranges.get(axis)
            if found is None:
                continue
            lo = max(lo, found.min)
            hi = found.max if hi is None else (hi if found.max is None else min(hi, found.max))
            cited.extend(g.expression for g in found.guards)
        if (lo, hi) == (dim.min or 0, dim.max):
            continue
        why = "  # from " + "; ".join(dict.fromkeys(cited)) if cited else ""
        if hi is not None and hi <= lo:
            out.append((f"{name} = {lo}{why}", name, "static", lo))
            continue
        fixed = Dim(name, min=lo or None, max=hi)
        out.append((f"{name} = {fixed!r}{why}", name, "range", fixed))
    return out


def _merge_guard_fixes(parsed: list[tuple[str, str, str, Any]], solved: list[tuple[str, str, str, Any]]) -> None:
    """Add the solved fixes to torch's: a solved range replaces torch's range for the same dim,
    intersected with it (torch's ``seq = Dim('seq')`` is often the unchanged dim); torch's
    static and equality fixes stay."""
    index = {name: i for i, (_, name, _, _) in enumerate(parsed)}
    for line, name, kind, value in solved:
        i = index.get(name)
        if i is None:
            parsed.append((line, name, kind, value))
            continue
        _, _, torch_kind, torch_value = parsed[i]
        if torch_kind != "range" or kind != "range" or not isinstance(torch_value, Dim):
            if torch_kind == "range":
                parsed[i] = (line, name, kind, value)
            continue
        lo = max(value.min or 0, torch_value.min or 0)
        his = [h for h in (value.max, torch_value.max) if h is not None]
        hi = min(his) if his else None
        if hi is not None and hi <= lo:
            parsed[i] = (f"{name} = {lo}", name, "static", lo)
        else:
            fixed = Dim(name, min=lo or None, max=hi)
            parsed[i] = (line.replace(repr(value), repr(fixed), 1), name, "range", fixed)


def build_fixes(
    error: BaseException | None, spec: DimSpec, bound: BoundInputs, guards: Guards | None = None
) -> SuggestedFixes:
    """Map a torch error's suggested fixes (and the exporter's own, for violations torch
    reports without one) onto ``spec``. ``guards`` (of the failed attempt) let an AUTO axis's
    violation be traced to the named Dim it was found equal to."""
    text = str(error) if error is not None else ""
    parsed: list[tuple[str, str, str, Any]] = []  # (line, name, kind, value)
    for line in _torch_fix_lines(error):
        try:
            parsed.append((line, *parse_fix_line(line)))
        except SpecError:
            parsed.append((line, line.partition("=")[0].strip(), "derived", None))
    named = {name for _, name, _, _ in parsed}
    # Violations torch states without a fix: a DYNAMIC axis the code pins to a constant, a
    # DYNAMIC axis 0/1-specialized (no size-oblivious capture).
    for name, size in formats.marked_static(text) + formats.zero_one_specializations(text):
        if name not in named:
            parsed.append((f"{name} = {size}", name, "static", size))
            named.add(name)
    if error is not None and formats.is_constraint_violation(error):
        _merge_guard_fixes(parsed, _guard_fixes(spec, bound, guards))
        named = {name for _, name, _, _ in parsed}
    for line, name, kind, fix_value in _range_fixes_from_violations(text, spec, bound, guards):
        if name not in named:
            parsed.append((line, name, kind, fix_value))
            named.add(name)

    ranges = {name: value for _, name, kind, value in parsed if kind == "range"}
    equal = {name: value for _, name, kind, value in parsed if kind == "equal"}
    existing = spec.named_dims()

    def target_policy(name: str) -> AxisPolicy:
        seen = set()
        while name in equal and name not in seen:
            seen.add(name)
            name = equal[name]
        if name in ranges:
            return ranges[name]
        return existing.get(name) or Dim(name)

    value: dict[tuple[str, int], AxisPolicy] = {(e.path, e.axis): e.policy for e in spec}
    fixes: list[DimFix] = []
    unapplied: list[str] = []
    for line, name, kind, fix_value in parsed:
        axes = _axes_of_name(name, spec, bound)
        if not axes:
            roots = set(equal.values()) | {
                parts[0] for _, _, k, v in parsed if k == "derived" and isinstance(v, str)
                and (parts := formats.derived_fix(v)) is not None
            }
            if not (kind == "range" and name in roots):
                unapplied.append(line)  # a root only other fixes refer to is fine
            continue
        if kind == "static":
            policy: AxisPolicy = STATIC
        elif kind in ("range", "equal"):
            policy = target_policy(name)
        else:
            policy = _derived_policy(fix_value, target_policy) or AUTO
        for axis in axes:
            value[axis] = policy
        if axis_of_source(name, bound) is not None:  # torch named the axis by its source
            line = f"{axes[0].label} = {fix_value}" if kind == "static" else line
        fixes.append(DimFix(line, name, kind, axes, policy))

    if is_size_one_broadcast(text):
        for leaf in bound.leaves:
            for index, example in enumerate(leaf.shape):
                key = Axis(leaf.path, index)
                if example in (0, 1) and value.get(key, STATIC) is not STATIC:
                    value[key] = STATIC
                    fixes.append(
                        DimFix(
                            f"{key.label} = STATIC  # size-{example} example that broadcasts",
                            key.dotted, "static-broadcast", (key,), STATIC,
                        )
                    )

    after, problem = spec, None
    try:
        after = spec_from(value, bound)
    except SpecError as exc:
        problem = exc.reason
    before_code = spec.to_code(bound)
    after_code = after.to_code(bound)
    diff = "\n".join(
        difflib.unified_diff(
            before_code.splitlines(), after_code.splitlines(), "your dynamic_shapes", "with the fixes", lineterm=""
        )
    )
    return SuggestedFixes(tuple(fixes), spec, after, diff, tuple(unapplied), problem, before_code, after_code)


_SOURCE_LINE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)\b")


def with_patches(fixes: SuggestedFixes, model: Any, applied: tuple[str, ...], failed: bool,
                 source: str | None = None, pinned_at: tuple[tuple[str, int], ...] = ()) -> SuggestedFixes:
    """``fixes`` plus the model patches that apply to ``model`` and are not ``applied`` yet,
    when the export or its verification ``failed``. ``source``: the failing stage's
    ``file:line …``, when a stage failed there: then only the patches that replace the function
    holding that line, or one of ``pinned_at`` (the lines whose guards made a dim static: torch
    may report the failure at a later use of the dim than the loop that pinned it)."""
    if not failed:
        return fixes
    from ..patches import suggested_patches

    match = _SOURCE_LINE.match(source or "")
    at = (match["file"], int(match["line"])) if match and os.path.isfile(match["file"]) else None
    places = tuple(p for p in ((at,) if at else ()) + pinned_at if os.path.isfile(p[0]))
    if source and not places:
        return fixes  # a failure at a line no patch can be matched against: offer none
    found = suggested_patches(model, exclude=applied, at=places if source else None)
    return dataclasses.replace(fixes, patches=found) if found else fixes


class FixableSession(Protocol):
    """What applying fixes needs of a session (an :class:`exporter.Session`)."""

    @property
    def spec(self) -> DimSpec: ...

    @property
    def options(self) -> ExportOptions: ...

    @property
    def suggested_fixes(self) -> SuggestedFixes: ...

    def run(self, until: str = ..., *, observer: Any = ..., cancel: Any = ...) -> StageResult: ...

    def with_options(self, **changes: Any) -> Self: ...

    def with_dims(self, dynamic_shapes: Any = ..., *, dynamic_axes: Any = ...) -> Self: ...


FixedSession = TypeVar("FixedSession", bound=FixableSession)


def apply_suggested_fixes(session: FixedSession, max_rounds: int = 5, *, observer: Any = None,
                          cancel: Any = None) -> tuple[FixedSession, tuple[SuggestedFixes, ...]]:
    """Re-export with the suggested fixes until capture succeeds, no new fix comes, or
    ``max_rounds`` rounds ran. Returns the last session and the fixes applied per round.
    Suggested model patches come first, as a round of their own (the spec unchanged): a patch
    often keeps dynamic a dim the dim fixes would make static; the dim fixes of a capture
    that still fails come next.
    ``observer`` / ``cancel`` as for :meth:`Session.run`: once cancelled, the rounds stop and
    the session reached so far is returned (its capture not run)."""
    current = session
    history: list[SuggestedFixes] = []
    seen = {current.spec}
    patched = False
    for _ in range(max_rounds):
        status = current.run("capture", observer=observer, cancel=cancel).status
        if status == "cancelled":
            break
        fixes = current.suggested_fixes
        if fixes.patches and not patched:  # a round of their own, the spec as it is
            patched = True
            history.append(fixes)
            current = current.with_options(patches=current.options.patches + fixes.patch_names)
            continue
        if status == "ok" or not fixes or fixes.after in seen:
            break
        seen.add(fixes.after)
        history.append(fixes)
        current = current.with_dims(fixes.after)
    return current, tuple(history)
