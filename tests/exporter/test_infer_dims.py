"""session.infer_dims: the forms more inputs come in, shared names for axes that vary
together, and a spec that exports as it is."""

from __future__ import annotations

import pytest
import torch

from exporter import Dim, DimSpec, Session, SpecError
from exporter.examples import block_inputs, demo_block


class Add(torch.nn.Module):
    def forward(self, x, y):
        return x + y


class AddPositions(torch.nn.Module):
    def forward(self, x, positions):
        return x + positions[None, :, None]


def spec_of(session: Session, value: dict) -> DimSpec:
    return DimSpec.parse(value, session.inputs)


@pytest.fixture(scope="module")
def block():
    """The demo block with no dims given: every name below is inferred."""
    model, args, kwargs, _ = demo_block(batch=2, seq=7)
    return Session(model, args, kwargs)


def test_demo_block_axes_that_vary_together_share_batch_and_seq_and_export_as_is(block, assert_matches_eager):
    spec = block.infer_dims([block_inputs(4, 12), block_inputs(1, 30)])  # (args, kwargs) pairs
    batch, seq = Dim("batch", min=1, max=4), Dim("seq", min=7, max=30)
    assert spec == spec_of(block, {"x": {0: batch, 1: seq}, "attention_mask": {0: batch, 1: seq}})
    exported = block.with_dims(spec)
    assert exported.run().status == "ok"  # no apply_suggested_fixes() needed
    assert [list(v.shape) for v in exported.onnx_model.graph.inputs] == [["batch", "seq", 64], ["batch", "seq"]]
    args, kwargs = block_inputs(3, 11)
    assert_matches_eager(exported, *args, **kwargs)


def test_more_inputs_as_kwargs_dicts_pairs_or_additional_inputs_give_one_spec(block):
    (x2,), kw2 = block_inputs(4, 12)
    (x3,), kw3 = block_inputs(1, 30)
    pairs = block.infer_dims([((x2,), kw2), ((x3,), kw3)])
    assert block.infer_dims([{"x": x2, **kw2}, {"x": x3, **kw3}]) == pairs
    more = torch.export.AdditionalInputs()
    more.add((x2,), kw2)
    more.add((x3,), kw3)
    assert block.infer_dims(more) == pairs


def test_args_tuples_work_when_the_example_was_all_positional():
    start = Session(Add(), (torch.ones(2, 3), torch.ones(2, 3)))
    spec = start.infer_dims([(torch.ones(5, 3), torch.ones(5, 3))])
    batch = Dim("batch", min=2, max=5)
    assert spec == spec_of(start, {"x": {0: batch}, "y": {0: batch}})


def test_a_set_missing_an_input_names_it_and_shows_the_pair_form(block):
    (x2,), _ = block_inputs(4, 12)
    with pytest.raises(SpecError) as caught:
        block.infer_dims([(x2,), (x2,)])
    message = str(caught.value)
    assert caught.value.input == "attention_mask"
    assert "missing from input set 1 of 2" in message
    assert "session.infer_dims([((x2,), {'attention_mask': attention_mask2}), ...])" in message


def test_a_set_with_another_rank_names_the_set_and_input():
    start = Session(Add(), (torch.ones(2, 3), torch.ones(2, 3)))
    with pytest.raises(SpecError, match="has rank 1 in input set 2 of 2 but 2 in the example") as caught:
        start.infer_dims([(torch.ones(4, 3), torch.ones(4, 3)), (torch.ones(4, 3), torch.ones(4))])
    assert caught.value.input == "y"


def test_square_inputs_share_dims_across_inputs_by_axis_never_within_one_input():
    start = Session(Add(), (torch.ones(4, 4), torch.ones(4, 4)))
    spec = start.infer_dims([(torch.ones(8, 8), torch.ones(8, 8))])
    batch, seq = Dim("batch", min=4, max=8), Dim("seq", min=4, max=8)
    assert spec == spec_of(start, {"x": {0: batch, 1: seq}, "y": {0: batch, 1: seq}})
    assert start.with_dims(spec).run("capture").status == "ok"


def test_axes_of_different_indices_that_vary_together_are_named_after_the_first():
    start = Session(AddPositions(), (torch.ones(2, 5, 3), torch.ones(5)))
    spec = start.infer_dims([(torch.ones(2, 9, 3), torch.ones(9))])
    shared = Dim("x_dim1", min=5, max=9)
    assert spec == spec_of(start, {"x": {1: shared}, "positions": {0: shared}})
    assert start.with_dims(spec).run("capture").status == "ok"


def test_axes_that_vary_differently_keep_their_own_dims():
    start = Session(AddPositions(), (torch.ones(2, 5, 3), torch.ones(5)))
    spec = start.infer_dims([(torch.ones(4, 9, 3), torch.ones(9))])
    assert spec.policy("x", 0) == Dim("x_dim0", min=2, max=4)
    assert spec.policy("x", 1) == spec.policy("positions", 0) == Dim("x_dim1", min=5, max=9)


def test_different_user_names_on_axes_that_vary_together_are_kept():
    start = Session(Add(), (torch.ones(2, 3), torch.ones(2, 3)))
    start = start.with_dims({"x": {0: Dim("rows")}, "y": {0: Dim("cols")}})
    spec = start.infer_dims([(torch.ones(5, 3), torch.ones(5, 3))])
    assert spec.policy("x", 0) == Dim("rows", min=2, max=5)
    assert spec.policy("y", 0) == Dim("cols", min=2, max=5)


def test_a_generated_name_does_not_take_a_users_name():
    start = Session(Add(), (torch.ones(2, 3), torch.ones(2, 3)))
    start = start.with_dims({"x": {1: Dim("batch")}, "y": {1: Dim("batch")}})
    spec = start.infer_dims([(torch.ones(5, 4), torch.ones(5, 4))])
    assert spec.policy("x", 1) == spec.policy("y", 1) == Dim("batch", min=3, max=4)
    assert spec.policy("x", 0) == spec.policy("y", 0) == Dim("batch_2", min=2, max=5)
