"""A guard on a value read from a tensor, together with a dynamic dim: the failure names the dim
in the user's words (never torch's ``u0``/``s77``), and TorchDynamo's version of the same error
(a ``UserError`` of the type a rejected spec has) is not called a rejected spec."""

from __future__ import annotations

import re

import torch

from exporter import ExportOptions, Session


class CountsPositive(torch.nn.Module):
    def forward(self, x):
        if x.shape[1] > 1:  # a guard on seq: it records the symbol's input source
            x = x * 2
        count = (x[0] > 0).sum().item()  # a value read from a tensor
        if 4 * count < x.shape[1]:
            return x + 1
        return x - 1


def session(strategy: str) -> Session:
    return Session(CountsPositive(), (torch.randn(2, 8),), {},
                   ExportOptions(dynamic_shapes={"x": {0: "batch", 1: "seq"}}, strategy=strategy))


def test_a_data_dependent_guard_is_said_with_the_users_dim_names_and_line_not_torchs_symbols():
    failed = session("nonstrict")
    assert failed.run("capture").status == "failed"
    error = failed.failed_stage.error
    text = str(error)
    assert "a size or branch depends on a value read from a tensor together with seq (x.shape[1])" in text
    assert not re.search(r"\b[us]\d+\b", text), text  # no torch symbols anywhere in what is shown
    assert "if 4 * count < x.shape[1]:" in error.source
    assert "unhinted" in error.library_text  # torch's own words kept whole


def test_longformer_names_seq_and_says_why_draft_was_not_tried_while_suggesting_it():
    import transformers

    torch.manual_seed(0)
    config = transformers.LongformerConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                           intermediate_size=64, attention_window=4, max_position_embeddings=128)
    ids = torch.randint(0, 128, (2, 16))
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    longformer = Session(transformers.LongformerModel(config).eval(), (), {"input_ids": ids, "attention_mask": torch.ones_like(ids)},
                         ExportOptions(dynamic_shapes=dims))
    assert longformer.run("capture").status == "failed"
    error = longformer.failed_stage.error
    text = str(error)
    assert "together with seq (input_ids.shape[1], attention_mask.shape[1])" in text
    assert not re.search(r"\b[us]\d+\b", text), text
    lines = {a.strategy: a.first_error_line for a in longformer.attempts}
    assert lines["strict"] == ("UserError: could not decide a data-dependent condition "  # not "rejected"
                               "(on a value read from a tensor)")
    assert lines["draft"].startswith("skipped: a condition on a value read from a tensor stops every strategy; "
                                     "strategy='draft' would fix it")
    assert "strategy='draft'" in error.hint  # suggested, and the line above says why it was not tried
