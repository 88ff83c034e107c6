"""An analysis reads a frozen record of the export (:class:`exporter.export_record.ExportRecord`):
it never runs a stage, never derives another export, and a failed stage raises its error as
the session would."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from exporter import ExportOptions, Session
from exporter.analyses import ANALYSES, Analysis
from exporter.errors import CaptureError
from exporter.export_record import ExportRecord


class Double(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()


class Raises(torch.nn.Module):
    def forward(self, x):
        raise RuntimeError("boom in user code")


def session(model=None, dims=None):
    return Session(model or Double(), (torch.randn(3, 4),), {},
                   ExportOptions(dynamic_shapes=dims if dims is not None else {"x": {0: "batch"}}))


class RecordKind(Analysis):
    name, label = "record_kind", "reading the record"

    def run(self, record, *, observer, cancel, **options):
        return dataclasses.make_dataclass("Seen", [("record", object), ("status", str)])(record, "ok")


@pytest.fixture
def record_kind():
    ANALYSES.register(RecordKind())
    yield
    ANALYSES.unregister("record_kind")


def test_an_analysis_receives_a_frozen_record_that_cannot_derive_another_export(record_kind):
    s = session()
    record = s.analyze("record_kind").record
    assert isinstance(record, ExportRecord)
    assert not hasattr(record, "with_options") and not hasattr(record, "run")
    with pytest.raises(dataclasses.FrozenInstanceError):
        record.spec = None
    assert record.model is s.model and record.spec == s.spec and record.options == s.options
    assert record.stage_output("optimize") is s.stage_output("optimize")
    assert [str(r.status) for r in record.results.values()] == ["ok"] * 4
    assert record.guards == s.guards and record.onnx_input_names == s.onnx_input_names


def test_a_record_answers_like_the_session_it_was_taken_from():
    s = session()
    record = s.snapshot()
    x = torch.randn(5, 4)
    assert record.feeds(x).keys() == s.feeds(x).keys()
    assert (record.run_onnx(x)[0] == s.run_onnx(x)[0]).all()
    assert record.ort_model is s.ort_model and record.graphs is s.graphs
    assert len(record.passes) == len(s.passes)


def test_reading_a_record_never_runs_a_stage():
    s = session()
    record = s.snapshot("capture")
    assert list(record.results) == ["capture"] and record.until == "capture"
    with pytest.raises(ValueError, match="stops at capture: it has no optimize result"):
        record.stage_output("optimize")
    assert [r.name for r in s.stages] == ["capture"]  # nothing ran past capture


def test_a_failed_stage_raises_its_error_from_the_record_for_every_later_stage():
    s = session(Raises())
    record = s.snapshot()
    assert s.failed_stage is not None and s.failed_stage.name == "capture"
    for stage in ("capture", "translate", "optimize"):
        with pytest.raises(CaptureError) as raised:
            record.stage_output(stage)
        assert raised.value.session is s  # the handler reaches the session and its fixes
    with pytest.raises(CaptureError):
        _ = record.ort_model


def test_verify_on_a_failed_export_is_an_error_result_not_an_exception():
    result = session(Raises()).verify()
    assert result.status == "error" and result.failure is not None and result.failure.stage == "capture"


def test_the_unoptimized_variant_is_timed_without_deriving_another_export():
    s = session()
    s.run()
    optimized = s._cache._data["optimize"]  # the optimize results every derived session shares
    before = len(optimized)
    comparison = s.compare(["unoptimized"], budget=0.05, min_runs=5)
    assert comparison.error is None
    row = next(r for r in comparison.rows if r.variant.name == "unoptimized")
    assert row.error is None and row.model_mb > 0
    assert len(optimized) == before  # no optimize=False export was computed or cached
