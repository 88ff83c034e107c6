"""The Stages tab: capture → decompose → translate → optimize → verify → benchmark, each with
its status, seconds, whether it came from the cache and its one-line result; the error of a
failed stage shown once (message, the user's source line, the fix; torch's own text folded);
every capture attempt, folded; the optimizer pass by pass, folded, and under it a pass picker
that draws the ONNX model before and after the chosen pass, the nodes it removed, added and
changed highlighted (:func:`exporter.graphs.draw.before_after`, the graph view's own layout, in
the graph widget's front end: :class:`workbench.pass_graph_widget.PassGraphWidget`; a static
SVG without anywidget);
the ONNX inputs and outputs; buttons to run the next step or everything (stages and verify; a
benchmark only from its own button).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import ipywidgets as widgets

from exporter.display import Table, render
from exporter.errors import Failure
from exporter.graphs.draw import CHANGE_COLOURS, GraphView, before_after
from exporter.graphs.pass_graphs import PassGraphs, pass_graphs
from exporter.ports import Port

from .blocks import esc, failure_html, folded, pane, verdict

if TYPE_CHECKING:
    from exporter.pipeline.capture import CaptureAttempt
    from exporter.pipeline.pass_records import OptimizerPasses
    from exporter.pipeline.stage import StageResult
    from exporter.session import Session
    from workbench.pass_graph_widget import PassGraphWidget, PassJob

__all__ = ["STEPS", "StagesView"]

STEPS = ("capture", "decompose", "translate", "optimize", "verify", "benchmark")
_NO_PASS = "(pick a pass to see the graphs before and after it)"


def _pass_choice(index: int, label: str, removed: int, added: int, changed: int) -> str:
    return f"{index}: {label} ({removed} removed, {added} added, {changed} changed)"


def _pass_widget() -> PassGraphWidget | None:
    try:  # anywidget is an optional dependency: without it the drawing is a static SVG
        from workbench.pass_graph_widget import PassGraphWidget
    except ImportError:
        return None
    return PassGraphWidget(height="420px")


def _legend() -> str:
    swatches = "".join(f'<span class="wb-swatch" style="background:{colour}">{kind}</span>'
                       for kind, colour in CHANGE_COLOURS.items())
    return f'<div class="wb-pass-legend">{swatches}</div>'


def _ports_table(ports: Sequence[Port], caption: str = "") -> Table:
    return Table.from_rows(("", "name", "dtype", "shape"),
                           [(p.kind, p.name, p.dtype, p.shape_text) for p in ports], caption=caption)


class StagesView:
    """Stage table, attempts, error, ONNX ports; ``on_run(until)`` is called by the buttons
    with a step name, or ``"next"``."""

    title = "Stages"

    def __init__(self, on_run: Callable[[str], None]) -> None:
        self._rows: dict[str, tuple[str, str, str, str]] = {}
        self._attempts: list[CaptureAttempt] = []
        self.table = widgets.HTML()
        self.table.add_class("wb-stages-table")
        self.attempts = widgets.HTML()
        self.attempts.add_class("wb-attempts")
        self.error = widgets.HTML()
        self.error.add_class("wb-stages-error")
        self.ports = widgets.HTML()
        self.ports.add_class("wb-onnx-ports")
        self.passes = widgets.HTML()
        self.passes.add_class("wb-optimizer-passes")
        self._session: Session | None = None
        self.pass_step: PassGraphs | None = None  # the pass drawn below the pass table
        self._pass_steps: dict[int, PassGraphs] = {}  # of this session: picked again, drawn without a replay
        self.pass_view: GraphView | None = None
        self._picker_quiet = False  # set while a cancel puts the picker back on the pass drawn
        self.pass_picker = widgets.Dropdown(options=[(_NO_PASS, -1)], value=-1, description="Pass",
                                            layout=widgets.Layout(width="auto", max_width="100%"))
        self.pass_picker.add_class("wb-pass-picker")
        self.pass_picker.observe(lambda change: self.show_pass(change["new"]), names="value")
        self.pass_graphs = widgets.HTML()
        self.pass_graphs.add_class("wb-pass-graphs")
        self.pass_widget = _pass_widget()  # pan, zoom, click: the graph widget's front end
        if self.pass_widget is not None:
            self.pass_widget.add_class("wb-pass-graph-widget")
            self.pass_widget.layout.display = "none"  # until a pass is picked
        self.pass_box = widgets.VBox([self.pass_picker, self.pass_graphs]
                                     + ([self.pass_widget] if self.pass_widget is not None else []),
                                     layout=widgets.Layout(display="none", max_width="100%"))
        self.last_good = widgets.HTML()
        self.next_button = widgets.Button(description="Run next step", icon="step-forward",
                                          layout=widgets.Layout(width="auto"))
        self.all_button = widgets.Button(description="Run all", icon="play", layout=widgets.Layout(width="auto"),
                                         tooltip="every stage, then verify (the benchmark has its own tab)")
        self.next_button.add_class("wb-run-next")
        self.all_button.add_class("wb-run-all")
        self.next_button.on_click(lambda _: on_run("next"))
        self.all_button.on_click(lambda _: on_run("verify"))
        self.widget = widgets.VBox([self.error, widgets.HBox([self.next_button, self.all_button]), self.table,
                                    self.attempts, self.passes, self.pass_box, self.ports, self.last_good])
        self.reset()

    # -- live events ---------------------------------------------------------------------------
    def reset(self) -> None:
        self._rows = {step: ("not run", "", "", "") for step in STEPS}
        self._attempts = []
        self.attempts.value = ""
        self.passes.value = ""
        self._clear_pass_picker()
        self._draw()

    def started(self, stage: str) -> None:
        if stage == "capture":
            self._attempts = []
            self.attempts.value = ""
        self._rows[stage] = ("running", "", "", "")
        self._draw()

    def ended(self, result: StageResult) -> None:
        # A failed stage's message is in the box above the table, once: the row only says failed.
        detail = "" if result.failure is not None else (result.detail or "")
        self._rows[result.name] = (str(result.status), f"{result.seconds:.3f}", "yes" if result.cached else "no",
                                   detail)
        if result.name == "capture" and result.attempts:
            self._attempts = list(result.attempts)
            self._draw_attempts()
        if result.name == "optimize":
            self._draw_passes(result.passes)
        self._draw()

    def attempt(self, attempt: CaptureAttempt) -> None:
        self._attempts.append(attempt)
        self._draw_attempts()

    def analysis(self, name: str, status: str, seconds: float | None, detail: str) -> None:
        """The row of ``verify`` or ``benchmark``: its status and one-line result."""
        self._rows[name] = (status, "" if seconds is None else f"{seconds:.3f}", "", detail)
        self._draw()

    # -- whole session ---------------------------------------------------------------------------
    def show(self, session: Session, last_good: Session | None = None, ports: Sequence[Port] | None = None,
             last_good_ports: Sequence[Port] | None = None) -> None:
        """Every stage the session has run (others "not run"), its failure, its ONNX ports;
        beside a failure, the last session that exported (``last_good``) and its ports."""
        if session is not self._session:
            self._clear_pass_picker()
        self._session = session
        for stage in STEPS[:4]:
            self._rows[stage] = ("not run", "", "", "")
        for result in session.stages:
            self.ended(result)
        failed = session.failed_stage
        self.error.value = failure_html(failed.failure, f"{failed.name} failed") if failed is not None else ""
        self.ports.value = pane(folded("ONNX model inputs and outputs", _ports_table(ports), open=True)) if ports else ""
        if failed is not None and last_good is not None and last_good is not session:
            self.last_good.value = pane(folded(
                f"last good export: {last_good.spec.describe()}", render(last_good),
                _ports_table(last_good_ports, "its ONNX model") if last_good_ports else None))
        else:
            self.last_good.value = ""

    def _draw(self) -> None:
        rows = [(stage, status, seconds, cached, detail)
                for stage, (status, seconds, cached, detail) in self._rows.items()]
        self.table.value = pane(Table.from_rows(("stage", "status", "s", "cached", "result"), rows,
                                                badges=("status",), wrap=("result",)))

    def _draw_passes(self, passes: OptimizerPasses | None) -> None:
        """The optimizer pass by pass (``session.passes``), folded under its verdict line."""
        if passes is None or not len(passes):
            self.passes.value = ""
            self._clear_pass_picker()
            return
        section = render(passes)
        outline = section.verdict.text if section.verdict else f"{len(passes)} passes"
        self.passes.value = pane(folded(f"optimizer passes: {outline}", *section.body))
        choices = [(_pass_choice(r.index, r.label, len(r.removed), len(r.added), len(r.changed)), r.index)
                   for r in passes if r.ran and r.changes_model]
        if [c[1] for c in choices] != [o[1] for o in self.pass_picker.options[1:]]:
            self._clear_pass_picker()
            self.pass_picker.options = [(_NO_PASS, -1), *choices]
        self.pass_box.layout.display = None if choices else "none"

    def _clear_pass_picker(self) -> None:
        self.pass_step, self.pass_view = None, None
        self._pass_steps = {}
        self.pass_graphs.value = ""
        if self.pass_widget is not None:
            self.pass_widget.cancel_pass()  # a pass of the previous session being drawn is not shown
            self.pass_widget.layout.display = "none"
        self.pass_picker.options = [(_NO_PASS, -1)]
        self.pass_picker.value = -1
        self.pass_box.layout.display = "none"

    def show_pass(self, index: int) -> None:
        """Draw the model before and after ``session.passes[index]`` (``-1``: nothing), the
        nodes the pass removed, added and changed highlighted. The picker calls it; the models
        are rebuilt by replaying the passes before it (:func:`~exporter.graphs.pass_graphs.pass_graphs`).
        With the graph widget this returns at once: the replay and the layout run on the export
        worker, the drawing shown stays until the new one arrives (:meth:`wait_pass` waits)."""
        if index != self.pass_picker.value and index in [o[1] for o in self.pass_picker.options]:
            self.pass_picker.value = index  # calls back here with the same index
            return
        if self._picker_quiet:
            return
        if index < 0 or self._session is None:
            self.pass_step, self.pass_view = None, None
            if self.pass_widget is not None:
                self.pass_widget.cancel_pass()
                self.pass_widget.layout.display = "none"
            self.pass_graphs.value = ""
            return
        if self.pass_widget is not None:
            if self.pass_step is None:  # nothing drawn yet: say what is coming (the widget says it too)
                self.pass_graphs.value = pane(verdict("running", f"replaying the passes up to pass {index}…"))
            self.pass_widget.show_pass(self._session, index, cache=self._pass_steps, on_done=self._pass_drawn)
            return
        self.pass_step, self.pass_view = None, None
        self.pass_graphs.value = pane(verdict("running", f"replaying the passes up to pass {index}…"))
        try:
            if index not in self._pass_steps:
                self._pass_steps[index] = pass_graphs(self._session, index)
            self.pass_step = self._pass_steps[index]
            self.pass_view = before_after(self.pass_step)
        except Exception as exc:  # noqa: BLE001 - a UI callback shows the error, never raises into the page
            self.pass_graphs.value = failure_html(Failure.from_exception(exc, "optimize"),
                                                  f"drawing pass {index} failed")
            return
        self._caption()

    def wait_pass(self, timeout: float | None = None) -> bool:
        """Wait until the pass picked is drawn (or failed, or was cancelled); False on timeout."""
        return self.pass_widget is None or self.pass_widget.wait_pass(timeout)

    def _pass_drawn(self, job: PassJob) -> None:
        """The widget's pass job ended (on the export worker): caption it, say its error, or
        after a cancel put the picker back on the pass still drawn."""
        widget = self.pass_widget
        if widget is None:
            return
        if job.cancelled:
            if widget.job is not None:  # replaced by another pass, still being drawn: that one says it
                return
            drawn = self.pass_step.record.index if self.pass_step is not None else -1
            if self.pass_picker.value == job.index and drawn != job.index:
                self._picker_quiet = True
                try:
                    self.pass_picker.value = drawn
                finally:
                    self._picker_quiet = False
            if self.pass_step is None:
                self.pass_graphs.value = ""
            return
        if job.exception is not None or job.step is None:
            self.pass_step, self.pass_view = None, None
            widget.layout.display = "none"
            error = job.exception if job.exception is not None else RuntimeError(job.error or "nothing was drawn")
            self.pass_graphs.value = failure_html(Failure.from_exception(error, "optimize"),
                                                  f"drawing pass {job.index} failed")
            return
        self.pass_step, self.pass_view = job.step, widget.view
        widget.layout.display = None
        self._caption()

    def _caption(self) -> None:
        """Above the drawing: which pass, what it does, the node counts, the colours."""
        step, view = self.pass_step, self.pass_view
        if step is None:
            return
        if self.pass_widget is not None:
            body = ""  # the widget below draws it
        elif view is not None and view.svg:
            body = f'<div class="wb-pass-svg wb-scroll">{view.svg}</div>'
        else:
            body = view._repr_html_() if view is not None else ""
        self.pass_graphs.value = (
            f'<div class="wb-pass-caption">{esc(step.record.label)}: {esc(step.record.description)}; '
            f"{len(step.before)} → {len(step.after)} nodes</div>{_legend()}{body}")

    def _draw_attempts(self) -> None:
        if not self._attempts:
            self.attempts.value = ""
            return
        outline = ", ".join(f"{a.strategy} {a.outcome}" for a in self._attempts)
        rows = [(a.strategy, a.outcome, f"{a.seconds:.3f}", a.first_error_line or "") for a in self._attempts]
        self.attempts.value = pane(folded(
            f"capture attempts: {outline}",
            Table.from_rows(("strategy", "outcome", "s", "torch said"), rows, badges=("outcome",))))
