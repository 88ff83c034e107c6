"""A small example can make an intermediate size 1 (a 8×8 image pooled by 8), and torch treats a
size 1 as a constant: the program then holds only while that size stays 1, and its ONNX model is
wrong or refuses most other sizes. Capture runs again at a larger example and keeps that program
when it matches the model at the user's example and at other sizes."""

from __future__ import annotations

import pytest
import sympy
import torch
import torch.nn.functional as F

from exporter import ExportOptions, Session, compat
from exporter.errors import Status
from exporter.pipeline.grown_example import PinnedSize, grown_assignment

SPEC = {"x": {0: "batch", 2: "height", 3: "width"}}


class PooledContext(torch.nn.Module):
    """FocalNet's last stage in small: a global context broadcast over a pooled map, read back
    through a permuted copy (the stride check there guards the pooled size against 1)."""

    def forward(self, x):
        y = F.avg_pool2d(x, 8)
        context = y.mean((2, 3), keepdim=True)
        return (y + context * y.mean(1, keepdim=True)).permute(0, 2, 3, 1).contiguous().flatten(1, 2)


class SizeOneBranch(torch.nn.Module):
    """A branch on the pooled size being 1: a program traced at a larger example is not this model at 8×8."""

    def forward(self, x):
        y = F.avg_pool2d(x, 8)
        if y.shape[2] * y.shape[3] == 1:
            return y.flatten(1) * 2
        return y.flatten(1)


def test_a_program_pinned_to_a_size_one_intermediate_is_replaced_by_one_captured_at_a_larger_example():
    x = torch.randn(2, 4, 8, 8)
    session = Session(PooledContext(), (x,), {}, ExportOptions(dynamic_shapes=SPEC))
    capture = session.run("capture")
    assert capture.status == Status.OK
    assert [(a.strategy, a.outcome) for a in capture.attempts] == [("nonstrict", "skipped"), ("nonstrict", "ok")]
    assert "test_grown_example.py:" in capture.attempts[0].skipped_reason  # where the size-1 value is computed
    [note] = [w for w in capture.warnings if "captured again" in w]
    assert "x.shape[2]=16, x.shape[3]=16" in note and "torch treats a size 1 as a constant" in note
    verdict = session.verify(sizes={"height": [8, 16, 40], "width": [8, 24, 64]})
    assert verdict.status == "passed", verdict
    grown = torch.randn(3, 4, 32, 24)
    (got,) = session.run_onnx(grown)
    torch.testing.assert_close(torch.from_numpy(got), PooledContext()(grown))


def test_torch_guards_the_first_program_to_a_pooled_size_of_one_and_unguarded_module_runs_past_the_guard():
    x = torch.randn(2, 4, 8, 8)
    dims = {"x": {0: torch.export.Dim.DYNAMIC, 2: torch.export.Dim.DYNAMIC, 3: torch.export.Dim.DYNAMIC}}
    with compat.size_oblivious_capture():
        program = torch.export.export(PooledContext(), (x,), dynamic_shapes=dims, strict=False)
    bigger = torch.randn(2, 4, 16, 16)
    with pytest.raises(AssertionError, match=r"== 1"):
        program.module()(bigger)
    torch.testing.assert_close(compat.unguarded_module(program)(bigger), PooledContext()(bigger))


def test_a_size_one_the_model_branches_on_keeps_the_first_program_and_its_narrow_range():
    x = torch.randn(2, 4, 8, 8)
    session = Session(SizeOneBranch(), (x,), {}, ExportOptions(dynamic_shapes=SPEC))
    capture = session.run("capture")
    assert capture.status == Status.OK
    assert [(a.strategy, a.outcome) for a in capture.attempts] == [("nonstrict", "ok")]
    assert not [w for w in capture.warnings if "captured again" in w]
    (got,) = session.run_onnx(x)
    torch.testing.assert_close(torch.from_numpy(got), SizeOneBranch()(x))


def test_the_grown_example_is_the_smallest_factor_that_moves_every_pinned_size_off_its_constant_within_its_range():
    h, w = sympy.symbols("s1 s2", integer=True, positive=True)

    def ones(*sizes):
        return [PinnedSize(size, 1, None) for size in sizes]

    examples = {"s0": 2, "s1": 8, "s2": 32}
    sizes = ones(sympy.floor(h / 8), sympy.floor(w / 32))
    assert grown_assignment(sizes, examples, {}) == {"s0": 2, "s1": 16, "s2": 64}
    assert grown_assignment(ones(sympy.floor(h / 24)), examples, {}) == {"s0": 2, "s1": 64, "s2": 32}  # 2× and 4× fall short
    assert grown_assignment(sizes, examples, {"s1": (1, 12)}) is None  # the user's Dim max forbids it
    assert grown_assignment(ones(sympy.floor(h / 100)), examples, {}) is None  # no factor tried reaches 2
    patches = sympy.floor(h / 2) ** 2 + 1  # a ViT's patch count plus its class token: 17 at the example
    assert grown_assignment([PinnedSize(patches, 17, None)], examples, {}) == {"s0": 2, "s1": 16, "s2": 32}
    assert grown_assignment([PinnedSize(sympy.Mod(h, 4), 0, None)], examples, {}) is None  # every multiple keeps it


def test_named_dims_refused_for_a_size_one_intermediate_are_captured_at_a_larger_example():
    from exporter import Dim

    named = {"x": {0: Dim("batch"), 2: Dim("height", min=8, max=64), 3: Dim("width", min=8, max=64)}}
    session = Session(PooledContext(), (torch.randn(2, 3, 8, 8),), {}, ExportOptions(dynamic_shapes=named))
    capture = session.run("capture")
    assert capture.ok, session.failed_stage
    assert "captured again at x.shape[2]=16, x.shape[3]=16" in capture.detail
    assert session.verify(sizes={"height": [8, 24, 64], "width": [8, 24, 64]}).status == "passed"


def test_dinov2_at_its_training_size_with_named_dims_is_offered_a_range_fix_not_static_which_then_verifies():
    transformers = pytest.importorskip("transformers")
    from exporter import Dim

    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, image_size=32, patch_size=8)
    torch.manual_seed(0)
    model = transformers.Dinov2Model(config).eval()
    named = {"pixel_values": {0: Dim("batch"), 2: Dim("height", max=128), 3: Dim("width", max=128)}}
    session = Session(model, (torch.randn(2, 3, 32, 32),), {}, ExportOptions(dynamic_shapes=named))
    assert session.run().status == "failed"  # at 64x64 torch asks for height, width >= 8
    fixes = session.suggested_fixes
    assert "height = Dim('height', min=8, max=128)" in fixes.diff and "STATIC" not in str(fixes)
    fixed = session.apply_suggested_fixes()
    assert fixed.run().ok
    assert "captured again at pixel_values.shape[2]=64, pixel_values.shape[3]=64" in fixed.result("capture").detail
    assert fixed.verify(sizes={"height": [8, 32, 72], "width": [8, 32, 72]}).status == "passed"
