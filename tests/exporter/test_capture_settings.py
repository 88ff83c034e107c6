"""``runtime_asserts``: strict by default (no silently wrong sizes); torch.onnx's lenient
capture on request, with what it costs made visible."""

from __future__ import annotations

import pytest
import torch

from exporter import AUTO, STRATEGIES, CaptureError, Dim, ExportOptions, Session


class PaddingMaskAttention(torch.nn.Module):
    """The usual broadcast padding mask: torch guards seq != 1 while tracing it."""

    def forward(self, q, mask):
        return torch.nn.functional.scaled_dot_product_attention(q, q, q, attn_mask=mask[:, None, None, :])


class BranchOnThree(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] == 3:
            return x * 2
        return x + 1


def _inputs(batch, seq):
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[:, -1] = False
    return torch.randn(batch, 4, seq, 16), mask


def _mask_session(seq, **options):
    batch = Dim("batch")
    return Session(
        PaddingMaskAttention(), _inputs(2, 7), {},
        ExportOptions(dynamic_shapes={"q": {0: batch, 2: seq}, "mask": {0: batch, 1: seq}}, **options),
    )


def test_by_default_a_guard_that_excludes_a_size_rejects_the_spec_and_names_the_guard():
    session = _mask_session(Dim("seq"))
    session.run()
    error = session.failed_stage.error
    assert isinstance(error, CaptureError)
    assert "1 != " in str(error) and "seq" in str(error)


def test_the_rejected_mask_spec_exports_with_min_two(assert_matches_eager):
    session = _mask_session(Dim("seq", min=2))
    session.run()
    assert session.succeeded, session.summary()
    assert_matches_eager(session, *_inputs(3, 12), atol=1e-4)


@pytest.mark.parametrize("strategy", [cls.name for cls in STRATEGIES if cls.name != "fx_symbolic"])
def test_runtime_asserts_export_the_mask_with_unbounded_named_dims_like_torch_onnx(strategy, assert_matches_eager):
    session = _mask_session(Dim("seq"), strategy=strategy, runtime_asserts=True)
    session.run()
    assert session.succeeded, session.summary()
    dims = [d.dim_param for d in session.model_proto.graph.input[1].type.tensor_type.shape.dim]
    assert dims == ["batch", "seq"]
    assert "runtime_assert" in set(session.guards.to_frame()["kind"])
    assert_matches_eager(session, *_inputs(3, 12), atol=1e-4)


def test_runtime_asserts_keep_a_branched_dim_symbolic_and_verify_catches_the_wrong_sizes():
    x = torch.randn(3, 4)
    strict = Session(BranchOnThree(), (x,), {}, ExportOptions(dynamic_shapes={"x": {0: AUTO}}))
    lenient = strict.with_options(runtime_asserts=True)
    assert strict.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value == 3
    assert lenient.model_proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "x_dim0"
    result = lenient.verify()
    wrong = {dict(f.sizes)["x.shape[0]"] for f in result.findings if f.kind == "wrong_at_size"}
    assert {5, 7} <= wrong
    assert "dropped runtime assert" in result.summary()
