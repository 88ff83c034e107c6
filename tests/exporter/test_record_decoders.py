"""The recorder on real decoders: sliding-window and hybrid caches (Mistral's default config,
Gemma2, Gemma3), one recorded ``generate()``, and ``dynamic_shapes=`` laid over the proposal.

Tiny configs, random weights (``kv_models``). The proof is onnxruntime alone: the exported
prefill and decode models, in a greedy loop, give the tokens ``generate()`` gives, at a batch
size and a prompt length the recording never saw.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import transformers  # noqa: F401 - the test extra installs it: missing, this fails instead of skipping

import kv_models
from exporter.dims import Derived, Dim, Name
from exporter.errors import SpecError
from exporter.recording import RecordingError, record

TWO_PROMPTS = ((2, 5), (3, 3))  # (batch, prompt length)
NEW_TOKENS = 3


def _prompt(batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids and a left-padded mask (the first row is one token shorter)."""
    ids = torch.randint(1, kv_models.VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))
    mask = torch.ones_like(ids)
    mask[0, 0] = 0
    return ids, mask


def _generate(model, ids, mask, new_tokens: int = NEW_TOKENS, **kwargs) -> torch.Tensor:
    return model.generate(ids, attention_mask=mask, max_new_tokens=new_tokens, do_sample=False, pad_token_id=0,
                          **kwargs)


@functools.lru_cache(maxsize=None)
def _recorded(name: str, prompts: tuple[tuple[int, int], ...]):
    model = getattr(kv_models, name)()
    with record(model) as rec:
        for seed, (batch, length) in enumerate(prompts):
            _generate(model, *_prompt(batch, length, seed))
    return model, rec


@functools.lru_cache(maxsize=None)
def _exported(name: str, prompts: tuple[tuple[int, int], ...]):
    _, rec = _recorded(name, prompts)
    return rec.export("prefill", sweep=False), rec.export("decode", sweep=False)


def _positions(mask: np.ndarray) -> np.ndarray:
    """Each token's position counting only the unmasked ones, as generate() computes them."""
    return np.where(mask == 0, 1, np.cumsum(mask, axis=-1) - 1)


def _onnx_generate(prefill, decode, ids: torch.Tensor, mask: torch.Tensor, new_tokens: int) -> np.ndarray:
    """Greedy decoding with onnxruntime alone: the prefill model, then one decode step per token
    fed the previous step's ``present.*`` as ``past_key_values.*`` (eos and padding are token 0)."""
    import onnxruntime as ort

    first, step = (ort.InferenceSession(r.session.model_proto.SerializeToString(), providers=["CPUExecutionProvider"])
                   for r in (prefill, decode))
    cache_names = [i.name for i in step.get_inputs() if i.name.startswith("past_key_values.")]
    out, mask_ = ids.numpy(), mask.numpy()
    feeds = {"input_ids": out, "attention_mask": mask_, "position_ids": _positions(mask_)}
    logits, *present = first.run(None, {i.name: feeds[i.name] for i in first.get_inputs()})
    done = np.zeros((len(out), 1), dtype=bool)
    for _ in range(new_tokens):
        token = logits[:, -1].argmax(-1)[:, None].astype(np.int64)
        token = np.where(done, 0, token)  # as generate(): a row that gave eos (0) is padded (0) from then on
        done |= token == 0
        out = np.concatenate([out, token], axis=1)
        mask_ = np.concatenate([mask_, np.ones_like(token)], axis=1)
        feeds = {"input_ids": token, "attention_mask": mask_, "position_ids": _positions(mask_)[:, -1:],
                 **dict(zip(cache_names, present, strict=True))}
        logits, *present = step.run(None, {i.name: feeds[i.name] for i in step.get_inputs()})
    return out


# -- sliding-window and hybrid caches --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(("name", "layers"), [
    ("mistral", ["DynamicSlidingWindowLayer"] * 2),
    ("gemma2", ["DynamicSlidingWindowLayer", "DynamicLayer"]),
    ("gemma3", ["DynamicSlidingWindowLayer", "DynamicLayer"]),
])
def test_sliding_window_caches_recorded_around_generate_regenerate_its_tokens_in_onnxruntime(name, layers):
    model, rec = _recorded(name, TWO_PROMPTS)
    decode_call = rec.group("decode").calls[0]
    assert [type(layer).__name__ for layer in decode_call.kwargs["cache"].layers] == layers  # as generate() built it
    prefill, decode = _exported(name, TWO_PROMPTS)
    for result, calls in ((prefill, 2), (decode, 2 * (NEW_TOKENS - 1))):
        assert result.recorded.ok and result.recorded.compared == calls, result.recorded.summary()
    # the window bounds what the cache keeps: proposed so, and the export needs no other bound
    past = next(a for a in rec.group("decode").axes if (a.path, a.axis) == ("cache.1.value", 2))
    assert past.dim == Dim("past", max=4095) and past.note == "at most 4095: a sliding window of 4096 keeps 4095 tokens"
    assert decode.bounded == ()
    assert decode.ranges.outside_calls == ()
    ids, mask = _prompt(4, 6, seed=7)  # a batch and a prompt length the recording never saw
    eager = _generate(model, ids, mask, new_tokens=5).numpy()
    np.testing.assert_array_equal(_onnx_generate(prefill, decode, ids, mask, 5), eager)


@pytest.mark.slow
def test_a_sliding_window_that_fills_up_is_refused_at_the_block_end_in_one_line_naming_what_works():
    from transformers import DynamicCache

    model = kv_models.mistral(sliding_window=4)
    with pytest.raises(RecordingError) as caught:
        with record(model) as rec:
            _generate(model, *_prompt(2, 5))
    message = str(caught.value)
    assert len(message.splitlines()) == 1
    assert "call 1's cache holds a DynamicSlidingWindowLayer whose window of 4 is full (5 tokens seen, 3 kept)" in message
    assert "cache=DynamicCache()" in message
    shown = repr(rec)
    assert len(shown.splitlines()) == 1 and "window of 4 is full" in shown and shown.startswith("<Recorder of Mistral")
    with pytest.raises(RecordingError, match="window of 4 is full"):
        _ = rec.groups
    # what the message names works: plain layers, and the model masks its window itself
    with record(model) as rec:
        for seed, (batch, length) in enumerate(TWO_PROMPTS):
            _generate(model, *_prompt(batch, length, seed), cache=DynamicCache())
    decode = rec.export("decode", sweep=False)
    assert decode.recorded.ok and decode.recorded.compared == 2 * (NEW_TOKENS - 1), decode.recorded.summary()
    assert max(rec.group("decode").dims["past"]) > 4  # past the window: the recorded calls cover it


class Window(torch.nn.Module):
    """Takes at most 15 positions: a guard bounds ``seq`` (``seq <= 15``)."""

    def forward(self, past, mask):
        if past.shape[1] >= 16:
            raise ValueError("at most 15 positions")
        return torch.cat([past, past[:, -1:]], dim=1) * mask


def test_a_proposed_dim_that_the_models_guards_bound_is_bounded_by_torchs_range_and_said():
    model = Window()
    with record(model) as rec:
        for past in (3, 5, 7):
            model(torch.randn(2, past), torch.ones(2, past + 1))
    assert rec.group().dynamic_shapes["past"][1] == Dim("seq")  # the root of the mask's seq + 1
    result = rec.export(sweep=False)
    assert result.bounded == ("seq = Dim('seq', max=15)",)
    assert result.session.spec.policy("mask", 1).root.max is not None  # seq + 1 follows its root
    assert result.recorded.ok and result.recorded.compared == 3, result.recorded.summary()
    assert "bounded by the model's guards: seq = Dim('seq', max=15)" in result.summary()


# -- one recorded generate() -----------------------------------------------------------------


def test_one_generate_proposes_batch_and_prompt_length_dynamic_flagged_inferred_not_observed():
    _, rec = _recorded("llama", ((2, 5),))
    prefill, decode = rec.group("prefill"), rec.group("decode")
    policies = {f"{a.path}.{a.axis}": (a.policy, a.inferred) for a in prefill.axes}
    assert policies == {f"{path}.{axis}": (name, True) for path in ("input_ids", "attention_mask", "position_ids")
                        for axis, name in ((0, "batch"), (1, "seq"))}
    assert prefill.axes[0].note == "inferred, not observed (always 2 here)"
    observed = {f"{a.path}.{a.axis}": (a.policy, a.inferred) for a in decode.axes if a.dim is not None}
    assert observed["cache.0.key.0"] == observed["input_ids.0"] == ("batch", True)
    assert observed["cache.0.key.2"] == ("past", False) and observed["attention_mask.1"] == ("past + 1", False)
    assert decode.dynamic_shapes["input_ids"] == {0: Name("batch")}  # seq stays 1 while decoding
    assert rec.recording.notes == (
        "batch and seq never moved in the recorded calls: proposed dynamic, inferred, not observed "
        "(record two prompts of different batch size and length to observe them)",
    )
    assert "inferred, not observed (always 5 here)" in rec.summary()


def test_two_prompts_infer_nothing():
    _, rec = _recorded("llama", TWO_PROMPTS)
    assert not any(axis.inferred for group in rec.groups for axis in group.axes)
    assert rec.recording.notes == ()


@pytest.mark.slow
def test_one_recorded_generate_gives_a_model_that_runs_at_batch_3_and_another_prompt_length_and_matches_eager():
    model, _ = _recorded("llama", ((2, 5),))
    prefill, decode = _exported("llama", ((2, 5),))
    assert prefill.recorded.ok and decode.recorded.ok
    ids, mask = _prompt(3, 11, seed=5)
    eager = _generate(model, ids, mask, new_tokens=4).numpy()
    np.testing.assert_array_equal(_onnx_generate(prefill, decode, ids, mask, 4), eager)
    # one ONNX dim per name, one range per name: input_ids.0 and attention_mask.0 read alike
    accepted = {f"{a.path}.{a.axis}": a.accepted_text for a in prefill.ranges.axes}
    assert accepted["input_ids.0"] == accepted["attention_mask.0"] == accepted["position_ids.0"]
    assert accepted["input_ids.1"] == accepted["attention_mask.1"]


# -- repr never raises -----------------------------------------------------------------------


class Scale(torch.nn.Module):
    def forward(self, x):
        return x * 2


def test_a_recorder_shows_itself_in_one_line_whatever_its_state_and_never_raises():
    model = Scale()
    rec = record(model)
    assert repr(rec) == "<Recorder of Scale: new>"
    with rec:
        assert repr(rec) == "<Recorder of Scale: recording>"
        model(torch.ones(2, 3))
    assert repr(rec).splitlines()[1] == "  1 calls of Scale.forward recorded: forward (1)"
    broken = record(model)
    with broken:
        model(torch.ones(2, 3))
    model.forward = lambda y, z: y  # the calls no longer bind to forward: grouping them raises
    shown = repr(broken)
    assert shown.startswith("<Recorder of Scale: done: SpecError: ") and len(shown.splitlines()) == 1
    assert "done: SpecError: " in broken._repr_html_()  # the same line, as its HTML
    with pytest.raises(SpecError):  # the recording itself still raises what failed
        _ = broken.groups


# -- dynamic_shapes= widens ------------------------------------------------------------------


class Rows(torch.nn.Module):
    def forward(self, x):
        return x.sum(-1) * 2


def test_dynamic_shapes_given_to_export_widen_the_proposal_instead_of_replacing_it():
    model = Rows()
    with torch.no_grad(), record(model) as rec:
        for batch in (2, 5, 8, 3):
            model(torch.randn(batch, 16))
    assert rec.group().dynamic_shapes == {"x": {0: rec.group().axes[0].dim}}  # features: always 16
    result = rec.export(sweep=False, dynamic_shapes={"x": {1: "features"}})
    assert result.recorded.ok and result.recorded.compared == 4, result.recorded.summary()
    dims = [d.dim_param or d.dim_value for d in result.session.model_proto.graph.input[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "features"]
    out = result.session.run_onnx(torch.ones(6, 7))[0]
    assert np.allclose(out, np.full(6, 14.0))


def test_a_dim_given_under_a_proposed_name_replaces_it_everywhere_derived_axes_included():
    from exporter.dims import DimSpec
    from exporter.inputs import bind_inputs
    from exporter.recording.replay import merged_spec

    model, rec = _recorded("llama", ((2, 5),))
    group = rec.group("decode")
    args, kwargs = group.example.inputs()
    kwargs.pop("return_dict")
    bound = bind_inputs(model, args, kwargs)
    spec = merged_spec(group.dynamic_shapes, {"cache.0.key": {2: Dim("past", max=64)}}, bound)
    assert isinstance(spec, DimSpec)
    past = Dim("past", max=64)
    assert spec.policy("cache.1.value", 2) == past
    assert spec.policy("attention_mask", 1) == Derived(past, 1, 1)
    assert spec.policy("input_ids", 0) == group.dynamic_shapes["input_ids"][0]  # the rest kept
    assert merged_spec(group.dynamic_shapes, None, bound) == group.dynamic_shapes
