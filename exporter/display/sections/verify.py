"""Verification (:class:`~exporter.verify.VerifyResult`): the verdict first, findings and
contract problems, the first divergence; one row per case and the dim groups folded."""

from __future__ import annotations

from ...errors import Status
from ...presentation import presents
from ...verify.results import VerifyResult
from ..blocks import Badge, Block, Details, Note, Pre, Section, Table, Verdict
from ..cells import number
from ..failures import failure_blocks
from ..style import tone_of

__all__ = ["verify_section"]


@presents(VerifyResult)
def verify_section(result: VerifyResult, title: str = "Verification") -> Section:
    """Verification: the verdict line first, findings and contract problems, the first
    divergence; one row per case and the dim groups folded below."""
    badge = Badge.status(result.status)
    verdict = Verdict(result.verdict or str(result.status), tone_of(result.status))
    if result.status == Status.ERROR and not result.cases:
        blocks = failure_blocks(result.failure, result.error)
        if result.failure is None:  # the verdict already says what the fallback note would
            blocks = [b for b in blocks if not isinstance(b, Note)]
        return Section(title, badge, tuple(blocks), verdict=verdict)
    body: list[Block] = []
    if result.findings:
        if any(f.fix for f in result.findings):
            body.append(Table.from_rows(("finding", "message", "likely cause", "fix"),
                                        [(f.kind, f.message, f.cause, f.fix) for f in result.findings]))
        else:
            body.append(Table.from_rows(("finding", "message", "likely cause"),
                                        [(f.kind, f.message, f.cause) for f in result.findings]))
    if result.divergence is not None:
        body.append(Pre(result.divergence.summary()))
    if result.contract is not None and not result.contract.ok:
        body.append(Table.from_rows(
            ("check", "subject", "status", "message", "fix"),
            [(c.check, c.subject, c.status, c.message, c.hint) for c in result.contract.checks
             if c.status not in (Status.OK, Status.PASS)],
            caption="contract", badges=("status",)))
    rows = [(c.name, c.sizes_text, c.status, c.max_abs, ", ".join(c.outside_obtained),
             "" if c.ok else c.describe()) for c in result.cases]
    cases = Table.from_rows(("case", "sizes", "status", "max abs diff", "outside obtained range", "detail"),
                            rows, badges=("status",))
    body.append(Details(f"{len(result.cases)} case(s), {number(result.seconds)} s", (cases,),
                        open=not result.ok))
    if result.groups:
        groups = Table.from_rows(("dim", "axes", "sizes checked"),
                                 [(g.label, g.axes_text, ", ".join(map(str, g.sizes))) for g in result.groups])
        body.append(Details(f"{len(result.groups)} dim group(s)", (groups,)))
    return Section(title, badge, tuple(body), verdict=verdict)
