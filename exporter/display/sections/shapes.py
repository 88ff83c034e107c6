"""What torch did with the shapes: the dim outcomes, the guards, the suggested fixes."""

from __future__ import annotations

from ...errors import Status
from ...guards import Guard, Guards
from ...presentation import presents
from ...shapes.fixes import SuggestedFixes
from ...shapes.outcomes import ZERO_MIN_NOTE, DimOutcomes
from ..blocks import Badge, Block, Code, Details, Note, Pre, Section, Table, Verdict
from ..failures import first_line, user_terms

__all__ = ["dims_section", "fixes_section", "guards_section"]


@presents(DimOutcomes)
def dims_section(dims: DimOutcomes, title: str = "Dims") -> Section:
    """Per input axis: example size, requested policy, obtained result and range, and why.
    When capture failed, only the axes the failure names read ``failed``."""
    badge = Badge.status(Status.FAILED) if dims.error else Badge(str(dims.strategy or "not captured"), "muted")
    rows = []
    for o in dims.outcomes:
        # A dynamic range's bounds in words (shapes.reasons); torch's sentence when there are none.
        said = o.why or user_terms(o.reason)
        notes = o.notes if o.why else ((o.note,) if o.note else ())
        why = "; ".join(x for x in (said, *(f"note: {n}" for n in notes)) if x)
        rows.append((o.name, o.example, o.requested, o.obtained, o.range_text, o.dim or "", why, o.where))
    verdict = None
    if dims.error:
        failing = [o.name for o in dims.outcomes if o.obtained == "failed" and o.reason]
        said = (f"{', '.join(failing)} cannot be as requested (why: below)" if failing
                else user_terms(first_line(str(dims.error))))
        verdict = Verdict(f"capture failed: {said}", "fail")
    else:
        dynamic = sum(1 for o in dims.outcomes if o.dynamic)
        differ = len(dims.differing)
        verdict = Verdict(f"{dynamic} dynamic axis(es) of {len(dims.outcomes)}"
                          + (f"; {differ} not as requested" if differ else ""), "warn" if differ else "ok")
    table = Table.from_rows(("axis", "example", "requested", "obtained", "range", "dim", "why", "source"),
                            rows, badges=("obtained",), code=("source",))
    body: list[Block] = [table]
    if any(o.dynamic and not o.min for o in dims.outcomes):
        body.append(Details("why ranges start at 1", (Note(ZERO_MIN_NOTE),), in_text=False))
    return Section(title, badge, tuple(body), verdict=verdict)


@presents(Guards)
def guards_section(guards: Guards, title: str = "Guards") -> Section:
    """Every shape guard with the user's line that added it."""
    records = tuple(guards)
    badge = Badge(f"{len(records)} guard{'s' if len(records) != 1 else ''}", "info" if records else "muted")
    if not records:
        return Section(title, badge, (Note(f"no shape guards ({guards.strategy or 'not captured'})"),))
    rows = [(g.kind, g.expression, ", ".join(a.dotted for a in g.axes), _line(g)) for g in records]
    # the long columns wrap: a transformer's guards read whole in a narrow notebook pane
    return Section(title, badge, (Table.from_rows(("kind", "expression", "axes", "line"), rows,
                                                  code=("expression", "line"), wrap=("expression", "axes", "line")),))


def _line(guard: Guard) -> str:
    """``m.py:3: if x.shape[0] > 2:``: the user's line that added the guard (short path)."""
    if guard.location and guard.code:
        return f"{guard.location}: {guard.code}"
    return guard.location or guard.code or ""


@presents(SuggestedFixes)
def fixes_section(fixes: SuggestedFixes, title: str = "Suggested fixes") -> Section:
    """torch's suggested fixes: the lines applied, those that name no dim of the spec, the
    spec before and after."""
    count = len(fixes.fixes) + len(fixes.patches)
    if not fixes.fixes and not fixes.unapplied and not fixes.patches:
        return Section(title, Badge("none", "muted"), (Note("no suggested fixes"),))
    body: list[Block] = [Details(f"model patch {p.name}: replaces {p.idiom}", (Pre(p.diff),)) for p in fixes.patches]
    if fixes.fixes:
        body.append(Code("\n".join(f.text for f in fixes.fixes)))
    body.extend(Note(f"{u}  (not applied: names no dim of this spec)", "warn") for u in fixes.unapplied)
    if fixes.error:
        body.append(Note(f"could not apply: {fixes.error}", "fail"))
    if fixes.diff:
        body.append(Details("the spec before and after", (Pre(fixes.diff),)))
    return Section(title, Badge(f"{count} fix{'es' if count != 1 else ''}", "info"), tuple(body))
