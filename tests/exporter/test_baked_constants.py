"""Sizes baked at the example where a dim is asked dynamic: found in the translated model
before it is saved, named by ONNX node, FX node and the user's source line, and linked from
verify's failing cases (:mod:`exporter.shapes.baked`)."""

from __future__ import annotations

import functools

import pytest
import torch
import torch.nn.functional as F

from exporter import ExportOptions, export
from exporter.errors import Status
from exporter.examples import demo_block
from exporter.shapes.baked import BakedConstant, baked_constants_of
from exporter.shapes.dim_expr import parse_dim

from real_models import bert
from shape_models import line_of


class InterpolatedPositions(torch.nn.Module):
    """DINOv2 / ViT ``interpolate_pos_encoding`` sized with Python ints."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Conv2d(3, 8, 4, 4)
        self.pos = torch.nn.Parameter(torch.randn(1, 16, 8))

    def forward(self, pixel_values):
        x = self.proj(pixel_values).flatten(2).transpose(1, 2)
        side = int(self.pos.shape[1] ** 0.5)
        h, w = pixel_values.shape[2] // 4, pixel_values.shape[3] // 4
        pos = self.pos.reshape(1, side, side, -1).permute(0, 3, 1, 2)
        pos = F.interpolate(pos, size=(int(h), int(w)), mode="bicubic", align_corners=False)
        return x + pos.permute(0, 2, 3, 1).reshape(1, -1, 8)


class PoolKernelFromShape(torch.nn.Module):
    """MobileNetV1-style global pooling: ``avg_pool2d`` with the kernel read as Python ints."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)

    def forward(self, x):
        y = self.conv(x)
        return F.avg_pool2d(y, kernel_size=(int(y.shape[-2]), int(y.shape[-1])))


class WindowPartition(torch.nn.Module):
    """Swin-style window partition with the window counts read as Python ints."""

    def forward(self, x):
        b, h, w, c = x.shape
        nh, nw = int(h // 4), int(w // 4)
        x = x.view(b, nh, 4, nw, 4, c)
        return x.permute(0, 1, 3, 2, 4, 5).reshape(-1, 16, c)


class ArangeOfInt(torch.nn.Module):
    def forward(self, x):
        pairs = x.reshape(x.shape[0], -1, 2).sum(-1)
        return pairs + torch.arange(int(x.shape[1] // 2), dtype=x.dtype)


class ZerosOfInt(torch.nn.Module):
    def forward(self, x):
        pad = torch.zeros(x.shape[0], int(x.shape[1] // 2), x.shape[2])
        return x.reshape(x.shape[0], -1, 2, x.shape[2]).sum(2) + pad


class FixedPositions(torch.nn.Module):
    """A learned position embedding of fixed length: the model's own limit, said as a weight."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Conv2d(3, 8, 4, 4)
        self.pos = torch.nn.Parameter(torch.randn(1, 30, 8))

    def forward(self, pixel_values):
        return self.proj(pixel_values).flatten(2).transpose(1, 2) + self.pos


class AdaptivePool(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1)

    def forward(self, x):
        return F.adaptive_avg_pool2d(self.conv(x), 1).flatten(1)


class MatmulAttention(torch.nn.Module):
    """T5-style eager attention: ``q @ k.transpose(-1, -2)`` on ``[batch, heads, seq, head_dim]``."""

    def __init__(self, heads: int = 2, head_dim: int = 16) -> None:
        super().__init__()
        self.heads, self.head_dim = heads, head_dim
        self.qkv = torch.nn.Linear(heads * head_dim, 3 * heads * head_dim)

    def forward(self, x):
        q, k, v = (t.view(x.shape[0], x.shape[1], self.heads, self.head_dim).transpose(1, 2)
                   for t in self.qkv(x).chunk(3, dim=-1))
        weights = torch.softmax(q @ k.transpose(-1, -2), dim=-1)
        return (weights @ v).transpose(1, 2).reshape(x.shape[0], x.shape[1], -1)


IMAGE = {0: "batch", 2: "height", 3: "width"}


@functools.lru_cache(maxsize=None)
def _session(name: str):
    torch.manual_seed(0)
    cases = {
        "positions": (InterpolatedPositions(), torch.randn(2, 3, 24, 20), {"pixel_values": IMAGE}),
        "pool": (PoolKernelFromShape(), torch.randn(2, 3, 24, 20), {"x": IMAGE}),
        "window": (WindowPartition(), torch.randn(2, 12, 8, 3), {"x": {0: "batch", 1: "height", 2: "width"}}),
        "arange": (ArangeOfInt(), torch.randn(2, 6), {"x": {0: "batch", 1: "seq"}}),
        "zeros": (ZerosOfInt(), torch.randn(2, 6, 5), {"x": {0: "batch", 1: "seq"}}),
        "weight": (FixedPositions(), torch.randn(2, 3, 24, 20), {"pixel_values": IMAGE}),
        "adaptive": (AdaptivePool(), torch.randn(2, 3, 24, 20), {"x": IMAGE}),
        "attention": (MatmulAttention(), torch.randn(2, 16, 32), {"x": {0: "batch", 1: "seq"}}),
        "mlp": (torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 16)),
                torch.randn(16, 16), {"input": {0: "batch"}}),
    }
    model, x, shapes = cases[name]
    return export(model.eval(), x, options=ExportOptions(dynamic_shapes=shapes))


def _only(session) -> BakedConstant:
    found = baked_constants_of(session)
    assert len(found) == 1, [b.message for b in found]
    return found[0]


def _optimize_warnings(session) -> tuple[str, ...]:
    return session.result("optimize").warnings


# -- each idiom is found, with its node and source line, before the model is saved --------------------------


def test_interpolated_position_embedding_is_named_with_the_interpolate_line():
    session = _session("positions")
    baked = _only(session)
    assert (baked.kind, baked.op, baked.node, baked.numbers) == ("broadcast", "Add", "node_add_13", (30,))
    assert baked.origin_op == "Resize" and baked.fx_node == "upsample_bicubic2d"
    line = line_of(InterpolatedPositions, "F.interpolate(")
    assert f"test_baked_constants.py:{line} in forward" in baked.source
    assert baked.examples == (("height", 24), ("width", 20))
    assert baked.holds_in == (("height", 24, 27), ("width", 20, 23))
    assert baked.pinned_by is not None and "== 6" in baked.pinned_by
    stage = session.result("optimize")
    assert stage.status == Status.WARNING
    assert any("Add `node_add_13` has 30" in w and f"test_baked_constants.py:{line}" in w for w in stage.warnings)


def test_pool_kernel_read_from_the_shape_is_named_with_both_sizes():
    baked = _only(_session("pool"))
    assert (baked.kind, baked.op, baked.groups, baked.value) == ("pool", "AveragePool", ((12,), (10,)), (12, 10))
    assert f"test_baked_constants.py:{line_of(PoolKernelFromShape, 'avg_pool2d(')} in forward" in baked.source
    assert baked.confidence == "high"
    assert "make height and width static" in baked.message and "keep height in [23, 24]" in baked.message


def test_window_partition_sized_with_python_ints_is_named_at_its_view():
    baked = _only(_session("window"))
    assert (baked.kind, baked.op) == ("reshape", "Reshape")
    assert baked.groups == ((3, 4), (4, 2))  # 3 x 4 = height 12, 4 x 2 = width 8
    assert f"test_baked_constants.py:{line_of(WindowPartition, 'x.view(')} in forward" in baked.source
    assert baked.pinned_by is not None and f":{line_of(WindowPartition, 'nh, nw = ')}" in baked.pinned_by
    assert baked.holds_in == (("height", 12, 12), ("width", 8, 8))


def test_arange_of_a_python_int_is_named_though_the_optimizer_folded_it():
    baked = _only(_session("arange"))
    assert (baked.op, baked.numbers, baked.origin_op) == ("Add", (3,), "Range")
    assert "folded by the optimizer" in baked.origin
    assert f"test_baked_constants.py:{line_of(ArangeOfInt, 'torch.arange(')} in forward" in baked.source


def test_zeros_sized_with_a_python_int_is_named():
    baked = _only(_session("zeros"))
    assert (baked.op, baked.numbers, baked.examples) == ("Add", (3,), (("seq", 6),))
    assert f"test_baked_constants.py:{line_of(ZerosOfInt, 'torch.zeros(')} in forward" in baked.source


def test_a_fixed_size_weight_is_said_as_a_weight_without_a_patch():
    baked = _only(_session("weight"))
    assert baked.kind == "weight" and baked.origin is None and "'pos'" in baked.slot
    assert not any("patch" in choice for choice in baked.choices)


# -- no false alarm ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["mlp", "adaptive"])
def test_no_finding_on_an_ordinary_model(name):
    session = _session(name)
    assert baked_constants_of(session) == ()
    assert session.result("optimize").status == Status.OK


def test_no_finding_where_a_matmul_multiplies_a_head_size_equal_to_the_example_sequence():
    session = _session("attention")  # [b, 2, seq, 16] @ [b, 2, 16, seq] at seq 16: the matrix dims do not broadcast
    assert baked_constants_of(session) == ()
    assert not _optimize_warnings(session)


def test_no_finding_on_the_attention_block():
    model, args, kwargs, shapes = demo_block()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=shapes), **kwargs)
    assert baked_constants_of(session) == ()
    assert session.result("optimize").status == Status.OK


def test_no_finding_on_tiny_bert_whose_sequence_equals_its_head_size():
    real = bert()  # seq 16 at the example, head size 32 / 2 = 16: a coincidence, not a baked size
    session = export(real.model, *real.args, options=ExportOptions(dynamic_shapes=real.names), **real.kwargs)
    assert baked_constants_of(session) == ()
    assert not _optimize_warnings(session)


# -- verify names the baked node in its failing cases -----------------------------------------------------------


def test_verify_names_the_baked_node_where_onnxruntime_fails():
    result = _session("positions").verify(edge_values=False)
    failing = [f for f in result.findings if f.kind == "wrong_at_size" and "onnxruntime fails" in f.message]
    assert failing
    assert all(f.cause.startswith("pixel_values.2 (height), pixel_values.3 (width) are dynamic, but Add `node_add_13` has 30")
               for f in failing)


def test_verify_names_the_baked_kernel_where_the_output_is_wrong():
    result = _session("pool").verify(edge_values=False)
    wrong = [f for f in result.findings if f.kind == "wrong_at_size"]
    assert wrong and all("AveragePool `node_avg_pool2d` has 12" in f.cause for f in wrong)
    assert f"test_baked_constants.py:{line_of(PoolKernelFromShape, 'avg_pool2d(')}" in wrong[0].cause


# -- dim expressions ------------------------------------------------------------------------------------------


def test_dim_expressions_evaluate_at_sizes_and_list_their_parts():
    expr = parse_dim("((height//4))*((width//4)) + 1")
    assert expr is not None and expr.symbols == {"height", "width"}
    assert expr.value({"height": 24, "width": 20}) == 31
    assert expr.value({"height": 24}) is None
    assert {p.text for p in expr.parts()} >= {"height // 4", "width // 4", "height", "width"}
    assert parse_dim("Min(16, seq)").value({"seq": 40}) == 16
    assert parse_dim("__import__('os')") is None and parse_dim("7") is None
