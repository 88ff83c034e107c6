"""A standalone HTML report of a session: one file that opens offline.

::

    from exporter.report import write_report

    write_report(session, "report.html", verify=session.verify(), benchmark=session.benchmark())
    write_report(session, "report.html", verify=True)    # run the verification for the report

The report holds the stages, the capture attempts, the dims, the guards, the FX and ONNX
graphs side by side as inline SVG (:func:`exporter.graphs.draw.side_by_side`; without
Graphviz's ``dot``, the per-module alignment table), the verification and the benchmark (by default those the session keeps:
``session.analyses``, including the runs made in the widget). Everything is rendered through
:mod:`exporter.display`: inline CSS, no script, no external resource, and every string from
the user or torch escaped. A failed export gives a report that shows the failure.

No IPython, ipywidgets or matplotlib is imported.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, Union

from .display import Badge, Block, Document, KeyValues, Note, Section, Svg, Table, error_section, failure_blocks, render
from .display.sections import attempts_table, dims_section, guards_section, session_section, stages_table
from .display.sections.session import TIMINGS, PresentedSession, stages_badge
from .errors import Status
from .graphs.draw import side_by_side
from .verdict import qualified_status, verify_again

if TYPE_CHECKING:
    from .bench import BenchmarkResult, Comparison, ProfileResult, SweepResult
    from .graphs.session_graphs import SessionGraphs
    from .passes import Bisection
    from .pipeline.pass_records import OptimizerPasses
    from .verify import VerifyResult

    Timing = Union[BenchmarkResult, SweepResult, Comparison, ProfileResult]
    # What the Verification and Benchmark sections take: a result, or True to run it now.
    VerifyArgument = Union[VerifyResult, bool, None]
    BenchmarkArgument = Union[Timing, Sequence[Timing], bool, None]

__all__ = ["report_document", "report_html", "write_report"]


class ReportedSession(PresentedSession, Protocol):
    """What the report reads of a :class:`~exporter.Session`: its summary's members, its
    graphs, the optimizer's passes, and the analyses it keeps or runs when asked (``verify=True``)."""

    @property
    def passes(self) -> OptimizerPasses: ...

    @property
    def graphs(self) -> SessionGraphs: ...

    def run(self, until: str = "optimize") -> Any: ...

    def verify(self) -> VerifyResult: ...

    def benchmark(self) -> Any: ...

    def latest_analysis(self, name: str) -> Any: ...


def _guarded(title: str, anchor: str, build: Callable[[], Section]) -> Section:
    """``build()``'s section with its anchor, or a section showing why it could not be built."""
    try:
        section = build()
    except Exception as exc:  # noqa: BLE001 - a report shows what went wrong, it does not stop
        section = error_section(title, exc)
    return Section(title, section.badge, section.body, anchor, section.verdict)


def _summary(session: ReportedSession) -> Section:
    base = session_section(session, details=False)
    keep: list[Block] = [b for b in base.body if isinstance(b, KeyValues)]
    if session.options.patches:  # exporter.patches: what the capture replaced in the model's code
        keep.append(Note("model patches applied while capturing: " + ", ".join(session.options.patches)))
    return Section("Summary", base.badge, tuple(keep), verdict=base.verdict)


def _stages(session: ReportedSession) -> Section:
    stages = session.stages
    body: list[Block] = [stages_table(stages)]
    failed = session.failed_stage
    if failed is not None and failed.failure is not None:
        body.extend(failure_blocks(failed.failure))
    capture = next((r for r in stages if r.name == "capture"), None)
    if capture is not None and capture.attempts:
        body.append(Section("Capture attempts", None, (attempts_table(capture.attempts),)))
    return Section("Stages", stages_badge(session), tuple(body))


def _graphs(session: ReportedSession) -> Section:
    if not session.succeeded:
        return Section("Graphs", Badge("not drawn", "muted"), (Note("no graphs: the export did not finish"),))
    view = side_by_side(session)
    if view.svg is None:
        body: list[Block] = [Note(view.message or "no drawing", "warn")]
        if view.table is not None:
            body.append(Table.from_frame(view.table))
        return Section("Graphs", Badge("table only", "warn"), tuple(body))
    return Section("Graphs", Badge("FX | ONNX", "info"),
                   (Note("left: the FX program translated; right: the optimized ONNX model"),
                    Svg(view.svg, "FX and ONNX graphs")))


def _analysis(result: object, title: str, hint: str) -> Section:
    if result is None or (isinstance(result, (list, tuple)) and not result):
        return Section(title, Badge.status("not run"), (Note(hint),))
    if isinstance(result, (list, tuple)) and len(result) == 1:
        result = result[0]
    if isinstance(result, (list, tuple)):  # each part says its own verdict
        parts = [render(r) for r in result]
        return Section(title, parts[0].badge, tuple(parts))
    section = render(result)
    return Section(title, section.badge, section.body, verdict=section.verdict) if title == "Verification" else section


def _verification(session: ReportedSession, result: VerifyArgument) -> Section:
    """The verification shown; one given to the report that is not the verify kept with this
    exported model (another spec's, or run outside the session) says the summary does not count it."""
    section = _analysis(result, "Verification", "not run: pass verify=session.verify() (or verify=True)")
    verdict = session.verdict
    if result is None or result is verdict.verify or not verdict.exported:
        return section
    note = Note("this verification was given to the report and is not the one kept with this exported model "
                "(another spec's, or run outside the session): the summary's verdict does not count it", "warn")
    return Section(section.title, section.badge, (note, *section.body), section.anchor, section.verdict)


def _benchmark(session: ReportedSession, result: BenchmarkArgument) -> Section:
    """The timings; their badge is green only for a model verified as passed (a timing of a
    model that fails verify, or that nothing verified, says so first)."""
    section = _analysis(result, "Benchmark", "not run: pass benchmark=session.benchmark() (or benchmark=True)")
    verdict = session.verdict
    if section.badge is None or section.badge.tone != "ok" or verdict.passed:
        return section
    said = ("the model timed fails verify: these are the timings of wrong numbers" if verdict.word == "failed"
            else f"the model timed is {verdict.word}: the timings say nothing of its numbers")
    badge = Badge(qualified_status(Status.OK, verdict), verdict.tone)  # "verify failed": the timing itself ran
    return Section(section.title, badge, (Note(said, verdict.tone), *section.body), section.anchor, section.verdict)


def _kept(session: ReportedSession) -> dict[str, Any]:
    try:
        return dict(session.analyses)
    except Exception:  # noqa: BLE001 - a report shows what it can
        return {}


def _recorded_passes(session: ReportedSession) -> OptimizerPasses | None:
    """``session.passes`` when the optimize stage ran its passes; None otherwise."""
    result = next((r for r in session.stages if r.name == "optimize"), None)
    passes = result.passes if result is not None else None
    return passes if passes is not None and len(passes) else None


def _passes(passes: OptimizerPasses, bisection: Bisection | None) -> Section:
    section = render(passes)
    body = section.body + ((render(bisection),) if bisection is not None else ())
    return Section("Optimizer passes", section.badge, body, verdict=section.verdict)


def _verify_again(session: ReportedSession) -> bool:
    """Verify a derived export on its own, as the widget does after a change of spec
    (:func:`exporter.verdict.verify_again`): exported, no verify of its own, and the last
    verify of a session it shares its cache with was quick."""
    verdict = session.verdict
    if not verdict.exported:
        return False
    latest = session.latest_analysis("verify")
    return verify_again(verdict.verify, getattr(latest, "seconds", None))


def report_document(session: ReportedSession, *, verify: VerifyArgument = None, benchmark: BenchmarkArgument = None,
                    graphs: bool = True) -> Document:
    """The report's :class:`~exporter.display.Document`. Runs the session's stages (a failure
    is shown, not raised). ``verify``: a :class:`~exporter.verify.VerifyResult`, or True to run
    ``session.verify()``; ``benchmark``: a BenchmarkResult / SweepResult / Comparison /
    ProfileResult (or a list of them), or True to run ``session.benchmark()``. Left out, they
    are the latest the session keeps (:attr:`~exporter.Session.analyses`: the widget's runs
    too); a derived export (another spec) with no verify of its own is verified here when the
    last verify of its family took under 2 s, as the widget does, so the report never shows
    an earlier spec's verdict. ``graphs=False`` leaves the drawing out."""
    session.run()
    if verify is True or (verify is None and _verify_again(session)):
        verify = session.verify()
    if benchmark is True:
        benchmark = session.benchmark()
    kept = _kept(session)
    if verify is None:
        verify = kept.get("verify")
    if benchmark is None:
        benchmark = [kept[name] for name in TIMINGS if name in kept]
    sections = [
        _guarded("Summary", "summary", lambda: _summary(session)),
        _guarded("Stages", "stages", lambda: _stages(session)),
        _guarded("Dims", "dims", lambda: dims_section(session.dims)),
        _guarded("Guards", "guards", lambda: guards_section(session.guards)),
    ]
    passes = _recorded_passes(session)
    if passes:  # the optimizer pass by pass, and which pass broke the model if that was asked
        sections.insert(2, _guarded("Optimizer passes", "passes", lambda: _passes(passes, kept.get("bisect_passes"))))
    if graphs:
        sections.append(_guarded("Graphs", "graphs", lambda: _graphs(session)))
    sections.append(_guarded("Verification", "verification", lambda: _verification(session, verify)))
    sections.append(_guarded("Benchmark", "benchmark", lambda: _benchmark(session, benchmark)))
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    title = f"ONNX export report: {type(session.model).__name__}"
    return Document(title, tuple(sections), subtitle=f"written {when}")


def report_html(session: ReportedSession, *, verify: VerifyArgument = None, benchmark: BenchmarkArgument = None,
                graphs: bool = True) -> str:
    """The report as one HTML string (see :func:`report_document`)."""
    return report_document(session, verify=verify, benchmark=benchmark, graphs=graphs).to_html()


def write_report(session: ReportedSession, path: str | os.PathLike[str], *, verify: VerifyArgument = None, benchmark: BenchmarkArgument = None,
                 graphs: bool = True) -> Path:
    """Write the report to ``path`` atomically (a failure leaves no partial file) and return
    the path. Raises :class:`~exporter.errors.SerializeError` if the file cannot be written."""
    from .atomic_save import _write_atomically

    target = Path(path)
    text = report_html(session, verify=verify, benchmark=benchmark, graphs=graphs)

    def write(directory: Path) -> None:
        (directory / target.name).write_text(text, encoding="utf-8")

    return _write_atomically(target, write)
