"""How recordings and their exports are shown (text, HTML, Markdown), registered by type name.

The recorder, the recording and its call groups, an export from recorded calls and its check on
them, observed against exported ranges. They live here, not in :mod:`exporter.display.sections`:
a recording exports through a session, and the session's report imports those (a cycle)."""

from __future__ import annotations

from ..display import Badge, Block, KeyValues, Note, Section, Table, Verdict, status_word
from ..errors import Status
from ..presentation import presents
from .groups import CallGroup
from .ranges import RangeReport
from .recording import Recorder, Recording
from .replay import RecordedCheck, RecordedExport


def _range(low: int, high: int) -> str:
    return str(low) if low == high else f"{low}..{high}"


@presents(CallGroup)
def group_section(group: CallGroup) -> Section:
    dims = ", ".join(f"{name} {_range(*observed)}" for name, observed in group.dims.items()) or "none (all static)"
    rows = [
        (f"{axis.path}.{axis.axis}", axis.policy, _range(*axis.observed), axis.note)
        for axis in group.axes
    ]
    body: list[Block] = [
        KeyValues((("calls", str(len(group.calls))), ("inputs", ", ".join(group.inputs)), ("dims", dims),
                   ("example", f"call {group.example.index}"))),
        Table.from_rows(("axis", "proposed", "observed", "note"), rows, code=("axis", "proposed")),
    ]
    return Section(f"group {group.name}", body=tuple(body))


@presents(Recording)
def recording_section(recording: Recording) -> Section:
    groups = ", ".join(f"{g.name} ({len(g.calls)})" for g in recording.groups)
    verdict = Verdict(f"{len(recording.calls)} calls of {recording.model_name}.forward recorded: {groups}")
    body = tuple(Note(note, tone="warn") for note in recording.notes) + tuple(group_section(g) for g in recording.groups)
    return Section("Recording", verdict=verdict, body=body)


@presents(Recorder)
def recorder_section(recorder: Recorder) -> Section:
    """A recorder after its block: its recording; before, or when its calls cannot be used,
    the one line that says its state and why."""
    outcome = recorder.outcome()
    if isinstance(outcome, Recording):
        return recording_section(outcome)
    return Section(f"<Recorder of {type(recorder.model).__name__}: {outcome}>")


@presents(RecordedCheck)
def recorded_check_section(check: RecordedCheck) -> Section:
    rows = [(c.case, c.output, c.status, c.max_abs if c.max_abs is not None else "", c.describe() if not c.ok else "")
            for c in check.checks if not c.ok]
    body: list[Block] = []
    if rows:
        body.append(Table.from_rows(("call", "output", "status", "max abs diff", "detail"), rows, badges=("status",)))
    body.extend(Note(f"call {index} not compared: {reason}", tone="warn") for index, reason in check.skipped)
    tone = "ok" if check.ok else "fail" if check.status == Status.FAILED else "warn"  # skipped: some not compared
    return Section(f"On the recorded {check.group} calls", badge=Badge(status_word(check.status), tone),
                   verdict=Verdict(check.verdict, tone), body=tuple(body))


@presents(RecordedExport)
def recorded_export_section(result: RecordedExport) -> Section:
    sweep = "not run" if result.sweep is None else result.sweep.status
    rows = [("group", result.group.name), ("example", f"call {result.group.example.index}"),
            ("spec", repr(result.session.spec)), ("sweep (session.verify())", str(sweep))]
    if result.bounded:
        rows.append(("bounded by the model's guards", "; ".join(result.bounded)))
    body: list[Block] = [KeyValues(tuple(rows)), recorded_check_section(result.recorded)]
    return Section(f"Exported from the recorded {result.group.name} calls",
                   badge=Badge.status("ok" if result.ok else "failed"), body=tuple(body))


@presents(RangeReport)
def range_report_section(report: RangeReport) -> Section:
    rows = [
        (f"{a.path}.{a.axis}", _range(*a.observed), a.proposed, a.exported_text,
         ", ".join(f"call {i}" for i in a.outside))
        for a in report.axes
    ]
    outside = report.outside_calls
    verdict = Verdict(
        f"recorded {report.group} calls outside what the export accepts: " + ", ".join(f"call {i}" for i in outside)
        if outside else f"the export accepts the sizes of every recorded {report.group} call",
        "warn" if outside else "ok",
    )
    table = Table.from_rows(("axis", "observed", "proposed", "exported", "calls outside"), rows, code=("axis",))
    calls = tuple(Note(line, tone="warn") for line in report.outside_lines)
    return Section(f"Observed and exported ranges ({report.group})", verdict=verdict, body=(*calls, table))
