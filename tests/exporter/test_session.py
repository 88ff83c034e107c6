"""The lazy session: stages run on demand, are cached by what they depend on, never raise."""

from __future__ import annotations

import logging

import pytest
import torch

from exporter import AUTO, STATIC, CaptureError, Dim, ExportError, ExportOptions, Session, SpecError, export


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        return self.linear(x) * 2


class Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in user code")


def make_session(**options):
    return Session(Scale().eval(), (torch.randn(3, 4),), {}, ExportOptions(**options))


def test_session_runs_nothing_until_asked():
    session = make_session()
    assert session.stages == ()
    result = session.run(until="capture")
    assert result.name == "capture" and result.status == "ok"
    assert [r.name for r in session.stages] == ["capture"]


def test_run_until_last_stage_runs_all_four_in_order():
    session = make_session()
    session.run()
    assert [r.name for r in session.stages] == ["capture", "decompose", "translate", "optimize"]
    assert all(r.status == "ok" and r.seconds >= 0 for r in session.stages)
    assert session.succeeded


def test_new_dim_spec_reruns_capture_and_everything_after():
    session = make_session()
    session.run()
    changed = session.with_axis("x", 0, Dim("batch"))
    changed.run()
    assert [r.cached for r in changed.stages] == [False, False, False, False]
    assert changed.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"


def test_spec_seen_before_is_served_from_cache():
    session = make_session(dynamic_shapes={"x": {0: AUTO}})
    session.run()
    static = session.with_axis("x", 0, STATIC)
    static.run()
    back = static.with_axis("x", 0, AUTO)
    back.run()
    assert all(r.cached for r in back.stages)
    assert back.exported_program is session.exported_program


def test_new_opset_keeps_the_capture_and_reruns_the_rest():
    session = make_session()
    session.run()
    other = session.with_options(opset_version=18)
    other.run()
    assert [(r.name, r.cached) for r in other.stages] == [
        ("capture", True), ("decompose", False), ("translate", False), ("optimize", False)
    ]


def test_toggling_optimize_reuses_translation():
    session = make_session()
    session.run()
    other = session.with_options(optimize=False)
    other.run()
    assert [(r.name, r.cached, r.status) for r in other.stages] == [
        ("capture", True, "ok"), ("decompose", True, "ok"), ("translate", True, "ok"), ("optimize", False, "skipped")
    ]


def test_optimize_does_not_mutate_the_cached_translation():
    session = make_session()
    session.run()
    translated = session.result("translate").output
    optimized = session.onnx_model
    assert translated is not optimized
    unoptimized = session.with_options(optimize=False)
    assert unoptimized.stage_output("optimize") is translated


def test_failing_model_returns_a_failed_stage_and_skips_the_rest():
    session = Session(Raises(), (torch.randn(2),))
    result = session.run()
    assert result.name == "capture" and result.status == "failed"
    assert isinstance(result.error, CaptureError)
    assert "boom in user code" in str(result.error)
    assert session.failed_stage is result
    assert len(session.attempts) == 4 and all(a.outcome == "failed" for a in session.attempts)


def test_export_raises_a_capture_error_that_carries_the_session_and_user_line():
    with pytest.raises(CaptureError) as info:
        export(Raises(), torch.randn(2))
    error = info.value
    assert error.session is not None and error.session.failed_stage.name == "capture"
    assert error.source is not None and "test_session.py" in error.source
    assert 'raise RuntimeError("boom in user code")' in error.source
    assert "[capture]" in str(error)


def test_previous_good_result_survives_a_failing_variant():
    session = make_session()
    session.run()
    with pytest.raises(SpecError):
        session.with_axis("x", 5, AUTO)
    assert session.succeeded and session.model_proto is not None


def test_logger_receives_one_record_per_stage(caplog):
    logger = logging.getLogger("test.session.progress")
    with caplog.at_level(logging.INFO, logger="test.session.progress"):
        make_session(logger=logger).run()
    messages = [r.getMessage() for r in caplog.records if r.name == "test.session.progress"]
    assert [m.split()[0] for m in messages] == ["capture", "decompose", "translate", "optimize"]
    assert all(" s" in m for m in messages)


def test_unknown_stage_name_is_rejected():
    with pytest.raises(ValueError, match="stages are capture, decompose, translate, optimize"):
        make_session().run(until="compile")


def test_summary_and_frame_list_every_stage():
    session = make_session()
    session.run()
    frame = session.to_frame()
    assert list(frame["stage"]) == ["capture", "decompose", "translate", "optimize"]
    assert "strategy nonstrict" in session.summary()


def test_every_export_error_subclass_names_its_stage():
    error = CaptureError("x", input="a", axis=1, source="m.py:3", hint="do y")
    assert isinstance(error, ExportError)
    assert str(error).splitlines() == ["[capture] x", "  input: a.shape[1]", "  at: m.py:3", "  fix: do y"]


def test_a_cached_stage_error_is_raised_as_a_fresh_copy_per_session():
    session = Session(Raises(), (torch.randn(2),))
    session.run()
    derived = session.with_options(optimize=False)
    raised = []
    for s in (session, session, derived):
        with pytest.raises(CaptureError) as info:
            _ = s.exported_program
        raised.append(info.value)
    assert raised[0] is not raised[1] and raised[0].session is session and raised[2].session is derived
    assert session.failed_stage.error.session is None  # the stored error is left as it was
    assert str(raised[0]) == str(raised[2]) and raised[0].source == raised[2].source
    assert raised[0].__cause__ is session.failed_stage.error.__cause__


def test_switching_the_model_to_eval_invalidates_the_cached_capture():
    class WithDropout(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.drop = torch.nn.Dropout(0.5)

        def forward(self, x):
            return self.drop(x) + 1

    model = WithDropout().train()
    session = Session(model, (torch.randn(2, 3),))
    session.run("capture")
    model.eval()
    again = session.with_options(optimize=False)
    again.run("capture")
    assert not again.result("capture").cached
    (dropout,) = [n for n in again.exported_program.graph.nodes if "dropout" in str(n.target)]
    assert dropout.args[2] is False  # train=False: captured in eval mode


def test_editing_weights_in_place_invalidates_the_cached_capture():
    model = Scale().eval()
    session = Session(model, (torch.randn(3, 4),))
    session.run()
    with torch.no_grad():
        model.linear.weight.fill_(1.0)
    again = session.with_options(optimize=False)
    x = torch.randn(3, 4)
    assert not again.result("capture").cached
    torch.testing.assert_close(torch.from_numpy(again.run_onnx(x)[0]), model(x).detach())


def test_opsets_below_torchlibs_share_one_decomposition():
    session = make_session(opset_version=18)
    session.run()
    lower = session.with_options(opset_version=17)
    lower.run()
    assert [(r.name, r.cached) for r in lower.stages] == [
        ("capture", True), ("decompose", True), ("translate", False), ("optimize", False)
    ]


def test_options_that_are_not_export_options_are_a_type_error_naming_the_fix():
    with pytest.raises(TypeError, match=r"options= takes an ExportOptions, not a dict: write "
                                        r"options=ExportOptions\(\*\*\{'opset_version': \.\.\.\}\)"):
        export(torch.nn.Linear(3, 2), torch.randn(2, 3), options={"opset_version": 18})


def test_the_stages_frame_has_no_nan_where_a_stage_has_no_strategy():
    frame = export(torch.nn.Linear(3, 2), torch.randn(2, 3)).to_frame()
    assert list(frame["strategy"]) == [frame["strategy"][0], "", "", ""] and frame["strategy"][0]
    assert not frame.isna().any().any()
