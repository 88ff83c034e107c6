"""One rendering model with a text and an HTML output, for every result a session produces.

Results are first turned into a tiny tree of frozen blocks (:class:`Section`, :class:`Badge`,
:class:`KeyValues`, :class:`Table`, :class:`Pre`, :class:`Note`, :class:`Svg`), which then
renders as plain text (:meth:`Section.to_text`) or as an HTML fragment (:meth:`Section.to_html`)::

    from exporter.display import render, to_html

    section = render(session.dims)      # a Section
    print(section.to_text())
    html = to_html(session.verify())     # what a notebook shows for the result

The HTML uses inline CSS only (no external resource, no JavaScript), so it also shows in
static renderings (nbconvert, GitHub) and in the standalone report (:mod:`exporter.report`).
Every string that comes from the user or from torch is escaped with ``html.escape``; the only
markup passed through is Graphviz's SVG, after :func:`clean_svg`.

A renderer never raises: :func:`repr_html` turns an error while rendering into a box that
shows it. Nothing heavy (torch, onnx, pandas) is imported by this module.
"""

from __future__ import annotations

import html
import math
import re
import traceback
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Union

if TYPE_CHECKING:
    from .session import Session

__all__ = [
    "Badge",
    "Block",
    "KeyValues",
    "Note",
    "Pre",
    "Section",
    "Svg",
    "Table",
    "benchmark_section",
    "clean_svg",
    "dims_section",
    "guards_section",
    "render",
    "repr_html",
    "session_html",
    "session_section",
    "sweep_section",
    "to_html",
    "verify_section",
]

# -- the model ----------------------------------------------------------------------------------

TONES = ("ok", "warn", "fail", "info", "muted")
_TONE_STYLE = {
    "ok": "background:#dcfce7;color:#166534",
    "warn": "background:#fef3c7;color:#92400e",
    "fail": "background:#fee2e2;color:#991b1b",
    "info": "background:#dbeafe;color:#1e40af",
    "muted": "background:#f3f4f6;color:#374151",
}
_STATUS_TONE = {
    "ok": "ok", "passed": "ok", "pass": "ok", "dynamic": "info", "static": "muted",
    "failed": "fail", "fail": "fail", "error": "fail", "ort_error": "fail",
    "skipped": "muted", "cancelled": "warn", "warning": "warn", "eager_error": "warn",
    "not run": "muted", "running": "info",
}


def tone_of(status: Any) -> str:
    """The tone of a status word (``ok`` → ok, ``failed`` → fail, ``cancelled`` → warn...)."""
    return _STATUS_TONE.get(str(getattr(status, "value", status)).lower(), "muted")


@dataclass(frozen=True)
class Badge:
    """A short status word with a tone (``ok``, ``warn``, ``fail``, ``info``, ``muted``)."""

    text: str
    tone: str = "muted"

    @classmethod
    def status(cls, status: Any) -> Badge:
        text = str(getattr(status, "value", status))
        return cls(text, tone_of(text))

    def to_text(self) -> str:
        return f"[{self.text}]"

    def to_html(self) -> str:
        style = _TONE_STYLE.get(self.tone, _TONE_STYLE["muted"])
        return (f'<span class="oxw-badge oxw-{_e(self.tone)}" style="{style};border-radius:3px;'
                f'padding:0 5px;font-size:0.85em;font-weight:600;white-space:nowrap">{_e(self.text)}</span>')


Cell = Union[str, Badge]


@dataclass(frozen=True)
class KeyValues:
    """``key: value`` lines."""

    items: tuple[tuple[str, Cell], ...]

    def text_lines(self) -> list[str]:
        width = max((len(k) for k, _ in self.items), default=0)
        return [f"{k + ':':<{width + 1}} {_cell_text(v)}".rstrip() for k, v in self.items]

    def to_html(self) -> str:
        rows = "".join(
            f'<tr><th style="{_TH};text-align:left;padding-right:1em">{_e(k)}</th>'
            f'<td style="{_TD}">{_cell_html(v)}</td></tr>'
            for k, v in self.items
        )
        return f'<table class="oxw-kv" style="{_TABLE}">{rows}</table>'


@dataclass(frozen=True)
class Table:
    """Columns and rows of cells (strings or badges)."""

    columns: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    caption: str = ""

    @classmethod
    def from_rows(cls, columns: Sequence[str], rows: Iterable[Sequence[Any]], caption: str = "",
                  badges: Sequence[str] = ()) -> Table:
        """Cells are formatted with :func:`cell`; columns named in ``badges`` show status badges."""
        columns = tuple(columns)
        as_badge = {columns.index(c) for c in badges if c in columns}
        out = []
        for row in rows:
            out.append(tuple(
                Badge.status(value) if i in as_badge and not _missing(value) else cell(value)
                for i, value in enumerate(row)
            ))
        return cls(columns, tuple(out), caption)

    @classmethod
    def from_frame(cls, frame: Any, columns: Sequence[str] | None = None, caption: str = "",
                   badges: Sequence[str] = ()) -> Table:
        """A table from a pandas DataFrame (all columns, or ``columns``)."""
        columns = list(columns) if columns is not None else [str(c) for c in frame.columns]
        rows = frame[columns].itertuples(index=False, name=None)
        return cls.from_rows(columns, rows, caption, badges)

    def text_lines(self) -> list[str]:
        cells = [list(self.columns)] + [[_cell_text(c) for c in row] for row in self.rows]
        cells = [[c.replace("\n", " ") for c in row] for row in cells]
        widths = [max(len(row[i]) for row in cells) for i in range(len(self.columns))]
        lines = [self.caption] if self.caption else []
        lines.extend("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() for row in cells)
        return lines

    def to_html(self) -> str:
        caption = (f'<caption style="text-align:left;font-weight:600;padding:2px 0">{_e(self.caption)}</caption>'
                   if self.caption else "")
        head = "".join(f'<th style="{_TH}">{_e(c)}</th>' for c in self.columns)
        body = "".join(
            "<tr>" + "".join(f'<td style="{_TD}">{_cell_html(c)}</td>' for c in row) + "</tr>" for row in self.rows
        )
        return (f'<table class="oxw-table" style="{_TABLE}">{caption}<thead><tr>{head}</tr></thead>'
                f"<tbody>{body}</tbody></table>")


@dataclass(frozen=True)
class Pre:
    """Preformatted text (an error, a traceback, generated code)."""

    text: str

    def text_lines(self) -> list[str]:
        return self.text.splitlines() or [""]

    def to_html(self) -> str:
        return (f'<pre class="oxw-pre" style="background:#f8f8f8;border:1px solid #e5e7eb;padding:6px;'
                f'margin:4px 0;white-space:pre-wrap;font-size:0.85em">{_e(self.text)}</pre>')


@dataclass(frozen=True)
class Note:
    """A sentence, optionally toned (a warning, a failure)."""

    text: str
    tone: str = "muted"

    def text_lines(self) -> list[str]:
        return self.text.splitlines() or [""]

    def to_html(self) -> str:
        color = {"fail": "#991b1b", "warn": "#92400e", "ok": "#166534", "info": "#1e40af"}.get(self.tone, "#374151")
        return f'<p class="oxw-note" style="margin:4px 0;color:{color};white-space:pre-wrap">{_e(self.text)}</p>'


@dataclass(frozen=True)
class Svg:
    """An SVG drawing made by Graphviz (text form: a placeholder line). Cleaned on output."""

    svg: str
    alt: str = "graph drawing"

    def text_lines(self) -> list[str]:
        return [f"({self.alt}: SVG, {len(self.svg)} characters)"]

    def to_html(self) -> str:
        cleaned = clean_svg(self.svg)
        if cleaned is None:
            return Note(f"{self.alt} left out: it contained active content", "warn").to_html()
        return f'<div class="oxw-svg" style="overflow:auto;max-height:80vh;border:1px solid #e5e7eb">{cleaned}</div>'


@dataclass(frozen=True)
class Section:
    """A titled part with an optional status badge; its body holds blocks and sub-sections."""

    title: str
    badge: Badge | None = None
    body: tuple[Block, ...] = ()
    anchor: str = ""

    def text_lines(self) -> list[str]:
        head = self.title + (f" {self.badge.to_text()}" if self.badge else "")
        lines = [head]
        for block in self.body:
            lines.extend(("  " + line).rstrip() for line in block.text_lines())
        return lines

    def to_text(self) -> str:
        return "\n".join(self.text_lines())

    def to_html(self, level: int = 3) -> str:
        badge = " " + self.badge.to_html() if self.badge else ""
        anchor = f' id="{_e(self.anchor)}"' if self.anchor else ""
        parts = []
        for block in self.body:
            parts.append(block.to_html(min(level + 1, 6)) if isinstance(block, Section) else block.to_html())
        return (f'<section class="oxw-section"{anchor} style="margin:6px 0 10px 0">'
                f'<h{level} style="margin:4px 0;font-size:{_HEADING_SIZE.get(level, "1em")}">{_e(self.title)}{badge}</h{level}>'
                f'<div style="margin-left:0.75em">{"".join(parts)}</div></section>')

    def _repr_html_(self) -> str:
        return _frame(self.to_html())

    def __str__(self) -> str:
        return self.to_text()


Block = Union[KeyValues, Table, Pre, Note, Svg, Section]

_HEADING_SIZE = {2: "1.3em", 3: "1.1em", 4: "1em", 5: "0.95em", 6: "0.9em"}
_TABLE = "border-collapse:collapse;margin:4px 0;font-size:0.9em"
_TH = "border-bottom:1px solid #9ca3af;padding:2px 8px;text-align:left;vertical-align:top;font-weight:600"
_TD = "border-bottom:1px solid #e5e7eb;padding:2px 8px;text-align:left;vertical-align:top;white-space:pre-wrap"
_FONT = "font-family:system-ui,-apple-system,'Segoe UI',sans-serif;font-size:13px;line-height:1.4;color:#111827"


def _e(text: Any) -> str:
    return html.escape(str(text), quote=True)


def _missing(value: Any) -> bool:
    if value is None:
        return True
    try:
        return isinstance(value, float) and math.isnan(value)
    except TypeError:  # pragma: no cover
        return False


def cell(value: Any) -> str:
    """How a value shows in a table cell: '' for None/NaN, 4 significant digits for floats,
    yes/no for booleans, comma-joined sequences, ``str`` otherwise."""
    if _missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if value == math.inf:
            return "inf"
        return f"{value:.4g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return cell(value.item())
    return str(value)


def _cell_text(value: Cell) -> str:
    return value.text if isinstance(value, Badge) else value


def _cell_html(value: Cell) -> str:
    return value.to_html() if isinstance(value, Badge) else _e(value)


def _frame(inner: str) -> str:
    return f'<div class="oxw" style="{_FONT}">{inner}</div>'


_SVG_ACTIVE = re.compile(
    r"<\s*(script|foreignObject|iframe|object|embed)\b|\son\w+\s*=|javascript:"
    r"|(?:xlink:)?href\s*=\s*[\"']?\s*(?:https?:)?//|url\(\s*[\"']?\s*(?:https?:)?//|@import",
    re.IGNORECASE,
)


def clean_svg(svg: str) -> str | None:
    """Graphviz's SVG ready to inline in HTML: without the XML prolog, doctype and comments;
    None if it holds active or external content (scripts, event handlers, remote links)."""
    start = svg.find("<svg")
    if start < 0:
        return None
    body = re.sub(r"<!--.*?-->", "", svg[start:], flags=re.DOTALL)
    return None if _SVG_ACTIVE.search(body) else body


# -- builders: results → sections ---------------------------------------------------------------


def _failure_blocks(failure: Any, fallback: str | None = None) -> list[Block]:
    if failure is not None:
        return [Pre(str(failure))]
    return [Pre(fallback)] if fallback else []


def stages_table(stages: Sequence[Any]) -> Table:
    rows = []
    for r in stages:
        d = r.to_dict()
        rows.append((d["stage"], d["status"], f"{d['seconds']:.3f}", d["cached"], d["detail"]))
    return Table.from_rows(("stage", "status", "seconds", "cached", "detail"), rows, badges=("status",))


def _session_status(session: Session) -> Badge:
    from .errors import Status

    stages = session.stages
    if any(r.status == Status.FAILED for r in stages):
        return Badge("failed", "fail")
    if any(r.status == Status.CANCELLED for r in stages):
        return Badge("cancelled", "warn")
    if session.succeeded:
        return Badge("ok", "ok")
    return Badge("not run", "muted") if not stages else Badge("partial", "info")


def session_section(session: Session, *, title: str | None = None, details: bool | None = None) -> Section:
    """The compact summary of a :class:`~exporter.Session`: model, dim spec, options, one row
    per stage run so far, the failure if any, what has not run. Nothing is run to show it.

    ``details``: also show dims and guards (True: computed if needed; None: only when the
    session has already computed them)."""
    from .session import STAGES

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
    body: list[Block] = [KeyValues(tuple(items))]
    stages = session.stages
    if stages:
        body.append(stages_table(stages))
    failed = session.failed_stage
    if failed is not None:
        body.extend(_failure_blocks(failed.failure, failed.detail))
    pending = [s for s in STAGES if s not in {r.name for r in stages}]
    if pending:
        body.append(Note(f"not run: {', '.join(pending)}"))
    computed = vars(session)
    for name, builder in (("dims", dims_section), ("guards", guards_section)):
        if details or (details is None and name in computed):
            body.append(_safe(builder, getattr(session, name), name.capitalize()))
    return Section(title or f"Session: {model}", _session_status(session), tuple(body))


def session_html(session: Session) -> str:
    """The HTML a notebook shows for a session (``Session._repr_html_``); never raises."""
    return repr_html(session)


def attempts_table(attempts: Sequence[Any]) -> Table:
    rows = [(a.strategy, a.outcome, f"{a.seconds:.3f}", a.first_error_line) for a in attempts]
    return Table.from_rows(("strategy", "outcome", "seconds", "error"), rows, badges=("outcome",))


def _range(lo: Any, hi: Any) -> str:
    return f"[{0 if lo is None else lo}, {'inf' if hi is None else hi}]"


def dims_section(dims: Any, title: str = "Dims") -> Section:
    """Per input axis: example size, requested policy, obtained result and range, and why."""
    badge = Badge("capture failed", "fail") if dims.error else Badge(str(dims.strategy or "not captured"), "muted")
    rows = []
    for o in dims.outcomes:
        rng = _range(o.min, o.max) if o.obtained == "dynamic" else ("" if o.obtained == "failed" else str(o.min))
        rows.append((o.name, o.example, o.requested, o.obtained, rng, o.dim or "",
                     "; ".join(x for x in (o.reason, o.note) if x), o.source))
    body: list[Block] = []
    if dims.error:
        body.append(Note(f"capture failed: {dims.error}", "fail"))
    body.append(Table.from_rows(("axis", "example", "requested", "obtained", "range", "dim", "why", "source"),
                                rows, badges=("obtained",)))
    return Section(title, badge, tuple(body))


def guards_section(guards: Any, title: str = "Guards") -> Section:
    """Every shape guard with the user's line that added it."""
    records = tuple(guards)
    badge = Badge(f"{len(records)} guard{'s' if len(records) != 1 else ''}", "info" if records else "muted")
    if not records:
        return Section(title, badge, (Note(f"no shape guards ({guards.strategy or 'not captured'})"),))
    rows = [(g.kind, g.expression, ", ".join(a.dotted for a in g.axes), g.location, g.code) for g in records]
    return Section(title, badge, (Table.from_rows(("kind", "expression", "axes", "at", "code"), rows),))


def verify_section(result: Any, title: str = "Verification") -> Section:
    """Verification: status, findings, first divergence, contract problems, one row per case."""
    badge = Badge.status(result.status)
    if result.status == "error":
        return Section(title, badge, tuple([Note("verification could not run", "fail"),
                                            *_failure_blocks(result.failure, result.error)]))
    n_edge = sum(1 for c in result.cases if getattr(c, "edge", None) is not None)
    n_other = sum(1 for c in result.cases if not c.is_example) - n_edge
    edges = f", {n_edge} edge value(s)" if n_edge else ""
    body: list[Block] = [KeyValues((
        ("cases", f"{len(result.cases)} ({n_other} at other sizes{edges})"),
        ("dim groups", str(len(result.groups))),
        ("seconds", f"{result.seconds:.2f}"),
    ))]
    if result.status == "cancelled":
        body.append(Note(f"cancelled after {len(result.cases)} case(s)", "warn"))
    if result.findings:
        if any(getattr(f, "fix", None) for f in result.findings):
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
            [(c.check, c.subject, c.status, c.message, c.hint) for c in result.contract.checks if c.status != "ok"],
            caption="contract", badges=("status",)))
    rows = [(c.name, c.sizes_text, c.status, c.max_abs, ", ".join(c.outside_obtained),
             "" if c.ok else c.describe()) for c in result.cases]
    body.append(Table.from_rows(("case", "sizes", "status", "max abs", "outside obtained range", "detail"),
                                rows, badges=("status",)))
    return Section(title, badge, tuple(body))


def _ms(seconds: float | None) -> str:
    return "" if seconds is None else f"{seconds * 1e3:.4g}"


def benchmark_section(result: Any, title: str = "Benchmark") -> Section:
    """Latency of onnxruntime and eager PyTorch: percentiles, mean with its interval, ratio."""
    badge = Badge.status(result.status)
    if result.cancelled:
        return Section(title, badge, (Note("benchmark cancelled", "warn"),))
    if result.error:
        return Section(title, badge, tuple([Note("benchmark could not run", "fail"),
                                            *_failure_blocks(result.failure, result.error)]))
    items: list[tuple[str, Cell]] = []
    if result.sizes:
        items.append(("sizes", ", ".join(f"{k}={v}" for k, v in result.sizes)))
    if result.config is not None:
        items.append(("setup", result.config.describe()))
    if result.speedup is not None:
        faster = "faster" if result.speedup >= 1 else "slower"
        items.append(("onnxruntime / eager p50", f"{result.ratio:.3f} (onnxruntime {result.speedup:.2f}x {faster})"))
        interval = getattr(result, "speedup_ci", None)
        if interval is not None:
            items.append(("95% interval", f"{interval[0]:.2f}–{interval[1]:.2f}x over {len(result.speedup_rounds)} "
                                          "interleaved rounds"))
    rows = []
    for timing in (result.ort, result.eager):
        if timing is None:
            continue
        s = timing.stats
        if s is None:
            rows.append((timing.engine, "", "", "", "", "", timing.error))
        else:
            rows.append((timing.engine, str(s.runs), _ms(s.p50), _ms(s.p90), _ms(s.p99),
                         f"{_ms(s.mean)} ± {_ms(s.stdev)}", ""))
    body: list[Block] = [KeyValues(tuple(items))] if items else []
    body.append(Table.from_rows(("engine", "runs", "p50 ms", "p90 ms", "p99 ms", "mean ± sd ms", "error"), rows))
    if getattr(result, "warning", None):
        body.insert(0, Note(result.warning, "warn"))
    if getattr(result, "comparison", None) is not None:
        body.append(Pre(result.comparison.summary()))
    return Section(title, badge, tuple(body))


def sweep_section(result: Any, title: str | None = None) -> Section:
    """Latency against the size of one dynamic dim: one row per size."""
    title = title or f"Latency vs {result.dim}"
    badge = Badge.status(result.status)
    body: list[Block] = []
    if result.cancelled:
        body.append(Note(f"cancelled after {len(result.points)} size(s)", "warn"))
    if result.error:
        return Section(title, badge, (Note(f"sweep could not run: {result.error}", "fail"),))
    if result.config is not None:
        body.append(KeyValues((("setup", result.config.describe()),)))
    rows = []
    for size, point in zip(result.sizes, result.points):
        ort = point.ort.stats if point.ort is not None else None
        eager = point.eager.stats if point.eager is not None else None
        error = point.error or (point.ort.error if point.ort else None) or (point.eager.error if point.eager else None)
        rows.append((size, _ms(ort.p50 if ort else None), _ms(ort.p90 if ort else None),
                     _ms(eager.p50 if eager else None),
                     f"{point.speedup:.2f}x" if point.speedup else "",
                     f"{point.speedup_ci[0]:.2f}–{point.speedup_ci[1]:.2f}x" if getattr(point, "speedup_ci", None) else "",
                     error))
    body.append(Table.from_rows(("size", "ort p50 ms", "ort p90 ms", "eager p50 ms", "speedup", "95% interval", "error"),
                                rows))
    if getattr(result, "warning", None):
        body.append(Note(result.warning, "warn"))
    return Section(title, badge, tuple(body))


def comparison_section(result: Any, title: str = "Variants") -> Section:
    """Variants timed in the same rounds (``session.compare()``): one row per variant with its
    p50 and its time relative to the baseline."""
    badge = Badge.status(result.status)
    if result.cancelled or result.error:
        text = "cancelled" if result.cancelled else f"comparison could not run: {result.error}"
        return Section(title, badge, (Note(text, "warn" if result.cancelled else "fail"),))
    rows = []
    for row in result.rows:
        if row.name == result.baseline:
            ratio = "baseline"
        elif row.ratio is not None and row.ratio_ci is not None:
            ratio = f"{row.ratio:.3f} ({row.ratio_ci[0]:.3f}–{row.ratio_ci[1]:.3f})"
        else:
            ratio = ""
        rows.append((row.name, _ms(row.stats.p50 if row.stats else None), ratio,
                     "" if row.model_mb is None else f"{row.model_mb:.3g}",
                     "" if row.rss_growth_mb is None else f"{row.rss_growth_mb:.3g}", row.error))
    body: list[Block] = [
        KeyValues((("rounds", str(result.rounds)), ("ratio", f"variant time / {result.baseline} time, 95% interval"))),
        Table.from_rows(("variant", "p50 ms", "ratio", "model MB", "RSS growth MB", "error"), rows),
    ]
    if result.warning:
        body.append(Note(result.warning, "warn"))
    return Section(title, badge, tuple(body))


def _builders() -> list[tuple[type, Any]]:
    from .bench.compare import Comparison
    from .bench.latency import BenchmarkResult, SweepResult
    from .guards import Guards
    from .session import Session
    from .shapes.outcomes import DimOutcomes
    from .verify.results import VerifyResult

    return [(Session, session_section), (VerifyResult, verify_section), (BenchmarkResult, benchmark_section),
            (SweepResult, sweep_section), (Comparison, comparison_section), (DimOutcomes, dims_section),
            (Guards, guards_section),
            (Section, lambda s: s)]


def render(obj: Any) -> Section:
    """The :class:`Section` of a Session, VerifyResult, BenchmarkResult, SweepResult,
    DimOutcomes or Guards. Raises ``TypeError`` for anything else."""
    for cls, builder in _builders():
        if isinstance(obj, cls):
            return builder(obj)
    raise TypeError(f"no display for {type(obj).__name__}")


def _error_section(title: str, exc: BaseException) -> Section:
    text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    return Section(title, Badge("display error", "fail"), (Note("this could not be displayed:", "fail"), Pre(text)))


def _safe(builder: Any, obj: Any, title: str) -> Section:
    try:
        return builder(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return _error_section(title, exc)


def to_html(obj: Any) -> str:
    """The HTML fragment of :func:`render` (inline CSS, no script)."""
    return _frame(render(obj).to_html())


def repr_html(obj: Any) -> str:
    """What ``_repr_html_`` returns: :func:`to_html`, or a box showing why rendering failed."""
    try:
        return to_html(obj)
    except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
        return _frame(_error_section(type(obj).__name__, exc).to_html())


@dataclass(frozen=True)
class Document:
    """A standalone HTML page: a title, a line under it, sections."""

    title: str
    sections: tuple[Section, ...] = ()
    subtitle: str = ""
    meta: tuple[tuple[str, str], ...] = field(default=())

    def to_text(self) -> str:
        head = [self.title] + ([self.subtitle] if self.subtitle else [])
        return "\n\n".join(["\n".join(head), *(s.to_text() for s in self.sections)])

    def to_html(self) -> str:
        toc = "".join(f'<li><a href="#{_e(s.anchor)}">{_e(s.title)}</a> {s.badge.to_html() if s.badge else ""}</li>'
                      for s in self.sections if s.anchor)
        nav = f'<nav><ul style="margin:4px 0 12px 0">{toc}</ul></nav>' if toc else ""
        sub = f'<p style="color:#4b5563;margin:0 0 8px 0">{_e(self.subtitle)}</p>' if self.subtitle else ""
        body = "".join(s.to_html(level=2) for s in self.sections)
        return (
            "<!DOCTYPE html>\n"
            '<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; "
            "img-src data:\">"
            f"<title>{_e(self.title)}</title></head>"
            f'<body style="{_FONT};margin:16px 24px;max-width:1400px">'
            f'<h1 style="font-size:1.5em;margin:0 0 4px 0">{_e(self.title)}</h1>{sub}{nav}{body}'
            "</body></html>\n"
        )
