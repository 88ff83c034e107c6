"""Record, then export (issue 27): ``exporter.recording.record(model)`` observes the calls a
model receives (here inside transformers' ``generate()``), groups them by signature, proposes
the dims from the observed sizes, and exports a group verified on the recorded calls.

Tiny configs, random weights (``kv_models``); one recording and one export per model for the
module. Two ``generate()`` runs per model (batch 2 with a 5-token prompt, batch 3 with a
3-token prompt, a left-padded mask) make batch, seq and past vary.
"""

from __future__ import annotations

import functools

import pytest
import torch
import transformers  # noqa: F401 - the test extra installs it: missing, this fails instead of skipping

import kv_models
from exporter.dims import Derived, Dim, Name
from exporter.recording import RecordingError, record

PROMPTS = [(2, 5), (3, 3)]  # (batch, prompt length)
NEW_TOKENS = 4  # one prefill call and 3 decode calls per generate()


def _generate(model, batch: int, length: int, seed: int = 0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, kv_models.VOCAB, (batch, length), generator=generator)
    mask = torch.ones_like(ids)
    mask[0, 0] = 0  # left padding: generate() passes the mask to forward
    return model.generate(ids, attention_mask=mask, max_new_tokens=NEW_TOKENS, do_sample=False, pad_token_id=0)


@functools.lru_cache(maxsize=None)
def _recorded(name: str):
    model = getattr(kv_models, name)()
    with record(model) as rec:
        for batch, length in PROMPTS:
            _generate(model, batch, length)
    return model, rec


@functools.lru_cache(maxsize=None)
def _exported(name: str):
    _, rec = _recorded(name)
    return rec.export("decode", sweep=name == "gpt2")  # the sweep once: it takes seconds per model


def _policies(group) -> dict[str, str]:
    return {f"{axis.path}.{axis.axis}": axis.policy for axis in group.axes}


# -- groups and dims -----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_generate_gives_a_prefill_and_a_decode_group(name):
    _, rec = _recorded(name)
    assert [g.name for g in rec.groups] == ["prefill", "decode"]
    assert [len(g.calls) for g in rec.groups] == [len(PROMPTS), len(PROMPTS) * (NEW_TOKENS - 1)]
    assert "cache" not in rec.group("prefill").inputs
    assert "cache" in rec.group("decode").inputs


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_prefill_has_batch_and_seq_dims_over_the_observed_range(name):
    group = _recorded(name)[1].group("prefill")
    policies = _policies(group)
    assert policies["input_ids.0"] == policies["attention_mask.0"] == "batch"
    assert policies["input_ids.1"] == policies["attention_mask.1"] == "seq"
    assert group.dims == {"batch": (2, 3), "seq": (3, 5)}


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_decode_has_batch_past_and_the_mask_derived_as_past_plus_one(name):
    group = _recorded(name)[1].group("decode")
    policies = _policies(group)
    assert policies["input_ids.0"] == policies["cache.0.key.0"] == policies["cache.1.value.0"] == "batch"
    assert policies["cache.0.key.2"] == policies["cache.1.value.2"] == "past"
    assert policies["attention_mask.1"] == "past + 1"  # total = past + seq, seq always 1 here
    mask = next(a for a in group.axes if (a.path, a.axis) == ("attention_mask", 1))
    assert mask.dim == Derived(Dim("past"), 1, 1)
    assert "always +1 from past in the recorded calls" in mask.note
    # past: prompt + the tokens generated so far (5, 6, 7 then 3, 4, 5)
    assert group.dims == {"batch": (2, 3), "past": (3, 7), "past + 1": (4, 8)}
    seq = next(a for a in group.axes if (a.path, a.axis) == ("input_ids", 1))
    assert seq.static and seq.note == "always 1 in the recorded calls"
    heads = next(a for a in group.axes if (a.path, a.axis) == ("cache.0.key", 1))
    assert heads.static and heads.note == f"always {kv_models.HEADS} in the recorded calls"
    assert isinstance(group.dynamic_shapes["input_ids"][0], Name)  # a name: bounded by the guards
    assert group.dynamic_shapes["cache.0.key"][2] == Dim("past")  # a Dim: the root of past + 1


def test_recording_reads_well():
    _, rec = _recorded("gpt2")
    text = rec.summary()
    assert text.splitlines()[1] == "  8 calls of GPT2LMHeadModel.forward recorded: prefill (2), decode (6)"
    assert "always 4 in the recorded calls" in text
    assert "past + 1" in text
    assert "<table" in (rec._repr_html_() or "")
    decode = rec.group("decode").summary().splitlines()
    assert decode[:3] == ["group decode", "  calls:   6", "  inputs:  input_ids, cache, attention_mask, position_ids"]
    assert "  attention_mask.1  past + 1  4..8      past + 1: always +1 from past in the recorded calls" in decode


# -- export from the recording -------------------------------------------------------------


@pytest.mark.parametrize("name", ["gpt2", "llama"])
def test_exported_decode_model_matches_every_recorded_decode_call(name):
    result = _exported(name)
    group = _recorded(name)[1].group("decode")
    checked = result.recorded
    assert checked.ok, checked.summary()
    assert checked.compared == checked.calls == len(group.calls) == 6
    assert {c.case for c in checked.checks} == {f"call {c.index}" for c in group.calls}
    assert len(checked.checks) == 6 * 5  # logits and 2 layers x (key, value) per call
    assert checked.verdict == "ONNX vs recorded eager outputs: 6 of 6 recorded decode calls compared (5 outputs each), all within tolerance"
    # the example avoids size 1 (torch specializes it): the first decode call, batch 2 and past 5
    assert result.group.example.index == 1
    assert result.left_out == ("return_dict",)  # through **kwargs: the model's default applies


def test_exported_decode_model_passes_the_usual_sweep_too():
    result = _exported("gpt2")
    assert result.sweep is not None and result.sweep.ok, result.sweep.summary()
    assert result.ok
    inputs = {v.name: [d.dim_param or d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in result.session.model_proto.graph.input}
    assert inputs["past_key_values.0.key"] == ["batch", kv_models.HEADS, "past", kv_models.HEAD_DIM]
    assert inputs["input_ids"] == ["batch", 1]


def test_a_recorded_model_is_unchanged_afterwards():
    model = kv_models.gpt2().train()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    hooks = [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()]
    with record(model):
        model.eval()
        _generate(model, 2, 3)
        model.train()
    after = model.state_dict()
    assert before.keys() == after.keys() and all(torch.equal(before[k], after[k]) for k in before)
    assert model.training
    assert [(len(m._forward_pre_hooks), len(m._forward_hooks)) for m in model.modules()] == hooks


# -- a plain module ------------------------------------------------------------------------


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))

    def forward(self, x):
        return self.net(x)


def test_mlp_at_three_batch_sizes_gives_a_dynamic_batch_over_the_observed_range():
    model = MLP().eval()
    with torch.no_grad(), record(model) as rec:
        for batch in (1, 5, 8):
            model(torch.randn(batch, 16))
    group = rec.group()
    assert group.name == "forward"
    assert _policies(group) == {"x.0": "batch", "x.1": "STATIC"}
    assert group.dims == {"batch": (1, 8)}
    assert group.axes[1].note == "always 16 in the recorded calls"
    assert group.example.index == 1  # batch 5, not 1 (torch would specialize it)
    result = rec.export(sweep=False)
    assert result.recorded.ok and result.recorded.compared == 3
    assert [d.dim_param or d.dim_value for d in result.session.model_proto.graph.input[0].type.tensor_type.shape.dim] == ["batch", 16]


def test_calls_whose_structures_differ_are_split_and_the_split_is_said():
    class Scaled(torch.nn.Module):
        def forward(self, x, scale):
            return x * scale

    model = Scaled()
    with record(model) as rec:
        model(torch.ones(2, 3), torch.ones(3))
        model(torch.ones(4, 3), torch.ones(3, dtype=torch.float64))
    assert [g.name for g in rec.groups] == ["group", "group_2"]
    assert rec.recording.notes == (
        "calls with the inputs x, scale were split into 2 groups: dtypes or ranks differ "
        "(scale: float32/1-d vs float64/1-d)",
    )


def test_a_tensor_written_in_place_after_recording_makes_its_call_not_comparable():
    model = MLP()
    x = torch.randn(3, 16)
    with torch.no_grad(), record(model) as rec:
        model(x)
    assert rec.recording.calls[0].intact
    x.add_(1)
    assert not rec.recording.calls[0].intact


# -- bad input ------------------------------------------------------------------------------


def test_no_call_observed_is_a_clear_error_naming_the_model_and_what_to_do():
    model = MLP()
    with pytest.raises(RecordingError) as caught:
        with record(model):
            pass
    message = str(caught.value)
    assert "no call of MLP.forward was observed" in message
    assert "call the model inside the block" in message
    assert all(not m._forward_pre_hooks and not m._forward_hooks for m in model.modules())


def test_an_exception_inside_the_block_propagates_unchanged_and_nothing_is_kept():
    class Boom(torch.nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    model = Boom()
    error = None
    with pytest.raises(ValueError) as caught:
        with record(model) as rec:
            try:
                model(torch.ones(1))
            except ValueError as exc:
                error = exc
                raise
    assert caught.value is error and str(caught.value) == "boom"
    assert not model._forward_pre_hooks and not model._forward_hooks
    with pytest.raises(RecordingError, match="the record block raised: nothing was kept"):
        _ = rec.recording


def test_a_group_that_does_not_exist_names_the_groups_there_are():
    _, rec = _recorded("gpt2")
    with pytest.raises(RecordingError, match="no group 'decoding' in the recording of GPT2LMHeadModel"):
        rec.group("decoding")


def test_an_axis_always_the_sum_of_two_dims_is_named_total_and_the_export_follows_it():
    class Append(torch.nn.Module):
        def forward(self, x, past, mask):
            return torch.cat([past, x], dim=1) * mask

    model = Append()
    with record(model) as rec:
        for seq, past in [(2, 3), (4, 3), (2, 5)]:
            model(torch.randn(2, seq), torch.randn(2, past), torch.ones(2, seq + past))
    group = rec.group()
    assert _policies(group) == {"x.0": "STATIC", "x.1": "seq", "past.0": "STATIC", "past.1": "seq_2",
                                "mask.0": "STATIC", "mask.1": "total"}
    total = group.axes[-1]
    assert isinstance(total.dim, Name)
    assert total.note.startswith("total = seq + seq_2 in every recorded call")
    result = rec.export(sweep=False)
    assert result.recorded.ok and result.recorded.compared == 3, result.recorded.summary()


def test_caches_are_kept_as_they_were_at_the_call_copying_only_caches_that_write_in_place():
    from transformers import DynamicCache, StaticCache

    from exporter.recording.calls import keep

    dynamic = kv_models.cache(2, 3)
    kept, copies = keep(dynamic)
    assert copies == 0 and kept is not dynamic and kept.layers[0].keys is dynamic.layers[0].keys  # no copy
    dynamic.update(torch.randn(2, kv_models.HEADS, 1, kv_models.HEAD_DIM), torch.randn(2, kv_models.HEADS, 1, kv_models.HEAD_DIM), 0)
    assert kept.layers[0].keys.shape[2] == 3 and dynamic.layers[0].keys.shape[2] == 4  # generate() grows the cache
    static = StaticCache(config=kv_models.llama().config, max_cache_len=8)
    static.update(torch.randn(1, kv_models.HEADS, 2, kv_models.HEAD_DIM), torch.randn(1, kv_models.HEADS, 2, kv_models.HEAD_DIM), 0)
    kept, copies = keep(static)
    assert copies == 2 * kv_models.LAYERS and kept.layers[0].keys.data_ptr() != static.layers[0].keys.data_ptr()
    assert isinstance(keep(DynamicCache())[0], DynamicCache)


def test_a_call_that_raised_inside_the_block_and_was_caught_is_not_kept_and_said():
    class Picky(torch.nn.Module):
        def forward(self, x):
            if x.shape[0] == 3:
                raise ValueError("no 3")
            return x + 1

    model = Picky()
    with record(model) as rec:
        model(torch.ones(2, 4))
        with pytest.raises(ValueError):
            model(torch.ones(3, 4))
        model(torch.ones(5, 4))
    assert [call.index for call in rec.recording.calls] == [0, 1]
    assert rec.group().dims == {"batch": (2, 5)}
    assert rec.recording.notes == ("1 call(s) raised and were not kept",)


def test_importing_the_recording_loads_no_torch():
    import subprocess
    import sys

    code = "import sys, exporter.recording; assert 'torch' not in sys.modules, 'torch imported'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_ranges_put_the_observed_sizes_next_to_the_exported_range_and_name_the_calls_outside():
    model = MLP().eval()
    with torch.no_grad(), record(model) as rec:
        for batch in (1, 5, 8):
            model(torch.randn(batch, 16))
    narrow = rec.export(sweep=False, dynamic_shapes={"x": {0: Dim("batch", min=4)}}).ranges
    assert narrow.outside_calls == (0,)  # batch 1 is below the exported min
    batch = narrow.axes[0]
    assert (batch.observed, batch.exported, batch.exported_min, batch.outside) == ((1, 8), "dynamic", 4, (0,))
    assert narrow.axes[1].exported_text == "static 16"
    assert "recorded forward calls outside what the export accepts: call 0" in narrow.summary()
    assert narrow.outside_lines == ("call 0: x.0 = 1, outside [4, inf]",)  # the size and the range accepted
    assert "call 0: x.0 = 1, outside [4, inf]" in narrow.summary()
    assert (batch.sizes, batch.outside_sizes, narrow.axes[1].accepted_text) == ((1, 5, 8), (1,), "[16, 16]")
    assert rec.export(sweep=False).ranges.outside_calls == ()
