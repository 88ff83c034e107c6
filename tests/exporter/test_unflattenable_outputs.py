"""A model that returns (or takes) an object torch cannot flatten fails the same way in every
capture strategy: the first failure says so in words, the others are skipped at once, and a
transformers cache in the outputs gets the call change that works (``use_cache=False``) first."""

from __future__ import annotations

import torch
from kv_models import t5

from exporter import ExportOptions, Session


class Holder:
    """Not a registered pytree: torch.export cannot flatten it."""

    def __init__(self, value):
        self.value = value


class ReturnsHolder(torch.nn.Module):
    def forward(self, x):
        return x + 1, Holder(x * 2)


def test_an_output_no_strategy_can_flatten_is_said_in_words_and_the_other_strategies_are_skipped():
    session = Session(ReturnsHolder(), (torch.randn(2, 3),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert session.run("capture").status == "failed"
    first, *others = session.attempts
    assert first.strategy == "nonstrict" and first.error is not None
    assert [a.strategy for a in others] == ["strict", "draft", "fx_symbolic"]
    assert all(a.skipped_reason and "cannot flatten" in a.skipped_reason for a in others)
    error = str(session.failed_stage.error)
    assert "the model returns a Holder (" in error and "which torch cannot flatten into tensors" in error
    assert "leave a comment" not in error and "tried:" not in error  # torch's request stays in library_text
    assert "register it" in session.failed_stage.error.hint


def test_t5_called_as_written_is_told_to_call_with_use_cache_false_which_exports_and_verifies():
    model = t5()
    ids = torch.randint(2, 64, (2, 8))
    call = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "decoder_input_ids": torch.randint(2, 64, (2, 5))}
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"},
            "decoder_input_ids": {0: "batch", 1: "target"}}
    natural = Session(model, (), call, ExportOptions(dynamic_shapes=dims))
    assert natural.run("capture").status == "failed"
    assert [a.strategy for a in natural.attempts if a.skipped_reason] == ["strict", "draft", "fx_symbolic"]
    error = natural.failed_stage.error
    assert "the model returns a EncoderDecoderCache" in str(error)
    assert error.hint.startswith("call the model with use_cache=False")

    fixed = Session(model, (), {**call, "use_cache": False}, ExportOptions(dynamic_shapes=dims))
    fixed.run()
    assert fixed.succeeded, fixed.failed_stage
    result = fixed.verify()
    assert result.ok, result.summary()
