"""The session as a UI's model: events, cancel, background runs, thread safety, read-only
results, one failure record. The driver tests do what the workbench widget does."""

from __future__ import annotations

import collections
import inspect
import logging
import threading

import numpy as np
import pytest
import torch

from exporter import AUTO, STATIC, Dim, ExportOptions, Session
from exporter.errors import Failure, Status
from exporter.events import CancelToken, Observer
from exporter.worker import WORKER_THREAD_NAME


CALLS = collections.defaultdict(list)  # id(module) -> one entry per forward call


class Recorder(Observer):
    """Every event as a tuple, and the thread each one arrived on."""

    def __init__(self):
        self.events = []
        self.threads = set()

    def on_stage_start(self, stage):
        self.events.append(("start", stage))
        self.threads.add(threading.current_thread().name)

    def on_stage_end(self, result):
        self.events.append(("end", result.name, str(result.status), result.cached))

    def on_attempt(self, attempt):
        self.events.append(("attempt", attempt.strategy, attempt.outcome))

    def on_progress(self, task, done, total, note=""):
        self.events.append(("progress", task, done, total))


class Gated(torch.nn.Module):
    """forward blocks on ``gate`` the first time, so a test can act while capture runs;
    with ``fail_first`` that first traced call raises (a failed capture strategy)."""

    def __init__(self, fail_first=False):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.entered = threading.Event()
        self.gate = threading.Event()
        self.fail_first = fail_first
        self.key = id(self)
        CALLS[self.key] = []  # ids are reused once a module is freed

    @property
    def calls(self):  # kept outside the module: torch.export restores attributes forward changes
        return CALLS[self.key]  # the user's module's: jobs call a twin of it, whose __dict__ is a copy

    def forward(self, x):
        self.calls.append(1)
        if len(self.calls) == 1:
            self.entered.set()
            assert self.gate.wait(30), "test never opened the gate"
            if self.fail_first:
                raise RuntimeError("first strategy fails")
        return self.linear(x).relu()


class Counting(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)
        self.key = id(self)
        CALLS[self.key] = []

    @property
    def calls(self):
        return CALLS[self.key]  # the user's module's: jobs call a twin of it, whose __dict__ is a copy

    def forward(self, x):
        self.calls.append(1)
        return self.linear(x) * 2


def session_of(model, **options):
    return Session(model.eval(), (torch.randn(3, 4),), {}, ExportOptions(**options))


def cancel_while_forward_runs(session, model, until, observer=None):
    """Submit ``until`` in the background, click Cancel while the model's first forward is
    blocked inside capture, let it go on, and return the job's result."""
    token = CancelToken()
    future = session.submit(until, observer=observer, cancel=token)
    assert model.entered.wait(30)
    token.cancel()
    model.gate.set()
    return future.result(60)


# -- the driver: what the widget does --------------------------------------------------------------

def test_driver_cancels_a_background_capture_changes_a_dim_and_gets_what_run_gives():
    model = Gated(fail_first=True)
    session = session_of(model, dynamic_shapes={"x": {0: AUTO}})
    recorder = Recorder()
    cancelled = cancel_while_forward_runs(session, model, "capture", recorder)  # while the first strategy runs
    assert cancelled.status == Status.CANCELLED
    assert [a.strategy for a in cancelled.attempts] == ["nonstrict"]
    assert session.stages == ()  # not recorded: the next run computes capture again
    assert recorder.threads == {f"{WORKER_THREAD_NAME}_0"}

    changed = session.with_axis("x", 0, STATIC)  # the user flips the dim, submits again
    recorder = Recorder()
    result = changed.submit("optimize", observer=recorder).result(120)
    assert result.status == Status.OK and result.name == "optimize"
    assert recorder.events[:3] == [("start", "capture"), ("attempt", "nonstrict", "ok"), ("end", "capture", "ok", False)]
    assert [e[1] for e in recorder.events if e[0] == "end"] == ["capture", "decompose", "translate", "optimize"]
    assert [e[1] for e in recorder.events if e[0] == "start"] == ["capture", "decompose", "translate", "optimize"]

    plain = session_of(model, dynamic_shapes={"x": {0: STATIC}})  # its own cache
    plain.run()
    assert changed.model_proto.graph.input[0].type == plain.model_proto.graph.input[0].type
    assert [n.op_type for n in changed.model_proto.graph.node] == [n.op_type for n in plain.model_proto.graph.node]


def test_cancelled_capture_is_not_cached_and_the_next_run_recomputes_it():
    model = Gated(fail_first=True)
    session = session_of(model)
    assert cancel_while_forward_runs(session, model, "capture").status == Status.CANCELLED
    again = session.run("capture")
    assert again.status == Status.OK and not again.cached
    assert again.strategy == "nonstrict"


def test_cancel_between_stages_keeps_finished_work_and_stops_before_the_next_stage():
    model = Gated()
    session = session_of(model)
    result = cancel_while_forward_runs(session, model, "optimize")
    assert (result.name, result.status) == ("decompose", Status.CANCELLED)
    assert [(r.name, r.status) for r in session.stages] == [("capture", Status.OK)]
    finished = session.run()
    assert finished.status == Status.OK
    assert [r.cached for r in session.stages] == [False, False, False, False]


def test_submit_of_an_analysis_returns_its_result_and_rejects_unknown_tasks():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    verified = session.submit("verify").result(120)
    assert verified.status == "passed"
    with pytest.raises(ValueError, match="unknown task 'verfy'"):
        session.submit("verfy")
    with pytest.raises(TypeError, match="takes no options"):
        session.submit("capture", sizes={"batch": [2]})


def test_verify_cancelled_mid_sweep_keeps_the_cases_already_run():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    session.run()
    token = CancelToken()

    class CancelAfterTwoCases(Recorder):
        def on_progress(self, task, done, total, note=""):
            super().on_progress(task, done, total, note)
            if done >= 2:
                token.cancel()

    recorder = CancelAfterTwoCases()
    result = session.verify(observer=recorder, cancel=token)
    assert result.status == "cancelled"
    assert 1 <= len(result.cases) < recorder.events[-1][3]
    assert "cancelled" in result.summary()
    assert session.verify().status == "passed"  # nothing left half-done


def test_benchmark_cancelled_mid_way_restores_torch_threads():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    session.run()
    threads = torch.get_num_threads()
    token = CancelToken()

    class CancelDuringEager(Observer):
        def on_progress(self, task, done, total, note=""):
            if task == "eager":
                token.cancel()

    result = session.benchmark(budget=0.2, threads=1, observer=CancelDuringEager(), cancel=token)
    assert result.cancelled and result.status == "cancelled" and not result.ok
    assert result.summary().startswith("Benchmark [cancelled]\n  benchmark cancelled")  # badge, then the headline
    assert torch.get_num_threads() == threads
    sweep_token = CancelToken()
    sweep_token.cancel()
    assert session.benchmark_sweep(sizes=(1, 2), budget=0.05, cancel=sweep_token).cancelled


def test_progress_events_reach_the_observer_in_order():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    recorder = Recorder()
    session.verify(observer=recorder)
    progress = [e for e in recorder.events if e[0] == "progress"]
    assert progress[0][2] == 0 and progress[-1][2] == progress[-1][3]
    assert [p[2] for p in progress] == sorted(p[2] for p in progress)


# -- thread safety ----------------------------------------------------------------------------------

@pytest.mark.parametrize("derived", [False, True], ids=["one-session", "derived-sessions"])
def test_two_threads_asking_for_one_capture_get_one_computation(derived):
    model = Counting()
    session = session_of(model, dynamic_shapes={"x": {0: Dim("batch")}})
    sessions = [session, session.with_dims({"x": {0: Dim("batch")}}) if derived else session]
    barrier = threading.Barrier(2)
    results = [None, None]

    def capture(i):
        barrier.wait()
        results[i] = sessions[i].run("capture")

    threads = [threading.Thread(target=capture, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(model.calls) == 1  # nonstrict capture runs forward once
    assert results[0].output is results[1].output
    assert sorted(r.cached for r in results) == ([False, True] if derived else [False, False])


def test_an_observer_that_raises_does_not_break_the_export(caplog):
    class Broken(Observer):
        def on_stage_end(self, result):
            raise RuntimeError("broken progress bar")

    session = session_of(Counting(), logger=logging.getLogger("test.live"))
    with caplog.at_level(logging.INFO, logger="test.live"):
        assert session.run(observer=Broken()).status == Status.OK
    assert any("capture ok" in r.getMessage() for r in caplog.records)  # the logger adapter still hears


# -- nothing process-wide stays changed -----------------------------------------------------------

class Specializes(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[0] == 3 else x


def test_failed_and_cancelled_runs_leave_fx_config_loggers_and_dim_marks_as_they_were():
    import torch.fx.experimental._config as fx_config

    from exporter.compat import onnx_registry

    onnx_registry.cache_clear()
    registration = logging.getLogger("torch.onnx._internal.exporter._registration")
    before = (fx_config.backed_size_oblivious, registration.level, torch.get_num_threads())
    x = torch.randn(3, 4)
    failed = Session(Specializes(), (x,), {}, ExportOptions(dynamic_shapes={"x": {0: Dim("batch")}}))
    assert failed.run().status == Status.FAILED
    token = CancelToken()
    token.cancel()
    assert Session(Counting(), (x,), {}).run(cancel=token).status == Status.CANCELLED
    Session(Counting(), (x,), {}, ExportOptions(opset_version=19)).run()  # builds a fresh registry
    assert (fx_config.backed_size_oblivious, registration.level, torch.get_num_threads()) == before
    assert not any(name.startswith("_dynamo") for name in vars(x))  # no dim marks left on the input
    exported = torch.export.export(Specializes(), (x,))  # a plain export afterwards is unaffected
    assert tuple(exported.graph_signature.user_inputs) == ("x",)


# -- read-only results ------------------------------------------------------------------------------

def test_derived_sessions_hand_out_copies_so_renaming_through_one_changes_neither():
    session = session_of(Counting())
    twin = session.with_dims(None)
    assert twin.onnx_model is not session.onnx_model
    mine = session.onnx_model
    mine.graph.inputs[0].name = "renamed"
    assert twin.onnx_model.graph.inputs[0].name == "x"
    assert session.onnx_model.graph.inputs[0].name == "x"
    proto = session.model_proto
    proto.graph.input[0].name = "renamed"
    assert session.model_proto.graph.input[0].name == "x"
    import onnx

    assert onnx.load_from_string(session.model_bytes).graph.input[0].name == "x"


def test_saved_bytes_match_the_model_the_session_reports(tmp_path):
    import onnx

    session = session_of(Counting())
    session.onnx_model.graph.inputs[0].name = "changed"  # a copy: the session is untouched
    session.save(tmp_path / "m.onnx")
    assert (tmp_path / "m.onnx").read_bytes() == session.model_bytes
    assert onnx.load(str(tmp_path / "m.onnx")) == session.model_proto


@pytest.mark.parametrize("field", ["model", "options", "args", "inputs", "spec"])
def test_public_fields_are_read_only(field):
    session = session_of(Counting())
    with pytest.raises(AttributeError):
        setattr(session, field, None)


# -- one failure record -----------------------------------------------------------------------------

class Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in user code")


def test_failed_stage_carries_one_failure_record_with_the_user_line_and_a_single_prefix():
    session = session_of(Raises(), strategy="nonstrict")
    result = session.run()
    assert result.status == Status.FAILED and result.status == "failed"
    failure = result.failure
    assert isinstance(failure, Failure)
    assert (failure.stage, failure.type) == ("capture", "CaptureError")
    assert "boom in user code" in failure.message and "raise RuntimeError" in failure.source
    assert "Traceback" in failure.traceback
    with pytest.raises(Exception) as raised:
        session.raise_for_status()
    assert str(raised.value).count("[capture]") == 1
    assert session.to_frame().loc[0, "status"] == "failed"


def test_strategy_is_a_field_of_the_capture_result():
    session = session_of(Counting(), strategy="strict")
    assert session.run("capture").strategy == "strict"
    assert session.run("decompose").strategy is None


def test_verify_with_a_typo_in_sizes_raises_value_error_at_once():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    with pytest.raises(ValueError, match="typo"):
        session.verify(sizes={"typo": [4]})


def test_verify_of_a_failed_export_records_a_failure():
    result = session_of(Raises(), strategy="nonstrict").verify()
    assert result.status == "error" and result.failure is not None
    assert result.failure.stage == "capture"


def test_progress_bar_observer_prints_a_line_per_stage_and_draws_a_bar_in_a_terminal():
    import io

    from exporter.events import ProgressBarObserver

    stream = io.StringIO()
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    observer = ProgressBarObserver(stream)
    session.run(observer=observer)
    session.verify(observer=observer)
    text = stream.getvalue()
    assert [line.split(":")[0] for line in text.splitlines() if line.endswith(" s")] == [
        "capture", "decompose", "translate", "optimize"]
    assert "verify: 100%" in text


def test_benchmark_with_a_typo_in_sizes_raises_value_error_at_once():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    with pytest.raises(ValueError, match="unknown dim 'btach'"):
        session.benchmark(sizes={"btach": 4}, budget=0.05)


@pytest.mark.needs_dot
def test_a_session_shows_as_html_and_writes_its_report(tmp_path):
    from html_page import Page

    session = session_of(Counting())
    session.run()
    words = Page(session._repr_html_()).all_text
    assert all(stage in words for stage in ("capture", "decompose", "translate", "optimize"))
    path = session.report(tmp_path / "report.html")
    assert path.read_text(encoding="utf-8").count("<svg") >= 1
    import re

    text = path.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?https?:""", text)  # opens offline (XML namespaces aside)


def test_apply_suggested_fixes_stops_when_cancelled():
    session = session_of(Specializes(), dynamic_shapes={"x": {0: Dim("batch")}})
    token = CancelToken()
    token.cancel()
    fixed = session.apply_suggested_fixes(cancel=token)
    assert fixed.spec == session.spec and fixed.applied_fixes == ()
    assert session.stages == ()  # nothing ran


def test_session_of_an_exported_program_runs_like_export_of_it():
    program = torch.export.export(Counting().eval(), (torch.randn(3, 4),))
    session = Session(program)
    assert session.run().status == Status.OK
    assert [i.name for i in session.model_proto.graph.input] == ["x"]


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.complex64], ids=str)
def test_run_onnx_takes_inputs_of_dtypes_numpy_lacks_or_onnx_spells_otherwise(dtype):
    class CastsIn(torch.nn.Module):
        def forward(self, x):
            real = torch.view_as_real(x) if x.is_complex() else x.float()
            return real * 2

    x = torch.randn(3, 4, dtype=dtype)
    session = Session(CastsIn(), (x,))
    (actual,) = session.run_onnx(x)
    expected = CastsIn()(x).numpy()
    assert actual.shape == expected.shape
    np.testing.assert_allclose(actual, expected, rtol=1e-6)


class NarrowsSeq(torch.nn.Module):
    def forward(self, x):
        return x * 2 if x.shape[1] > 4 else x


def test_a_rejected_spec_headline_names_the_violation_and_the_line_of_its_guard():
    session = Session(NarrowsSeq(), (torch.randn(2, 8),), {}, ExportOptions(dynamic_shapes={"x": {1: Dim("seq")}}))
    failure = session.run().failure
    assert failure.first_line == ("CaptureError: x.shape[1] (seq): sizes 0–4 take another branch at "
                                  "`return x * 2 if x.shape[1] > 4 else x` "
                                  f"(test_live_session.py:{inspect.getsourcelines(NarrowsSeq.forward)[1] + 1}); "
                                  "the range [0, inf] cannot hold")
    assert "For more information" not in failure.first_line
    assert "Not all values of seq" in failure.library_text  # torch's own words, kept apart
    assert failure.source.endswith("return x * 2 if x.shape[1] > 4 else x")


def test_clear_cache_drops_the_shared_stage_results_so_a_derived_session_recomputes():
    session = session_of(Counting())
    session.run()
    assert session.clear_cache() == 4
    again = session.with_dims(None)
    again.run()
    assert [r.cached for r in again.stages] == [False, False, False, False]
    assert session.stages and session.succeeded  # its own results stay


# -- one observer protocol, a lock for results only --------------------------------------------------

class AnalysisRecorder(Recorder):
    """A Recorder that also hears analyses start and end."""

    def on_analysis_start(self, name):
        self.events.append(("analysis start", name))

    def on_analysis_end(self, name, result):
        self.events.append(("analysis end", name, str(result.status) if not isinstance(result, BaseException) else "raised"))


def test_every_analysis_has_one_start_and_one_end_event_around_its_progress():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    session.run()
    recorder = AnalysisRecorder()
    session.verify(observer=recorder)
    session.benchmark(budget=0.02, min_runs=5, threads=1, eager=False, observer=recorder)
    session.profile(runs=1, threads=1, observer=recorder)
    bounds = [e for e in recorder.events if e[0].startswith("analysis")]
    assert bounds == [("analysis start", "verify"), ("analysis end", "verify", "passed"),
                      ("analysis start", "benchmark"), ("analysis end", "benchmark", "ok"),
                      ("analysis start", "profile"), ("analysis end", "profile", "ok")]
    verify_events = recorder.events[: recorder.events.index(("analysis end", "verify", "passed")) + 1]
    assert verify_events[0] == ("analysis start", "verify") and any(e[0] == "progress" for e in verify_events)
    assert not any(e[0] == "start" for e in recorder.events)  # stage events are for the four stages only


def test_an_analysis_that_raises_still_ends():
    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}})
    recorder = AnalysisRecorder()
    with pytest.raises(ValueError):
        session.verify(sizes={"typo": [4]}, observer=recorder)
    assert [e for e in recorder.events if e[0].startswith("analysis")] == [
        ("analysis start", "verify"), ("analysis end", "verify", "raised")]


def test_a_raising_observer_without_a_logger_does_not_break_the_export():
    class Broken(Observer):
        def on_stage_start(self, stage):
            raise RuntimeError("broken progress bar")

    assert session_of(Counting()).run(observer=Broken()).status == Status.OK


def test_the_session_lock_is_not_held_while_a_stage_computes_or_an_observer_runs():
    # An observer reads and releases the session from another thread while the stage it hears
    # of is being computed: the session lock guards results only, so nothing waits.
    session = session_of(Counting())
    answered = []

    class ReadsFromAnotherThread(Observer):
        def on_attempt(self, attempt):
            reader = threading.Thread(target=lambda: answered.append((session.stages, session.release())))
            reader.start()
            reader.join(10)
            answered.append(not reader.is_alive())

    assert session.run("capture", observer=ReadsFromAnotherThread()).status == Status.OK
    assert answered == [((), None), True]


def test_the_logger_hears_each_analysis_end_and_a_progress_bar_closes_what_a_cancel_left(caplog):
    import io

    from exporter.events import ProgressBarObserver

    session = session_of(Counting(), dynamic_shapes={"x": {0: Dim("batch")}}, logger=logging.getLogger("test.live.analyses"))
    session.run()
    with caplog.at_level(logging.INFO, logger="test.live.analyses"):
        session.verify()
    assert [r.getMessage().split(" in ")[0] for r in caplog.records if r.name == "test.live.analyses"] == ["verify passed"]

    token = CancelToken()

    class CancelMidway(ProgressBarObserver):
        def on_progress(self, task, done, total, note=""):
            super().on_progress(task, done, total, note)
            if 0 < done < total:
                token.cancel()

    bars = CancelMidway(io.StringIO())
    assert session.verify(observer=bars, cancel=token).status == "cancelled"
    assert bars._bars == {}
