"""When the default captures fail on a data-dependent branch, ``strategy="auto"`` ends at draft
export, which fixes that value at the example's: the capture says which values, at the user's
lines, since the ONNX model is right only for inputs that take the same branches."""

from __future__ import annotations

import pytest
import torch

from exporter import ExportOptions, Session, compat


class SignBranch(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x - 1


def test_a_capture_that_ends_at_draft_export_names_the_values_it_fixed_at_the_users_line():
    x = torch.full((2, 3), 2.0)
    session = Session(SignBranch(), (x,), {}, ExportOptions(dynamic_shapes=({0: "batch"},)))
    capture = session.run("capture")
    assert capture.strategy == "draft"
    [note] = [w for w in capture.warnings if w.startswith("draft export fixed")]
    assert "1 data-dependent value(s)" in note
    assert "test_draft_assumptions.py:" in note and "(`if x.sum() > 0:`)" in note
    assert "holds only for inputs that take the same branches" in note
    (got,) = session.run_onnx(-x)  # the other branch: the ONNX model still takes the example's
    assert torch.equal(torch.from_numpy(got), -x * 2) and not torch.equal(torch.from_numpy(got), SignBranch()(-x))


def test_draft_export_assumptions_reads_the_reports_data_dependent_failures_and_nothing_from_other_programs():
    x = torch.ones(2, 3)
    program = torch.export.draft_export(SignBranch(), (x,))
    [(expr, file, line, code)] = compat.draft_export_assumptions(program)
    assert expr and file.endswith("test_draft_assumptions.py") and code == "if x.sum() > 0:"
    assert line == SignBranch.forward.__code__.co_firstlineno + 1
    assert compat.draft_export_assumptions(torch.export.export(torch.nn.ReLU(), (x,))) == []


def test_the_example_check_passes_a_draft_program_at_its_example_and_its_fixed_values_assert_elsewhere():
    from exporter.inputs import bind_inputs
    from exporter.pipeline.size_check import differs_at_example

    positive, negative = torch.full((2, 3), 2.0), torch.full((2, 3), -2.0)
    program = torch.export.draft_export(SignBranch(), (positive,))  # fixed on the positive branch
    assert differs_at_example(SignBranch(), program, bind_inputs(SignBranch(), (positive,), {})) is None
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):  # the fixed value's assert, kept in the program
        differs_at_example(SignBranch(), program, bind_inputs(SignBranch(), (negative,), {}))
