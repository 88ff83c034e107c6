"""Verification (:class:`~exporter.verify.VerifyResult`): the verdict first, what was
checked and the findings as bullets (likely cause, fix), the first divergence and the contract's
problems; one row per case and the dim groups folded. Also the contract
(:class:`~exporter.verify.ContractReport`) and the first divergence
(:class:`~exporter.verify.divergence.Divergence`) on their own."""

from __future__ import annotations

from ...errors import Status
from ...presentation import presents
from ...verify.contract import ContractReport
from ...verify.divergence import Divergence
from ...verify.results import CaseResult, Finding, VerifyResult
from ..blocks import Badge, Block, Bullets, Details, Item, KeyValues, Note, Section, Table, Verdict
from ..failures import failure_blocks
from ..style import tone_of

__all__ = ["contract_section", "divergence_section", "finding_item", "verify_section"]

# Findings that leave the result unproven (not_verified) or say what was not compared: a warning.
_WARN_KINDS = ("not_verified", "vacuous", "eager_error", "not_swept", "not_varied")


@presents(VerifyResult)
def verify_section(result: VerifyResult, title: str = "Verification") -> Section:
    """Verification: the verdict line first (the text's first line), the counts, what a
    passing result was checked at and the findings as bullets, the first divergence and the
    contract's problems; one row per case (open when it failed) and the dim groups folded."""
    badge = Badge.status(result.status)
    verdict = Verdict(result.verdict or str(result.status), tone_of(result.status))
    if result.status in (Status.ERROR, Status.CANCELLED) and not result.cases:
        blocks = failure_blocks(result.failure, result.error)
        if result.failure is None:  # the verdict already says what the fallback note would
            blocks = [b for b in blocks if not isinstance(b, Note)]
        return Section(title, badge, tuple(blocks), verdict=verdict, verdict_as_title=True)
    body: list[Block] = [_counts(result)]
    items = _checked_items(result) + [finding_item(f) for f in result.findings]
    if items:
        body.append(Bullets(tuple(items)))
    if result.divergence is not None:
        body.append(divergence_section(result.divergence))
    if result.contract is not None and not result.contract.ok:
        body.append(contract_section(result.contract))
    body.append(Details("cases", (_cases_table(result),), open=not result.ok))
    if result.groups:
        groups = Table.from_rows(("dim", "axes", "sizes checked"),
                                 [(g.label, g.axes_text, ", ".join(map(str, g.sizes))) for g in result.groups])
        body.append(Details(f"{len(result.groups)} dim group(s)", (groups,)))
    return Section(title, badge, tuple(body), verdict=verdict, verdict_as_title=True)


def _counts(result: VerifyResult) -> Note:
    edges = sum(1 for c in result.cases if c.is_edge_value)
    others = sum(1 for c in result.cases if not c.is_example) - edges
    edge_text = f", {edges} edge value(s)" if edges else ""
    return Note(f"{len(result.cases)} case(s) ({others} at other sizes{edge_text}), "
                f"{len(result.groups)} dim group(s), {result.seconds:.2f} s")


def _checked_items(result: VerifyResult) -> list[Item]:
    """What a passing result was compared at: every swept size (a size eager refused was not
    checked: not listed), every edge value."""
    if not result.ok:
        return []
    items = []
    checked = result.compared_sizes()
    swept = "; ".join(f"{g.label} in {{{', '.join(map(str, checked.get(g.label) or g.sizes))}}}"
                      for g in result.groups if not g.auto_static)
    if swept:
        items.append(Item(f"correct at every swept size: {swept}", tone="ok"))
    edges = [c.edge.name for c in result.cases if c.ok and c.edge is not None]
    if edges:
        items.append(Item(f"correct with edge values: {'; '.join(edges)}", tone="ok"))
    return items


def finding_item(finding: Finding) -> Item:
    """A finding as a bullet: its message, then ``likely cause:`` and ``fix:``; its kind as
    the tag (HTML and Markdown)."""
    details = tuple((label, text) for label, text in (("likely cause", finding.cause), ("fix", finding.fix)) if text)
    tone = "fail" if finding.fails else "warn" if finding.kind in _WARN_KINDS else "muted"
    return Item(finding.message, details, tone=tone, tag=finding.kind)


def _cases_table(result: VerifyResult) -> Table:
    """One row per case; the detail of a failing case (the findings say it in text) in HTML only."""
    outside = any(c.outside_obtained for c in result.cases)
    columns = ("case", "sizes", "status", "max abs diff") + (("outside obtained range",) if outside else ()) + ("detail",)
    said: dict[tuple[str, str], str] = {}
    rows = [(c.name, c.sizes_text, c.status, c.max_abs) + ((", ".join(c.outside_obtained),) if outside else ())
            + (_detail(c, said),) for c in result.cases]
    return Table.from_rows(columns, rows, badges=("status",), not_in_text=("detail",))


def _detail(case: CaseResult, said: dict[tuple[str, str], str]) -> str:
    """A failing case's detail; an error given in full on an earlier row (the same onnxruntime
    error at another size) is named by that row's case."""
    if case.ok:
        return ""
    key = case.error_key
    first = said.setdefault(key, case.name) if key is not None else case.name
    return case.describe() if first == case.name else f"the same error as case {first!r}"


@presents(Divergence)
def divergence_section(divergence: Divergence, title: str | None = None) -> Section:
    """Where a failing case first goes wrong: the sentence, then the ONNX node, the FX node,
    the module and the user's line it maps to."""
    items: list[tuple[str, str]] = []
    if divergence.onnx_node:
        items.append(("ONNX node", f"{divergence.onnx_node!r} ({divergence.op_type}) → value {divergence.onnx_value!r}"))
    if divergence.fx_node:
        items.append(("FX node", f"{divergence.fx_node!r} ({divergence.fx_target})"))
    if divergence.module_path is not None:
        items.append(("module", divergence.module_path or "(top level)"))
    if divergence.source:
        items.append(("at", divergence.source))
    body: tuple[Block, ...] = (KeyValues(tuple(items)),) if items else ()
    return Section(title or f"first divergence ({divergence.case}, {divergence.stage})", None, body,
                   verdict=Verdict(divergence.message, "fail"))


@presents(ContractReport)
def contract_section(report: ContractReport, title: str = "Contract") -> Section:
    """The ONNX model's contract: the count of errors and warnings, each problem as a bullet
    with its fix; every check in a folded table (HTML)."""
    errors, warnings = len(report.errors), len(report.warnings)
    status = Status.ERROR if errors else Status.WARNING if warnings else Status.OK
    counts = [f"{n} {word}(s)" for n, word in ((errors, "error"), (warnings, "warning")) if n]
    verdict = Verdict(", ".join(counts) if counts else f"all {len(report.checks)} check(s) pass", tone_of(status))
    items = tuple(Item(f"{c.subject}: {c.message}", (("fix", c.hint),) if c.hint else (), badge=Badge.status(c.status),
                       tag=c.check) for c in report.checks if c.status != Status.OK)
    body: list[Block] = [Bullets(items)] if items else []
    every = Table.from_rows(("check", "subject", "status", "message", "fix"),
                            [(c.check, c.subject, c.status, c.message, c.hint) for c in report.checks], badges=("status",))
    body.append(Details(f"all {len(report.checks)} check(s)", (every,), in_text=False))
    return Section(title, Badge.status(status), tuple(body), verdict=verdict)
