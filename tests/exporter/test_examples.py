"""The built-in example models: deterministic, in eval mode, with valid dim specs."""

from __future__ import annotations

import torch

from exporter import Dim, ExportOptions, Session, export
from exporter.examples import block_inputs, demo_block, mlp


def test_demo_block_names_batch_and_seq_on_both_inputs():
    model, args, kwargs, dims = demo_block()
    session = Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims))
    assert session.spec.named_dims() == {"batch": Dim("batch"), "seq": Dim("seq")}
    assert {(e.path, e.axis): e.policy.name for e in session.spec} == {
        ("x", 0): "batch", ("x", 1): "seq", ("attention_mask", 0): "batch", ("attention_mask", 1): "seq",
    }


def test_demo_block_is_seeded_and_in_eval_mode():
    first, args, kwargs, _ = demo_block()
    second, *_ = demo_block()
    assert not first.training
    with torch.no_grad():
        out = first(*args, **kwargs)
        torch.testing.assert_close(out, second(*args, **kwargs), rtol=0, atol=0)
    assert out.shape == (2, 7, 64)


def test_attention_mask_hides_padded_keys_only():
    model, (x,), kwargs, _ = demo_block(batch=3, seq=6)
    mask = kwargs["attention_mask"]
    with torch.no_grad():
        masked, unmasked = model(x, attention_mask=mask), model(x)
    assert mask[0].all() and not mask[1].all()
    torch.testing.assert_close(masked[0], unmasked[0])
    assert not torch.allclose(masked[1], unmasked[1])


def test_block_inputs_never_mask_a_whole_sequence():
    (x,), kwargs = block_inputs(batch=5, seq=3)
    assert x.shape == (5, 3, 64)
    assert kwargs["attention_mask"].any(dim=1).all()


def test_mlp_exports_and_matches_eager_at_another_batch(assert_matches_eager):
    model, args, kwargs, dims = mlp()
    assert dims == {"x": {0: Dim("batch")}}
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims), **kwargs)
    assert [d.dim_param or d.dim_value for d in session.model_proto.graph.input[0].type.tensor_type.shape.dim] == [
        "batch", 16,
    ]
    assert_matches_eager(session, torch.randn(9, 16))
