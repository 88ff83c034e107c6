"""The diffusers zoo: one model per family of ``diffusers`` (UNets, VAEs, ControlNets,
diffusion transformers), each built from a tiny config with random weights (no hub access),
called as a ``torch.onnx.export`` user calls it, with the dims such a user names: ``batch``,
latent ``height``/``width``, ``frames``, ``text_seq`` (the prompt's tokens), ``image_seq``
(Flux's packed latent tokens), ``length`` (audio samples).

A VAE is exported as a user does: its ``forward`` (encode, then decode), or one half through a
wrapper module (``vae.encode(x).latent_dist.parameters``, ``vae.decode(z)``).

Listing the zoo only checks that diffusers imports; where it does not, every entry is
``skipped`` with the reason. A class this diffusers lacks is ``skipped`` with its name.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..case import SweepCase
from ..zoo import Zoo, ZooEntry
from ._optional import import_problem

__all__ = ["MODELS", "ZOO", "DiffusersZoo", "diffusers_model"]

BATCH = 2
TEXT_SEQ = 8

Builder = Callable[[Any, Any], SweepCase]  # (diffusers, torch) -> case


@dataclass(frozen=True)
class _Model:
    name: str
    cls: str  # the diffusers class it needs
    build: Builder


def _randn(torch: Any, *shape: int) -> Any:
    return torch.randn(*shape, generator=_GENERATOR[0])


_GENERATOR: list[Any] = []


def _steps(torch: Any, batch: int = BATCH) -> Any:
    """A timestep per sample, as a scheduler's ``t.expand(batch)`` gives them."""
    return torch.linspace(999.0, 10.0, batch)


_B = {0: "batch"}
_IMAGE = {0: "batch", 2: "height", 3: "width"}
_TEXT = {0: "batch", 1: "text_seq"}


def _case(model: Any, kwargs: dict[str, Any], dims: dict[str, Any]) -> SweepCase:
    from .transformers import randomize_zero_matrices

    return SweepCase(randomize_zero_matrices(model.eval()), (), kwargs, {k: dims.get(k) for k in kwargs})


# --- UNets ---------------------------------------------------------------------------------

def _unet2d(d: Any, torch: Any) -> SweepCase:
    model = d.UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1,
                          block_out_channels=(16, 32), norm_num_groups=8,
                          down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return _case(model, {"sample": _randn(torch, BATCH, 3, 16, 16), "timestep": _steps(torch)},
                 {"sample": _IMAGE, "timestep": _B})


def _sd_unet_config(**extra: Any) -> dict[str, Any]:
    return dict(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
                norm_num_groups=8, down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32, attention_head_dim=4, **extra)


def _unet2d_condition(d: Any, torch: Any) -> SweepCase:
    model = d.UNet2DConditionModel(**_sd_unet_config())
    return _case(model, {"sample": _randn(torch, BATCH, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32)},
                 {"sample": _IMAGE, "timestep": _B, "encoder_hidden_states": _TEXT})


def _unet2d_condition_sdxl(d: Any, torch: Any) -> SweepCase:
    config = _sd_unet_config(addition_embed_type="text_time", addition_time_embed_dim=8,
                             projection_class_embeddings_input_dim=16 + 6 * 8, transformer_layers_per_block=(1, 2),
                             use_linear_projection=True)
    config["attention_head_dim"] = (2, 4)
    config["down_block_types"] = ("DownBlock2D", "CrossAttnDownBlock2D")
    config["up_block_types"] = ("CrossAttnUpBlock2D", "UpBlock2D")
    model = d.UNet2DConditionModel(**config)
    added = {"text_embeds": _randn(torch, BATCH, 16), "time_ids": torch.tensor([[32.0, 32, 0, 0, 32, 32]] * BATCH)}
    return _case(model, {"sample": _randn(torch, BATCH, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32), "added_cond_kwargs": added},
                 {"sample": _IMAGE, "timestep": _B, "encoder_hidden_states": _TEXT,
                  "added_cond_kwargs": {"text_embeds": _B, "time_ids": _B}})


def _unet1d(d: Any, torch: Any) -> SweepCase:
    # the configuration of diffusers' own tests: a value-function UNet over trajectories
    model = d.UNet1DModel(block_out_channels=(8, 8, 16, 16), in_channels=14, out_channels=14,
                          time_embedding_type="positional", use_timestep_embedding=True, flip_sin_to_cos=False,
                          freq_shift=1.0, out_block_type="OutConv1DBlock", mid_block_type="MidResTemporalBlock1D",
                          down_block_types=("DownResnetBlock1D",) * 4, up_block_types=("UpResnetBlock1D",) * 3,
                          act_fn="swish")
    return _case(model, {"sample": _randn(torch, BATCH, 14, 16), "timestep": _steps(torch)},
                 {"sample": {0: "batch", 2: "length"}, "timestep": _B})


def _unet3d_condition(d: Any, torch: Any) -> SweepCase:
    model = d.UNet3DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                                   block_out_channels=(8, 16), norm_num_groups=4, cross_attention_dim=8,
                                   attention_head_dim=2, down_block_types=("CrossAttnDownBlock3D", "DownBlock3D"),
                                   up_block_types=("UpBlock3D", "CrossAttnUpBlock3D"))
    return _case(model, {"sample": _randn(torch, BATCH, 4, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8)},
                 {"sample": {0: "batch", 2: "frames", 3: "height", 4: "width"}, "timestep": _B,
                  "encoder_hidden_states": _TEXT})


def _unet_spatio_temporal(d: Any, torch: Any) -> SweepCase:
    model = d.UNetSpatioTemporalConditionModel(
        sample_size=16, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(32, 64),
        down_block_types=("CrossAttnDownBlockSpatioTemporal", "DownBlockSpatioTemporal"),
        up_block_types=("UpBlockSpatioTemporal", "CrossAttnUpBlockSpatioTemporal"), cross_attention_dim=16,
        num_attention_heads=(2, 4), addition_time_embed_dim=8, projection_class_embeddings_input_dim=3 * 8)
    return _case(model, {"sample": _randn(torch, BATCH, 4, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, 1, 16),
                         "added_time_ids": torch.tensor([[6.0, 127.0, 0.02]] * BATCH)},
                 {"sample": {0: "batch", 1: "frames", 3: "height", 4: "width"}, "timestep": _B,
                  "encoder_hidden_states": _B, "added_time_ids": _B})


def _kandinsky3_unet(d: Any, torch: Any) -> SweepCase:
    model = d.Kandinsky3UNet(in_channels=4, time_embedding_dim=4, groups=2, attention_head_dim=4, layers_per_block=3,
                             block_out_channels=(32, 64), cross_attention_dim=4, encoder_hid_dim=32)
    return _case(model, {"sample": _randn(torch, BATCH, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32),
                         "encoder_attention_mask": torch.ones(BATCH, TEXT_SEQ)},
                 {"sample": _IMAGE, "timestep": _B, "encoder_hidden_states": _TEXT, "encoder_attention_mask": _TEXT})


# --- autoencoders ----------------------------------------------------------------------------

def _wrapper(torch: Any, vae: Any, half: str) -> Any:
    """One half of a VAE as a user exports it (Optimum's ``VaeEncoder``/``VaeDecoder``): the
    encoder's ``latent_dist.parameters`` (mean and log-variance), the decoder's output."""
    class VaeEncoder(torch.nn.Module):
        def __init__(self, vae: Any) -> None:
            super().__init__()
            self.vae = vae

        def forward(self, sample: Any) -> Any:
            return self.vae.encode(sample).latent_dist.parameters

    class VaeDecoder(torch.nn.Module):
        def __init__(self, vae: Any) -> None:
            super().__init__()
            self.vae = vae

        def forward(self, latent_sample: Any) -> Any:
            return self.vae.decode(latent_sample)

    return (VaeEncoder if half == "encode" else VaeDecoder)(vae)


def _kl(d: Any) -> Any:
    return d.AutoencoderKL(in_channels=3, out_channels=3, block_out_channels=(16, 32), layers_per_block=1,
                           down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                           latent_channels=4, norm_num_groups=8, sample_size=32)


def _autoencoder_kl(d: Any, torch: Any) -> SweepCase:
    return _case(_kl(d), {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _autoencoder_kl_encode(d: Any, torch: Any) -> SweepCase:
    return _case(_wrapper(torch, _kl(d), "encode"), {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _autoencoder_kl_decode(d: Any, torch: Any) -> SweepCase:
    return _case(_wrapper(torch, _kl(d), "decode"), {"latent_sample": _randn(torch, BATCH, 4, 16, 16)},
                 {"latent_sample": _IMAGE})


def _autoencoder_tiny(d: Any, torch: Any) -> SweepCase:
    model = d.AutoencoderTiny(in_channels=3, out_channels=3, encoder_block_out_channels=(16, 16),
                              decoder_block_out_channels=(16, 16), num_encoder_blocks=(1, 1), num_decoder_blocks=(1, 1),
                              latent_channels=4)
    return _case(model, {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _vq_model(d: Any, torch: Any) -> SweepCase:
    model = d.VQModel(in_channels=3, out_channels=3, block_out_channels=(16, 32), layers_per_block=1,
                      down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                      latent_channels=3, norm_num_groups=8, num_vq_embeddings=64, sample_size=32)
    return _case(model, {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _asymmetric_autoencoder_kl(d: Any, torch: Any) -> SweepCase:
    model = d.AsymmetricAutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                                      down_block_out_channels=(16, 32), layers_per_down_block=1,
                                      up_block_types=("UpDecoderBlock2D",) * 2, up_block_out_channels=(16, 32),
                                      layers_per_up_block=1, latent_channels=4, norm_num_groups=8, sample_size=32)
    return _case(model, {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _autoencoder_dc(d: Any, torch: Any) -> SweepCase:
    # the configuration of diffusers' own tests
    model = d.AutoencoderDC(in_channels=3, latent_channels=4, attention_head_dim=2,
                            encoder_block_types=("ResBlock", "EfficientViTBlock"),
                            decoder_block_types=("ResBlock", "EfficientViTBlock"),
                            encoder_block_out_channels=(8, 8), decoder_block_out_channels=(8, 8),
                            encoder_qkv_multiscales=((), (5,)), decoder_qkv_multiscales=((), (5,)),
                            encoder_layers_per_block=(1, 1), decoder_layers_per_block=(1, 1),
                            downsample_block_type="conv", upsample_block_type="interpolate",
                            decoder_norm_types="rms_norm", decoder_act_fns="silu", scaling_factor=0.41407)
    return _case(model, {"sample": _randn(torch, BATCH, 3, 32, 32)}, {"sample": _IMAGE})


def _autoencoder_oobleck(d: Any, torch: Any) -> SweepCase:
    model = d.AutoencoderOobleck(encoder_hidden_size=12, decoder_channels=12, decoder_input_channels=6,
                                 audio_channels=2, downsampling_ratios=[2, 4], channel_multiples=[1, 2])
    return _case(model, {"sample": _randn(torch, BATCH, 2, 256)}, {"sample": {0: "batch", 2: "length"}})


# --- ControlNets -----------------------------------------------------------------------------

def _controlnet(d: Any, torch: Any) -> SweepCase:
    # one downsampling step in the conditioning embedding: the control image is twice the latent's size
    model = d.ControlNetModel(in_channels=4, block_out_channels=(16, 32), layers_per_block=1, norm_num_groups=8,
                              down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=32,
                              attention_head_dim=4, conditioning_embedding_out_channels=(8, 16))
    return _case(model, {"sample": _randn(torch, BATCH, 4, 16, 16), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32),
                         "controlnet_cond": _randn(torch, BATCH, 3, 32, 32)},
                 {"sample": _IMAGE, "timestep": _B, "encoder_hidden_states": _TEXT,
                  "controlnet_cond": {0: "batch", 2: "image_height", 3: "image_width"}})


def _sd3_config(**extra: Any) -> dict[str, Any]:
    return dict(sample_size=16, patch_size=2, in_channels=4, num_layers=1, attention_head_dim=8, num_attention_heads=2,
                joint_attention_dim=32, caption_projection_dim=16, pooled_projection_dim=16, out_channels=4,
                pos_embed_max_size=32, **extra)


def _sd3_inputs(torch: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {"hidden_states": _randn(torch, BATCH, 4, 16, 16), "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32),
              "pooled_projections": _randn(torch, BATCH, 16), "timestep": _steps(torch)}
    dims = {"hidden_states": _IMAGE, "encoder_hidden_states": _TEXT, "pooled_projections": _B, "timestep": _B,
            "controlnet_cond": _IMAGE}
    return kwargs, dims


def _sd3_controlnet(d: Any, torch: Any) -> SweepCase:
    config = _sd3_config()
    config.pop("out_channels")
    model = d.SD3ControlNetModel(**config)
    kwargs, dims = _sd3_inputs(torch)
    kwargs["controlnet_cond"] = _randn(torch, BATCH, 4, 16, 16)
    return _case(model, kwargs, dims)


# --- diffusion transformers ------------------------------------------------------------------

def _dit(d: Any, torch: Any) -> SweepCase:
    model = d.DiTTransformer2DModel(in_channels=4, out_channels=8, num_attention_heads=2, attention_head_dim=8,
                                    num_layers=1, sample_size=8, patch_size=2, num_embeds_ada_norm=1000)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 8, 8), "timestep": torch.tensor([999, 10]),
                         "class_labels": torch.tensor([207, 360])},
                 {"hidden_states": _IMAGE, "timestep": _B, "class_labels": _B})


def _pixart(d: Any, torch: Any) -> SweepCase:
    model = d.PixArtTransformer2DModel(sample_size=8, num_layers=1, patch_size=2, attention_head_dim=4,
                                       num_attention_heads=2, in_channels=4, cross_attention_dim=8, out_channels=8,
                                       attention_bias=True, activation_fn="gelu-approximate", num_embeds_ada_norm=1000,
                                       norm_type="ada_norm_single", norm_elementwise_affine=False, norm_eps=1e-6,
                                       caption_channels=16)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 8, 8),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 16), "timestep": _steps(torch),
                         "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}},
                 {"hidden_states": _IMAGE, "encoder_hidden_states": _TEXT, "timestep": _B,
                  "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}})


def _sd3(d: Any, torch: Any) -> SweepCase:
    kwargs, dims = _sd3_inputs(torch)
    return _case(d.SD3Transformer2DModel(**_sd3_config()), kwargs, dims)


def _sd35(d: Any, torch: Any) -> SweepCase:
    """SD 3.5 Medium's shape: RMS-normed queries and keys, a second attention in the first block."""
    kwargs, dims = _sd3_inputs(torch)
    config = _sd3_config(qk_norm="rms_norm", dual_attention_layers=(0,))
    config["num_layers"] = 2
    return _case(d.SD3Transformer2DModel(**config), kwargs, dims)


def _flux(d: Any, torch: Any) -> SweepCase:
    model = d.FluxTransformer2DModel(patch_size=1, in_channels=16, num_layers=1, num_single_layers=1,
                                     attention_head_dim=16, num_attention_heads=2, joint_attention_dim=32,
                                     pooled_projection_dim=32, axes_dims_rope=(4, 4, 8))
    image_seq = 16  # a 4×4 grid of packed 2×2 latent patches
    ids = torch.stack(torch.meshgrid(torch.zeros(1), torch.arange(4.0), torch.arange(4.0), indexing="ij"), -1)
    return _case(model, {"hidden_states": _randn(torch, BATCH, image_seq, 16),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32),
                         "pooled_projections": _randn(torch, BATCH, 32), "timestep": _steps(torch) / 1000,
                         "img_ids": ids.reshape(-1, 3), "txt_ids": torch.zeros(TEXT_SEQ, 3)},
                 {"hidden_states": {0: "batch", 1: "image_seq"}, "encoder_hidden_states": _TEXT,
                  "pooled_projections": _B, "timestep": _B, "img_ids": {0: "image_seq"}, "txt_ids": {0: "text_seq"}})


def _auraflow(d: Any, torch: Any) -> SweepCase:
    model = d.AuraFlowTransformer2DModel(sample_size=16, patch_size=2, in_channels=4, num_mmdit_layers=1,
                                         num_single_dit_layers=1, attention_head_dim=8, num_attention_heads=2,
                                         caption_projection_dim=16, joint_attention_dim=32, out_channels=4,
                                         pos_embed_max_size=64)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 16, 16),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32), "timestep": _steps(torch)},
                 {"hidden_states": _IMAGE, "encoder_hidden_states": _TEXT, "timestep": _B})


def _sana(d: Any, torch: Any) -> SweepCase:
    model = d.SanaTransformer2DModel(patch_size=1, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=4,
                                     num_attention_heads=2, num_cross_attention_heads=2, cross_attention_head_dim=4,
                                     cross_attention_dim=8, caption_channels=8, sample_size=16)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 16, 16),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8), "timestep": _steps(torch)},
                 {"hidden_states": _IMAGE, "encoder_hidden_states": _TEXT, "timestep": _B})


def _cogview4(d: Any, torch: Any) -> SweepCase:
    model = d.CogView4Transformer2DModel(patch_size=2, in_channels=4, num_layers=1, attention_head_dim=4,
                                         num_attention_heads=4, out_channels=4, text_embed_dim=8, time_embed_dim=8,
                                         condition_dim=4)
    sizes = torch.tensor([[128.0, 128.0]] * BATCH)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 16, 16),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8), "timestep": _steps(torch),
                         "original_size": sizes, "target_size": sizes.clone(), "crop_coords": torch.zeros(BATCH, 2)},
                 {"hidden_states": _IMAGE, "encoder_hidden_states": _TEXT, "timestep": _B, "original_size": _B,
                  "target_size": _B, "crop_coords": _B})


def _uvit2d(d: Any, torch: Any) -> SweepCase:
    # aMUSEd's transformer: image token ids in, codebook logits out
    model = d.UVit2DModel(hidden_size=32, use_bias=False, hidden_dropout=0.0, cond_embed_dim=32, micro_cond_encode_dim=2,
                          micro_cond_embed_dim=10, encoder_hidden_size=32, vocab_size=32, codebook_size=32,
                          in_channels=32, block_out_channels=32, num_res_blocks=1, downsample=True, upsample=True,
                          block_num_heads=1, num_hidden_layers=1, num_attention_heads=1, attention_dropout=0.0,
                          intermediate_size=32, layer_norm_eps=1e-6, ln_elementwise_affine=True)
    ids = torch.randint(0, 32, (BATCH, 8, 8), generator=_GENERATOR[0])
    return _case(model, {"input_ids": ids, "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 32),
                         "pooled_text_emb": _randn(torch, BATCH, 32),
                         "micro_conds": torch.tensor([[256.0, 256, 0, 0, 6]] * BATCH)},
                 {"input_ids": {0: "batch", 1: "height", 2: "width"}, "encoder_hidden_states": _TEXT,
                  "pooled_text_emb": _B, "micro_conds": _B})


_VIDEO = {0: "batch", 2: "frames", 3: "height", 4: "width"}  # (batch, channels, frames, height, width)


def _latte(d: Any, torch: Any) -> SweepCase:
    model = d.LatteTransformer3DModel(sample_size=8, num_layers=1, patch_size=2, attention_head_dim=4,
                                      num_attention_heads=2, caption_channels=8, in_channels=4, cross_attention_dim=8,
                                      out_channels=8, attention_bias=True, activation_fn="gelu-approximate",
                                      num_embeds_ada_norm=1000, norm_type="ada_norm_single",
                                      norm_elementwise_affine=False, norm_eps=1e-6, video_length=2)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 2, 8, 8),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8), "timestep": _steps(torch)},
                 {"hidden_states": _VIDEO, "encoder_hidden_states": _TEXT, "timestep": _B})


def _cogvideox(d: Any, torch: Any) -> SweepCase:
    model = d.CogVideoXTransformer3DModel(num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4,
                                          time_embed_dim=2, text_embed_dim=8, num_layers=1, sample_width=8,
                                          sample_height=8, sample_frames=9, patch_size=2, temporal_compression_ratio=4,
                                          max_text_seq_length=TEXT_SEQ)
    # (batch, frames, channels, height, width); the text is padded to max_text_seq_length
    return _case(model, {"hidden_states": _randn(torch, BATCH, 3, 4, 8, 8),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8), "timestep": _steps(torch)},
                 {"hidden_states": {0: "batch", 1: "frames", 3: "height", 4: "width"}, "encoder_hidden_states": _B,
                  "timestep": _B})


def _wan(d: Any, torch: Any) -> SweepCase:
    model = d.WanTransformer3DModel(patch_size=(1, 2, 2), num_attention_heads=2, attention_head_dim=12, in_channels=4,
                                    out_channels=4, text_dim=16, freq_dim=32, ffn_dim=32, num_layers=1,
                                    cross_attn_norm=True, qk_norm="rms_norm_across_heads", rope_max_seq_len=32)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 2, 8, 8), "timestep": _steps(torch),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 16)},
                 {"hidden_states": _VIDEO, "timestep": _B, "encoder_hidden_states": _TEXT})


def _mochi(d: Any, torch: Any) -> SweepCase:
    model = d.MochiTransformer3DModel(patch_size=2, num_attention_heads=2, attention_head_dim=8, num_layers=1,
                                      pooled_projection_dim=16, in_channels=4, out_channels=None, qk_norm="rms_norm",
                                      text_embed_dim=16, time_embed_dim=4, activation_fn="swiglu",
                                      max_sequence_length=TEXT_SEQ)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 2, 8, 8),
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 16), "timestep": _steps(torch),
                         "encoder_attention_mask": torch.ones(BATCH, TEXT_SEQ, dtype=torch.bool)},
                 {"hidden_states": _VIDEO, "encoder_hidden_states": _TEXT, "timestep": _B,
                  "encoder_attention_mask": _TEXT})


def _lumina2(d: Any, torch: Any) -> SweepCase:
    model = d.Lumina2Transformer2DModel(sample_size=16, patch_size=2, in_channels=4, hidden_size=24, num_layers=1,
                                        num_refiner_layers=1, num_attention_heads=3, num_kv_heads=1, multiple_of=2,
                                        ffn_dim_multiplier=None, norm_eps=1e-5, scaling_factor=1.0,
                                        axes_dim_rope=(4, 2, 2), axes_lens=(128, 128, 128), cap_feat_dim=8)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 4, 16, 16), "timestep": _steps(torch) / 1000,
                         "encoder_hidden_states": _randn(torch, BATCH, TEXT_SEQ, 8),
                         "encoder_attention_mask": torch.ones(BATCH, TEXT_SEQ, dtype=torch.bool)},
                 {"hidden_states": _IMAGE, "timestep": _B, "encoder_hidden_states": _TEXT,
                  "encoder_attention_mask": _TEXT})


def _prior_transformer(d: Any, torch: Any) -> SweepCase:
    # Kandinsky/unCLIP's prior: an image embedding denoised from a text embedding and its tokens
    model = d.PriorTransformer(num_attention_heads=2, attention_head_dim=4, num_layers=1, embedding_dim=8,
                               num_embeddings=7, additional_embeddings=4)
    return _case(model, {"hidden_states": _randn(torch, BATCH, 8), "timestep": _steps(torch),
                         "proj_embedding": _randn(torch, BATCH, 8), "encoder_hidden_states": _randn(torch, BATCH, 7, 8),
                         "attention_mask": torch.ones(BATCH, 7, dtype=torch.bool)},
                 {"hidden_states": _B, "timestep": _B, "proj_embedding": _B, "encoder_hidden_states": _B,
                  "attention_mask": _B})


MODELS: tuple[_Model, ...] = (
    _Model("unet_2d", "UNet2DModel", _unet2d),
    _Model("unet_2d_condition", "UNet2DConditionModel", _unet2d_condition),
    _Model("unet_2d_condition_sdxl", "UNet2DConditionModel", _unet2d_condition_sdxl),
    _Model("unet_1d", "UNet1DModel", _unet1d),
    _Model("unet_3d_condition", "UNet3DConditionModel", _unet3d_condition),
    _Model("unet_spatio_temporal_condition", "UNetSpatioTemporalConditionModel", _unet_spatio_temporal),
    _Model("kandinsky3_unet", "Kandinsky3UNet", _kandinsky3_unet),
    _Model("autoencoder_kl", "AutoencoderKL", _autoencoder_kl),
    _Model("autoencoder_kl_encode", "AutoencoderKL", _autoencoder_kl_encode),
    _Model("autoencoder_kl_decode", "AutoencoderKL", _autoencoder_kl_decode),
    _Model("autoencoder_tiny", "AutoencoderTiny", _autoencoder_tiny),
    _Model("vq_model", "VQModel", _vq_model),
    _Model("asymmetric_autoencoder_kl", "AsymmetricAutoencoderKL", _asymmetric_autoencoder_kl),
    _Model("autoencoder_dc", "AutoencoderDC", _autoencoder_dc),
    _Model("autoencoder_oobleck", "AutoencoderOobleck", _autoencoder_oobleck),
    _Model("controlnet", "ControlNetModel", _controlnet),
    _Model("sd3_controlnet", "SD3ControlNetModel", _sd3_controlnet),
    _Model("dit", "DiTTransformer2DModel", _dit),
    _Model("pixart", "PixArtTransformer2DModel", _pixart),
    _Model("sd3", "SD3Transformer2DModel", _sd3),
    _Model("sd3_5", "SD3Transformer2DModel", _sd35),
    _Model("flux", "FluxTransformer2DModel", _flux),
    _Model("auraflow", "AuraFlowTransformer2DModel", _auraflow),
    _Model("sana", "SanaTransformer2DModel", _sana),
    _Model("cogview4", "CogView4Transformer2DModel", _cogview4),
    _Model("uvit_2d", "UVit2DModel", _uvit2d),
    _Model("latte", "LatteTransformer3DModel", _latte),
    _Model("cogvideox", "CogVideoXTransformer3DModel", _cogvideox),
    _Model("wan", "WanTransformer3DModel", _wan),
    _Model("mochi", "MochiTransformer3DModel", _mochi),
    _Model("lumina2", "Lumina2Transformer2DModel", _lumina2),
    _Model("prior_transformer", "PriorTransformer", _prior_transformer),
)


def diffusers_model(name: str) -> SweepCase:
    """The zoo's model ``name``: built from its tiny config with random weights (seed 0), with
    its example inputs and dim names."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import diffusers
    import torch

    spec = next(m for m in MODELS if m.name == name)
    torch.manual_seed(0)
    _GENERATOR[:] = [torch.Generator().manual_seed(0)]
    return spec.build(diffusers, torch)


class DiffusersZoo(Zoo):
    """One tiny model per diffusers family (listing imports diffusers, builds nothing)."""

    name = "diffusers"
    source = __name__

    def entries(self) -> tuple[ZooEntry, ...]:
        problem = import_problem("diffusers", "pip install diffusers")
        known: set[str] = set()
        if problem is None:
            import diffusers

            known = set(dir(diffusers))  # its lazy module lists every class without importing it
        entries = []
        for model in MODELS:
            reason = problem or (None if model.cls in known else
                                 f"diffusers {diffusers.__version__} has no {model.cls}")
            entries.append(ZooEntry(self.name, model.name, self.source, None if reason else _factory(model.name), reason))
        return tuple(entries)


def _factory(name: str) -> Callable[[], SweepCase]:
    def build() -> SweepCase:
        return diffusers_model(name)

    build.__name__ = build.__qualname__ = name
    return build


ZOO = DiffusersZoo()
