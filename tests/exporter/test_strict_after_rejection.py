"""After torch rejects the dim spec in the default (non-strict) capture, the strict capture that
torch.onnx.export falls back to is tried, and kept only when its program matches the model at
other sizes: a user coming from torch.onnx.export is never refused what it exports correctly,
and never handed a program that is wrong where the model is not."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from exporter import ExportOptions, Session, export
from exporter.errors import Status
from exporter.inputs import bind_inputs
from exporter.pipeline.size_check import differs_from_model, other_size_assignments


class SizeAsInt(torch.nn.Module):
    """The non-strict capture reads ``n`` into a Python int and bakes it; TorchDynamo keeps it symbolic."""

    def forward(self, x):
        n = int(x.shape[1])
        return x.reshape(x.shape[0], n)[:, : max(1, n // 2)] * 2


class PaddingByParity(torch.nn.Module):
    """TF "same" padding (MobileNet's ``apply_tf_padding``): the strict program guards the parity."""

    def forward(self, x):
        n = int(x.shape[-1])
        pad = 1 if n % 2 == 0 else 2
        return F.pad(x, (0, pad)) * 2


SPEC = ({0: "batch", 1: "n"},)


def test_a_size_read_into_an_int_stays_dynamic_through_the_strict_capture_and_verifies_at_other_sizes():
    session = export(SizeAsInt(), torch.randn(2, 6), options=ExportOptions(dynamic_shapes=SPEC))
    capture = session.stages[0]
    assert capture.status == Status.OK and capture.strategy == "strict"
    assert [(a.strategy, a.outcome) for a in capture.attempts] == [("nonstrict", "failed"), ("strict", "ok")]
    [note] = [w for w in capture.warnings if "strict capture" in w]
    assert "x.shape[1] was asked to be dynamic" in note and "n = int(x.shape[1])" in note  # what, and the user's line
    assert "matches the model at other sizes" in note
    dims = [d.dim_param or d.dim_value for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "n"]
    verdict = session.verify()
    assert verdict.status == "passed", verdict
    x = torch.randn(3, 11)
    (got,) = session.run_onnx(x)
    torch.testing.assert_close(torch.from_numpy(got), SizeAsInt()(x))


def test_a_strict_program_that_refuses_a_size_the_model_takes_is_not_used_and_the_rejection_stands():
    session = Session(PaddingByParity(), (torch.randn(2, 3, 6),), {}, ExportOptions(dynamic_shapes=({2: "width"},)))
    capture = session.run("capture")
    assert capture.status == Status.FAILED
    assert [(a.strategy, a.outcome) for a in capture.attempts] == [
        ("nonstrict", "failed"), ("strict", "failed"), ("draft", "skipped"), ("fx_symbolic", "skipped")]
    message = str(capture.error)
    assert "x.shape[2] was asked to be dynamic" in message and "x.shape[2]: STATIC" in message  # the fix is kept
    assert "strict: " in message and "at x.shape[2]=7 it fails where the model runs" in message


def test_an_explicit_strategy_gets_no_other_capture():
    session = Session(SizeAsInt(), (torch.randn(2, 6),), {}, ExportOptions(dynamic_shapes=SPEC, strategy="nonstrict"))
    capture = session.run("capture")
    assert capture.status == Status.FAILED and [a.strategy for a in capture.attempts] == ["nonstrict"]


class Doubles(torch.nn.Module):
    def forward(self, x):
        return x * 2


class Triples(torch.nn.Module):
    def forward(self, x):
        return x * 3


class KeepsFour(torch.nn.Module):
    def forward(self, x):
        return x[:, :4] * 2


def _program(module, x):
    return torch.export.export(module, (x,), dynamic_shapes=({0: torch.export.Dim("b"), 1: torch.export.Dim("n", min=5)},))


def test_the_size_check_says_which_output_differs_in_value_or_shape_and_at_which_sizes():
    x = torch.randn(2, 6)
    bound = bind_inputs(Doubles(), (x,), {})
    assert differs_from_model(Doubles(), _program(Doubles(), x), bound) is None
    assert differs_from_model(Doubles(), _program(Triples(), x), bound) == \
        "at x.shape[0]=3, x.shape[1]=7 its output 0 differs from the model's"
    assert differs_from_model(Doubles(), _program(KeepsFour(), x), bound) == \
        "at x.shape[0]=3, x.shape[1]=7 its output 0 has shape [3, 4] where the model's has [3, 7]"


def test_other_sizes_stay_inside_the_programs_ranges():
    x = torch.randn(2, 6)
    program = torch.export.export(Doubles(), (x,), dynamic_shapes=({0: torch.export.Dim("b", max=2),
                                                                      1: torch.export.Dim("n", max=12)},))
    assignments = other_size_assignments(program, bind_inputs(Doubles(), (x,), {}))
    assert [sorted(a.values()) for a in assignments] == [[1, 7], [1, 12]]  # batch at its maximum steps down
