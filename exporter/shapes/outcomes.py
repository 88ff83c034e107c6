"""Per-dim outcomes: why each input dim came out dynamic, static or failed."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..artifacts import CapturedExport
from ..axis import Axis
from ..dims import AUTO, STATIC, AxisPolicy, Dim, DimSpec
from ..errors import first_line
from ..presentation import Presentable
from ..guards import (
    EQUALITY,
    GUARD,
    RUNTIME_ASSERT,
    SPECIALIZATION,
    Guard,
    Guards,
    axes_in_text,
    input_sources,
    reported_attempt,
)
from .common import spec_from
from .fixes import is_size_one_broadcast, suggested_fixes_of
from .reasons import DimBound, axes_text, axis_family, bounds_text, dim_bounds, guard_where, short_source
from ..compat import formats, program_ranges
from ..program_symbols import dim_names, symbol_of
from .solve import axis_ranges
from .violations import plain_violation, rejected_ranges

if TYPE_CHECKING:
    from ..inputs import BoundInputs
    from ..pipeline.records import StageResult


DYNAMIC_RESULT, STATIC_RESULT, FAILED_RESULT = "dynamic", "static", "failed"
NOT_RUN_RESULT = "not run"  # capture failed for another reason than this axis: nothing is known of it
FRAME_COLUMNS = [
    "input", "axis", "example", "requested", "obtained", "min", "max", "symbol", "dim",
    "equal_to", "why", "reason", "source", "note", "differs",
]


# The capture torch.onnx.export uses (backed_size_oblivious) reports a dynamic dim's range from
# 0; torch's own export keeps 0 and 1 out (it specializes them). An empty tensor is not a size
# anyone exports for, and the ONNX model was only traced at sizes >= 1, so a lower bound of 0
# is shown as 1, with this reason beside it.
ZERO_MIN_NOTE = ("torch's range starts at 0 because this capture is size-oblivious (as torch.onnx.export's); "
                 "size 0 is an empty tensor, so the range is shown from 1. Plain torch.export would start at 2: "
                 "it specializes sizes 0 and 1.")


UNCHECKED_NOTE = "the ONNX dim stays symbolic"  # how the note on a range the ONNX model does not check starts
_TIED = "equal to "


def range_text(low: int | None, high: int | None) -> str:
    """An obtained range, ``[1, inf]`` style: ``high`` None is ``inf``; a lower bound of 0 (or
    none) is 1 (:data:`ZERO_MIN_NOTE` says why)."""
    return f"[{max(low or 0, 1)}, {'inf' if high is None else high}]"


def _requested_range(policy: AxisPolicy, example: int) -> tuple[int, int | None]:
    if policy is STATIC:
        return example, example
    if isinstance(policy, Dim):
        return policy.min or 0, policy.max
    return 0, None


@dataclass(frozen=True)
class DimOutcome:
    """What became of one input axis.

    ``obtained`` is ``"dynamic"`` (with ``symbol``, the range ``[min, max]``, ``max`` None
    when unbounded, and ``dim``, the name shared by every axis torch found equal to it, also
    the ONNX ``dim_param``), ``"static"`` (``min == max ==`` the size; also a STATIC axis of a
    failed capture: static is what was asked and what any capture gives), ``"failed"`` (capture
    failed because of this axis: ``reason`` says how) or ``"not run"`` (capture failed for
    another reason: nothing is known of this axis). ``reason`` says why the result differs from ``requested`` (``differs``),
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
    bounds: tuple[DimBound, ...] = ()  # the range's bounds in words (shapes.reasons)

    @property
    def requested(self) -> str:
        return repr(self.policy)

    @property
    def axis_key(self) -> Axis:
        """This outcome's :class:`~exporter.axis.Axis` (``input``, ``axis``)."""
        return Axis(self.input, self.axis)

    @property
    def name(self) -> str:
        """``x.0``."""
        return self.axis_key.dotted

    @property
    def dynamic(self) -> bool:
        return self.obtained == DYNAMIC_RESULT

    @property
    def range_text(self) -> str:
        """The obtained range as a person reads it: ``[1, inf]`` for a dynamic dim (see
        :data:`ZERO_MIN_NOTE`), the size for a static one, "" when capture failed or did not
        reach this axis."""
        if self.obtained == DYNAMIC_RESULT:
            return range_text(self.min, self.max)
        return str(self.min) if self.obtained == STATIC_RESULT else ""

    @property
    def why(self) -> str:
        """The range in the user's terms: ``at least 2: q_length > 1, transformers/…/sdpa_attention.py:149;
        at most 512: position embeddings, transformers/models/bert/modeling_bert.py:95``; ""
        when nothing narrowed it (or it is not dynamic: ``reason`` says why)."""
        return bounds_text(self.bounds)

    @property
    def where(self) -> str | None:
        """``source`` as a person reads it: an installed file relative to its site-packages
        (``transformers/models/bert/modeling_bert.py:95: code``); ``source`` is the full one."""
        return short_source(self.source)

    @property
    def notes(self) -> tuple[str, ...]:
        """The notes in words (a size-0/1 example kept dynamic, the range the ONNX model does
        not check); the equality that tied this dim to others, in torch's terms, is in
        :attr:`torch_notes`."""
        return tuple(n for n in self.note.split("; ") if n and not n.startswith(_TIED))

    @property
    def torch_notes(self) -> tuple[str, ...]:
        """``equal to y.shape[0] by <guard>``: how torch tied this axis to others."""
        return tuple(n for n in self.note.split("; ") if n.startswith(_TIED))

    @property
    def unchecked(self) -> bool:
        """A narrowed dynamic dim: the ONNX model does not check its range (a note says so)."""
        return any(n.startswith(UNCHECKED_NOTE) for n in self.notes)

    @property
    def shown_min(self) -> int | None:
        """The lower bound as the Dims tab prints it: from 1 for a dynamic dim (:data:`ZERO_MIN_NOTE`)."""
        if self.obtained == DYNAMIC_RESULT:
            return max(self.min or 0, 1)
        return self.min

    @property
    def result_text(self) -> str:
        """One line: ``dynamic batch [1, inf]``, ``static 4``, ``failed`` or ``not run``."""
        if self.obtained == DYNAMIC_RESULT:
            return f"dynamic {self.dim or self.symbol} {self.range_text}"
        return f"static {self.min}" if self.obtained == STATIC_RESULT else self.obtained

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
class DimRow:
    """Input axes read as one row: the axes tied to one dynamic dim (``batch: input_ids.0 =
    attention_mask.0``), or a family of leaves with the same result (``cache.*.key/value.1``,
    static 16). Every member shares the range and the reason."""

    outcomes: tuple[DimOutcome, ...]

    @property
    def first(self) -> DimOutcome:
        return self.outcomes[0]

    @property
    def name(self) -> str:
        """The dynamic dim's name (``past``); "" for other rows."""
        return (self.first.dim or "") if self.first.dynamic else ""

    @property
    def axes(self) -> str:
        """``cache.*.key/value.2``, ``input_ids.0 = attention_mask.0``."""
        return axes_text([o.axis_key for o in self.outcomes])

    @property
    def label(self) -> str:
        """``past: cache.*.key/value.2``; the axes alone for a row without a dim name."""
        return f"{self.name}: {self.axes}" if self.name else self.axes

    @property
    def count(self) -> str:
        return f"{len(self.outcomes)} axes" if len(self.outcomes) > 1 else ""

    @property
    def result_text(self) -> str:
        """``dynamic [1, inf]``, ``static 16``, ``failed``, ``not run``."""
        o = self.first
        return f"dynamic {o.range_text}" if o.dynamic else o.result_text

    @property
    def why(self) -> str:
        return self.first.why

    @property
    def bounds(self) -> tuple[DimBound, ...]:
        return self.first.bounds

    @property
    def guards(self) -> tuple[Guard, ...]:
        """Every guard of the members, once, in order."""
        return tuple(dict.fromkeys(g for o in self.outcomes for g in o.guards))

    def __str__(self) -> str:
        """One line: ``seq: input_ids.1 = attention_mask.1 — dynamic [2, 512] — at least 2: …``."""
        head = f"{self.label}" + (f" ({self.count})" if self.count else "") + f" — {self.result_text}"
        return head + (f" — {self.why}" if self.why else "")


@dataclass(frozen=True, repr=False)
class DimOutcomes(Presentable):
    """Every input axis's :class:`DimOutcome`, in input then axis order."""

    outcomes: tuple[DimOutcome, ...]
    spec: DimSpec
    bound: Any = field(default=None, compare=False, hash=False)  # BoundInputs (for code generation)
    strategy: str | None = None
    error: str | None = None  # the capture error's first line, when capture failed
    # A rejected spec's ranges in the user's terms (shapes.violations.RejectedRange), each with
    # its sentence and the fix apply_suggested_fixes() applies.
    rejected: tuple[Any, ...] = ()

    def __iter__(self) -> Iterator[DimOutcome]:
        return iter(self.outcomes)

    def __len__(self) -> int:
        return len(self.outcomes)

    def __getitem__(self, key: Any) -> DimOutcome:
        """``dims["x", 0]``, ``dims["x.0"]``, ``dims["x.shape[0]"]``, ``dims[Axis("x", 0)]`` or ``dims[3]``."""
        if isinstance(key, int) and not isinstance(key, bool):
            return self.outcomes[key]
        try:
            wanted = Axis.parse(key)
        except ValueError:
            raise KeyError(key) from None
        for outcome in self.outcomes:
            if outcome.axis_key == wanted:
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

    def grouped(self) -> tuple[DimRow, ...]:
        """The rows a person reads: one per dynamic dim name (every axis tied to it), and one per
        family of other axes with the same result (``cache.*.key/value.1``, static 16), in
        input order."""
        groups: dict[tuple[Any, ...], list[DimOutcome]] = {}
        for o in self.outcomes:
            if o.dynamic and o.dim:
                key: tuple[Any, ...] = ("dim", o.dim)
            else:
                key = ("axes", axis_family(o.input, o.axis), o.requested, o.obtained, o.min, o.reason, o.note)
            groups.setdefault(key, []).append(o)
        return tuple(DimRow(tuple(members)) for members in groups.values())

    def to_frame(self) -> Any:
        """One row per input axis, as the Dims tab prints it: ``min`` from 1 for a dynamic dim,
        ``max`` ``inf`` when unbounded (``<NA>`` when capture did not say), integer columns as
        pandas' nullable ``Int64``; ``why`` the range in words."""
        import pandas as pd

        rows = []
        for o in self.outcomes:
            row = o.to_dict()
            row["min"] = pd.NA if o.shown_min is None else o.shown_min
            row["why"] = o.why
            rows.append(row)
        frame = pd.DataFrame(rows, columns=FRAME_COLUMNS)
        for column in ("axis", "example", "min"):
            frame[column] = frame[column].astype("Int64")
        # ints and inf side by side (512, inf): an object column prints them as the tab does
        frame["max"] = pd.Series([o.max if o.max is not None else (math.inf if o.dynamic else pd.NA)
                                  for o in self.outcomes], index=frame.index, dtype=object)
        return frame

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
        return spec_from(value, self.bound)

    def to_code(self) -> str:
        """The exact ``dynamic_shapes=`` code that reproduces the obtained result."""
        spec = self.obtained_spec()
        if spec is None:
            head = f"# capture failed ({self.error}); this is the requested spec, not an obtained one\n"
            return head + (self.spec.to_code(self.bound) if self.bound is not None else "")
        return spec.to_code(self.bound)


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
            out.append(Axis(other_path, other_axis).label)
    return out


def dim_outcomes(session: CapturedExport) -> DimOutcomes:
    """The :class:`DimOutcomes` of a session (runs capture if needed)."""
    capture = session.result("capture")
    bound, spec = session.inputs, session.spec
    guards = session.guards
    if capture.status != "ok":
        return _failed_outcomes(session, capture, guards)

    program = capture.output
    symbols = symbol_of(program, bound)
    ranges = program_ranges(program)
    caps = axis_ranges(guards, bound)  # Min/Max/<= guards torch keeps out of range_constraints
    names = dim_names(program, bound, spec, symbols)  # symbol_of runs once
    groups: dict[str, list[tuple[str, int]]] = {}
    static_axes: dict[tuple[str, int], int] = {}
    for key, symbol in symbols.items():
        if symbol.lstrip("-").isdigit():
            static_axes[key] = int(symbol)
        else:
            groups.setdefault(symbol, []).append(key)

    outcomes = []
    solved: dict[tuple[Any, ...], tuple[DimBound, ...]] = {}  # the bounds of one symbol, solved once for its axes
    for leaf in bound.leaves:
        for axis, example in enumerate(leaf.shape):
            key = Axis(leaf.path, axis)
            policy = spec.policy(*key)
            found = symbols.get(key)
            if found is None or key in static_axes:
                value = static_axes.get(key, example)
                outcomes.append(_static_outcome(leaf.path, axis, example, policy, value, guards, static_axes))
            else:
                lo, hi = ranges.get(found, (0, None))
                members = groups.get(found, [key])
                lo, hi = _with_caps(lo, hi, [caps[m] for m in members if m in caps])
                outcomes.append(
                    _dynamic_outcome(
                        leaf.path, axis, example, policy, found, names.get(found, found), lo, hi,
                        members, guards, spec, solved,
                    )
                )
    return DimOutcomes(_derived_names(outcomes), spec, bound, capture.strategy)


def _derived_names(outcomes: list[DimOutcome]) -> tuple[DimOutcome, ...]:
    """A derived dim said with the names of the dims it derives from: ``s12 + 1`` → ``past + 1``
    when ``s12`` is the symbol of the dim named ``past``."""
    named = {o.symbol: o.dim for o in outcomes if o.symbol and o.dim and o.dim.isidentifier()}

    def say(dim: str | None) -> str | None:
        if not dim or dim.isidentifier():
            return dim
        return re.sub(r"\b[a-z]\d+\b", lambda m: named.get(m.group(0), m.group(0)), dim)

    return tuple(replace(o, dim=say(o.dim)) if o.dynamic and say(o.dim) != o.dim else o for o in outcomes)


def _with_caps(lo: int, hi: int | None, found: list[Any]) -> tuple[int, int | None]:
    """A program range narrowed by the ranges solved from the guards (``shapes.solve``)."""
    for size_range in found:
        if size_range.is_static:
            continue  # a pin on a dim that stayed symbolic is a branch on the example, no range
        lo = max(lo, size_range.min)
        if size_range.max is not None:
            hi = size_range.max if hi is None else min(hi, size_range.max)
    return lo, hi


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
    solved: dict[tuple[Any, ...], tuple[DimBound, ...]] | None = None,
) -> DimOutcome:
    relevant = guards.for_axes(members)
    others = [m for m in members if m != (path, axis)]
    notes: list[str] = []
    source: str | None = None
    if others:
        equalities = [g for g in relevant if g.kind == EQUALITY and g.involves(path, axis)] or [
            g for g in relevant if g.kind == EQUALITY
        ]
        text = f"equal to {', '.join(Axis(*m).label for m in others)}"
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
    # Ranges print from 1 (ZERO_MIN_NOTE): torch's 0 → 1 is no narrowing a person would see.
    narrowed = max(lo, 1) > max(rlo, 1) or (hi is not None and (rhi is None or hi < rhi))
    reason = ""
    bounds: tuple[DimBound, ...] = ()
    if narrowed:
        cited = [g for g in relevant if g.kind in (GUARD, RUNTIME_ASSERT)]
        ties: list[str] = []  # the bounded Dims this axis is tied to: where its range came from
        for other in others:
            other_policy = spec.policy(*other)
            if isinstance(other_policy, Dim) and _requested_range(other_policy, example) == (lo, hi):
                ties.append(f"equal to {Axis(*other).label}, a {other_policy!r}")
                link = next((g for g in relevant if g.kind == EQUALITY and g.involves(*other)), None)
                if link is not None:
                    cited.append(link)
        notes.append(
            f"the ONNX dim stays symbolic and does not check {range_text(lo, hi)}: sizes outside it run "
            "without error and can be wrong (session.verify() tries them)"
        )
        if cited:
            source = cited[0].source
        cache = solved if solved is not None else {}
        memo = (symbol, example, rlo, rhi)
        if memo not in cache:
            cache[memo] = dim_bounds(relevant, example, rlo, rhi)
        bounds = cache[memo]
        if not bounds:  # guards on several dims, or none from the user's code: the range, and who
            words = [f"at least {lo}"] if max(lo, 1) > max(rlo, 1) else []
            words += [f"at most {hi}"] if hi is not None and (rhi is None or hi < rhi) else []
            bounds = (DimBound(", ".join(words), "guards on several dims (torch's guards)" if cited
                               else "torch's own code", guard_where(cited[0]) if cited else None, tuple(cited)),)
        asked = f"from {range_text(rlo, rhi)} " if (rlo, rhi) != (0, None) else ""
        said = [text for text in (bounds_text(bounds),) if text] + ties
        reason = f"narrowed {asked}to {range_text(lo, hi)}" + (f": {'; '.join(said)}" if said else "")
    return DimOutcome(
        path, axis, example, policy, DYNAMIC_RESULT, lo, hi,
        symbol=symbol,
        dim=name,
        equal_to=tuple(Axis(*m).dotted for m in others),
        reason=reason,
        source=source,
        note="; ".join(notes),
        differs=narrowed,
        guards=relevant,
        bounds=bounds,
    )


def _axes_named_in(
    line: str, bound: BoundInputs, spec: DimSpec, sources: dict[str, str] | None = None
) -> set[Axis]:
    """Input axes a torch message line mentions, by source or by the user's Dim name."""
    found = set(axes_in_text(line, bound, sources))
    for entry in spec:
        if isinstance(entry.policy, Dim) and re.search(rf"(?<![\w'\"]){re.escape(entry.policy.name)}\b", line):
            found.add(Axis(entry.path, entry.axis))
    return found


def _failed_outcomes(session: CapturedExport, capture: StageResult, guards: Guards) -> DimOutcomes:
    bound, spec = session.inputs, session.spec
    attempt = reported_attempt(capture.attempts)
    error = attempt.error if attempt is not None else capture.error
    text = str(error) if error is not None else ""
    violated = error is not None and formats.is_constraint_violation(error)
    fixes = suggested_fixes_of(session)
    rejected = rejected_ranges(fixes, guards, bound) if violated else ()
    by_name = {r.name: r for r in rejected}
    # torch's sentence about a range said in the user's terms is not repeated per axis.
    details = [d for d in formats.violation_lines(text)
               if not any(name in by_name for name, _ in formats.range_violations(d))]
    fix_by_axis = {(row[0], row[1]): row for row in fixes.changes()}
    broadcast = is_size_one_broadcast(text)
    sources = input_sources(bound)
    outcomes = []
    for leaf in bound.leaves:
        for axis, example in enumerate(leaf.shape):
            key = Axis(leaf.path, axis)
            policy = spec.policy(*key)
            relevant = guards.for_axis(*key)
            reasons = [plain_violation(d, bound, spec) for d in details if key in _axes_named_in(d, bound, spec, sources)]
            if not reasons and broadcast and policy is not STATIC and example in (0, 1):
                reasons.append(
                    f"a size-{example} example kept dynamic cannot broadcast against another size "
                    f"({first_line(error) if error is not None else text}); make this axis STATIC or pass an "
                    "example with size >= 2"
                )
            said = by_name.get(policy.name) if isinstance(policy, Dim) else None
            if said is not None:
                reasons.insert(0, said.row_reason)  # it carries the fix
            elif key in fix_by_axis:
                reasons.append(f"fix: {fix_by_axis[key][3]}")
            source = next((g.source for g in relevant if g.source), None)
            if said is not None and said.guard is not None and said.guard.source:
                source = said.guard.source
            if reasons:
                outcomes.append(DimOutcome(
                    leaf.path, axis, example, policy, FAILED_RESULT,
                    reason="; ".join(reasons), source=source, differs=True, guards=relevant,
                ))
            elif policy is STATIC:  # what was asked, and what any capture keeps
                outcomes.append(DimOutcome(leaf.path, axis, example, policy, STATIC_RESULT, example, example,
                                           guards=relevant))
            else:
                outcomes.append(DimOutcome(leaf.path, axis, example, policy, NOT_RUN_RESULT, source=source,
                                           guards=relevant))
    if violated:
        head = "the dim spec was rejected"  # the failing rows and the capture error say how
    else:
        head = first_line(error) if error is not None else "capture failed"
    return DimOutcomes(tuple(outcomes), spec, bound, attempt.strategy if attempt else None, error=head,
                       rejected=rejected)
