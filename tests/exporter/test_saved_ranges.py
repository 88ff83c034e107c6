"""A dim range narrowed by torch's guards (or asked with a ``Dim(min, max)``) travels with the
ONNX model: one ``metadata_props`` entry per narrowed input axis, and one ``valid range`` line
in the session's summary and report.

The issue: Swin-T with string names exports a model valid only for height in [60, 115] (a guard
at ``swin_transformer.py:608``); verify said so, but nothing in the saved model or the summary
carried the range, and onnxruntime does not check it. :class:`Window` has the same two guards.
"""

from __future__ import annotations

import inspect
import re

import onnx
import onnx_ir as ir
import pytest
import torch

from exporter import Dim, ExportOptions, Session
from exporter.report import report_html
from exporter.shapes.ranges_metadata import METADATA_PREFIX, read_range_metadata


class Window(torch.nn.Module):
    """At least 60 rows (a branch below), at most 115 (a table of 115 rows)."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(115, 1))

    def forward(self, x):
        h = x.shape[2]
        if h < 60:
            x = x * 2
        return x + self.table[:h]


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1


def _line_of(code):
    lines, first = inspect.getsourcelines(Window.forward)
    return first + next(i for i, line in enumerate(lines) if line.strip() == code)


def _session(model, dims, **options):
    torch.manual_seed(0)
    return Session(model.eval(), (torch.randn(2, 3, 64, 1),), {}, ExportOptions(dynamic_shapes=dims, **options))


@pytest.fixture(scope="module")
def guarded():
    return _session(Window(), {"x": {0: "batch", 2: "height"}})


@pytest.fixture(scope="module")
def plain():
    return _session(Scale(), {"x": {0: "batch", 2: "height"}})


def test_a_range_narrowed_by_guards_is_in_the_saved_model_with_its_reasons_and_lines(guarded, tmp_path):
    path = tmp_path / "window.onnx"
    guarded.save(path)
    entries = read_range_metadata(onnx.load(str(path)))
    assert list(entries) == [f"{METADATA_PREFIX}x.2"]  # the batch axis is not narrowed: no entry
    text = entries[f"{METADATA_PREFIX}x.2"]
    assert text.startswith("x.2 height: 60..115 (")
    low, high = (_line_of(code) for code in ("if h < 60:", "return x + self.table[:h]"))
    here = r"(?:\S*/)?test_saved_ranges\.py"  # the file as a person reads it (relative when it can be)
    assert re.search(rf"at least 60: h < 60, {here}:{low}; ", text), text
    assert re.search(rf"at most 115: return x \+ self\.table\[:h\], {here}:{high}\)$", text), text
    # Every form of the final model carries it; the shared stage output is not changed.
    assert read_range_metadata(guarded.model_proto) == entries
    assert read_range_metadata(guarded.onnx_model) == entries
    assert read_range_metadata(guarded.stage_output("optimize")) == {}


def test_a_requested_dim_range_is_written_with_the_dim_it_came_from(tmp_path):
    session = _session(Window(), {"x": {2: Dim("height", min=60, max=100)}}, input_names=["pixels"])
    session.save(tmp_path / "ranged.onnx")
    entries = read_range_metadata(onnx.load(str(tmp_path / "ranged.onnx")))
    assert entries == {f"{METADATA_PREFIX}pixels.2": "pixels.2 height: 60..100 (requested Dim('height', min=60, max=100))"}


def test_a_model_without_a_narrowed_range_is_saved_unchanged(plain, tmp_path):
    plain.save(tmp_path / "plain.onnx")
    saved = (tmp_path / "plain.onnx").read_bytes()
    assert read_range_metadata(onnx.load_from_string(saved)) == {}
    final = plain.stage_output("optimize")
    assert plain.ort_model.model is final  # handed on as is, not copied
    assert saved == plain.model_bytes == ir.to_proto(final).SerializeToString()


def test_the_summary_and_the_report_show_one_valid_range_line_per_narrowed_axis(guarded, plain):
    _ = guarded.model_proto  # the final model computes the dims: the summary then shows the range
    lines = [line.strip() for line in guarded.summary().splitlines() if line.strip().startswith("valid range:")]
    assert len(lines) == 1 and lines[0].startswith("valid range: x.2 height: 60..115 (at least 60: h < 60")
    assert "x.2 height: 60..115 (at least 60" in report_html(guarded)
    _ = plain.model_proto
    assert "valid range" not in plain.summary()
