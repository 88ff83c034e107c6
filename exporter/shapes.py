"""Why each input dim came out dynamic or static; torch's suggested fixes; specs from examples.

* :func:`dim_outcomes` → :class:`DimOutcomes`: per input axis, the requested policy, the
  obtained result (dynamic with its symbol and range, or static with its size) and, when they
  differ, the reason: the guards that narrowed or specialized it, with the user's lines. Dims
  torch found equal share one name (the ONNX ``dim_param``).
* :func:`suggested_fixes_of` → :class:`SuggestedFixes`: torch's "Suggested fixes:" for a
  rejected spec, mapped onto the dim-policy model, with a diff against the user's spec;
  :func:`apply_suggested_fixes` re-exports with them until torch accepts (bounded).
* :func:`infer_dim_spec`: a spec from several example input sets.
* :func:`dim_warnings`: axes torch cannot keep dynamic as asked,
  known before any export.

About size-0/1 examples: plain ``torch.export`` specializes such a dim to the example value;
capture here runs size-obliviously like ``torch.onnx.export`` (see
``_torch_compat.size_oblivious_capture``), which keeps it dynamic; the table says so.
"""

from __future__ import annotations

import difflib
import re
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .dims import AUTO, STATIC, AxisEntry, AxisPolicy, Dim, DimSpec
from .errors import SpecError, first_line
from .guards import EQUALITY, GUARD, RUNTIME_ASSERT, SPECIALIZATION, Guard, Guards, axis_of_source, reported_attempt

if TYPE_CHECKING:
    from .inputs import BoundInputs
    from .session import Session

__all__ = [
    "DimFix",
    "DimOutcome",
    "DimOutcomes",
    "DimPolicyWarning",
    "DimWarning",
    "SuggestedFixes",
    "apply_suggested_fixes",
    "dim_outcomes",
    "dim_warnings",
    "infer_dim_spec",
    "parse_fix_line",
    "suggested_fixes_of",
]

DYNAMIC_RESULT, STATIC_RESULT, FAILED_RESULT = "dynamic", "static", "failed"
FRAME_COLUMNS = [
    "input", "axis", "example", "requested", "obtained", "min", "max", "symbol", "dim",
    "equal_to", "reason", "source", "note", "differs",
]


def _axis_name(path: str, axis: int) -> str:
    return f"{path}.{axis}"


def _label(path: str, axis: int) -> str:
    return f"{path}.shape[{axis}]"


def _range_text(lo: int | None, hi: int | None) -> str:
    return f"[{0 if lo is None else lo}, {'inf' if hi is None else hi}]"


def _requested_range(policy: AxisPolicy, example: int) -> tuple[int, int | None]:
    if policy is STATIC:
        return example, example
    if isinstance(policy, Dim):
        return policy.min or 0, policy.max
    return 0, None


# -- per-dim outcomes -----------------------------------------------------------------------


@dataclass(frozen=True)
class DimOutcome:
    """What became of one input axis.

    ``obtained`` is ``"dynamic"`` (with ``symbol``, the range ``[min, max]``, ``max`` None
    when unbounded, and ``dim``, the name shared by every axis torch found equal to it, also
    the ONNX ``dim_param``), ``"static"`` (``min == max ==`` the size) or ``"failed"``
    (capture failed). ``reason`` says why the result differs from ``requested`` (``differs``),
    citing guards; ``source`` is the user line of the first guard cited; ``note`` holds what
    is worth knowing even when nothing differs (size-oblivious capture of a 0/1 example, the
    equality that merged this dim with others).
    """

    input: str
    axis: int
    example: int
    policy: AxisPolicy
    obtained: str
    min: int | None = None
    max: int | None = None
    symbol: str | None = None
    dim: str | None = None
    equal_to: tuple[str, ...] = ()
    reason: str = ""
    source: str | None = None
    note: str = ""
    differs: bool = False
    guards: tuple[Guard, ...] = ()

    @property
    def requested(self) -> str:
        return repr(self.policy)

    @property
    def name(self) -> str:
        return _axis_name(self.input, self.axis)

    @property
    def dynamic(self) -> bool:
        return self.obtained == DYNAMIC_RESULT

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "axis": self.axis,
            "example": self.example,
            "requested": self.requested,
            "obtained": self.obtained,
            "min": self.min,
            "max": self.max,
            "symbol": self.symbol,
            "dim": self.dim,
            "equal_to": ", ".join(self.equal_to),
            "reason": self.reason,
            "source": self.source,
            "note": self.note,
            "differs": self.differs,
        }


@dataclass(frozen=True)
class DimOutcomes:
    """Every input axis's :class:`DimOutcome`, in input then axis order."""

    outcomes: tuple[DimOutcome, ...]
    spec: DimSpec
    bound: Any = None  # BoundInputs (for code generation)
    strategy: str | None = None
    error: str | None = None  # the capture error's first line, when capture failed

    def __iter__(self) -> Iterator[DimOutcome]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def __getitem__(self, key: Any) -> DimOutcome:
        """``dims["x", 0]`` or ``dims["x.0"]`` or ``dims[3]``."""
        if isinstance(key, int):
            return self.outcomes[key]
        if isinstance(key, str):
            path, _, axis = key.rpartition(".")
            key = (path, int(axis))
        for outcome in self.outcomes:
            if (outcome.input, outcome.axis) == tuple(key):
                return outcome
        raise KeyError(key)

    @property
    def ok(self) -> bool:
        return self.error is None

    @property
    def differing(self) -> tuple[DimOutcome, ...]:
        return tuple(o for o in self.outcomes if o.differs)

    def groups(self) -> dict[str, tuple[str, ...]]:
        """Dynamic dim name → the axes (``input.axis``) that share it."""
        out: dict[str, list[str]] = {}
        for o in self.outcomes:
            if o.dynamic and o.dim:
                out.setdefault(o.dim, []).append(o.name)
        return {k: tuple(v) for k, v in out.items()}

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([o.to_dict() for o in self.outcomes], columns=FRAME_COLUMNS)

    def obtained_spec(self) -> DimSpec | None:
        """The spec that reproduces the obtained result: a named Dim (with the obtained range)
        per group of equal dynamic dims, everything else static. None if capture failed."""
        if not self.ok or self.bound is None:
            return None
        value: dict[tuple[str, int], AxisPolicy] = {}
        for o in self.outcomes:
            if o.obtained != DYNAMIC_RESULT:
                continue
            if o.dim and o.dim.isidentifier():
                value[(o.input, o.axis)] = Dim(o.dim, min=o.min or None, max=o.max)
            else:  # a derived dim (2*s0): let torch find the relation again
                value[(o.input, o.axis)] = AUTO
        return _spec_from(value, self.bound)

    def to_code(self) -> str:
        """The exact ``dynamic_shapes=`` code that reproduces the obtained result."""
        spec = self.obtained_spec()
        if spec is None:
            head = f"# capture failed ({self.error}); this is the requested spec, not an obtained one\n"
            return head + (self.spec.to_code(self.bound) if self.bound is not None else "")
        return spec.to_code(self.bound)

    def summary(self) -> str:
        lines = []
        for o in self.outcomes:
            if o.obtained == DYNAMIC_RESULT:
                got = f"dynamic {o.dim or o.symbol} {_range_text(o.min, o.max)}"
            elif o.obtained == STATIC_RESULT:
                got = f"static {o.min}"
            else:
                got = "failed"
            why = f"  <- {o.reason}" if o.reason else ""
            lines.append(f"  {o.name:<24} {o.requested:<28} {got}{why}")
        head = "dims" + (f" (capture failed: {self.error})" if self.error else f" ({self.strategy})")
        return "\n".join([head, *lines])

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def _spec_from(value: dict[tuple[str, int], AxisPolicy], bound: BoundInputs) -> DimSpec:
    order = {leaf.path: leaf.index for leaf in bound.leaves}
    entries = tuple(
        AxisEntry(path, axis, policy)
        for (path, axis), policy in sorted(value.items(), key=lambda kv: (order[kv[0][0]], kv[0][1]))
        if policy is not STATIC
    )
    return DimSpec.parse(DimSpec(entries), bound)


def _cite(guard: Guard) -> str:
    where = f" at {guard.location}" if guard.location else ""
    code = f" (`{guard.code}`)" if guard.code else ""
    return f"{guard.expression}{where}{code}"


def _related_static(guard: Guard, path: str, axis: int, static_axes: dict[tuple[str, int], int]) -> list[str]:
    """Static axes of the guard's constant that the guard's user line mentions."""
    if guard.value is None or not guard.code:
        return []
    out = []
    for (other_path, other_axis), size in static_axes.items():
        if (other_path, other_axis) == (path, axis) or size != guard.value:
            continue
        top = other_path.split(".")[0]
        if re.search(rf"(?<![\w.]){re.escape(top)}\b", guard.code):
            out.append(_label(other_path, other_axis))
    return out


def dim_outcomes(session: Session) -> DimOutcomes:
    """The :class:`DimOutcomes` of a session (runs capture if needed)."""
    capture = session.result("capture")
    bound, spec = session.inputs, session.spec
    guards = session.guards
    if capture.status != "ok":
        return _failed_outcomes(session, capture, guards)

    from ._torch_compat import program_ranges
    from .translate import dim_names, symbol_of

    program = capture.output
    symbols = symbol_of(program, bound)
    ranges = program_ranges(program)
    names = dim_names(program, bound, spec)
    groups: dict[str, list[tuple[str, int]]] = {}
    static_axes: dict[tuple[str, int], int] = {}
    for key, symbol in symbols.items():
        if symbol.lstrip("-").isdigit():
            static_axes[key] = int(symbol)
        else:
            groups.setdefault(symbol, []).append(key)

    outcomes = []
    for leaf in bound.leaves:
        for axis, example in enumerate(leaf.shape):
            key = (leaf.path, axis)
            policy = spec.policy(*key)
            symbol = symbols.get(key)
            if symbol is None or key in static_axes:
                value = static_axes.get(key, example)
                outcomes.append(_static_outcome(leaf.path, axis, example, policy, value, guards, static_axes))
            else:
                lo, hi = ranges.get(symbol, (0, None))
                members = groups.get(symbol, [key])
                outcomes.append(
                    _dynamic_outcome(
                        leaf.path, axis, example, policy, symbol, names.get(symbol, symbol), lo, hi,
                        members, guards, spec,
                    )
                )
    return DimOutcomes(tuple(outcomes), spec, bound, capture.detail.removeprefix("strategy ") or None)


def _static_outcome(
    path: str, axis: int, example: int, policy: AxisPolicy, value: int, guards: Guards,
    static_axes: dict[tuple[str, int], int],
) -> DimOutcome:
    relevant = guards.for_axis(path, axis)
    if policy is STATIC:
        return DimOutcome(path, axis, example, policy, STATIC_RESULT, value, value, guards=relevant)
    reason, source = "", None
    specializations = [g for g in relevant if g.kind == SPECIALIZATION]
    if specializations:
        guard = specializations[0]
        related = _related_static(guard, path, axis, static_axes)
        if related:
            reason = (
                f"specialized to {value}: equal to {', '.join(related)}, which is static, "
                f"by {_cite(guard)}"
            )
        else:
            reason = f"specialized to {value} by {_cite(guard)}"
        source = guard.source
    elif example in (0, 1):
        reason = (
            f"0/1 specialization: the example size is {example} and this capture could not keep "
            "it dynamic; pass an example with size >= 2"
        )
    else:
        reason = (
            f"torch kept it static at {value} without a guard from the user's code "
            "(a dim it depends on is static, or torch's own code pinned it)"
        )
    return DimOutcome(
        path, axis, example, policy, STATIC_RESULT, value, value,
        reason=reason, source=source, differs=True, guards=relevant,
    )


def _dynamic_outcome(
    path: str, axis: int, example: int, policy: AxisPolicy, symbol: str, name: str,
    lo: int, hi: int | None, members: list[tuple[str, int]], guards: Guards, spec: DimSpec,
) -> DimOutcome:
    relevant = guards.for_axes(members)
    others = [m for m in members if m != (path, axis)]
    notes: list[str] = []
    source: str | None = None
    if others:
        equalities = [g for g in relevant if g.kind == EQUALITY and g.involves(path, axis)] or [
            g for g in relevant if g.kind == EQUALITY
        ]
        text = f"equal to {', '.join(_label(*m) for m in others)}"
        if equalities:
            text += f" by {_cite(equalities[0])}"
            source = equalities[0].source
        notes.append(text)
    if example in (0, 1):
        notes.append(
            f"example size {example} kept dynamic by size-oblivious capture "
            f"(plain torch.export would specialize it to {example})"
        )

    rlo, rhi = _requested_range(policy, example)
    narrowed = lo > rlo or (hi is not None and (rhi is None or hi < rhi))
    reason = ""
    if narrowed:
        causes: list[str] = []
        cited: list[Guard] = []
        for guard in relevant:
            if guard.kind in (GUARD, RUNTIME_ASSERT):
                causes.append(_cite(guard))
                cited.append(guard)
        for other in others:
            other_policy = spec.policy(*other)
            if isinstance(other_policy, Dim) and _requested_range(other_policy, example) == (lo, hi):
                link = next((g for g in relevant if g.kind == EQUALITY and g.involves(*other)), None)
                causes.append(
                    f"equal to {_label(*other)}, a {other_policy!r}" + (f", by {_cite(link)}" if link else "")
                )
                if link is not None:
                    cited.append(link)
        reason = f"narrowed from {_range_text(rlo, rhi)} to {_range_text(lo, hi)}: " + (
            "; ".join(causes) if causes else "no guard from the user's code was recorded"
        )
        if cited:
            source = cited[0].source
    return DimOutcome(
        path, axis, example, policy, DYNAMIC_RESULT, lo, hi,
        symbol=symbol,
        dim=name,
        equal_to=tuple(_axis_name(*m) for m in others),
        reason=reason,
        source=source,
        note="; ".join(notes),
        differs=narrowed,
        guards=relevant,
    )


_MESSAGE_SOURCE = re.compile(r"(?:L|inputs)(?:\[[^\]\s]*\])+\.(?:size\(\)|shape)\[\d+\]")


def _axes_named_in(line: str, bound: BoundInputs, spec: DimSpec) -> set[tuple[str, int]]:
    """Input axes a torch message line mentions, by source or by the user's Dim name."""
    found: set[tuple[str, int]] = set()
    for source in _MESSAGE_SOURCE.findall(line):
        axis = axis_of_source(source, bound)
        if axis is not None:
            found.add(axis)
    for entry in spec:
        if isinstance(entry.policy, Dim) and re.search(rf"(?<![\w'\"]){re.escape(entry.policy.name)}\b", line):
            found.add((entry.path, entry.axis))
    return found


def _failed_outcomes(session: Session, capture: Any, guards: Guards) -> DimOutcomes:
    bound, spec = session.inputs, session.spec
    attempt = reported_attempt(capture.attempts)
    error = attempt.error if attempt is not None else capture.error
    text = str(error) if error is not None else ""
    details = [ln.strip()[2:] for ln in text.splitlines() if ln.strip().startswith("- ")]
    fixes = suggested_fixes_of(session)
    fix_by_axis = {(row[0], row[1]): row for row in fixes.changes()}
    broadcast = _is_size_one_broadcast(text)
    outcomes = []
    for leaf in bound.leaves:
        for axis, example in enumerate(leaf.shape):
            key = (leaf.path, axis)
            policy = spec.policy(*key)
            relevant = guards.for_axis(*key)
            reasons = [d for d in details if key in _axes_named_in(d, bound, spec)]
            if not reasons and broadcast and policy is not STATIC and example in (0, 1):
                reasons.append(
                    f"a size-{example} example kept dynamic cannot broadcast against another size "
                    f"({first_line(error)}); make this axis STATIC or pass an example with size >= 2"
                )
            if key in fix_by_axis:
                reasons.append(f"fix: {fix_by_axis[key][3]}")
            source = next((g.source for g in relevant if g.source), None)
            outcomes.append(
                DimOutcome(
                    leaf.path, axis, example, policy, FAILED_RESULT,
                    reason="; ".join(reasons), source=source, differs=bool(reasons), guards=relevant,
                )
            )
    return DimOutcomes(
        tuple(outcomes), spec, bound, attempt.strategy if attempt else None,
        error=first_line(error) if error is not None else "capture failed",
    )


def _is_size_one_broadcast(text: str) -> bool:
    return "must match the size of tensor" in text


# -- suggested fixes ------------------------------------------------------------------------

_DIM_FIX = re.compile(r"^Dim\(\s*['\"](\w+)['\"]\s*(?:,\s*min\s*=\s*(\d+))?\s*(?:,\s*max\s*=\s*(\d+))?\s*\)$")
_MARKED_STATIC = re.compile(r"You marked (\S+) as dynamic but your code specialized it to be a constant \((-?\d+)\)")
_ZERO_ONE = re.compile(r"0/1 specialized due to hint of (\d+) for dimension (\S+?)\.?$")
_NOT_ALL_VALUES = re.compile(r"Not all values of (\S+) = .* satisfy the generated guard (.*)$")


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
    axes: tuple[tuple[str, int], ...]
    policy: AxisPolicy | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "fix": self.text,
            "name": self.name,
            "kind": self.kind,
            "axes": ", ".join(_axis_name(*a) for a in self.axes),
            "policy": repr(self.policy) if self.policy is not None else None,
        }


@dataclass(frozen=True)
class SuggestedFixes:
    """torch's suggested fixes for a rejected spec, mapped onto the spec.

    ``before`` is the user's spec, ``after`` the spec with the fixes applied, ``diff`` a
    unified diff of their ``dynamic_shapes`` code, ``unapplied`` the lines that named no
    known dim, ``error`` why ``after`` could not be built (then ``after == before``)."""

    fixes: tuple[DimFix, ...]
    before: DimSpec
    after: DimSpec
    diff: str = ""
    unapplied: tuple[str, ...] = ()
    error: str | None = None
    before_code: str = ""
    after_code: str = ""

    def __bool__(self) -> bool:
        return self.after != self.before

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
            {"input": p, "axis": a, "before": old, "after": new, "fix": by_axis.get((p, a), "")}
            for p, a, old, new in self.changes()
        ]
        return pd.DataFrame(rows, columns=["input", "axis", "before", "after", "fix"])

    def to_code(self) -> str:
        return self.after_code

    def summary(self) -> str:
        if not self.fixes and not self.unapplied:
            return "no suggested fixes"
        lines = ["suggested fixes:"]
        lines.extend(f"  {f.text}" for f in self.fixes)
        lines.extend(f"  {u}  (not applied: names no dim of this spec)" for u in self.unapplied)
        if self.error:
            lines.append(f"  could not apply: {self.error}")
        if self.diff:
            lines.extend(["", self.diff])
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())


def parse_fix_line(line: str) -> tuple[str, str, Any]:
    """``"dx = Dim('dx', min=3, max=6)"`` → ``("dx", "range", Dim("dx", min=3, max=6))``;
    ``"_x0 = dx"`` → ``("_x0", "equal", "dx")``; ``"d = 32"`` → ``("d", "static", 32)``;
    anything else (``"dy = dx + 1"``) → ``(name, "derived", "dx + 1")``."""
    name, _, rhs = (part.strip() for part in line.partition("="))
    rhs = rhs.split("#", 1)[0].strip()
    match = _DIM_FIX.match(rhs)
    if match:
        lo, hi = match.group(2), match.group(3)
        return name, "range", Dim(name, min=int(lo) if lo else None, max=int(hi) if hi else None)
    if rhs.lstrip("-").isdigit():
        return name, "static", int(rhs)
    if rhs.isidentifier():
        return name, "equal", rhs
    return name, "derived", rhs


def _axes_of_name(name: str, spec: DimSpec, bound: BoundInputs) -> tuple[tuple[str, int], ...]:
    axes = tuple((e.path, e.axis) for e in spec if isinstance(e.policy, Dim) and e.policy.name == name)
    if axes:
        return axes
    found = axis_of_source(name, bound)
    return (found,) if found is not None else ()


def _torch_fix_lines(error: BaseException | None) -> tuple[str, ...]:
    from .capture import suggested_fixes

    return suggested_fixes(error) if error is not None else ()


def suggested_fixes_of(session: Session) -> SuggestedFixes:
    """torch's suggested fixes for the session's failed capture (empty when it succeeded)."""
    capture = session.result("capture")
    bound, spec = session.inputs, session.spec
    attempt = None if capture.status == "ok" else reported_attempt(capture.attempts)
    error = attempt.error if attempt is not None else None
    return build_fixes(error, spec, bound, session.guards if error is not None else None)


def _equal_groups(guards: Guards | None) -> list[set[tuple[str, int]]]:
    """Sets of input axes the guards equate (transitively)."""
    groups: list[set[tuple[str, int]]] = []
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
    for line in text.splitlines():
        match = _NOT_ALL_VALUES.search(line.strip())
        if not match:
            continue
        name, guard_text = match.group(1), match.group(2)
        axes = _axes_of_name(name, spec, bound)
        if not axes:
            continue
        lows = [int(v) for v in re.findall(r"(?:^|\s)(\d+) <= ", guard_text)]
        highs = [int(v) for v in re.findall(r" <= (\d+)(?:\s|$)", guard_text)]
        group = set(axes).union(*[g for g in groups if g & set(axes)])
        dims = {spec.policy(*a) for a in group if isinstance(spec.policy(*a), Dim)}
        for dim in sorted(dims, key=lambda d: d.name):
            lo = max(lows) if lows else dim.min
            hi = min(highs) if highs else dim.max
            fixed = Dim(dim.name, min=lo or None, max=hi)
            reason = f"  # {', '.join(_label(*a) for a in sorted(axes))} is equal to it and guarded by {guard_text}"
            out.append((f"{dim.name} = {fixed!r}{reason}", dim.name, "range", fixed))
    return out


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
    for name, value in _MARKED_STATIC.findall(text):
        if name not in named:
            parsed.append((f"{name} = {value}", name, "static", int(value)))
            named.add(name)
    for line in text.splitlines():
        match = _ZERO_ONE.search(line.strip())
        if match and match.group(2) not in named:
            parsed.append((f"{match.group(2)} = {match.group(1)}", match.group(2), "static", int(match.group(1))))
            named.add(match.group(2))
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
            if not (kind == "range" and any(name == v for v in equal.values())):
                unapplied.append(line)  # a root only other fixes refer to is fine
            continue
        if kind == "static":
            policy: AxisPolicy | None = STATIC
        elif kind in ("range", "equal"):
            policy = target_policy(name)
        else:
            policy = AUTO
        for axis in axes:
            value[axis] = policy
        if axis_of_source(name, bound) is not None:  # torch named the axis by its source
            line = f"{_label(*axes[0])} = {fix_value}" if kind == "static" else line
        fixes.append(DimFix(line, name, kind, axes, policy))

    if _is_size_one_broadcast(text):
        for leaf in bound.leaves:
            for axis, size in enumerate(leaf.shape):
                key = (leaf.path, axis)
                if size in (0, 1) and value.get(key, STATIC) is not STATIC:
                    value[key] = STATIC
                    fixes.append(
                        DimFix(
                            f"{_label(*key)} = STATIC  # size-{size} example that broadcasts",
                            _axis_name(*key), "static-broadcast", (key,), STATIC,
                        )
                    )

    after, problem = spec, None
    try:
        after = _spec_from(value, bound)
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


def apply_suggested_fixes(session: Session, max_rounds: int = 5) -> tuple[Session, tuple[SuggestedFixes, ...]]:
    """Re-export with the suggested fixes until capture succeeds, no new fix comes, or
    ``max_rounds`` rounds ran. Returns the last session and the fixes applied per round."""
    current = session
    history: list[SuggestedFixes] = []
    seen = {current.spec}
    for _ in range(max_rounds):
        if current.run("capture").status == "ok":
            break
        fixes = current.suggested_fixes
        if not fixes or fixes.after in seen:
            break
        seen.add(fixes.after)
        history.append(fixes)
        current = current.with_dims(fixes.after)
    return current, tuple(history)


# -- inference from more inputs -------------------------------------------------------------


def _examples(more_inputs: Any) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    from ._torch_compat import additional_inputs_examples

    held = additional_inputs_examples(more_inputs)
    if held is not None:
        return held
    if isinstance(more_inputs, (dict, tuple)) or not isinstance(more_inputs, Iterable):
        raise SpecError(
            f"more_inputs must be a list of input sets or a torch.export.AdditionalInputs, "
            f"not {type(more_inputs).__name__}",
            hint="session.infer_dims([(x2,), (x3,)]) or [{'x': x2}, {'x': x3}] or [((x2,), {'mask': m2})]",
        )
    out = []
    for item in more_inputs:
        if isinstance(item, dict):
            out.append(((), dict(item)))
        elif (
            isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], tuple) and isinstance(item[1], dict)
        ):
            out.append((item[0], dict(item[1])))
        elif isinstance(item, (tuple, list)):
            out.append((tuple(item), {}))
        else:
            out.append(((item,), {}))
    return out


def infer_dim_spec(model: Any, bound: BoundInputs, more_inputs: Any, *, spec: DimSpec | None = None) -> DimSpec:
    """A spec from ``bound`` plus more example input sets: an axis whose size varies becomes a
    named Dim over the observed ``[min, max]``, every other axis static. Axes whose sizes vary
    identically across all sets share one Dim (torch requires equal named dims to share a
    name); the name is the user's Dim name for that axis if ``spec`` has one."""
    from .inputs import bind_inputs

    sets = [bound]
    for args, kwargs in _examples(more_inputs):
        other = bind_inputs(model, args, kwargs)
        for leaf in bound.leaves:
            try:
                mine = other.leaf(leaf.path)
            except KeyError:
                raise SpecError(
                    "is missing from an additional input set", input=leaf.path,
                    hint="every input set must have the same inputs and structure",
                ) from None
            if mine.rank != leaf.rank:
                raise SpecError(
                    f"has rank {mine.rank} in an additional input set but {leaf.rank} in the example",
                    input=leaf.path,
                    hint="only sizes may vary between input sets, not ranks",
                )
        sets.append(other)
    observed: dict[tuple[int, ...], list[tuple[str, int]]] = {}
    for leaf in bound.leaves:
        for axis in range(leaf.rank):
            sizes = tuple(s.leaf(leaf.path).shape[axis] for s in sets)
            if len(set(sizes)) > 1:
                observed.setdefault(sizes, []).append((leaf.path, axis))
    user_names = {(e.path, e.axis): e.policy.name for e in (spec or DimSpec()) if isinstance(e.policy, Dim)}
    value: dict[tuple[str, int], AxisPolicy] = {}
    taken: set[str] = set()
    for sizes, axes in observed.items():
        name = next((user_names[a] for a in axes if a in user_names), None)
        if name is None or name in taken:
            path, axis = axes[0]
            name = re.sub(r"\W", "_", path) + f"_dim{axis}"
            if not name.isidentifier():
                name = f"d_{name}"
        taken.add(name)
        dim = Dim(name, min=min(sizes) or None, max=max(sizes))
        for a in axes:
            value[a] = dim
    return _spec_from(value, bound)


# -- what cannot stay dynamic, known before export ------------------------------------------


class DimPolicyWarning(UserWarning):
    """An axis asked to be dynamic that torch cannot keep dynamic."""


@dataclass(frozen=True)
class DimWarning:
    input: str
    axis: int
    message: str
    hint: str

    def __str__(self) -> str:
        return f"{_label(self.input, self.axis)}: {self.message}; fix: {self.hint}"


def dim_warnings(spec: DimSpec, bound: BoundInputs) -> tuple[DimWarning, ...]:
    """Axes the spec asks to be dynamic that torch cannot keep dynamic, before any export:
    a named Dim whose max is below 2 (torch rejects the range), and, on a torch without
    size-oblivious capture, a size-0/1 example (torch would specialize it)."""
    from ._torch_compat import size_oblivious_available

    oblivious = size_oblivious_available()
    out = []
    for entry in spec:
        example = bound.leaf(entry.path).shape[entry.axis]
        policy = entry.policy
        if isinstance(policy, Dim) and policy.max is not None and policy.max < 2:
            out.append(
                DimWarning(
                    entry.path, entry.axis,
                    f"{policy!r} allows only sizes up to {policy.max}; torch.export needs max >= 2 "
                    "for a dynamic dim and rejects this range",
                    f"make the axis STATIC, or use Dim({policy.name!r}, max=2) or more",
                )
            )
        elif not oblivious and example in (0, 1):
            out.append(
                DimWarning(
                    entry.path, entry.axis,
                    f"the example size is {example} and this torch cannot capture size-obliviously: "
                    f"torch.export specializes it to {example}"
                    + (" (and rejects a dynamic request)" if policy is not AUTO else ""),
                    "pass an example with size >= 2 on this axis",
                )
            )
    return tuple(out)
