"""Whatever escapes a stage's own guard (a library's error outside it, a failed model-state
restore, a bug) is the stage's failure: an ExportError naming the stage and the cause, chained
from it, never a bare exception out of exporter.export or Session.run."""

from __future__ import annotations

import pytest
import torch

from exporter import CaptureError, DecomposeError, ExportError, OptimizeError, Session, TranslateError, export
from exporter.pipeline import stages


def _raises(*args, **kwargs):
    # what diffusers' FrozenDict raised from inside the capture's restore: a bare Exception
    raise Exception("You cannot use ``update`` on a FrozenDict instance.")


# each function a stage calls outside its own error handling (decompose's is inside it)
@pytest.mark.parametrize(("stage", "function", "error_type"), [
    ("capture", "capture", CaptureError),
    ("decompose", "decompose", DecomposeError),
    ("translate", "constant_outputs", TranslateError),
    ("optimize", "optimize_stage", OptimizeError),
])
def test_an_unexpected_exception_in_a_stage_is_that_stages_export_error(monkeypatch, stage, function, error_type):
    monkeypatch.setattr(stages, function, _raises)
    with pytest.raises(error_type) as caught:
        export(torch.nn.Linear(2, 2), torch.ones(1, 2))
    error = caught.value
    assert error.stage == stage and type(error.__cause__) is Exception
    text = str(error)
    assert text.startswith(f"[{stage}] ") and "Exception: You cannot use ``update`` on a FrozenDict" in text
    assert "\n  fix: " in text
    session = error.session
    assert session.failed_stage.name == stage and session.failed_stage.failure.stage == stage


def test_session_run_returns_the_failure_instead_of_raising(monkeypatch):
    monkeypatch.setattr(stages, "constant_outputs", _raises)
    result = Session(torch.nn.Linear(2, 2), (torch.ones(1, 2),)).run()
    assert result.status == "failed" and result.name == "translate" and isinstance(result.error, ExportError)


def test_a_model_state_restore_that_raises_is_the_capture_stages_failure(monkeypatch):
    from exporter import model_state

    def broken(self, checked, done):
        raise Exception("restore broke")

    monkeypatch.setattr(model_state._ModuleSnapshot, "restore", broken)
    with pytest.raises(CaptureError) as caught:
        export(torch.nn.Linear(2, 2), torch.ones(1, 2))
    assert caught.value.stage == "capture" and str(caught.value.__cause__) == "restore broke"


def test_an_output_named_like_an_input_reads_out_and_its_name():
    # an ONNX graph names each value once: Optimum names a UNet's output out_sample beside sample
    class SameName(torch.nn.Module):
        def forward(self, sample):
            return {"sample": sample * 2, "other": sample + 1}

    session = export(SameName(), torch.ones(2, 3))
    for stage in ("translate", "optimize"):
        model = session.result(stage).output
        assert [v.name for v in model.graph.inputs] == ["sample"]
        assert [v.name for v in model.graph.outputs] == ["out_sample", "other"], stage
    (doubled, _) = session.run_onnx(torch.ones(2, 3))
    assert (doubled == 2).all()
