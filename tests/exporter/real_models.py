"""Tiny real architectures (transformers configs with random weights, plain torch modules), each
with example inputs, the dim names a torch.onnx user writes, and inputs at a second size.

Every builder returns a :class:`RealModel`. transformers loads lazily and never reaches the
hub (``HF_HUB_OFFLINE=1``); configs are 2 layers, hidden 32.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")

VOCAB = 96


@dataclass
class RealModel:
    name: str
    model: torch.nn.Module
    args: tuple
    kwargs: dict
    names: dict  # the string dim names a torch.onnx user writes
    second: Callable[[], tuple[tuple, dict]]  # inputs at another size
    specializes: bool = False  # the code truly pins a dim asked dynamic (the fix makes it static)
    extra: dict = field(default_factory=dict)


def _ids(batch: int, seq: int, seed: int = 0) -> torch.Tensor:
    return torch.randint(3, VOCAB, (batch, seq), generator=torch.Generator().manual_seed(seed))


def _text(name: str, model: torch.nn.Module, mask: bool = True, max_positions: int | None = None) -> RealModel:
    model.eval()

    def inputs(batch: int, seq: int, seed: int) -> tuple[tuple, dict]:
        kwargs = {"input_ids": _ids(batch, seq, seed)}
        if mask:
            kwargs["attention_mask"] = torch.ones(batch, seq, dtype=torch.long)
        return (), kwargs

    _, kwargs = inputs(2, 16, 0)
    names = {"input_ids": {0: "batch", 1: "seq"}}
    if mask:
        names["attention_mask"] = {0: "batch", 1: "seq"}
    return RealModel(name, model, (), kwargs, names, lambda: inputs(3, 11, 1))


def bert() -> RealModel:
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    return _text("bert", BertModel(config))


def distilbert() -> RealModel:
    from transformers import DistilBertConfig, DistilBertModel

    config = DistilBertConfig(vocab_size=VOCAB, dim=32, n_layers=2, n_heads=2, hidden_dim=64, max_position_embeddings=128)
    return _text("distilbert", DistilBertModel(config))


def roberta() -> RealModel:
    from transformers import RobertaConfig, RobertaModel

    config = RobertaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                           intermediate_size=64, max_position_embeddings=130, pad_token_id=1)
    return _text("roberta", RobertaModel(config))


def gpt2() -> RealModel:
    from transformers import GPT2Config, GPT2Model

    config = GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=2, n_positions=128, use_cache=False)
    return _text("gpt2", GPT2Model(config))


def qwen2() -> RealModel:
    from transformers import Qwen2Config, Qwen2Model

    config = Qwen2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         num_key_value_heads=1, intermediate_size=64, max_position_embeddings=128, use_cache=False)
    return _text("qwen2", Qwen2Model(config))


def bart() -> RealModel:
    from transformers import BartConfig, BartModel

    config = BartConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=128,
                        use_cache=False)
    return _text("bart", BartModel(config))


def clip_text() -> RealModel:
    from transformers import CLIPTextConfig, CLIPTextModel

    config = CLIPTextConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                            intermediate_size=64, max_position_embeddings=64)
    return _text("clip_text", CLIPTextModel(config))


def vit() -> RealModel:
    """ViT with dynamic H/W: its patch embedding checks the size against the config, so the
    code pins both (the fix makes them static)."""
    from transformers import ViTConfig, ViTModel

    config = ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       image_size=32, patch_size=8, num_channels=3)
    model = ViTModel(config).eval()
    pixels = torch.randn(2, 3, 32, 32)
    return RealModel(
        "vit", model, (), {"pixel_values": pixels},
        {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
        lambda: ((), {"pixel_values": torch.randn(3, 3, 32, 32)}),
        specializes=True,
    )


def whisper_encoder() -> RealModel:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    config = WhisperConfig(vocab_size=VOCAB, d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                           decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, num_mel_bins=8,
                           max_source_positions=16)
    model = WhisperEncoder(config).eval()
    # Whisper checks the mel length against max_source_positions * 2: the time axis is pinned.
    return RealModel(
        "whisper_encoder", model, (torch.randn(2, 8, 32),), {},
        {"input_features": {0: "batch", 2: "frames"}},
        lambda: ((torch.randn(3, 8, 32),), {}),
        specializes=True,
    )


class Encoder(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(32, 2, 64, batch_first=True, dropout=0.0)
        self.encoder = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


def transformer_encoder() -> RealModel:
    return RealModel(
        "nn.TransformerEncoder", Encoder().eval(), (torch.randn(2, 10, 32),), {},
        {"x": {0: "batch", 1: "seq"}}, lambda: ((torch.randn(3, 7, 32),), {}),
    )


class Audio(torch.nn.Module):
    """Two stride-2 Conv1d, then self-attention over the frames."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv1d(8, 16, 3, stride=2, padding=1)
        self.c2 = torch.nn.Conv1d(16, 16, 3, stride=2, padding=1)
        self.attn = torch.nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, x):
        h = torch.relu(self.c2(torch.relu(self.c1(x)))).transpose(1, 2)
        return self.attn(h, h, h, need_weights=False)[0]


def conv_audio() -> RealModel:
    return RealModel(
        "conv1d_audio", Audio().eval(), (torch.randn(2, 8, 40),), {},
        {"x": {0: "batch", 2: "time"}}, lambda: ((torch.randn(3, 8, 29),), {}),
    )


class Recurrent(torch.nn.Module):
    def __init__(self, kind: type) -> None:
        super().__init__()
        self.rnn = kind(16, 16, num_layers=2, batch_first=True)

    def forward(self, x):
        return self.rnn(x)[0]


def lstm() -> RealModel:
    # Captured with torch's while_loop decomposition (as torch.onnx.export does): seq stays dynamic.
    return RealModel(
        "lstm", Recurrent(torch.nn.LSTM).eval(), (torch.randn(2, 8, 16),), {},
        {"x": {0: "batch", 1: "seq"}}, lambda: ((torch.randn(3, 5, 16),), {}),
    )


def gru() -> RealModel:
    return RealModel(
        "gru", Recurrent(torch.nn.GRU).eval(), (torch.randn(2, 8, 16),), {},
        {"x": {0: "batch", 1: "seq"}}, lambda: ((torch.randn(3, 5, 16),), {}),
    )


BUILDERS: dict[str, Callable[[], RealModel]] = {
    "bert": bert,
    "distilbert": distilbert,
    "roberta": roberta,
    "gpt2": gpt2,
    "qwen2": qwen2,
    "bart": bart,
    "clip_text": clip_text,
    "vit": vit,
    "whisper_encoder": whisper_encoder,
    "nn.TransformerEncoder": transformer_encoder,
    "conv1d_audio": conv_audio,
    "lstm": lstm,
    "gru": gru,
}


def build(name: str) -> RealModel:
    from transformers.utils import logging

    logging.set_verbosity_error()
    return BUILDERS[name]()


def flat_tensors(value: Any) -> list[torch.Tensor]:
    from exporter.compat import tree_flatten_with_path

    return [leaf for _, leaf in tree_flatten_with_path(value) if isinstance(leaf, torch.Tensor)]


# -- models whose guards only bound a named dim: torch.onnx.export's string names export them,
# a strict Dim of the same name is refused (FIELD-NOTES "Real architectures"). Not in BUILDERS:
# tests/workbench/test_magic_real_models.py exports them through %onnx_export.


def _token_inputs(batch: int, seq: int, seed: int) -> dict:
    return {"input_ids": _ids(batch, seq, seed), "attention_mask": torch.ones(batch, seq, dtype=torch.long)}


def gemma2() -> RealModel:
    """The SDPA mask adds ``seq != 1``: seq's range starts at 2."""
    from transformers import Gemma2Config, Gemma2Model

    config = Gemma2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                          num_key_value_heads=1, intermediate_size=64, head_dim=16, max_position_embeddings=128,
                          use_cache=False)
    return RealModel("gemma2", Gemma2Model(config).eval(), (), _token_inputs(2, 16, 0),
                     {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                     lambda: ((), _token_inputs(3, 11, 1)))


def albert() -> RealModel:
    """Position ids sliced from a 128 table: ``seq == min(128, seq)``, seq's range ends at 128."""
    from transformers import AlbertConfig, AlbertModel

    config = AlbertConfig(vocab_size=VOCAB, embedding_size=16, hidden_size=32, num_hidden_layers=2,
                          num_attention_heads=2, intermediate_size=64, max_position_embeddings=128)
    return RealModel("albert", AlbertModel(config).eval(), (), _token_inputs(2, 16, 0),
                     {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}},
                     lambda: ((), _token_inputs(3, 11, 1)))


def wav2vec2() -> RealModel:
    """Raw audio through strided convolutions: the frame count must stay above 1, so the
    length has a minimum."""
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    config = Wav2Vec2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                            conv_dim=(16, 16), conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                            num_conv_pos_embedding_groups=2, do_stable_layer_norm=False, feat_extract_norm="group")
    return RealModel("wav2vec2", Wav2Vec2Model(config).eval(), (torch.randn(2, 400),), {},
                     {"input_values": {0: "batch", 1: "length"}}, lambda: ((torch.randn(3, 560),), {}))


def convnext() -> RealModel:
    """The stem's 4×4 patches and a depthwise conv: ``8 <= height``."""
    from transformers import ConvNextConfig, ConvNextModel

    config = ConvNextConfig(num_channels=3, hidden_sizes=[8, 16], depths=[1, 1], num_stages=2, patch_size=4)
    return RealModel("convnext", ConvNextModel(config).eval(), (torch.randn(2, 3, 32, 32),), {},
                     {"pixel_values": {0: "batch", 2: "height", 3: "width"}},
                     lambda: ((torch.randn(3, 3, 48, 40),), {}))


def detr() -> RealModel:
    """DETR with a transformers ResNet backbone built from its config (no timm, no pretrained
    download): the feature map's width guards bound ``width``."""
    from transformers import DetrConfig, DetrModel

    backbone = {"model_type": "resnet", "embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1],
                "num_channels": 3, "out_features": ["stage2"]}
    config = DetrConfig(use_timm_backbone=False, use_pretrained_backbone=False, backbone="resnet",
                        backbone_config=backbone, d_model=32, encoder_layers=1, decoder_layers=1,
                        encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64,
                        decoder_ffn_dim=64, num_queries=5)
    return RealModel("detr", DetrModel(config).eval(), (torch.randn(1, 3, 64, 64),), {},
                     {"pixel_values": {2: "height", 3: "width"}}, lambda: ((torch.randn(1, 3, 48, 80),), {}))


NARROWED_BY_GUARDS: dict[str, Callable[[], RealModel]] = {
    "gemma2": gemma2,
    "albert": albert,
    "wav2vec2": wav2vec2,
    "convnext": convnext,
    "detr": detr,
}
