"""The Dims tab: one row per input axis with its example size, a policy control and the
obtained result with its reason and source line; an "Apply suggested fixes" button; the spec
as code with a Copy button. When the session was exported from recorded calls
(:mod:`exporter.recording`), under the verdict: per axis the observed sizes next to the range
the session accepts (a chart and a table) and the recorded calls it does not accept, redrawn
for every session shown (a policy toggle narrows or widens the range).

The policies: AUTO / STATIC / DYNAMIC (torch's), a *named* dynamic dim (a string, as
``torch.onnx.export`` reads it: dynamic, named in the ONNX model, its range narrowed by the
model's guards) and a *Dim with bounds* (``Dim(name, min, max)``: strict, a guard that narrows
the range rejects the export, with a fix).

Changing a control calls back into the workbench, which derives a session with that axis
changed and re-captures in the background. Every text shown comes from the core
(``session.dims``, ``session.suggested_fixes``, ``session.spec.to_code``).

Rows are read in the user's terms (``session.dims.grouped()``): one row per dynamic dim with
every axis tied to it (``seq: input_ids.1 = attention_mask.1``), one per family of leaves
with the same result (``cache.*.key/value.1``, static 2); the range's bounds in words with the
line that asked for each (``at most 512: position embeddings,
transformers/models/bert/modeling_bert.py:95``); torch's guards folded in a closed
``<details>``. A row of several axes opens (its toggle) to the per-axis controls.

DOM hooks (CSS classes) for browser tests: the policy control of input ``x`` axis 0 has
``wb-axis-x-0``, its result text ``wb-dim-result-x-0`` (a leaf path's dots become dashes); a
row of several axes ``wb-dim-group``, its toggle ``wb-dim-group-toggle``; the recorded section
``wb-dims-recorded``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from exporter.dims import AUTO, DYNAMIC, STATIC, AxisPolicy, Derived, Dim, DimSpec, Name, Policy
from exporter.dims.model import default_dim_name
from exporter.display import Note, Pre, render
from exporter.recording import CallGroup, RangeReport, compare_ranges
from exporter.shapes.outcomes import UNCHECKED_NOTE, ZERO_MIN_NOTE, DimOutcome, DimRow, range_text
from exporter.shapes.reasons import DimBound

from ..render.dim_charts import recorded_ranges_chart
from .blocks import esc, failure_html, figure_html, folded, pane, verdict

if TYPE_CHECKING:
    from exporter.inputs import BoundInputs
    from exporter.pipeline.stage import StageResult
    from exporter.session import Session

__all__ = ["POLICY_CHOICES", "AxisRow", "DimsView", "GroupRow", "css_name", "range_text"]

# (label, value): the value is what tests and the front end set.
POLICY_CHOICES = (
    ("AUTO", "AUTO"), ("STATIC", "STATIC"), ("DYNAMIC", "DYNAMIC"),
    ("name (torch.onnx)", "name"), ("Dim(min, max)", "Dim"),
)
POLICY_HELP = {
    "AUTO": "torch decides: dynamic if the model allows it, else static",
    "STATIC": "fixed at the example size",
    "DYNAMIC": "dynamic; the export fails if the model does not allow it",
    "name": "a string name, as torch.onnx.export reads it: dynamic, named in the ONNX model; "
            "the model's guards may narrow its range",
    "Dim": "Dim(name, min, max): strict; a guard that narrows this range rejects the export, with a fix",
}


def css_name(path: str, axis: int) -> str:
    """``x``, 0 → ``x-0``; ``cache.0.key``, 2 → ``cache-0-key-2``."""
    return f"{path.replace('.', '-')}-{axis}"


def _bound_text(value: int | None) -> str:
    return "" if value is None else str(value)


def _parse_bound(text: str, which: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{which} {text!r} is not an integer") from None


_INLINE = "1 1 140px"  # beside the controls, on their line when it fits
_FULL_LINE = "1 1 100%"  # a wrapping row's line of its own


class AxisRow:
    """The controls and result of one input axis."""

    def __init__(self, path: str, axis: int, example: int, on_change: Callable[[AxisRow], None]) -> None:
        self.path, self.axis, self.example = path, axis, example
        self._on_change = on_change
        self._syncing = False
        self._shown_policy: AxisPolicy | None = None  # the session's policy for this axis, as last shown
        css = css_name(path, axis)
        self.label = widgets.HTML(f"<span class='wb-nowrap'><code>{esc(path)}.{axis}</code> "
                                  f"<span class='wb-size'>size {example}</span></span>",
                                  layout=widgets.Layout(width="auto", min_width="110px"))
        self.policy = widgets.Dropdown(options=POLICY_CHOICES, value="STATIC", layout=widgets.Layout(width="175px"),
                                       tooltip=POLICY_HELP["STATIC"])
        self.policy.add_class(f"wb-axis-{css}")
        self.name = widgets.Text(placeholder="name", continuous_update=False, layout=widgets.Layout(width="100px"))
        self.min = widgets.Text(placeholder="min", continuous_update=False, layout=widgets.Layout(width="55px"))
        self.max = widgets.Text(placeholder="max", continuous_update=False, layout=widgets.Layout(width="55px"))
        self.dim_box = widgets.HBox([self.name, self.min, self.max], layout=widgets.Layout(display="none"))
        self.derived = widgets.HTML()
        # The result flows after the controls when it is one short line (``static 1``), and takes a
        # line of its own when it says more (bounds, notes): see show_outcome.
        self.result = widgets.HTML(layout=widgets.Layout(flex=_FULL_LINE, min_width="0"))
        self.result.add_class(f"wb-dim-result-{css}")
        self.result.add_class("wb-dim-result")
        self.widget = widgets.HBox([self.label, self.policy, self.derived, self.dim_box, self.result],
                                   layout=widgets.Layout(flex_flow="row wrap", align_items="center",
                                                         border_bottom="1px solid #e5e7eb", padding="2px 0"))
        self.policy.observe(self._policy_changed, names="value")
        for box in (self.name, self.min, self.max):
            box.observe(self._dim_changed, names="value")

    def _show_fields(self) -> None:
        choice = self.policy.value
        self.dim_box.layout.display = "" if choice in ("name", "Dim") else "none"
        bounds = "" if choice == "Dim" else "none"
        self.min.layout.display = self.max.layout.display = bounds
        self.policy.tooltip = POLICY_HELP.get(choice, "")

    # -- control → workbench ---------------------------------------------------------------
    def _policy_changed(self, change: Any) -> None:
        self._show_fields()
        if change["new"] in ("name", "Dim") and not self.name.value:
            with self.syncing():
                self.name.value = default_dim_name(self.path, self.axis)
        if not self._syncing:
            self._on_change(self)

    def _dim_changed(self, change: Any) -> None:
        if not self._syncing and self.policy.value in ("name", "Dim"):
            self._on_change(self)

    def requested_policy(self) -> AxisPolicy | str:
        """The policy the controls ask for (raises ``SpecError``/``ValueError`` for a bad name or bound);
        a name as the string, unless the session already shows it."""
        choice = self.policy.value
        if choice in ("AUTO", "STATIC", "DYNAMIC"):
            return {"AUTO": AUTO, "STATIC": STATIC, "DYNAMIC": DYNAMIC}[choice]
        name = self.name.value.strip()
        if choice == "name":
            shown = self._shown_policy
            return shown if isinstance(shown, Name) and shown.name == name else name
        low, high = _parse_bound(self.min.value, "min"), _parse_bound(self.max.value, "max")
        shown = self._shown_policy
        if isinstance(shown, Dim) and not isinstance(shown, Name) and (shown.name, shown.min, shown.max) == (name, low, high):
            return shown  # unchanged
        return Dim(name, min=low, max=high)

    # -- session → control ------------------------------------------------------------------
    @contextmanager
    def syncing(self) -> Iterator[None]:
        """While the session's state is shown in the controls: their changes call nothing back."""
        saved, self._syncing = self._syncing, True
        try:
            yield
        finally:
            self._syncing = saved

    def show_policy(self, policy: AxisPolicy) -> None:
        """Set the controls to ``policy`` without triggering a re-capture."""
        self._shown_policy = policy
        # A derived dim (past + 1) has no control of its own: it follows its root's.
        self.policy.layout.display = "none" if isinstance(policy, Derived) else ""
        self.derived.value = (f"<span class='wb-muted'>derived: <code>{esc(str(policy))}</code></span>"
                              if isinstance(policy, Derived) else "")
        with self.syncing():
            if isinstance(policy, Name):
                self.name.value = policy.name
                self.policy.value = "name"
            elif isinstance(policy, Dim):
                self.name.value, self.min.value, self.max.value = policy.name, _bound_text(policy.min), _bound_text(policy.max)
                self.policy.value = "Dim"
            elif isinstance(policy, Policy):
                self.policy.value = policy.name  # AUTO / STATIC / DYNAMIC
        self._show_fields()

    def show_outcome(self, outcome: DimOutcome, last_good: DimOutcome | None = None, *, compact: bool = False) -> None:
        """The obtained result and why, in words (the bounds of a dynamic range with their
        short lines; torch's guards folded); beside a failure, the last good result of this
        axis. ``compact``: the result alone (a member of a row of several axes, whose head says why)."""
        text = outcome.result_text
        hover = f' title="{esc(ZERO_MIN_NOTE)}"' if outcome.obtained == "dynamic" and not outcome.min else ""
        parts = [f"<b{hover}>{esc(text)}</b>"]
        if outcome.dynamic:
            if not compact:
                parts.extend(outcome_lines(outcome))
                parts.append(torch_details(outcome.guards, outcome.torch_notes))
        else:
            if outcome.reason:
                parts.append(f" — {esc(outcome.reason)}")
            parts.extend(f"<br><span class='wb-muted'>{esc(n)}</span>" for n in outcome.notes)
            if outcome.where:
                parts.append(f"<br><code class='wb-where'>{esc(outcome.where)}</code>")
        if outcome.obtained == "failed" and last_good is not None:
            parts.append(f"<br><span class='wb-muted'>{esc('last good: ' + last_good.result_text)}</span>")
        one_line = len(parts) == 1 or (len(parts) == 2 and not parts[1].strip())
        self.result.layout.flex = _INLINE if one_line else _FULL_LINE
        self.result.value = f"<div class='wb-pane wb-wrap'>{''.join(parts)}</div>"


def bound_html(bound: DimBound) -> str:
    """``at most 512: position embeddings, <code>transformers/…/modeling_bert.py:95</code>``."""
    where = f", <code class='wb-where'>{esc(bound.where)}</code>" if bound.where else ""
    return f"<b>{esc(bound.text)}</b>: {esc(bound.what)}{where}"


def outcome_lines(outcome: DimOutcome) -> list[str]:
    """The lines under a dynamic result: each bound in words, the notes in words, and a short
    mark when the ONNX model does not check the range."""
    lines = [f"<br>{bound_html(b)}" for b in outcome.bounds]
    lines += [f"<br><span class='wb-muted'>{esc(n)}</span>" for n in outcome.notes
              if not n.startswith(UNCHECKED_NOTE)]
    if outcome.unchecked:
        lines.append("<br><span class='wb-caution' title='the ONNX dim stays symbolic: sizes outside this range "
                     "run without error and can be wrong (Verify tries them)'>the ONNX model does not check this "
                     "range</span>")
    return lines


def torch_details(guards: tuple[Any, ...], notes: tuple[str, ...] = ()) -> str:
    """torch's own text (the guards' expressions, their full lines, how torch tied the axes),
    folded in a ``<details>`` closed by default; "" when there is none."""
    lines = [f"[{g.kind}] {g.expression}" + (f"  at {g.location}: {g.code}" if g.location else "") for g in guards]
    lines += list(notes)
    if not lines:
        return ""
    return ("<details class='wb-torch-guards'><summary class='wb-muted'>torch's guards "
            f"({len(guards)})</summary><pre class='wb-guards'>{esc(chr(10).join(lines))}</pre>"
            "</details>")


class GroupRow:
    """One row of the tab for several axes (``session.dims.grouped()``): a head in words (name,
    axes, result, bounds, torch's guards folded) and a toggle that opens the per-axis controls."""

    def __init__(self, group: DimRow, rows: list[AxisRow], opened: set[tuple[str, int]] | None = None) -> None:
        self.group, self.rows = group, rows
        self._opened = opened if opened is not None else set()  # the view's: stays open across captures
        self.key = (group.first.input, group.first.axis)
        self.head = widgets.HTML(group_html(group), layout=widgets.Layout(flex="1 1 auto", min_width="0"))
        self.head.add_class("wb-dim-group")
        self.toggle = widgets.ToggleButton(value=False, description=f"{len(rows)} axes", icon="chevron-right",
                                           tooltip="the controls of each axis",
                                           layout=widgets.Layout(width="auto", flex="0 0 auto"))
        self.toggle.add_class("wb-dim-group-toggle")
        self.members = widgets.VBox([r.widget for r in rows],
                                    layout=widgets.Layout(display="none", margin="0 0 0 18px"))
        self.toggle.observe(self._toggled, names="value")
        self.toggle.value = self.key in self._opened
        self.widget = widgets.VBox(
            [widgets.HBox([self.head, self.toggle], layout=widgets.Layout(align_items="flex-start")), self.members],
            layout=widgets.Layout(border_bottom="1px solid #e5e7eb", padding="2px 0"))

    def _toggled(self, change: Any) -> None:
        (self._opened.add if change["new"] else self._opened.discard)(self.key)
        self.members.layout.display = "" if change["new"] else "none"
        self.toggle.icon = "chevron-down" if change["new"] else "chevron-right"


def group_html(group: DimRow) -> str:
    """The head of a row of several axes: ``<b>past</b>: cache.*.key/value.2 · 4 axes · dynamic [1, inf]``,
    the bounds in words, torch's guards folded."""
    name = f"<b>{esc(group.name)}</b>: " if group.name else ""
    head = f"{name}<code>{esc(group.axes)}</code> <b>{esc(group.result_text)}</b>"  # the toggle counts the axes
    first = group.first
    lines = outcome_lines(first) if first.dynamic else (
        [f" — {esc(first.reason)}"] if first.reason else [])
    notes = tuple(dict.fromkeys(n for o in group.outcomes for n in o.torch_notes))
    return (f"<div class='wb-pane wb-wrap'>{head}{''.join(lines)}"
            f"{torch_details(group.guards, notes)}</div>")


_COPY_BUTTON = """<button class="wb-copy-code jupyter-button" title="copy the code to the clipboard"
 data-code="{code}" {disabled}
 onclick="const b=this; navigator.clipboard.writeText(b.dataset.code).then(
   () => {{ b.textContent='copied'; setTimeout(() => b.textContent='Copy', 1500); }},
   () => {{ b.textContent='copy refused by the browser'; }});">Copy</button>"""


def copy_button_html(code: str, enabled: bool = True) -> str:
    """A Copy button that puts ``code`` on the clipboard (``navigator.clipboard`` in the page);
    the code travels in a data attribute, escaped."""
    return _COPY_BUTTON.format(code=esc(code).replace("\n", "&#10;"), disabled="" if enabled else "disabled")


class DimsView:
    """The Dims tab of one workbench: rows for every input axis of the session's inputs."""

    title = "Dims"

    def __init__(self, inputs: BoundInputs, on_axis_change: Callable[[AxisRow], None], on_apply_fixes: Callable[[], None],
                 recording: CallGroup | None = None) -> None:
        self.recording = recording
        self.ranges: RangeReport | None = None  # the recording against the session shown
        self.recorded = widgets.HTML()
        self.recorded.add_class("wb-dims-recorded")
        self.rows: dict[tuple[str, int], AxisRow] = {}
        for leaf in inputs.leaves:
            for axis, size in enumerate(leaf.shape):
                self.rows[(leaf.path, axis)] = AxisRow(leaf.path, axis, int(size), on_axis_change)
        self.message = widgets.HTML()
        self.message.add_class("wb-dims-message")
        self.fixes_button = widgets.Button(description="Apply suggested fixes", disabled=True,
                                           icon="wrench", layout=widgets.Layout(width="220px"))
        self.fixes_button.add_class("wb-apply-fixes")
        self.fixes_button.on_click(lambda _: on_apply_fixes())
        self.fixes = widgets.HTML()
        self.code = widgets.Textarea(description="", layout=widgets.Layout(width="auto", height="110px"))
        self.code.add_class("wb-dims-code")
        self.code_title = widgets.HTML()
        self.copy = widgets.HTML(copy_button_html(""))
        self.copy.add_class("wb-copy")
        self._code_title("")
        header = widgets.HTML("<span title=\"a row's toggle opens its axes' policies\"><b>dim</b>: <b>input axes</b> · "
                              "<b>obtained</b> (why, source line)</span>")
        self.groups: list[GroupRow] = []
        self._opened: set[tuple[str, int]] = set()  # rows of several axes the user opened
        self.rows_box = widgets.VBox([row.widget for row in self.rows.values()])
        self.rows_box.add_class("wb-dim-rows")
        self.widget = widgets.VBox(
            [self.message, *((self.recorded,) if recording is not None else ()), header, self.rows_box,
             widgets.HBox([self.fixes_button]), self.fixes,
             widgets.HBox([self.code_title, self.copy], layout=widgets.Layout(align_items="center")), self.code]
        )

    def _code_title(self, state: str) -> None:
        self.code_title.value = ("<b>Copy as code</b> (the <code>dynamic_shapes=</code> of these controls)"
                                 + (f" <i class='wb-caution'>{esc(state)}</i>" if state else ""))

    def updating(self) -> None:
        """A re-capture has started: the code box says so until the new spec is shown."""
        self._code_title("updating…")
        self.code.value = "# updating… (the spec below is replaced when the capture ends)\n" + self.code.value.split(
            "\n", 1)[-1] if not self.code.value.startswith("# updating") else self.code.value
        self.copy.value = copy_button_html("", enabled=False)

    def show_code(self, code: str) -> None:
        self._code_title("")
        self.code.value = code
        self.copy.value = copy_button_html(code)

    def shown_rows(self) -> list[str]:
        """The HTML of each row as the tab shows it with every fold closed: a row's head (a row
        of several axes) or its label and result (a row of one); what a test reads."""
        out = []
        grouped = {id(g.widget): g for g in self.groups}
        singles = {id(r.widget): r for r in self.rows.values()}
        for child in self.rows_box.children:
            if id(child) in grouped:
                out.append(grouped[id(child)].head.value)
            elif id(child) in singles:
                row = singles[id(child)]
                out.append(row.label.value + " " + row.result.value)
        return out

    def shown_html(self) -> str:
        return "\n".join(self.shown_rows())

    def row(self, path: str, axis: int) -> AxisRow:
        try:
            return self.rows[(path, axis)]
        except KeyError:
            known = ", ".join(f"{p}.{a}" for p, a in self.rows)
            raise KeyError(f"no input axis {path}.{axis}; the axes are {known}") from None

    def show_spec(self, spec: DimSpec) -> None:
        for (path, axis), row in self.rows.items():
            row.show_policy(spec.policy(path, axis))

    def show_error(self, text: str) -> None:
        self.message.value = (pane(verdict("not valid", f"the controls ask for a spec that is not valid: {text}",
                                           tone="fail")) if text else "")

    def show(self, session: Session, last_good: Session | None = None) -> None:
        """The rows, fixes and code of ``session`` (its capture has run); ``last_good`` is the
        last session whose capture succeeded, shown beside a failure."""
        dims = session.dims
        good = last_good.dims if last_good is not None and last_good is not session else None
        shown: list[Any] = []
        self.groups = []
        for group in dims.grouped():
            rows = [self.rows[o.input, o.axis] for o in group.outcomes if (o.input, o.axis) in self.rows]
            for outcome in group.outcomes:
                row = self.rows.get((outcome.input, outcome.axis))
                if row is None:
                    continue
                previous = None
                if good is not None:
                    try:
                        previous = good[outcome.input, outcome.axis]
                    except KeyError:
                        previous = None
                row.show_outcome(outcome, previous, compact=len(rows) > 1)
            if len(rows) > 1:
                self.groups.append(GroupRow(group, rows, self._opened))
                shown.append(self.groups[-1].widget)
            else:
                shown.extend(r.widget for r in rows)
        listed = {id(w) for w in shown} | {id(r.widget) for g in self.groups for r in g.rows}
        shown.extend(r.widget for r in self.rows.values() if id(r.widget) not in listed)
        self.rows_box.children = tuple(shown)
        capture = session.result("capture")
        self.message.value = self._capture_message(session, capture)
        fixes = session.suggested_fixes
        self.fixes_button.disabled = not bool(fixes)
        self.fixes_button.button_style = "primary" if fixes else ""  # the one thing to click after a rejection
        if fixes:
            self.fixes.value = pane(verdict("fix", "Apply suggested fixes re-exports with these dims:", tone="info"),
                                    Pre("\n".join(f.text for f in fixes)),
                                    folded("the whole spec, as a diff", Pre(fixes.summary())))
        elif fixes.unapplied or fixes.error:
            self.fixes.value = pane(Pre(fixes.summary()))
        else:
            self.fixes.value = ""
        self.show_code(session.spec.to_code(session.inputs))
        self.show_recorded(session)

    def show_recorded(self, session: Session) -> None:
        """The recorded calls against ``session``'s ranges (nothing without a recording)."""
        if self.recording is None:
            return
        self.ranges = compare_ranges(self.recording, session)
        self.recorded.value = recorded_html(self.recording, self.ranges)

    @staticmethod
    def _capture_message(session: Session, capture: StageResult) -> str:
        """A failed capture, once: when an axis row carries the reason, only a pointer to it
        (the rows say why); else the failure itself."""
        failure = capture.failure
        if failure is None:
            return ""
        failing = [f"{o.input}.{o.axis}" for o in session.dims if o.obtained == "failed" and o.reason]
        if failing:
            return pane(verdict("capture failed", f"the spec of {', '.join(failing)} cannot hold; "
                                                  "the row says why, and the fix is below", tone="fail"))
        return failure_html(failure, "capture failed")


def recorded_html(group: CallGroup, report: RangeReport) -> str:
    """The recorded section: a verdict, the calls the export does not accept (one line each),
    the observed-vs-exported chart (folded unless a call is outside) and the per-axis table
    (folded), from the core's blocks."""
    section = render(report)
    calls = [block for block in section.body if isinstance(block, Note)]
    table = [block for block in section.body if not isinstance(block, Note)]
    unknown = [a.label for a in report.axes if not a.accepted_text]
    head = f"<b>Recorded calls</b> <span class='wb-muted'>({group.name}: {len(group.calls)} calls)</span>"
    if unknown:
        line = verdict("unknown", f"the export does not say which sizes of {', '.join(unknown)} it accepts "
                                  "(its capture failed or did not run)", tone="muted")
    elif report.outside_calls:
        line = verdict("outside", section.verdict.text if section.verdict else "", tone="warn")
    else:
        line = verdict("ok", section.verdict.text if section.verdict else "")
    # The chart opens by itself when it shows a problem (calls outside the exported ranges).
    chart = folded("chart: the sizes each call used against the exported ranges",
                   figure_html(recorded_ranges_chart(report)), open=bool(report.outside_calls))
    return pane(head, line, *calls, chart, folded("per axis: observed, proposed and exported", *table))
