"""A standalone HTML report of a session: one file that opens offline.

::

    from exporter.report import write_report

    write_report(session, "report.html", verify=session.verify(), benchmark=session.benchmark())
    write_report(session, "report.html", verify=True)    # run the verification for the report

The report holds the stages, the capture attempts, the dims, the guards, the FX and ONNX
graphs side by side as inline SVG (when Graphviz and the workbench's graph view are
installed), the verification and the benchmark. Everything is rendered through
:mod:`exporter.display`: inline CSS, no script, no external resource, and every string from
the user or torch escaped. A failed export gives a report that shows the failure.

No IPython, ipywidgets or matplotlib is imported.
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .display import (
    Badge,
    Document,
    KeyValues,
    Note,
    Pre,
    Section,
    Svg,
    Table,
    _error_section,
    attempts_table,
    benchmark_section,
    dims_section,
    guards_section,
    session_section,
    stages_table,
    sweep_section,
    verify_section,
)

if TYPE_CHECKING:
    from .session import Session

__all__ = ["report_document", "report_html", "write_report"]


def _guarded(title: str, anchor: str, build: Any) -> Section:
    """``build()``'s section with its anchor, or a section showing why it could not be built."""
    try:
        section = build()
    except Exception as exc:  # noqa: BLE001 - a report shows what went wrong, it does not stop
        section = _error_section(title, exc)
    return Section(title, section.badge, section.body, anchor)


def _summary(session: Session) -> Section:
    base = session_section(session, details=False)
    keep = [b for b in base.body if isinstance(b, KeyValues)]
    failed = session.failed_stage
    if failed is not None:
        keep.append(Note(f"the export failed at {failed.name}", "fail"))
    return Section("Summary", base.badge, tuple(keep))


def _stages(session: Session) -> Section:
    stages = session.stages
    body: list[Any] = [stages_table(stages)]
    failed = session.failed_stage
    if failed is not None and failed.failure is not None:
        body.append(Pre(str(failed.failure)))
    capture = next((r for r in stages if r.name == "capture"), None)
    if capture is not None and capture.attempts:
        body.append(Section("Capture attempts", None, (attempts_table(capture.attempts),)))
    return Section("Stages", base_badge(session), tuple(body))


def base_badge(session: Session) -> Badge | None:
    return session_section(session, details=False).badge


def _graphs(session: Session) -> Section:
    if not session.succeeded:
        return Section("Graphs", Badge("not drawn", "muted"), (Note("no graphs: the export did not finish"),))
    try:
        from workbench.render.graph_view import side_by_side
    except ImportError as exc:
        return Section("Graphs", Badge("not drawn", "muted"),
                       (Note(f"the graph view is not installed ({exc}); pip install 'onnx-export-workbench[workbench]'"),))
    view = side_by_side(session)
    if view.svg is None:
        body: list[Any] = [Note(view.message or "no drawing", "warn")]
        if view.table is not None:
            body.append(Table.from_frame(view.table))
        return Section("Graphs", Badge("table only", "warn"), tuple(body))
    return Section("Graphs", Badge("FX | ONNX", "info"),
                   (Note("left: the FX program translated; right: the optimized ONNX model"),
                    Svg(view.svg, "FX and ONNX graphs")))


def _analysis(result: Any, title: str, hint: str) -> Section:
    if result is None:
        return Section(title, Badge("not run", "muted"), (Note(hint),))
    from .bench.latency import SweepResult

    if isinstance(result, (list, tuple)):
        parts = [_analysis(r, title, hint) for r in result]
        return Section(title, parts[0].badge if parts else None, tuple(parts))
    if isinstance(result, SweepResult):
        return sweep_section(result)
    if title == "Verification":
        return verify_section(result)
    return benchmark_section(result)


def report_document(session: Session, *, verify: Any = None, benchmark: Any = None, graphs: bool = True) -> Document:
    """The report's :class:`~exporter.display.Document`. Runs the session's stages (a failure
    is shown, not raised). ``verify``: a :class:`~exporter.verify.VerifyResult`, or True to run
    ``session.verify()``; ``benchmark``: a BenchmarkResult / SweepResult (or a list of them),
    or True to run ``session.benchmark()``. ``graphs=False`` leaves the drawing out."""
    session.run()
    if verify is True:
        verify = session.verify()
    if benchmark is True:
        benchmark = session.benchmark()
    sections = [
        _guarded("Summary", "summary", lambda: _summary(session)),
        _guarded("Stages", "stages", lambda: _stages(session)),
        _guarded("Dims", "dims", lambda: dims_section(session.dims)),
        _guarded("Guards", "guards", lambda: guards_section(session.guards)),
    ]
    if graphs:
        sections.append(_guarded("Graphs", "graphs", lambda: _graphs(session)))
    sections.append(_guarded("Verification", "verification", lambda: _analysis(
        verify, "Verification", "not run: pass verify=session.verify() (or verify=True)")))
    sections.append(_guarded("Benchmark", "benchmark", lambda: _analysis(
        benchmark, "Benchmark", "not run: pass benchmark=session.benchmark() (or benchmark=True)")))
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    title = f"ONNX export report: {type(session.model).__name__}"
    return Document(title, tuple(sections), subtitle=f"written {when}")


def report_html(session: Session, *, verify: Any = None, benchmark: Any = None, graphs: bool = True) -> str:
    """The report as one HTML string (see :func:`report_document`)."""
    return report_document(session, verify=verify, benchmark=benchmark, graphs=graphs).to_html()


def write_report(session: Session, path: str | os.PathLike, *, verify: Any = None, benchmark: Any = None,
                 graphs: bool = True) -> Path:
    """Write the report to ``path`` atomically (a failure leaves no partial file) and return
    the path. Raises :class:`~exporter.errors.SerializeError` if the file cannot be written."""
    from .serialize import _write_atomically

    target = Path(path)
    text = report_html(session, verify=verify, benchmark=benchmark, graphs=graphs)
    return _write_atomically(target, lambda directory: (directory / target.name).write_text(text, encoding="utf-8"))
