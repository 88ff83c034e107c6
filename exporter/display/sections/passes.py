"""The optimizer pass by pass (:mod:`exporter.passes`): the passes that ran, what one pass
changed, and which pass broke the model."""

from __future__ import annotations

from dataclasses import replace

from ...errors import Status
from ...passes import Bisection
from ...pipeline.pass_records import OptimizerPasses, PassDiff, PassRecord
from ...presentation import presents
from ..blocks import Badge, Block, Code, Note, Section, Table, Verdict
from ..cells import number
from ..style import tone_of

__all__ = ["bisection_section", "pass_diff_section", "passes_section"]

@presents(Bisection)
def bisection_section(result: Bisection, title: str | None = None) -> Section:
    """``bisect_passes()``: the verdict, the fix, one row per verify run."""
    tone = tone_of(result.status)
    body: list[Block] = []
    if result.fix:
        body.append(Code(result.fix))
    body.append(Table.from_rows(
        ("passes applied", "after", "onnxruntime", "detail"),
        [(p.prefix, p.after, p.outcome, p.detail) for p in result.probes],
        caption=f"{result.verify_runs} verify run(s) on the {result.case} inputs; "
        f"{result.candidates} of {result.passes} passes changed the model"))
    return Section(title or "Which pass broke it", Badge.status(result.status), tuple(body),
                   verdict=Verdict(result.verdict, tone))


@presents(PassDiff)
def pass_diff_section(result: PassDiff, title: str | None = None) -> Section:
    """A pass's ``diff()``: the nodes it added, removed and changed, the initializers."""
    rows = [(c.kind, c.name, c.op, c.what) for c in result.changes]
    rows += [("initializer added", n, "", "") for n in result.initializers_added]
    rows += [("initializer removed", n, "", "") for n in result.initializers_removed]
    headline = (f"{len(result.added)} node(s) added, {len(result.removed)} removed, {len(result.changed)} changed; "
                f"{result.nodes_before} → {result.nodes_after} nodes")
    body: list[Block] = [Note(result.description)] if result.description else []
    body.append(Table.from_rows(("change", "node", "op", "what"), rows) if rows else Note("nothing changed"))
    return Section(title or f"Pass {result.index}: {result.label}", None, tuple(body),
                   verdict=Verdict(headline, "info" if rows else "muted"))


@presents(PassRecord)
def pass_record_section(result: PassRecord, title: str | None = None) -> Section:
    """A single pass as it ran: its :func:`pass_diff_section`."""
    return pass_diff_section(result.diff(), title)


@presents(OptimizerPasses)
def passes_section(result: OptimizerPasses, title: str | None = None) -> Section:
    """``session.passes``: one row per pass and round, the verdict (the pass that raised, or
    how many changed the model)."""
    records = result.records
    if not records:
        return Section(title or "Optimizer passes", Badge.status(Status.SKIPPED),
                       (Note(result.note or "no pass ran"),))
    table = Table.from_rows(
        ("#", "pass", "status", "seconds", "nodes before", "nodes after", "added", "removed", "changed",
         "initializers folded", "checks", "error"),
        [(r.index, r.label, r.status, r.seconds, r.nodes_before, r.nodes_after, len(r.added), len(r.removed),
          len(r.changed), r.initializers_folded, "yes" if r.checks else "no", r.error or r.check_error)
         for r in records])
    table = replace(table, rows=tuple(row[:2] + (Badge.status(records[i].status),) + row[3:]
                                      for i, row in enumerate(table.rows)))
    failed = result.failed
    changed = sum(1 for r in records if r.ran and r.changes_model)
    verdict = (Verdict(f"{failed.label} raised: {failed.error}; skip it with "
                       f"ExportOptions(skip_passes=[{failed.name!r}])", "fail") if failed is not None
               else Verdict(f"{len(records)} passes, {changed} changed the model: {records[0].nodes_before} → "
                            f"{records[-1].nodes_after} nodes in {number(result.seconds)} s", "ok"))
    body: list[Block] = [table]
    if result.skip_passes:
        body.append(Note("skipped: " + ", ".join(result.skip_passes)))
    return Section(title or "Optimizer passes", Badge.status(Status.FAILED if failed else Status.OK), tuple(body),
                   verdict=verdict)
