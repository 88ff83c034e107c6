"""Decoders with a transformers KV cache (and T5) export, read well and verify.

One export per model for the whole module (tiny configs, random weights): GPT-2 with an
attention mask, Llama without one, both with a ``DynamicCache`` passed as ``cache`` (the
name transformers 5 gives ``past_key_values``), named dims ``batch``, ``seq``, ``past_seq``.
"""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
import transformers  # the test extra installs it: missing, this fails instead of skipping

import kv_models
from exporter import ExportOptions, export
from exporter import compat

CACHE_NAMES = ["past_key_values.0.key", "past_key_values.0.value", "past_key_values.1.key", "past_key_values.1.value"]
PRESENT_NAMES = ["present.0.key", "present.0.value", "present.1.key", "present.1.value"]
# (batch, seq, past): past 0 is the first step (prompt), seq 1 a decoding step.
SIZES = [(1, 1, 0), (3, 1, 5), (2, 4, 2)]
SWEEP = {"batch": [1, 3], "seq": [1, 4], "past_seq": [0, 1, 6]}


@functools.lru_cache(maxsize=None)
def _exported(name: str):
    model = getattr(kv_models, name)()
    mask = name == "gpt2"
    shapes = kv_models.DYNAMIC_SHAPES_WITH_MASK if mask else kv_models.DYNAMIC_SHAPES
    session = export(model, options=ExportOptions(dynamic_shapes=shapes), **kv_models.decoder_inputs(2, 3, 4, mask=mask))
    return model, session


@pytest.fixture(scope="module")
def gpt2():
    return _exported("gpt2")


@pytest.fixture(scope="module")
def llama():
    return _exported("llama")


def _dims(value) -> list:
    return [d.dim_param or d.dim_value for d in value.type.tensor_type.shape.dim]


def _eager_and_onnx(model, session, batch, seq, past, mask):
    inputs = kv_models.decoder_inputs(batch, seq, past, mask=mask, seed=7)
    with torch.no_grad():
        eager = model(**kv_models.decoder_inputs(batch, seq, past, mask=mask, seed=7))
    onnx = session.run_onnx(**inputs)
    expected = [eager.logits] + [t for layer in eager.cache.layers for t in (layer.keys, layer.values)]
    return expected, onnx


# -- names and dims -----------------------------------------------------------------------


def test_gpt2_cache_inputs_and_present_outputs_have_readable_names_and_dims(gpt2):
    _, session = gpt2
    graph = session.model_proto.graph
    assert [v.name for v in graph.input] == ["input_ids", *CACHE_NAMES, "attention_mask"]
    assert [v.name for v in graph.output] == ["logits", *PRESENT_NAMES]
    inputs = {v.name: _dims(v) for v in graph.input}
    assert inputs["input_ids"] == ["batch", "seq"]
    assert inputs["attention_mask"] == ["batch", "total"]
    assert all(inputs[name] == ["batch", kv_models.HEADS, "past_seq", kv_models.HEAD_DIM] for name in CACHE_NAMES)
    assert session.onnx_input_names["cache.1.value"] == "past_key_values.1.value"  # the spec keeps forward's names
    outputs = {v.name: _dims(v) for v in graph.output}
    assert outputs["logits"] == ["batch", "seq", kv_models.VOCAB]
    assert all(outputs[name][2] in ("past_seq + seq", "seq + past_seq") for name in PRESENT_NAMES)


def test_llama_cache_inputs_and_present_outputs_have_readable_names(llama):
    _, session = llama
    graph = session.model_proto.graph
    assert [v.name for v in graph.input] == ["input_ids", *CACHE_NAMES]
    assert [v.name for v in graph.output] == ["logits", *PRESENT_NAMES]
    assert _dims(graph.input[1]) == ["batch", kv_models.HEADS, "past_seq", kv_models.HEAD_DIM]


def test_cache_is_read_as_inputs_not_rebuilt_from_lifted_empty_tensors(gpt2):
    """The root cause of 'lifted_tensor_N is not in the constants dictionary': transformers'
    unflatten concatenated the cache onto new empty tensors inside the traced region."""
    _, session = gpt2
    assert dict(session.exported_program.constants) == {}
    assert not any(
        node.target is torch.ops.aten.cat.default and any("lifted" in str(a) for a in node.args[0])
        for node in session.exported_program.graph.nodes
    )


# -- numbers at other sizes ---------------------------------------------------------------


@pytest.mark.parametrize("batch,seq,past", SIZES)
def test_gpt2_onnx_matches_eager_logits_and_present_at_batch_seq_past(gpt2, batch, seq, past):
    model, session = gpt2
    expected, onnx = _eager_and_onnx(model, session, batch, seq, past, mask=True)
    assert np.asarray(onnx[0]).shape == (batch, seq, kv_models.VOCAB)
    assert np.asarray(onnx[1]).shape == (batch, kv_models.HEADS, past + seq, kv_models.HEAD_DIM)
    for want, got in zip(expected, onnx, strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("batch,seq,past", SIZES)
def test_llama_onnx_matches_eager_logits_and_present_at_batch_seq_past(llama, batch, seq, past):
    model, session = llama
    expected, onnx = _eager_and_onnx(model, session, batch, seq, past, mask=False)
    for want, got in zip(expected, onnx, strict=True):
        np.testing.assert_allclose(np.asarray(got), want.numpy(), atol=1e-4, rtol=1e-4)


def test_gpt2_verify_passes_over_batch_seq_and_past_including_an_empty_cache(gpt2):
    """No hook: the mask length ``total`` follows ``past_seq + seq`` (from the guards)."""
    _, session = gpt2
    result = session.verify(sizes=SWEEP, edge_values=False)
    assert result.ok, result.summary()
    swept = {dict(case.sizes).get("past_seq") for case in result.cases}
    assert {0, 1, 6} <= swept
    assert all(dict(c.sizes)["total"] == dict(c.sizes)["past_seq"] + dict(c.sizes)["seq"] for c in result.cases)


def test_gpt2_verify_calls_a_make_inputs_hook_with_the_cache_shapes_of_every_case(gpt2):
    _, session = gpt2
    seen = []

    def hook(case):
        seen.append(case.shapes["cache.0.key"][2])
        return kv_models.mask_follows_cache(case)

    result = session.verify(sizes={"past_seq": [0, 6]}, make_inputs=hook, edge_values=False)
    assert result.ok, result.summary()
    assert seen == [0, 6]


def test_llama_verify_passes_with_its_own_sweep_and_with_an_empty_cache(llama):
    _, session = llama
    default = session.verify()
    assert default.ok, default.summary()
    empty = session.verify(sizes=SWEEP, edge_values=False)
    assert empty.ok, empty.summary()
    assert 0 in {dict(case.sizes).get("past_seq") for case in empty.cases}


# -- T5: a view after a no-op contiguous() ------------------------------------------------


@pytest.mark.slow
def test_t5_exports_with_dynamic_batch_and_seq_and_verifies():
    model = kv_models.t5()
    ids, decoder_ids = torch.randint(2, kv_models.VOCAB, (2, 5)), torch.randint(2, kv_models.VOCAB, (2, 4))
    shapes = {
        "input_ids": {0: "batch", 1: "seq"},
        "attention_mask": {0: "batch", 1: "seq"},
        "decoder_input_ids": {0: "batch", 1: "decoder_seq"},
    }
    session = export(
        model, input_ids=ids, attention_mask=torch.ones(2, 5, dtype=torch.long), decoder_input_ids=decoder_ids,
        use_cache=False, options=ExportOptions(dynamic_shapes=shapes),
    )
    assert [v.name for v in session.model_proto.graph.input] == ["input_ids", "attention_mask", "decoder_input_ids"]
    result = session.verify(sizes={"batch": [1, 3], "seq": [2, 7], "decoder_seq": [1, 6]}, edge_values=False)
    assert result.ok, result.summary()


# -- the private APIs this uses (exporter/compat/) --------------------------------


def test_register_kv_cache_pytree_flattens_a_dynamic_cache_by_layer_after_transformers_own():
    from torch.utils import _pytree
    from transformers.cache_utils import DynamicCache, DynamicLayer
    from transformers.integrations.executorch import register_dynamic_cache_export_support

    from exporter.compat import key_path_to_str

    def paths():
        flat = compat.tree_flatten_with_path({"cache": kv_models.cache(batch=1, past=2)})
        return [key_path_to_str("", p)[1:] for p, _ in flat]

    for cls in (DynamicCache, DynamicLayer):  # back to transformers' registration alone
        if cls in _pytree.SUPPORTED_NODES:
            _pytree._deregister_pytree_node(cls)
    register_dynamic_cache_export_support()
    assert paths() == ["cache.key_cache.0", "cache.key_cache.1", "cache.value_cache.0", "cache.value_cache.1"]
    compat.kv_cache._KV_CACHE_INSTALLED.clear()
    assert compat.register_kv_cache_pytree()
    assert compat.register_kv_cache_pytree()  # idempotent
    assert paths() == [f"cache.{n}" for n in ("0.key", "0.value", "1.key", "1.value")]


def test_unflattened_dynamic_cache_holds_the_same_tensors_and_creates_none():
    from torch.utils import _pytree

    compat.register_kv_cache_pytree()
    cache = kv_models.cache(batch=1, past=2)
    leaves, spec = _pytree.tree_flatten(cache)
    rebuilt = _pytree.tree_unflatten(leaves, spec)
    assert type(rebuilt).__name__ == "DynamicCache"
    assert all(a is b for a, b in zip(_pytree.tree_leaves(rebuilt), leaves, strict=True))
    assert rebuilt.get_seq_length() == 2


def test_kv_cache_leaf_names_give_cache_tensors_their_conventional_onnx_names():
    compat.register_kv_cache_pytree()
    names = compat.kv_cache_leaf_names("cache", kv_models.cache(1, 1))
    assert names == {f"cache.{n}": f"past_key_values.{n}" for n in ("0.key", "0.value", "1.key", "1.value")}
    assert compat.kv_cache_leaf_names("x", torch.ones(1)) == {}


def test_holds_kv_cache_finds_a_cache_inside_kwargs_and_nothing_in_plain_tensors():
    assert compat.holds_kv_cache({"cache": kv_models.cache(1, 1)}, 3)
    assert not compat.holds_kv_cache({"x": torch.ones(1)}, 3)
    assert compat.is_kv_cache_type(type(kv_models.cache(1, 1)))
    assert not compat.is_kv_cache_type(dict)


def test_views_as_reshapes_replaces_every_aten_view():
    from exporter.pipeline.decompose import views_as_reshapes

    class Flatten(torch.nn.Module):
        def forward(self, x):
            return x.transpose(0, 1).contiguous().view(-1)

    program = torch.export.export(Flatten(), (torch.randn(2, 3),)).run_decompositions({})
    graph_module = program.graph_module
    views = sum(n.target is torch.ops.aten.view.default for n in graph_module.graph.nodes)
    assert views_as_reshapes(graph_module) == views > 0
    assert not any(n.target is torch.ops.aten.view.default for n in graph_module.graph.nodes)
    x = torch.randn(2, 3)
    torch.testing.assert_close(graph_module(x)[0], x.t().reshape(-1))


def test_legacy_tuple_cache_is_refused_by_transformers_5():
    """transformers 5 dropped the tuple-of-(key, value) form: pass a DynamicCache instead."""
    model = kv_models.gpt2()
    inputs = kv_models.decoder_inputs(1, 2, 3)
    inputs["cache"] = tuple((layer.keys, layer.values) for layer in inputs["cache"].layers)
    with pytest.raises(AttributeError, match="get_seq_length"):
        model(**inputs)


def test_a_cache_passed_as_past_key_values_is_told_to_use_the_cache_parameter():
    """transformers 5 takes ``past_key_values`` only through **kwargs, where torch cannot put dims."""
    from exporter import Session

    inputs = kv_models.decoder_inputs(2, 3, 4)
    inputs["past_key_values"] = inputs.pop("cache")
    shapes = {"input_ids": {0: "batch", 1: "seq"}, "past_key_values": [[kv_models.KV, kv_models.KV]] * 2}
    session = Session(kv_models.gpt2(), (), inputs, ExportOptions(dynamic_shapes=shapes, strategy="nonstrict"))
    capture = session.run("capture")
    assert capture.status == "failed"
    hint = capture.error.hint
    assert "passed as past_key_values=" in hint and "transformers 5 renamed past_key_values to cache" in hint
    assert "pass it as cache=" in hint


@pytest.mark.slow
def test_gpt2_prefill_with_use_cache_returns_present_outputs_and_verifies():
    """GPT-2 building its own cache (no cache given, use_cache=True): its outputs read present.N.key."""
    model = transformers.GPT2Model(transformers.GPT2Config(
        vocab_size=96, n_embd=32, n_layer=2, n_head=2, n_positions=128, use_cache=True, bos_token_id=0, eos_token_id=0,
    )).eval()
    session = export(model, input_ids=torch.randint(3, 96, (2, 8)),
                     options=ExportOptions(dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}}))
    assert [v.name for v in session.model_proto.graph.output] == ["last_hidden_state", *PRESENT_NAMES]
    result = session.verify(sizes={"batch": [1, 3], "seq": [2, 9]}, edge_values=False)
    assert result.ok, result.summary()


def _sliding_cache(tokens: int, window: int = 4):
    """A hybrid cache as generate() builds it for Gemma2: a sliding layer, then a full one."""
    from transformers.cache_utils import DynamicCache, DynamicLayer, DynamicSlidingWindowLayer

    cache = DynamicCache()
    cache.layers = [DynamicSlidingWindowLayer(sliding_window=window), DynamicLayer()]
    for layer in cache.layers:
        layer.update(torch.randn(1, 2, tokens, 4), torch.randn(1, 2, tokens, 4))
    return cache


def test_a_sliding_window_cache_flattens_by_layer_and_unflattens_to_its_layer_types_and_window():
    from torch.utils import _pytree

    from exporter.compat import key_path_to_str

    compat.register_kv_cache_pytree()
    cache = _sliding_cache(tokens=3)
    leaves, spec = _pytree.tree_flatten(cache)
    assert [key_path_to_str("cache", p) for p, _ in compat.tree_flatten_with_path(cache)] == [
        f"cache.{n}" for n in ("0.key", "0.value", "1.key", "1.value")
    ]
    rebuilt = _pytree.tree_unflatten(leaves, spec)
    assert [type(layer).__name__ for layer in rebuilt.layers] == ["DynamicSlidingWindowLayer", "DynamicLayer"]
    assert all(a is b for a, b in zip(_pytree.tree_leaves(rebuilt), leaves, strict=True))  # no tensor created
    sliding = rebuilt.layers[0]
    assert (sliding.sliding_window, sliding.cumulative_length, sliding.get_seq_length()) == (4, 3, 3)
    assert rebuilt.get_mask_sizes(1, 0) == cache.get_mask_sizes(1, 0) == (4, 0)
    assert compat.kv_cache_leaf_names("cache", cache) == {
        f"cache.{n}": f"past_key_values.{n}" for n in ("0.key", "0.value", "1.key", "1.value")
    }
    assert compat.kv_cache.kv_cache_refusal(cache) is None


def test_a_full_sliding_window_and_other_layer_types_are_refused_before_export_with_what_to_do():
    from transformers.cache_utils import DynamicCache, DynamicLayer

    from exporter.errors import SpecError
    from exporter.inputs import bind_inputs

    class Step(torch.nn.Module):
        def forward(self, x, cache):
            return x

    compat.register_kv_cache_pytree()
    full = _sliding_cache(tokens=5)  # 5 tokens seen, the window keeps 3: the position is not in the tensors
    reason = compat.kv_cache.kv_cache_refusal({"cache": full})
    assert reason == ("a DynamicSlidingWindowLayer whose window of 4 is full (5 tokens seen, 3 kept): "
                      "its position is not in its tensors")
    with pytest.raises(SpecError, match="window of 4 is full") as info:
        bind_inputs(Step(), (torch.ones(1),), {"cache": full})
    assert "use_cache=False" in info.value.hint

    class OddLayer(DynamicLayer):  # any other layer type may keep state besides its tensors
        pass

    odd = DynamicCache()
    odd.layers = [OddLayer()]
    odd.layers[0].update(torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4))
    assert compat.kv_cache.kv_cache_refusal(odd) == "a OddLayer (state besides its tensors)"
    with pytest.raises(SpecError, match="holds a OddLayer"):
        bind_inputs(Step(), (torch.ones(1),), {"cache": odd})


def test_benchmark_gives_eager_the_example_cache_on_every_call_and_leaves_it_as_it_was(gpt2):
    _, session = gpt2
    cache = session.kwargs["cache"]
    before = [tuple(layer.keys.shape) for layer in cache.layers]
    result = session.benchmark(budget=0.2, min_runs=20, warmup=2)
    assert result.ort.ok and result.eager.ok, result.summary()  # grown caches once ran past n_positions
    assert [tuple(layer.keys.shape) for layer in cache.layers] == before
