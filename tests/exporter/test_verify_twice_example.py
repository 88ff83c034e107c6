"""verify always tries twice the example size (and the example + 1), whatever ``max_size`` says.

The issue: timm's halonet26t (example 256x256) passed ``verify(max_size=128)`` compared at
height/width 255 and 256 only, while onnxruntime fails at 512x512 in a Reshape. Its guards
narrowed the range torch obtained to about the example, and the sweep kept its "scaled" size
(then ``2 * example + 1``) inside that range, so no size above the example was compared. The
README promised sizes about twice the example regardless of ``max_size``.

:class:`BlockTable` copies the idiom with no timm: a table sized for the example's grid of
8x8 blocks, interpolated in eager PyTorch for a larger grid; the export keeps the slice, so
onnxruntime fails in a Reshape at twice the example, and the guard narrows the obtained range
to [0, 71] (71 is no multiple of 8: eager refuses every other size above 64 that old sweep
could pick).
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from exporter import Dim, ExportOptions, Session
from exporter.axis import Axis
from exporter.cases import DimGroup, plan_cases

HW = {"x": {2: "height", 3: "width"}}


class BlockTable(torch.nn.Module):
    """HaloNet-like: 8x8 blocks, a per-block table for a grid of at most 8x8 blocks."""

    def __init__(self, channels=4, side=8):
        super().__init__()
        self.side = side
        self.table = torch.nn.Parameter(torch.randn(side * side, channels))

    def forward(self, x):
        b, c, h, w = x.shape
        nh, nw = h // 8, w // 8
        pooled = x.reshape(b, c, nh, 8, nw, 8).mean((3, 5))
        if nh <= self.side and nw <= self.side:
            table = self.table[: nh * nw]
        else:  # eager only: the export keeps the branch the example took
            table = F.interpolate(self.table.T[None], size=nh * nw, mode="linear")[0].T
        return pooled + table.reshape(nh, nw, c).permute(2, 0, 1)


class BlockMean(torch.nn.Module):
    """The same 8x8 blocks without the table: right at every multiple of 8."""

    def forward(self, x):
        b, c, h, w = x.shape
        return x.reshape(b, c, h // 8, 8, w // 8, 8).mean((3, 5))


class RowScale(torch.nn.Module):
    def forward(self, x):
        return x * 2 + x.sum(-1, keepdim=True)


def _session(model, example, dims):
    torch.manual_seed(0)
    return Session(model.eval(), (example,), {}, ExportOptions(dynamic_shapes=dims))


def _cases(result):
    return [c for c in result.cases if not c.is_example and not c.is_edge_value]


def _swept(result):
    return [dict(c.sizes) for c in _cases(result)]


def _group(example, requested_range=(1, None), obtained_range=(0, None), cap=None):
    return DimGroup("n", (Axis("x", 0),), "'n'", example, requested_range, "s0", obtained_range, ("s0",),
                    cap=cap, symbols=("s0",))


@pytest.fixture(scope="module")
def block_table_result():
    return _session(BlockTable(), torch.randn(1, 4, 64, 64), HW).verify(max_size=32, edge_values=False)


@pytest.fixture(scope="module")
def block_mean_result():
    return _session(BlockMean(), torch.randn(1, 4, 64, 64), HW).verify(max_size=32, edge_values=False)


def test_the_halonet_like_miss_now_fails_verify_at_twice_the_example_past_max_size_and_the_obtained_range(
        block_table_result):
    result = block_table_result
    assert result.status == "failed", result.summary()
    height = next(g for g in result.groups if g.label == "height")
    assert height.obtained_range[1] is not None and height.obtained_range[1] < 128  # guards narrowed it
    (failing,) = result.failed_cases
    assert dict(failing.sizes) == {"height": 128, "width": 128}
    assert failing.status == "ort_error" and "Reshape" in failing.error
    finding = next(f for f in result.findings if f.kind == "wrong_at_size")
    assert "128 is outside it" in finding.cause and "does not check that range" in finding.cause


def test_a_block_model_right_at_twice_the_example_still_passes_and_was_compared_there(block_mean_result):
    result = block_mean_result
    assert result.status == "passed", result.summary()
    twice = next(c for c in result.cases if dict(c.sizes) == {"height": 128, "width": 128})
    assert twice.status == "pass" and twice.compared


def test_max_size_still_bounds_every_other_generated_size(block_mean_result):
    # The example + 1, twice, the sizes chosen from remainder guards (near the example by
    # design) and the extra sizes scaled to the example (the example or twice it plus a prime,
    # both sides of a stride) may pass max_size; nothing else (the far size and the top of the
    # range do not).
    scaled = ("guard", "example +", "twice +", "stride")
    others = [c for c in _cases(block_mean_result) if c.name not in ("near", "twice") and not any(k in c.name for k in scaled)]
    assert others and all(size <= 32 for c in others for size in dict(c.sizes).values() if size != 64)
    # The same rule without an export: only twice, and the example + 1 (tried when no size in
    # the obtained range has the other parity: here 1, 2 and 3 are below it), pass max_size.
    plans = plan_cases((_group(64, obtained_range=(8, None)),), 16, None)
    assert {p.name: dict(p.sizes)["n"] for p in plans if dict(p.sizes)["n"] > 16} == {"near": 65, "twice": 128}
    assert {dict(p.sizes)["n"] for p in plans} == {1, 2, 3, 65, 128}
    assert {dict(p.sizes)["n"] for p in plan_cases((_group(64),), 16, None)} == {1, 2, 3, 128}  # 3: odd, in range


def test_a_dim_with_max_100_and_example_64_tries_100_not_128():
    plans = plan_cases((_group(64, requested_range=(1, 100)),), 16, None)
    sizes = {p.name: dict(p.sizes)["n"] for p in plans}
    assert sizes["twice"] == 100 and 128 not in sizes.values()

    dims = {"x": {1: Dim("n", max=100)}}
    result = _session(RowScale(), torch.randn(2, 64, 3), dims).verify(max_size=16, edge_values=False)
    assert result.status == "passed", result.summary()
    swept = {s["n"] for s in _swept(result)}
    assert 100 in swept and 128 not in swept and max(swept) == 100


def test_twice_is_tried_outside_a_narrowed_obtained_range_and_runs_after_the_sizes_inside_it():
    plans = plan_cases((_group(256, obtained_range=(32, 256)),), 128, None)
    sizes = [dict(p.sizes)["n"] for p in plans]
    assert 512 in sizes  # past max_size and past the range torch obtained
    assert 255 in sizes and 257 not in sizes  # the other parity inside it
    inside = [i for i, n in enumerate(sizes) if 32 <= n <= 256]
    assert max(inside) < sizes.index(512)  # the sizes torch verified come first


def test_at_the_requested_max_the_other_parity_is_the_example_minus_one_and_there_is_no_twice():
    plans = plan_cases((_group(64, requested_range=(1, 64), obtained_range=(8, None)),), 16, None)
    sizes = {p.name: dict(p.sizes)["n"] for p in plans}
    assert sizes.get("near") == 63 and "twice" not in sizes and max(sizes.values()) == 63
