"""``Workbench``: the live widget of one export, what ``%onnx_export`` displays.

::

    from workbench import Workbench

    wb = Workbench(session)                  # starts exporting in the background
    wb.axis_control("x", 0).value = "STATIC" # what the front end does when you pick STATIC
    wb.wait()                                # tests and scripts: wait for the background job
    wb.session                               # the session now shown
    wb.session.dims["x", 0].obtained         # 'static'

The widget holds one current :class:`exporter.Session` and replaces it with a derived one
(``with_axis``, ``apply_suggested_fixes``) on every change; derived sessions share the stage
cache, so a spec seen before answers at once. Analyses run here are kept by the core with the
exported model (``session.analyses``), so a script, ``session.report()`` and a spec revisited
later find them; ``bind`` hears of every session shown (``%onnx_export -o NAME`` rebinds NAME). Every long step runs on the exporter's worker
thread through ``session.submit(...)`` (the kernel keeps answering), reports through an
observer to a progress bar, and stops at the next step when Cancel is clicked. A failed step
shows its error beside the last good result; a cancelled one puts the previous result back.
"""

from __future__ import annotations

import html
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import ipywidgets as widgets

from exporter.analyses import ANALYSES as CORE_ANALYSES
from exporter.bench import BenchmarkResult
from exporter.errors import Failure, SpecError
from exporter.events import CancelToken, Observer
from exporter.ports import Port, onnx_ports
from exporter.recording import CallGroup, RecordedExport
from exporter.verify import VerifyResult
from exporter.session import STAGE_CACHE_ENTRIES
from exporter.verdict import AUTO_VERIFY_SECONDS, ExportVerdict, qualified_status, verify_again
from exporter.worker import submit_work

from ._live import Job, JobRunner, Step, WidgetObserver
from .views.blocks import STYLE, esc, failure_html
from .views.benchmark import BenchmarkView, swept_dims
from .views.registry import ANALYSIS_VIEWS, AnalysisView, View
from .views.dims import AxisRow, DimsView
from .views.graphs import GraphsView, graph_renderer
from .views.guards import GuardsView
from .views.stages import STEPS, StagesView
from .views.verify import VerifyView

if TYPE_CHECKING:
    from exporter.dims import DimSpec
    from exporter.pipeline.capture import CaptureAttempt
    from exporter.pipeline.stage import StageResult
    from exporter.session import Session

__all__ = ["Workbench"]

STAGES = STEPS[:4]


def stage_row(name: str, result: VerifyResult | BenchmarkResult | None,
              verdict: ExportVerdict) -> tuple[str, float | None, str]:
    """How the Stages tab's ``verify`` or ``benchmark`` row shows a result of the export whose
    verdict is ``verdict``: its status, seconds (a verification's) and the line it is known by
    (a verification's verdict, a benchmark's headline). No verify of an export: ``not run``
    and the verdict's sentence (``not verified: verify has not run on this spec``); a
    benchmark's ``ok`` only for a model verified as passed (else ``not verified`` /
    ``verify failed``, and what was timed)."""
    if result is None:
        unverified = name == "verify" and verdict.exported and verdict.verify is None
        return "not run", None, verdict.text if unverified else ""
    if isinstance(result, VerifyResult):
        return str(result.status), result.seconds, result.verdict
    status = qualified_status(result.status, verdict)
    said = "" if status == str(result.status) else f" (timed a model {'that fails verify' if verdict.word == 'failed' else verdict.word})"
    return status, None, result.headline + said


def steps_until(until: str) -> tuple[Step, ...]:
    """The job that runs everything up to ``until`` (a stage, ``verify`` or ``benchmark``):
    capture first on its own, so the dims are shown as soon as torch has captured."""
    if until == "capture":
        return (Step("capture"),)
    if until in STAGES:
        return (Step("capture"), Step(until))
    if until == "benchmark":
        return (Step("capture"), Step("optimize"), Step("verify"), Step("benchmark"))
    if until in CORE_ANALYSES:
        return steps_until(CORE_ANALYSES.named(until).needs) + (Step(until),)
    raise ValueError(f"unknown step {until!r}; choose one of {', '.join(STEPS)}")


class Workbench(widgets.VBox):
    """The workbench widget of one export, with a tab per concern: Stages, Dims, Guards,
    Graphs, Verify, Benchmark.

    Args:
        session: the :class:`exporter.Session` to show (run or not).
        run: export at once in the background (False: wait for a button).
        verify, benchmark: after that first export, verify it / time it (the magic verifies
            unless ``--no-verify``, and times with ``--bench``).
        save: a path to write the model to once the first export succeeds.
        bind: called with the session whenever the widget shows another one (a dim toggle,
            Apply suggested fixes, Cancel): ``%onnx_export -o NAME`` rebinds ``NAME`` with it.
        follow: how far a dim change runs: ``"capture"`` (the rows only) or a later stage
            (default ``"optimize"``, so the ONNX inputs are shown too).
        recording: the recorded calls the session was exported from (a group of
            :func:`exporter.record`'s recording, or ``rec.export(...)``'s result): the Dims tab
            then shows per axis the observed sizes next to the range each session accepts, and
            the recorded calls outside it (``%%onnx_export --record`` passes it).
        reverify_below: after a change of spec, verify again in the background when the last
            verify took less than this many seconds (0: never; the Verify tab then says "not
            verified for this spec" until you run it).
    """

    def __init__(self, session: Session, *, run: bool = True, verify: bool = False, benchmark: bool = False,
                 save: str | os.PathLike[str] | None = None, follow: str = "optimize",
                 bind: Callable[[Session], Any] | None = None,
                 recording: CallGroup | RecordedExport | None = None,
                 reverify_below: float = AUTO_VERIFY_SECONDS) -> None:
        steps_until(follow)  # a typo fails here, not on the first click
        self._shown = session          # the session whose results are on screen
        self._last_good: Session | None = None  # the last session whose capture succeeded (for the rows)
        self._last_exported: Session | None = None  # the last session exported to ONNX (for the Stages tab)
        self._sessions: dict[DimSpec, Session] = {session.spec: session}
        self._ports: dict[Session, list[Port]] = {}  # by identity: Session keeps object equality
        self._analyses: dict[str, tuple[Session, Any]] = {}  # by name: the session it ran on, its result
        self._follow = follow
        self._reverify_below = reverify_below
        self._bind = bind
        self._render_lock = threading.RLock()  # one renderer at a time (worker thread vs kernel thread)
        self._runner = JobRunner(self._submit_step, self._on_step, self._on_finish, self._observer_for)
        self.last_message = ""
        self._draw_problem: str | None = None  # a view that failed to draw during the current job
        self._superseded: set[Job] = set()  # jobs a cached result replaced: they end without a word

        self.header = widgets.HTML(self._title(session))
        self.job_status = widgets.HTML("idle")
        self.job_status.add_class("wb-job-status")
        self.progress = widgets.FloatProgress(value=0.0, min=0.0, max=1.0, layout=widgets.Layout(width="240px"))
        self.progress.add_class("wb-progress")
        self.cancel_button = widgets.Button(description="Cancel", icon="stop", disabled=True,
                                            layout=widgets.Layout(width="auto", min_width="100px"))
        self.cancel_button.add_class("wb-cancel")
        self.cancel_button.on_click(lambda _: self.cancel())

        self.stages_view = StagesView(self._run_clicked)
        group = recording.group if isinstance(recording, RecordedExport) else recording
        self.dims_view = DimsView(session.inputs, self._axis_changed, self.apply_suggested_fixes, group)
        self.guards_view = GuardsView()
        self.graphs_view = GraphsView(self.draw_graphs)
        self.analysis_views: dict[str, AnalysisView] = {}  # by the name of each analysis it shows
        self.analysis_tabs = tuple(make_view(self.run_analysis) for make_view in ANALYSIS_VIEWS)
        for view in self.analysis_tabs:
            self.analysis_views.update(dict.fromkeys(view.analyses, view))
        self.views: tuple[View, ...] = (self.stages_view, self.dims_view, self.guards_view, self.graphs_view,
                                        *self.analysis_tabs)
        self.tabs = widgets.Tab(children=[v.widget for v in self.views], titles=[v.title for v in self.views])
        self.tabs.observe(self._tab_selected, names="selected_index")
        self.job_status.layout = widgets.Layout(flex="1 1 auto", min_width="0")
        super().__init__([widgets.HTML(STYLE), self.header,
                          widgets.HBox([self.progress, self.cancel_button, self.job_status],
                                       layout=widgets.Layout(flex_flow="row wrap", align_items="center")),
                          self.tabs])
        self.add_class("wb-workbench")

        self.dims_view.show_spec(session.spec)
        if session.stages:
            self._runner.beside(lambda: self._render_locked(session))
        if run:
            first = steps_until("optimize") + ((Step("save", {"path": save}),) if save is not None else ())
            first += ((Step("verify"),) if verify else ()) + ((Step("benchmark"),) if benchmark else ())
            self._start(session, first, f"exporting {self._model_label(session)}")

    # -- public API -----------------------------------------------------------------------------
    @property
    def session(self) -> Session:
        """The session now shown (after :meth:`wait`, the one the controls ask for)."""
        return self._shown

    @property
    def requested_session(self) -> Session:
        """The session the controls ask for (still being captured while a job runs)."""
        job = self._runner.current
        return job.session if job is not None else self._shown

    @property
    def busy(self) -> bool:
        return self._runner.busy

    def axis_control(self, input: str, axis: int) -> widgets.Dropdown:
        """The policy control (AUTO / STATIC / DYNAMIC / Dim) of one input axis: set its
        ``value`` as the front end does. ``axis_row(...)`` gives the Dim name/min/max too."""
        return self.axis_row(input, axis).policy

    def axis_row(self, input: str, axis: int) -> AxisRow:
        """The controls and result text of one input axis (``.policy``, ``.name``, ``.min``,
        ``.max``, ``.result``)."""
        return self.dims_view.row(input, axis)

    def wait(self, timeout: float | None = 120.0) -> Workbench:
        """Block until the background job (and any cancelled one still finishing) is done.
        For tests and scripts; a notebook never needs it."""
        if not self._runner.wait(timeout):
            raise TimeoutError(f"the workbench was still busy after {timeout} s: {self.job_status.value}")
        return self

    def run(self, until: str = "optimize") -> None:
        """Run the current session up to ``until`` (a stage, ``verify`` or ``benchmark``) in the background."""
        self._start(self.requested_session, steps_until(until), f"running until {until}")

    @property
    def verify_view(self) -> VerifyView:
        """The Verify tab."""
        view = self.analysis_views["verify"]
        assert isinstance(view, VerifyView)
        return view

    @property
    def benchmark_view(self) -> BenchmarkView:
        """The Benchmark tab (benchmark, latency vs size, profile, compare variants)."""
        view = self.analysis_views["benchmark"]
        assert isinstance(view, BenchmarkView)
        return view

    def run_analysis(self, name: str, **options: Any) -> None:
        """Run an analysis that has a tab (``verify``, ``benchmark``, ``benchmark_sweep``,
        ``profile``, ``compare``, and any registered with a view), exporting first if needed."""
        if name not in self.analysis_views:
            raise ValueError(f"unknown analysis {name!r}; choose one of {', '.join(self.analysis_views)}")
        analysis = CORE_ANALYSES.named(name)
        self._start(self.requested_session, steps_until(analysis.needs) + (Step(name, options),), analysis.label)

    def apply_suggested_fixes(self) -> None:
        """Re-export with torch's suggested fixes (the "Apply suggested fixes" button)."""
        self._start(self.requested_session,
                    (Step("fixes"), Step("capture")) + steps_until(self._follow)[1:] + self._reverify(None),
                    "applying the suggested fixes")

    def _reverify(self, session: Session | None) -> tuple[Step, ...]:
        """Verify again after a change of spec, in the same (cancelable) job, when the widget
        exports to ONNX on a change, the last verify took under ``reverify_below`` seconds
        and ``session`` (None: not known yet) has no verify of its own: the Verify tab then
        follows the spec on screen."""
        last = self._analyses.get("verify")
        if self._follow != "optimize" or last is None:  # "verify" and "benchmark" verify anyway
            return ()
        own = session.last_verify if session is not None else None
        return (Step("verify"),) if verify_again(own, getattr(last[1], "seconds", None), self._reverify_below) else ()

    def draw_graphs(self) -> None:
        """Lay out the FX and ONNX graphs side by side in the Graphs tab (exports first if needed).
        Up to decompose as steps: the graph widget reads the ONNX side itself and, when
        translate or optimize failed, draws the FX side alone with a note."""
        if graph_renderer() is None:
            return
        failed = self.requested_session.failed_stage
        if failed is not None and failed.name in ("capture", "decompose"):  # the same export would fail again
            self.graphs_view.show_nothing_to_draw(failed)
            return
        self._start(self.requested_session, steps_until("decompose") + (Step("graphs", self.graphs_view.options()),),
                    "drawing the graphs")

    def cancel(self) -> None:
        """Stop the background job at its next step and put the previous result back on screen
        at once: it only reads results the previous session holds (the job's later events and
        results are dropped)."""
        with self._render_lock:
            job = self._runner.cancel()
            if job is None:
                return
            previous = job.previous
            self.dims_view.show_spec(previous.spec)
            self.dims_view.show_code(previous.spec.to_code(previous.inputs))
            self._show_session(previous)
            if previous.stages:
                self._render(previous)
            else:
                self.stages_view.reset()
            self.progress.value = 0.0
            self._status(f"cancelling {job.label}…")

    # -- control handlers (kernel thread) ---------------------------------------------------------
    def _run_clicked(self, until: str) -> None:
        if until == "next":
            session = self.requested_session
            done = {r.name for r in session.stages}
            if any(r.status == "failed" for r in session.stages):
                self._status("a stage failed: change the dims or apply the suggested fixes first")
                return
            following = next((s for s in STAGES if s not in done), None)
            if following is None:
                if "verify" in self._analyses_of(session):
                    self._status("every step has run: the Benchmark tab times the model")
                    return
                self.run_analysis("verify")
                return
            self._start(session, (Step(following),), f"running {following}")
            return
        self.run(until)

    def _axis_changed(self, row: AxisRow) -> None:
        base = self.requested_session
        try:
            policy = row.requested_policy()
            derived = base.with_axis(row.path, row.axis, policy)
        except (SpecError, ValueError) as exc:
            self.dims_view.show_error(str(exc))
            return
        self.dims_view.show_error("")
        derived = self._remember(derived)
        if derived is base:
            return  # nothing changed (the controls were set to what they already said)
        label = f"{row.path}.{row.axis}={policy!r}"
        if not self._show_cached(derived, label):
            self._start(derived, steps_until(self._follow) + self._reverify(derived), f"capturing {label}")

    def _show_cached(self, session: Session, label: str) -> bool:
        """Show ``session`` at once, on this thread, when every step a change runs has run on it
        already (a spec seen before): the worker, perhaps busy with a capture of another spec,
        is not waited for; the job running is superseded. Verify follows in the background
        when it would after a change. False when something is left to run."""
        done = {result.name for result in session.stages}
        needed = {step.task for step in steps_until(self._follow)}
        if not done or not (needed <= done or session.failed_stage is not None):
            return False
        reverify = self._reverify(session)
        with self._render_lock:
            superseded = self._runner.cancel()
            if superseded is not None:
                self._superseded.add(superseded)
            if session.result("capture").ok:
                self._last_good = session
            if session.succeeded:
                self._last_exported = session
            self.dims_view.show_spec(session.spec)
            self._show_session(session)
            self._render(session)
            self.cancel_button.disabled = True
            self.cancel_button.button_style = ""
            self.progress.value = 1.0
            self.progress.bar_style = "danger" if session.failed_stage is not None else "success"
            self._status(f"done: {label} seen before, shown from the cache")
        if reverify:
            self._start(session, reverify, f"verifying {label}")
        return True

    def _tab_selected(self, change: Any) -> None:
        if self.views[change["new"] or 0] is self.guards_view:
            self._runner.beside(lambda: self._render_locked(None))

    # -- jobs -------------------------------------------------------------------------------------
    def _start(self, session: Session, steps: tuple[Step, ...], label: str) -> None:
        with self._render_lock:
            previous = self._shown
            self.progress.value = 0.0
            self.progress.bar_style = ""
            self.cancel_button.disabled = False
            self.cancel_button.button_style = "warning"
            if session is not previous or any(step.task == "fixes" for step in steps):
                self.dims_view.updating()
            self._status(label + "…")
            self.last_message = ""
            self._runner.start(session, steps, label, previous)

    def _observer_for(self, job: Job) -> Observer:
        return WidgetObserver(self._runner, job, self)

    def _submit_step(self, session: Session, step: Step, observer: Observer, cancel: CancelToken) -> Future[Any]:
        if step.task in STAGES or step.task in CORE_ANALYSES:
            return session.submit(step.task, observer=observer, cancel=cancel, **dict(step.options))
        if step.task == "fixes":
            return submit_work(session.apply_suggested_fixes, observer=observer, cancel=cancel)
        if step.task == "save":
            return submit_work(session.save, step.options["path"])
        if step.task == "graphs":
            renderer = graph_renderer()
            if renderer is None:
                raise ValueError("drawing the graphs needs Graphviz or anywidget")
            return submit_work(renderer, session, **dict(step.options))
        raise ValueError(f"unknown step {step.task!r}")

    def _on_step(self, job: Job, step: Step, result: Any) -> bool:
        """A step's result, on the worker thread: show it; say whether the job goes on."""
        with self._render_lock:
            if not self._runner.is_current(job):
                return False
            if isinstance(result, BaseException):
                if step.task == "graphs":  # e.g. a module name that is not in the graphs
                    self.graphs_view.show(result)
                    job.problem = f"drawing the graphs failed: {(str(result).splitlines() or [''])[0]}"
                else:
                    job.problem = self._failed(step.task, result)
                return False
            if step.task in STAGES:
                return self._stage_done(job, result)
            if step.task == "fixes":
                self._sessions.pop(result.spec, None)
                job.session = self._remember(result)
                self.dims_view.show_spec(result.spec)
                return True
            if step.task in CORE_ANALYSES:
                self._analyses[step.task] = (job.session, result)
                self._show_analysis(step.task, job.session, result)
                return str(result.status) != "cancelled"
            if step.task == "save":
                self.last_message = f"saved {result}"
                return True
            if step.task == "graphs":
                self.graphs_view.show(result)
                return True
        return False

    def _stage_done(self, job: Job, result: StageResult) -> bool:
        session = job.session
        if result.status == "cancelled":
            return False
        if session.result("capture").status == "ok":
            self._last_good = session
        if session.succeeded:
            self._last_exported = session
        if result.name == "optimize" and result.ok:
            self._ports[session] = self._onnx_ports(session)
        self._show_session(session)
        self._render(session)
        return result.ok

    def _remember(self, session: Session) -> Session:
        """The session kept for ``session``'s spec (one seen before is reused, so its stages
        are), now the most recently used. Beyond the stage cache's bound the least recently
        used are forgotten (their stage results are gone from the shared cache by then), never
        the one on screen, the last good or last exported one, nor ``session``."""
        kept = self._sessions.pop(session.spec, session)
        self._sessions[session.spec] = kept
        keep = [s for s in (kept, self._shown, self._last_good, self._last_exported) if s is not None]
        for spec, old in list(self._sessions.items()):
            if len(self._sessions) <= STAGE_CACHE_ENTRIES:
                break
            if not any(old is s for s in keep):
                del self._sessions[spec]
                self._ports.pop(old, None)
        return kept

    def _show_session(self, session: Session) -> None:
        """``session`` is now on screen; ``bind`` hears of a new one (the ``-o`` variable)."""
        changed = session is not self._shown
        if session.spec in self._sessions:
            self._remember(session)
        self._shown = session
        if changed and self._bind is not None:
            try:
                self._bind(session)
            except Exception:  # noqa: BLE001 - a binding problem never stops the widget
                pass

    def _on_finish(self, job: Job) -> None:
        with self._render_lock:
            if job in self._superseded:  # a cached result took its place and said so
                self._superseded.discard(job)
                return
            if self._runner.current is not job and self._runner.current is not None:
                return  # superseded: the next job owns the job bar
            self.cancel_button.disabled = True
            self.cancel_button.button_style = ""
            if job.cancelled:  # by Cancel, which has put the previous result back
                self.progress.value = 0.0
                self._status(f"cancelled {job.label}: the previous result is shown")
                return
            failed = self._shown.failed_stage if self._shown is not None else None
            problem, self._draw_problem = job.problem or self._draw_problem, None
            if problem:
                self.progress.bar_style = "danger"
                self._status(problem, error=True)
            elif failed is not None:
                self.progress.bar_style = "danger"
                where = "Dims" if failed.name == "capture" and any(o.obtained == "failed" and o.reason
                                                                   for o in self._shown.dims) else "Stages"
                self._status(f"{failed.name} failed: the {where} tab says why", error=True)
            else:
                self.progress.value = 1.0
                self.progress.bar_style = "success"
                took = time.perf_counter() - job.started
                self._status(f"done: {job.label} in {took:.2f} s" + (f"; {self.last_message}" if self.last_message else ""))

    # -- observer sink (worker thread) ---------------------------------------------------------
    # The core calls observers holding no session lock, so these draw under the render lock like
    # every other drawing: a Cancel (kernel thread) and a late event of the cancelled job never
    # interleave, and the job checked current is still current when drawn.
    def stage_started(self, job: Job, stage: str) -> None:
        with self._render_lock:
            if self._runner.is_current(job):
                self._status(f"{stage}… ({job.label})")
                self.stages_view.started(stage)
                if stage in STAGES:
                    self.progress.value = STAGES.index(stage) / len(STAGES)

    def stage_ended(self, job: Job, result: StageResult) -> None:
        with self._render_lock:
            if self._runner.is_current(job):
                self.stages_view.ended(result)
                if result.name in STAGES:
                    self.progress.value = (STAGES.index(result.name) + 1) / len(STAGES)

    def attempt_made(self, job: Job, attempt: CaptureAttempt) -> None:
        with self._render_lock:
            if self._runner.is_current(job):
                self.stages_view.attempt(attempt)

    def analysis_started(self, job: Job, name: str) -> None:
        with self._render_lock:
            if self._runner.is_current(job):
                self._status(f"{name}… ({job.label})")
                self.progress.value = 0.0
                if name in STEPS:  # verify and benchmark have a row in the Stages tab
                    self.stages_view.started(name)

    def analysis_ended(self, job: Job, name: str, result: Any) -> None:
        # A result is shown when the step delivers it; an analysis that raised marks its row.
        if isinstance(result, BaseException) and name in STEPS:
            with self._render_lock:
                if self._runner.is_current(job):
                    self.stages_view.analysis(name, "failed", None, (str(result).splitlines() or [""])[0])

    def progress_made(self, job: Job, task: str, done: float, total: float, note: str = "") -> None:
        with self._render_lock:
            if self._runner.is_current(job):
                if total <= 0:  # a note without a count (a stage still running): the bar stays
                    self._status(note or task)
                    return
                self.progress.value = min(1.0, done / total)
                self._status(f"{task} {done:.0f}/{total:.0f} {note}".rstrip())

    # -- rendering (on the worker thread) ---------------------------------------------------------
    def _render_locked(self, session: Session | None) -> None:
        """Draw ``session`` (None: only the Guards tab of the session shown) unless a job
        has replaced what is shown meanwhile."""
        with self._render_lock:
            if session is None:
                self._safely(self.guards_view.draw)
            elif self._shown is session and not self._runner.current:
                self._render(session)

    def _render(self, session: Session) -> None:
        """Every view from ``session`` (its capture has run): the widget only reads the core."""
        exported = self._last_exported
        self._safely(self.stages_view.show, session, exported, self._ports.get(session),
                     self._ports.get(exported) if exported is not None else None)
        kept = session.analyses  # what ran on this session's exported model, here or in a script
        for name in ("verify", "benchmark"):
            result = kept.get(name)
            if result is None and name in self._analyses and self._analyses[name][0] is session:
                result = self._analyses[name][1]  # e.g. a verify that could not run: kept by the widget only
            self.stages_view.analysis(name, *stage_row(name, result, session.verdict))
        self._safely(self.dims_view.show, session, self._last_good)
        self._safely(self.guards_view.show, session, self.tabs.selected_index == self.views.index(self.guards_view))
        self._safely(self.benchmark_view.show_dims, swept_dims(session))
        for view in self.analysis_tabs:
            if not any(n in kept or n in self._analyses for n in view.analyses):
                self._safely(view.not_run)
        for name in self.analysis_views:
            if name in kept:
                self._safely(self._show_analysis, name, session, kept[name])
            elif name in self._analyses:
                self._safely(self._show_analysis, name, *self._analyses[name])

    def _show_analysis(self, name: str, of: Session, result: Any) -> None:
        current = of is self._shown or self._shown.analyses.get(name) is result
        view = self.analysis_views.get(name)
        verdict = of.verdict  # of the export the result ran on: a benchmark is green only on a verified model
        if view is not None:
            if getattr(view, "takes_verdict", False):
                show: Callable[..., None] = view.show  # the protocol's show, plus verdict=
                show(name, result, current, verdict=verdict)
            else:
                view.show(name, result, current)
        if current and name in ("verify", "benchmark"):
            self.stages_view.analysis(name, *stage_row(name, result, verdict))
        if current and name == "verify":  # the timings on screen now say what this verify found
            self._redraw_timings(self._shown)

    def _redraw_timings(self, session: Session) -> None:
        """Draw again the results of ``session`` in the views that show them beside its verdict."""
        kept = session.analyses
        for other, view in self.analysis_views.items():
            if getattr(view, "takes_verdict", False) and other in kept:
                self._show_analysis(other, session, kept[other])

    def _safely(self, draw: Callable[..., Any], *args: Any) -> None:
        """A view that fails to draw shows why in the job bar; the widget and kernel go on."""
        try:
            draw(*args)
        except Exception as exc:  # noqa: BLE001 - a renderer never kills a cell
            self._draw_problem = self._failed(getattr(draw, "__qualname__", "drawing"), exc)

    def _failed(self, what: str, exc: BaseException) -> str:
        failure = Failure.from_exception(exc, what)
        self.stages_view.error.value = failure_html(failure, f"{what} failed")
        text = f"{what} failed: {failure.first_line}"
        self._status(text, error=True)
        return text

    def _status(self, text: str, error: bool = False) -> None:
        self.job_status.value = f'<span class="wb-error">{esc(text)}</span>' if error else esc(text)

    @staticmethod
    def _onnx_ports(session: Session) -> list[Port]:
        return onnx_ports(session.stage_output("optimize"))

    def _analyses_of(self, session: Session) -> set[str]:
        return set(session.analyses) | {name for name, (of, _) in self._analyses.items() if of is session}

    @staticmethod
    def _model_label(session: Session) -> str:
        return type(session.model).__name__

    def _title(self, session: Session) -> str:
        inputs = ", ".join(f"{leaf.path}: {list(leaf.shape)}" for leaf in session.inputs.leaves)
        return f"<b>ONNX export workbench</b> — <code>{html.escape(self._model_label(session))}</code>({html.escape(inputs)})"

    def __repr__(self) -> str:
        return f"Workbench({self._shown.summary()})"
