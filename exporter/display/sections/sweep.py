"""Zoo sweeps (:mod:`exporter.sweep`): the results of a sweep, and a sweep against a previous one."""

from __future__ import annotations

from ...presentation import presents
from ...sweep.diff import SweepDiff
from ...sweep.results import SweepResults
from ..blocks import Badge, Block, KeyValues, Note, Section, Table, Verdict

__all__ = ["sweep_diff_section", "sweep_results_section"]


@presents(SweepResults)
def sweep_results_section(results: SweepResults, title: str = "Sweep", top: int = 5) -> Section:
    """A sweep: the units by status, how they did against ``torch.onnx.export``, the ``top``
    largest failure buckets."""
    counts = results.counts()
    line = f"{len(results.records)} units: " + ", ".join(f"{n} {status}" for status, n in counts.items())
    tone = "ok" if set(counts) <= {"passed"} else "warn"
    body: list[Block] = []
    versus = results.versus_counts()
    if versus:
        body.append(KeyValues((("vs torch.onnx.export", ", ".join(f"{n} {k}" for k, n in versus.items())),)))
    patched = results.with_offered_patches()
    if patched:
        body.append(KeyValues((("with offered patches", patched),)))
    buckets = results.buckets().head(top)
    if len(buckets):
        body.append(Table.from_rows(("units", "stage", "failure class"),
                                    [(row.count, row.stage, row.failure_class) for row in buckets.itertuples()],
                                    caption="largest failure buckets"))
    if results.interrupted:
        body.append(Note("interrupted: the units not finished have no record (run again to resume)", "warn"))
    badge = Badge("interrupted", "warn") if results.interrupted else None
    return Section(title, badge, tuple(body), verdict=Verdict(line, tone))


@presents(SweepDiff)
def sweep_diff_section(diff: SweepDiff, title: str = "Sweep diff") -> Section:
    """A sweep against a previous one: the counts, then one row per unit that differs,
    regressions first (with the new error of a regression or a changed failure)."""
    head = ", ".join(f"{n} {kind}" for kind, n in diff.counts().items() if n) or "no change"
    tone = "fail" if diff.regressions else "ok"
    rows = [(r.kind, r.model, r.spec, r.before or "-", r.after or "-",
             r.error if r.error and r.kind in ("regression", "changed") else "") for r in diff.rows]
    body: tuple[Block, ...] = ((Table.from_rows(("change", "model", "spec", "before", "after", "error"), rows),)
                               if rows else ())
    badge = Badge(f"{len(diff.regressions)} regression(s)", "fail") if diff.regressions else None
    return Section(title, badge, body, verdict=Verdict(f"{head} ({diff.unchanged} unchanged)", tone))
