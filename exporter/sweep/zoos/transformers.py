"""The transformers zoo: every base model type of ``transformers`` (``MODEL_MAPPING_NAMES``),
built from its default config shrunk to a tiny size, with random weights (no hub access).

Inputs follow the model's ``main_input_name``: ``input_ids`` + ``attention_mask`` (and
``decoder_input_ids`` for encoder-decoders) for text, ``pixel_values`` for vision (with
``interpolate_pos_encoding=True`` where forward takes it: a ViT accepts another image size only then),
``input_features`` / ``input_values`` for audio; dims are named ``batch``, ``seq``,
``height``, ``width``, ``frames``, ``length`` as a ``torch.onnx.export`` user names them. A
model whose config or forward does not fit these generic inputs fails at ``build``: it is
recorded as ``build_failed`` with the error, never dropped.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any

from ..case import SweepCase
from ..zoo import Zoo, ZooEntry

__all__ = ["ZOO", "TransformersZoo", "randomize_zero_matrices", "shrink_config", "tiny_model"]

VOCAB = 128
HIDDEN = 32
BATCH, SEQ, DECODER_SEQ = 2, 16, 8
IMAGE = 64
WINDOWED_IMAGE = 224
LARGER_IMAGES = (IMAGE, 128, 256)  # tried in turn for a vision model that needs a larger image

# Scalar config attributes set when the config has them.
_SIZES: dict[str, Any] = {
    "vocab_size": VOCAB, "hidden_size": HIDDEN, "d_model": HIDDEN, "n_embd": HIDDEN, "dim": HIDDEN, "embed_dim": HIDDEN,
    "embedding_size": HIDDEN, "d_embed": HIDDEN, "word_embed_proj_dim": HIDDEN, "projection_dim": HIDDEN,
    "num_hidden_layers": 2, "n_layer": 2, "n_layers": 2, "num_layers": 2, "encoder_layers": 2, "decoder_layers": 2,
    "num_decoder_layers": 2, "num_encoder_layers": 2,
    "num_attention_heads": 2, "n_head": 2, "n_heads": 2, "encoder_attention_heads": 2, "decoder_attention_heads": 2,
    "num_heads": 2, "num_key_value_heads": 1, "head_dim": HIDDEN // 2, "d_kv": HIDDEN // 2,
    "intermediate_size": 64, "ffn_dim": 64, "encoder_ffn_dim": 64, "decoder_ffn_dim": 64, "d_ff": 64, "n_inner": 64,
    "hidden_dim": 64, "moe_intermediate_size": 32, "shared_expert_intermediate_size": 32,
    "num_experts": 4, "num_local_experts": 4, "n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1,
    "max_position_embeddings": 128, "n_positions": 128, "max_source_positions": 64, "max_target_positions": 64,
    "image_size": IMAGE, "patch_size": 8, "num_channels": 3, "num_mel_bins": 16, "feature_size": 16,
    "kv_lora_rank": 16, "q_lora_rank": 16, "qk_rope_head_dim": 8, "qk_nope_head_dim": 8, "v_head_dim": 16,
    "sliding_window": 64, "use_cache": False, "rotary_dim": 8,
    # state-space mixers: heads * head_dim must equal expand * hidden
    "expand": 1, "mamba_expand": 1, "mamba_n_heads": 2, "mamba_d_head": HIDDEN // 2, "n_groups": 1, "mamba_n_groups": 1,
}
# Per-stage list attributes of convolutional and hierarchical models.
_STAGE_LISTS = {"depths": 1, "num_heads": 2, "num_attention_heads": 2, "hidden_sizes": None, "embed_dims": None}


def shrink_config(config: Any) -> Any:
    """``config`` made tiny in place (and its sub-configs): 2 layers, hidden 32, 2 heads,
    vocabulary 128, 32×32 images; token ids kept inside the vocabulary, per-layer lists cut
    to the new layer count."""
    for name, value in _SIZES.items():
        if name in vars(config) and not isinstance(getattr(config, name), (list, tuple, dict)) and getattr(config, name) is not None:
            setattr(config, name, value)
    if "head_dim" in vars(config):  # None: the checkpoint's config would set it (Ministral, HunYuan)
        # multi-head latent attention rotates qk_rope_head_dim channels (DeepSeek-V2/V3)
        config.head_dim = config.qk_rope_head_dim if "qk_rope_head_dim" in vars(config) else _SIZES["head_dim"]
    if "kv_lora_rank" in vars(config) and "num_key_value_heads" in vars(config):
        config.num_key_value_heads = config.num_attention_heads  # latent attention has a key per head, as checkpoints say
    if "qk_head_dim" in vars(config) and "qk_nope_head_dim" in vars(config):  # LongCat-Flash: their sum
        config.qk_head_dim = config.qk_nope_head_dim + config.qk_rope_head_dim
    if getattr(config, "num_experts_per_tok", 0) is None and getattr(config, "n_routed_experts", None):
        config.num_experts_per_tok = _SIZES["num_experts_per_tok"]  # DeepSeek-V2 leaves it to the checkpoint
    _shrink_mrope_sections(config)
    for name, per_stage in _STAGE_LISTS.items():
        value = getattr(config, name, None)
        if isinstance(value, (list, tuple)) and value and all(isinstance(v, int) for v in value):
            setattr(config, name, [per_stage if per_stage is not None else 16 * 2 ** i for i in range(len(value))])
    layers = getattr(config, "num_hidden_layers", None)
    for name in ("layer_types", "mlp_layer_types", "attention_layer_types", "block_types"):
        value = getattr(config, name, None)
        if isinstance(value, list) and isinstance(layers, int) and len(value) > layers:
            setattr(config, name, value[:layers])
    for name, value in list(vars(config).items()):
        if name.endswith("_token_id") and isinstance(value, int) and value >= VOCAB:
            setattr(config, name, VOCAB - 1)
    for value in list(vars(config).values()):
        if hasattr(value, "to_dict") and hasattr(value, "model_type") and value is not config:
            shrink_config(value)
    if isinstance(getattr(config, "window_size", None), int) and "depths" in vars(config) and "image_size" in vars(config):
        # Swin-style windows of 7 through 4 stages: at 64×64 the last stages are smaller than a
        # window, a degenerate path no checkpoint takes (torch.export fails on it in both exporters)
        config.image_size, config.patch_size = WINDOWED_IMAGE, 4
    _resnet_for_timm_backbone(config)
    return config


def _shrink_mrope_sections(config: Any) -> None:
    """Multimodal rotary sections (Qwen2.5-VL, GLM-4V) rescaled to sum to half the new rotary
    dim, as the model splits the rotary channels by them; set for a config that leaves them to
    the model's default (``rope_parameters.get("mrope_section", [16, 24, 24])``)."""
    for name in ("rope_parameters", "rope_scaling"):
        params = getattr(config, name, None)
        if not isinstance(params, dict):
            continue
        head_dim, hidden, heads = (getattr(config, n, None) for n in ("head_dim", "hidden_size", "num_attention_heads"))
        if not isinstance(head_dim, int):
            if not (isinstance(hidden, int) and isinstance(heads, int) and heads > 0):
                return  # per-stage lists (Swin): no rotary sections to size
            head_dim = hidden // heads
        partial = params.get("partial_rotary_factor") or getattr(config, "partial_rotary_factor", None) or 1.0
        half = int(head_dim * partial) // 2
        sections = params.get("mrope_section")
        if sections is None and half >= 3 and _model_reads_mrope_sections(config):
            sections = params["mrope_section"] = [2, 3, 3]  # the proportions of the models' defaults
        if isinstance(sections, list) and sections and sum(sections) != half:
            scaled = [max(1, round(s * half / sum(sections))) for s in sections]
            scaled[0] += half - sum(scaled)
            params["mrope_section"] = scaled
        return


def _model_reads_mrope_sections(config: Any) -> bool:
    """Whether the modeling module beside the config's reads ``mrope_section``."""
    import importlib
    import inspect

    name = type(config).__module__.replace(".configuration_", ".modeling_")
    try:
        return '"mrope_section"' in inspect.getsource(importlib.import_module(name))
    except (ImportError, OSError, TypeError):
        return False


def _resnet_for_timm_backbone(config: Any) -> None:
    """A timm backbone (the DETR family's default ResNet-50) swapped for a tiny ResNet of
    transformers' own with the same feature levels: the zoo builds without timm, and the same
    on every machine."""
    backbone = getattr(config, "backbone_config", None)
    if getattr(backbone, "model_type", None) != "timm_backbone":
        return
    from transformers import ResNetConfig

    levels = list(getattr(backbone, "out_indices", None) or (4,))
    sizes: dict[str, Any] = {"embedding_size": 16, "hidden_sizes": [16, 32, 64, 128], "depths": [1, 1, 1, 1],
                             "out_features": [f"stage{i}" for i in levels]}  # out_features: a backbone kwarg
    config.backbone_config = ResNetConfig(**sizes)
    for name in ("use_timm_backbone", "use_pretrained_backbone"):
        if hasattr(config, name):
            setattr(config, name, False)


def _ids(shape: tuple[int, ...]) -> Any:
    import torch

    return torch.randint(3, VOCAB - 1, shape, generator=torch.Generator().manual_seed(0))


def _inputs(model: Any, config: Any) -> tuple[dict[str, Any], dict[str, dict[int, str] | None]]:
    """The natural example inputs of ``model`` and their dim names."""
    import torch

    parameters = inspect.signature(model.forward).parameters
    main = getattr(model, "main_input_name", "input_ids")
    kwargs: dict[str, Any] = {}
    names: dict[str, dict[int, str] | None] = {}
    if main == "pixel_values":
        channels = getattr(config, "num_channels", 3)
        size = getattr(config, "image_size", IMAGE)
        size = size if isinstance(size, int) else IMAGE
        kwargs["pixel_values"] = torch.randn(BATCH, channels, size, size)
        names["pixel_values"] = {0: "batch", 2: "height", 3: "width"}
        if "interpolate_pos_encoding" in parameters:  # ViT-style: other image sizes only when asked
            kwargs["interpolate_pos_encoding"] = True
            names["interpolate_pos_encoding"] = None  # torch.export wants every input named in the spec
    elif main == "input_features":
        bins = int(getattr(config, "num_mel_bins", None) or getattr(config, "feature_size", None) or 16)
        frames = 2 * getattr(config, "max_source_positions", 32)
        kwargs["input_features"] = torch.randn(BATCH, bins, frames)
        names["input_features"] = {0: "batch"}
    elif main == "input_values":
        kwargs["input_values"] = torch.randn(BATCH, 1600)
        names["input_values"] = {0: "batch", 1: "length"}
    else:
        kwargs[main] = _ids((BATCH, SEQ))
        names[main] = {0: "batch", 1: "seq"}
        if "attention_mask" in parameters:
            kwargs["attention_mask"] = torch.ones(BATCH, SEQ, dtype=torch.long)
            names["attention_mask"] = {0: "batch", 1: "seq"}
    if main != "pixel_values" and "pixel_values" in parameters and hasattr(config, "vision_config"):
        vision = config.vision_config
        size = getattr(vision, "image_size", IMAGE)
        size = size if isinstance(size, int) else IMAGE
        kwargs["pixel_values"] = torch.randn(BATCH, getattr(vision, "num_channels", 3), size, size)
        names["pixel_values"] = {0: "batch"}
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in parameters:
        kwargs["decoder_input_ids"] = _ids((BATCH, DECODER_SEQ))
        names["decoder_input_ids"] = {0: "batch", 1: "decoder_seq"}
    return kwargs, names


def randomize_zero_matrices(model: Any, std: float = 0.02) -> Any:
    """``model`` with every all-zero weight matrix drawn from N(0, ``std``), in place.
    transformers zero-initialises some layers (AFMoE's router gate), which a checkpoint never
    leaves at zero: every routing score then ties and ``topk`` picks experts by tie-breaking,
    which PyTorch and onnxruntime do differently. The sweep measures the export, not that."""
    import torch

    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() >= 2 and parameter.is_floating_point() and not parameter.any():
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * std)
    return model


def calibrate_batch_norms(model: Any, kwargs: dict[str, Any]) -> Any:
    """``model`` with its batch norms' running statistics those of one pass over ``kwargs``, in
    place, back in eval mode. A checkpoint's batch norms carry its training data's statistics;
    a random model's are 0 and 1, and a deep stack of small random convolutions then shrinks the
    activations tenfold per layer (PP-OCRv5's HGNetV2 ends at 1e-12: every output within any
    tolerance of 0, nothing verified). A model that cannot run in training mode keeps 0 and 1."""
    import torch

    kinds = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d, torch.nn.SyncBatchNorm)
    norms = [m for m in model.modules() if isinstance(m, kinds) and m.track_running_stats]
    if not norms:
        return model
    momenta = [norm.momentum for norm in norms]
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None  # a cumulative average: the pass's own statistics
    try:
        with torch.no_grad():
            model.train()(**kwargs)
    except Exception:  # noqa: BLE001 - e.g. a layer that refuses training mode
        for norm in norms:
            norm.reset_running_stats()
    finally:
        for norm, momentum in zip(norms, momenta, strict=True):
            norm.momentum = momentum
        model.eval()
    return model


def tiny_model(model_type: str) -> SweepCase:
    """A tiny ``model_type`` base model with random weights and its natural inputs, its batch
    norms calibrated on them (:func:`calibrate_batch_norms`). A vision model whose layers need
    a larger image than the zoo's 64×64 (MobileViTV2's 8×8 unfold after a 32× reduction) is
    built again at 128 and 256."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    mapped = MODEL_MAPPING_NAMES[model_type]
    class_name: str = mapped if isinstance(mapped, str) else mapped[0]
    for image in LARGER_IMAGES:
        config = shrink_config(CONFIG_MAPPING[model_type]())
        if image != IMAGE and getattr(config, "image_size", None) != IMAGE:
            break  # not a model the zoo gave a 64×64 image to (none, or a windowed 224): nothing to retry
        if image != IMAGE:
            config.image_size = image
        model = randomize_zero_matrices(getattr(transformers, class_name)(config).eval())
        kwargs, names = _inputs(model, config)
        if image == LARGER_IMAGES[-1] or "pixel_values" not in kwargs:
            break
        try:
            with torch.no_grad():
                model(**kwargs)
            break
        except RuntimeError as exc:
            if "size" not in str(exc):  # not an image too small for a kernel or a reshape
                break
    return SweepCase(calibrate_batch_norms(model, kwargs), (), kwargs, names)


class TransformersZoo(Zoo):
    """Every base architecture transformers knows (listing imports transformers, builds nothing)."""

    name = "transformers"
    source = __name__

    def entries(self) -> tuple[ZooEntry, ...]:
        try:
            from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES
        except ImportError as exc:
            return (ZooEntry(self.name, "transformers", self.source, None, f"transformers does not import: {exc}"),)
        return tuple(ZooEntry(self.name, model_type, self.source, _factory(model_type)) for model_type in MODEL_MAPPING_NAMES)


def _factory(model_type: str) -> Callable[[], SweepCase]:
    def build() -> SweepCase:
        return tiny_model(model_type)

    build.__name__ = build.__qualname__ = f"tiny_{model_type}"
    return build


ZOO = TransformersZoo()
