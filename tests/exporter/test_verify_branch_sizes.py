"""Verify's sweep has sizes that can see a branch (issue 53, item 1): both sides of the coarsest
stride the program divides a dim by, the example plus a prime to the strides, twice the example
plus that prime, a size far above twice the example, the top of a finite range, within a time
budget. Each rule has a test that fails without it (the rule named in the test's name); the
behaviour tests use tiny models whose eager-only branch the old sizes (example, + 1, x2, x3)
never reach."""

from __future__ import annotations

import sympy
import torch
from torch.utils._sympy.functions import FloorDiv

from exporter import ExportOptions, Session
from exporter.axis import Axis
from exporter.cases import DimGroup, extra_cases, plan_cases
from exporter.cases.plan import EXTRA_SECONDS, FAR_SECONDS
from exporter.cases.stride_sizes import offset_prime, stride_sizes

S = sympy.Symbol("s0", integer=True, positive=True)
SEW_FRAMES = FloorDiv(FloorDiv(FloorDiv(S, 80) - 3, 2) - 1, 2) + 1  # 8 frames at 2640 samples, 9 at 2960


def _group(example, requested_range=(1, None), obtained_range=(0, None), divisors=(), stride=(), cap=None):
    return DimGroup("n", (Axis("x", 0),), "'n'", example, requested_range, "s0", obtained_range, ("s0",), cap=cap,
                    symbols=("s0",), divisors=tuple(divisors), stride_sizes=tuple(stride))


def _extra(group, seconds=0.001, max_size=512):
    """The extra cases' sizes by name, each of 30 planned runs at the example having taken
    ``seconds`` (cheap: all fit; else 12x ``seconds`` of budget)."""
    planned = plan_cases((group,), max_size, None)
    runs = [((("n", group.example),), seconds)] * 30
    return {p.name: dict(p.sizes)["n"] for p in extra_cases((group,), planned, runs, max_size)}


def test_rule_other_residue_the_example_plus_a_prime_that_divides_no_stride():
    assert _extra(_group(64))["example + 3"] == 67
    assert _extra(_group(64, divisors=(2, 5, 80)))["example + 3"] == 67
    assert _extra(_group(63, divisors=(3, 6)))["example + 7"] == 70  # 3 divides a stride: 7
    assert offset_prime((3, 6, 7)) == 5


def test_rule_prime_offset_beyond_twice_the_example():
    assert _extra(_group(64))["n=131 twice + 3"] == 131


def test_rule_far_size_well_above_twice_the_example_while_the_model_is_cheap():
    assert _extra(_group(64))["n=512 far (8x)"] == 512
    # A slower model gets the size its time allows (4x within FAR_SECONDS), a slow one none.
    medium = _extra(_group(64), seconds=FAR_SECONDS / 6)
    assert medium.get("n=256 far (4x)") == 256 and 512 not in medium.values()
    assert not any("far" in name for name in _extra(_group(64), seconds=FAR_SECONDS))
    # Never past max_size or the range (the top instead when it is still past twice).
    assert _extra(_group(64), max_size=256)["n=256 far (the top)"] == 256
    assert not any("far" in name for name in _extra(_group(64), max_size=128))


def test_rule_top_of_a_finite_range_even_past_max_size():
    assert _extra(_group(8, requested_range=(1, 1000)), 1e-5, max_size=512)["n=1000 top of the range"] == 1000
    assert _extra(_group(8, cap=300), 1e-5, max_size=64)["n=300 top of the range"] == 300  # a guard's cap
    # Within max_size the planned "max" case has it already: no second case.
    assert 1000 not in _extra(_group(8, requested_range=(1, 1000)), max_size=2000).values()


def test_rule_both_sides_of_a_divisor_read_from_the_program_sizes():
    group = _group(2640)
    divisors, sizes = stride_sizes(group, (group,), [FloorDiv(S, 5) - 1, SEW_FRAMES])  # the first conv, the frames
    assert divisors == (2, 5, 80)
    found = {size for _, size, _ in sizes}
    assert 2960 in found  # 9 frames: the coarsest division's other parity above the example (2645 is the conv's)
    assert any(size < 2640 for size in found)  # and below it
    assert {k for k, _, _ in sizes} == {"stride above", "stride below"}
    extra = _extra(_group(2640, divisors=divisors, stride=sizes))
    assert extra["n=2960 stride above"] == 2960


def test_the_extra_sizes_stay_within_a_share_of_the_time_the_planned_cases_took():
    group = _group(64)
    planned = plan_cases((group,), 512, None)
    # 5.2 s planned: 2.08 s for extra cases; each takes 1 s plus 0.2 s per example's worth.
    slow = [((("n", 64),), 1.0)] * 4 + [((("n", 128),), 1.2)]
    extra = extra_cases((group,), planned, slow, 512)
    assert [p.name for p in extra] == ["example + 3"]
    cheap = extra_cases((group,), planned, [((("n", 64),), EXTRA_SECONDS / 100)], 512)
    assert len(cheap) >= 3  # a cheap model gets every extra case


def test_a_stride_size_far_past_a_small_example_runs_only_within_the_budget():
    far_stride = [("stride above", 4104, 4096), ("stride below", 4, 4096)]  # a coarse stride past 8
    near_stride = [("stride above", 12, 4), ("stride below", 4, 4)]
    slow = 1.0  # 30 planned runs of 1 s: 9 s of budget, and a case of 4104 costs far more
    assert "n=4104 stride above" not in _extra(_group(8, divisors=(4096,), stride=far_stride), seconds=slow)
    assert _extra(_group(8, divisors=(4,), stride=near_stride), seconds=slow)["n=12 stride above"] == 12


def test_a_kind_too_large_with_every_group_at_once_runs_one_group_at_a_time():
    # A video transformer's latents: frames capped at 32, height and width at 65, from 2 x 8 x 8.
    groups = tuple(DimGroup(label, (Axis("x", axis),), repr(label), example, (1, top), f"s{axis}", (0, None), (f"s{axis}",),
                            symbols=(f"s{axis}",))
                   for axis, (label, example, top) in enumerate((("frames", 2, 32), ("height", 8, 65), ("width", 8, 65))))
    plans = {p.name: dict(p.sizes) for p in plan_cases(groups, 512, None)}
    assert "max" not in plans  # 16 x 8 x 8 times the example's elements at once: 32768 tokens
    assert plans["frames max"] == {"frames": 32, "height": 8, "width": 8}
    assert plans["height max"] == {"frames": 2, "height": 65, "width": 8}
    assert plans["larger"] == {"frames": 6, "height": 16, "width": 16}  # 12x at once: still together


class OddFrames(torch.nn.Module):
    """Frames 16 samples each; eager doubles the output at an odd frame count, which the export
    never sees (no guard): only a size of the other frame parity shows it."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Conv1d(1, 2, 4, stride=4)
        self.b = torch.nn.Conv1d(2, 2, 4, stride=4)

    def forward(self, audio):
        h = self.b(self.a(audio[:, None, :]))
        if not torch.compiler.is_exporting() and h.shape[2] % 2:
            return h * 2
        return h


def test_rule_stride_sizes_catch_a_branch_on_the_frame_parity_that_example_plus_one_and_twice_miss():
    torch.manual_seed(0)
    session = Session(OddFrames().eval(), (torch.randn(2, 64),), {}, ExportOptions(dynamic_shapes=({0: "batch", 1: "audio"},)))
    result = session.verify(edge_values=False)
    assert result.status == "failed", result.summary()
    failing = {dict(c.sizes)["audio"] for c in result.failed_cases}
    assert 80 in failing  # 5 frames
    assert all((n // 16) % 2 for n in failing)
    names = {c.name for c in result.failed_cases}
    assert any("stride" in name for name in names), names
    assert "audio in {" in result.verdict or "80" in result.summary()
