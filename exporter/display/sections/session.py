"""A session at a glance: model, dim spec, options, one row per stage run so far, the failure
if any, what has not run, the analyses it keeps."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from ...bench.compare import Comparison
from ...bench.latency import BenchmarkResult, SweepResult
from ...errors import Status
from ...verify.intermediates import IntermediateComparison
from ...passes import Bisection
from ...pipeline.stages import STAGES
from ...presentation import presents
from ...shapes.ranges_metadata import narrowed_ranges
from ...verdict import qualified_status
from ...verify.results import VerifyResult
from ..blocks import Badge, Block, Cell, KeyValues, Note, Section, Table, Verdict, cell_text
from ..cells import number
from ..failures import failure_blocks, failure_sentence, user_terms
from ..rendering import render, repr_html, safe_section
from .shapes import dims_section, guards_section

if TYPE_CHECKING:
    from ...dims import DimSpec
    from ...guards import Guards
    from ...options import ExportOptions
    from ...pipeline.records import CaptureAttempt, StageResult
    from ...shapes.outcomes import DimOutcomes
    from ...verdict import ExportVerdict

__all__ = ["TIMINGS", "PresentedSession", "attempts_table", "result_line", "session_html", "session_section", "stages_badge",
           "stages_table", "verdict_badge"]


class PresentedSession(Protocol):
    """What a session's summary reads of a :class:`~exporter.Session` (named by what it reads,
    so presentation stays below the session that presents itself with it)."""

    @property
    def model(self) -> Any: ...

    @property
    def spec(self) -> DimSpec: ...

    @property
    def options(self) -> ExportOptions: ...

    @property
    def stages(self) -> tuple[StageResult, ...]: ...

    @property
    def failed_stage(self) -> StageResult | None: ...

    @property
    def succeeded(self) -> bool: ...

    @property
    def dims(self) -> DimOutcomes: ...

    @property
    def guards(self) -> Guards: ...

    @property
    def onnx_input_names(self) -> dict[str, str]: ...

    @property
    def analyses(self) -> dict[str, Any]: ...

    @property
    def verdict(self) -> ExportVerdict: ...


TIMINGS = ("benchmark", "benchmark_sweep", "compare", "profile")
"""The analyses that time the model: their ``ok`` says the timing ran, so beside a model not
verified as passed it shows the verdict's word instead (:func:`exporter.verdict.qualified_status`)."""


def _seconds(value: float) -> str:
    return f"{value:.3f}"


def stages_table(stages: Sequence[StageResult]) -> Table:
    """One row per stage: status, seconds, cached, what it did. A failed stage's row says
    only the error's type: the failure itself is shown once, below the table."""
    rows = []
    for r in stages:
        d = r.to_dict()
        detail = r.failure.type if r.failure is not None else user_terms(d["detail"])
        rows.append((d["stage"], d["status"], _seconds(r.seconds), d["cached"], detail))
    return Table.from_rows(("stage", "status", "seconds", "cached", "detail"), rows, badges=("status",))


def attempts_table(attempts: Sequence[CaptureAttempt]) -> Table:
    """One row per capture strategy tried: outcome, seconds, the first line of its error."""
    rows = [(a.strategy, a.outcome, _seconds(a.seconds), user_terms(a.first_error_line or "")) for a in attempts]
    return Table.from_rows(("strategy", "outcome", "seconds", "error"), rows, badges=("outcome",))


def verdict_badge(verdict: ExportVerdict) -> Badge:
    """The badge of an export's verdict (:attr:`exporter.Session.verdict`): green ``passed``
    only when verified as passed; ``not verified`` (amber) for an export nothing verified."""
    return Badge(verdict.word, verdict.tone)


def stages_badge(session: PresentedSession) -> Badge:
    """The badge of the stages alone: ``failed``, ``cancelled``, ``exported`` (every stage
    ran: not a verdict on the numbers, so never a green ``ok``), ``partial`` or ``not run``."""
    stages = session.stages
    if any(r.status == Status.FAILED for r in stages):
        return Badge.status(Status.FAILED)
    if any(r.status == Status.CANCELLED for r in stages):
        return Badge.status(Status.CANCELLED)
    if session.succeeded:
        return Badge("exported", "info")
    return Badge.status(Status.NOT_RUN) if not stages else Badge("partial", "info")


def _session_status(session: PresentedSession) -> Badge:
    verdict = session.verdict
    return verdict_badge(verdict) if verdict.exported or verdict.word == "failed" else stages_badge(session)


def _session_verdict(session: PresentedSession) -> Verdict | None:
    failed = session.failed_stage
    if failed is not None:
        sentence = failure_sentence(failed.failure) if failed.failure is not None else failed.detail
        return Verdict(f"{failed.name} failed: {sentence}", "fail")
    stages = session.stages
    if not stages:
        return None
    total = sum(r.seconds for r in stages)
    strategy = next((r.strategy for r in stages if r.name == "capture" and r.strategy), None)
    by = f" ({strategy})" if strategy else ""
    if session.succeeded:  # what verify said of this exported model, or that it has not run
        verdict = session.verdict
        return Verdict(f"exported in {number(total)} s{by}; {verdict.text}", verdict.tone)
    if any(r.status == Status.CANCELLED for r in stages):
        return Verdict("cancelled", "warn")
    return Verdict(f"{', '.join(r.name for r in stages)} done in {number(total)} s{by}", "info")


@presents("exporter.session.Session")  # by name: importing the session here would close a loop (session.report())
def session_section(session: PresentedSession, *, title: str | None = None, details: bool | None = None) -> Section:
    """The compact summary of a :class:`~exporter.Session`: model, dim spec, options, one row
    per stage run so far, the failure if any, what has not run. Nothing is run to show it.

    ``details``: also show dims and guards (True: computed if needed; None: only when the
    session has already computed them)."""
    model = type(session.model).__name__
    options = session.options
    items: list[tuple[str, Cell]] = [
        ("model", model),
        ("dims", session.spec.describe()),
        ("strategy", str(options.strategy)),
    ]
    captured = next((r.strategy for r in session.stages if r.name == "capture" and r.strategy), None)
    if captured:
        items.append(("captured by", captured))
    extras = [f"opset {options.opset_version}" if options.opset_version else "",
              "runtime asserts" if options.runtime_asserts else "",
              "not optimized" if not options.optimize else "",
              f"fully masked rows: {options.fully_masked_rows}" if options.fully_masked_rows != "zero" else ""]
    if any(extras):
        items.append(("options", ", ".join(e for e in extras if e)))
    computed = vars(session)  # the cached properties computed so far
    if details or "dims" in computed:  # computed with the final model, which carries them too
        items.extend(_valid_ranges(session))
    body: list[Block] = [KeyValues(tuple(items))]
    stages = session.stages
    if stages:
        body.append(stages_table(stages))
    failed = session.failed_stage
    if failed is not None:
        body.extend(b for b in failure_blocks(failed.failure, failed.detail)
                    if not isinstance(b, Note) or b.tone != "fail")  # the sentence is the verdict
    pending = [s for s in STAGES if s not in {r.name for r in stages}]
    if pending:
        body.append(Note(f"not run: {', '.join(pending)}"))
    analyses = _analyses_table(session)
    if analyses is not None:
        body.append(analyses)
    if details or (details is None and "dims" in computed):
        body.append(safe_section(dims_section, session.dims, "Dims"))
    if details or (details is None and "guards" in computed):
        body.append(safe_section(guards_section, session.guards, "Guards"))
    return Section(title or f"Session: {model}", _session_status(session), tuple(body),
                   verdict=_session_verdict(session))


def _valid_ranges(session: PresentedSession) -> list[tuple[str, Cell]]:
    """One ``valid range`` line per input axis whose range torch narrowed (the ONNX model
    does not check it; its ``metadata_props`` say it too): ``x.2 height: 60..115 (why)``."""
    if session.failed_stage is not None or not any(r.name == "capture" and r.ok for r in session.stages):
        return []
    try:
        ranges = narrowed_ranges(session.dims, session.onnx_input_names)
    except Exception:  # noqa: BLE001 - a summary shows what it can
        return []
    return [("valid range", str(r)) for r in ranges]


def result_line(result: Any) -> str:
    """The one line of an analysis result: its verdict (verify, intermediates, bisection),
    headline (benchmark, sweep, comparison), or the verdict of its section."""
    line = (result.verdict if isinstance(result, (VerifyResult, IntermediateComparison, Bisection))
            else result.headline if isinstance(result, (BenchmarkResult, SweepResult, Comparison)) else None)
    if line:
        return line
    section = render(result)
    return section.verdict.text if section.verdict else cell_text(section.badge) if section.badge else section.title


def _analyses_table(session: PresentedSession) -> Table | None:
    try:
        analyses = session.analyses
    except Exception:  # noqa: BLE001 - a summary shows what it can
        return None
    if not analyses:
        return None
    verdict = session.verdict
    rows = [(name, qualified_status(result.status, verdict) if name in TIMINGS else result.status, result_line(result))
            for name, result in analyses.items()]
    return Table.from_rows(("analysis", "status", "result"), rows, badges=("status",))


def session_html(session: PresentedSession) -> str:
    """The HTML a notebook shows for a session (``Session._repr_html_``); never raises."""
    return repr_html(session)
