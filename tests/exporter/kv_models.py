"""Tiny transformers decoders with a KV cache (random weights, built from configs), their
example inputs at a given (batch, seq, past) and the dim spec the KV-cache tests export with."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

LAYERS, HEADS, HEAD_DIM, VOCAB = 2, 4, 8, 100
HIDDEN = HEADS * HEAD_DIM

KV = {0: "batch", 2: "past_seq"}
DYNAMIC_SHAPES = {
    "input_ids": {0: "batch", 1: "seq"},
    "cache": [[KV, KV]] * LAYERS,
}
DYNAMIC_SHAPES_WITH_MASK = {**DYNAMIC_SHAPES, "attention_mask": {0: "batch", 1: "total"}}


def gpt2() -> Any:
    import transformers

    config = transformers.GPT2Config(
        n_layer=LAYERS, n_embd=HIDDEN, n_head=HEADS, vocab_size=VOCAB, n_positions=128,
        bos_token_id=0, eos_token_id=0,
    )
    return transformers.GPT2LMHeadModel(config).eval()


def llama() -> Any:
    import transformers

    config = transformers.LlamaConfig(
        num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS,
        intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=128,
        bos_token_id=0, eos_token_id=0, pad_token_id=0,
    )
    return transformers.LlamaForCausalLM(config).eval()


def _decoder_config(cls_name: str, **extra: Any) -> Any:
    import transformers

    return getattr(transformers, cls_name)(
        num_hidden_layers=LAYERS, hidden_size=HIDDEN, num_attention_heads=HEADS, num_key_value_heads=HEADS,
        head_dim=HEAD_DIM, intermediate_size=64, vocab_size=VOCAB, max_position_embeddings=128,
        bos_token_id=0, eos_token_id=0, pad_token_id=0, **extra,
    )


def mistral(**extra: Any) -> Any:
    """Mistral's default config keeps ``sliding_window`` (4096): ``generate()`` builds a cache
    of ``DynamicSlidingWindowLayer`` s."""
    import transformers

    return transformers.MistralForCausalLM(_decoder_config("MistralConfig", **extra)).eval()


def gemma2() -> Any:
    """Gemma2: sliding and full attention layers in turn (a hybrid cache)."""
    import transformers

    return transformers.Gemma2ForCausalLM(_decoder_config("Gemma2Config")).eval()


def gemma3() -> Any:
    """Gemma3 (text): one sliding and one full attention layer (a hybrid cache)."""
    import transformers

    config = _decoder_config("Gemma3TextConfig", layer_types=["sliding_attention", "full_attention"])
    return transformers.Gemma3ForCausalLM(config).eval()


def t5() -> Any:
    import transformers

    config = transformers.T5Config(
        num_layers=LAYERS, num_decoder_layers=LAYERS, d_model=HIDDEN, d_kv=HEAD_DIM, num_heads=HEADS, d_ff=64,
        vocab_size=VOCAB, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )
    return transformers.T5ForConditionalGeneration(config).eval()


def cache(batch: int, past: int, seed: int = 0) -> Any:
    """A ``DynamicCache`` holding ``past`` positions per layer (``past`` may be 0)."""
    import torch
    from transformers import DynamicCache

    generator = torch.Generator().manual_seed(seed)
    filled = DynamicCache()
    for layer in range(LAYERS):
        key, value = (torch.randn(batch, HEADS, past, HEAD_DIM, generator=generator) for _ in range(2))
        filled.update(key, value, layer)
    return filled


def decoder_inputs(batch: int, seq: int, past: int, *, mask: bool = False, seed: int = 0) -> dict[str, Any]:
    """Keyword inputs of a decoding step: ``seq`` new tokens after ``past`` cached ones."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    inputs: dict[str, Any] = {
        "input_ids": torch.randint(0, VOCAB, (batch, seq), generator=generator),
        "cache": cache(batch, past, seed),
        "use_cache": True,
    }
    if mask:
        inputs["attention_mask"] = torch.ones(batch, past + seq, dtype=torch.long)
    return inputs


def mask_follows_cache(case: Any) -> tuple[tuple, dict] | None:
    """A ``verify(make_inputs=...)`` hook: the attention mask covers the cached and the new
    tokens (``total = past_seq + seq``). verify derives that from the guards by itself; the
    hook stays to test the ``make_inputs`` path with a cache."""
    import torch

    kwargs = dict(case.kwargs)
    if "attention_mask" not in kwargs or "cache.0.key" not in case.shapes:
        return None
    batch, seq = case.shapes["input_ids"]
    past = case.shapes["cache.0.key"][2]
    kwargs["attention_mask"] = torch.ones(batch, past + seq, dtype=torch.long)
    return tuple(case.args), kwargs
