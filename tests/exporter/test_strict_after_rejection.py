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


# -- the size check's rules, each pinned (issue 53 item 6) -------------------------------------------------


class DoublesUpToFive(torch.nn.Module):
    """Right at the example (4) and at 5, wrong from 6 on: only twice the example shows it."""

    def forward(self, x):
        return x * 2 if x.shape[0] <= 5 else x * 3


class DoublesOffByAThousandth(torch.nn.Module):
    def forward(self, x):
        return x * 2 + 1e-3


class OnlyAtFour(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] != 4:
            raise ValueError("this module only runs with a batch of 4")
        return x * 2


def _batch_program():
    x = torch.randn(4, 3)
    return torch.export.export(Doubles(), (x,), dynamic_shapes=({0: torch.export.Dim("b")},)), bind_inputs(Doubles(), (x,), {})


def test_size_check_rule_twice_the_size_a_program_right_at_size_plus_one_is_caught_at_twice():
    program, bound = _batch_program()
    assert differs_from_model(DoublesUpToFive(), program, bound) == "at x.shape[0]=8 its output 0 differs from the model's"


def test_size_check_rule_tolerance_a_program_a_thousandth_off_differs():
    program, bound = _batch_program()
    assert differs_from_model(DoublesOffByAThousandth(), program, bound) == \
        "at x.shape[0]=5 its output 0 differs from the model's"


def test_size_check_rule_a_model_that_refuses_every_other_size_is_no_difference_even_when_the_example_is_tried():
    program, bound = _batch_program()
    refused = "the model runs at no other size tried, so the program cannot be shown right there"
    assert differs_from_model(OnlyAtFour(), program, bound) == refused
    # The program's own example matches (it was captured there): it shows nothing about other sizes.
    assert differs_from_model(OnlyAtFour(), program, bound, also=(_examples(program, bound),)) == refused


def _examples(program, bound):
    from exporter.pipeline.size_check import example_sizes
    from exporter.program_symbols import symbol_of

    return example_sizes(symbol_of(program, bound), bound)


class ThresholdAtTwelve(torch.nn.Module):
    """Reads its width into an int (the default capture rejects a dynamic width; strict keeps it),
    and doubles its output past a batch of 12 in eager PyTorch only (the ``is_compiling()``
    pattern; ``torch._dynamo``'s, which strict traces, as transformers' own once did): neither
    the size check (5 and 8) nor the old sweep (1, 2, 3, 4, 8) reaches the threshold, and no
    guard caps the batch."""

    def forward(self, x):
        n = int(x.shape[1])
        y = x.reshape(x.shape[0], n) * 3
        if not torch._dynamo.is_compiling() and x.shape[0] > 12:
            return y * 2
        return y


def test_class_4_wrong_only_above_twice_the_example_after_the_strict_fallback_fails_verify_at_the_far_size():
    session = Session(ThresholdAtTwelve(), (torch.randn(4, 6),), {}, ExportOptions(dynamic_shapes=SPEC))
    capture = session.run("capture")
    assert capture.status == Status.OK and capture.strategy == "strict"
    result = session.verify(edge_values=False)
    assert result.status == "failed", result.summary()
    failing = {dict(c.sizes)["batch"] for c in result.failed_cases}
    assert failing and all(batch > 12 for batch in failing)
    assert any("far" in c.name for c in result.failed_cases)
    swept = {size for c in result.cases for label, size in c.sizes if label == "batch"}
    assert {4, 8} <= swept and max(swept) >= 32  # the verdict lists the sizes compared
    assert "32" in result.summary()
