"""Model patches (exporter.patches) on tiny transformers configs of models that need them: the
export without the patch is wrong at another size, the export with it matches the *unpatched*
eager model at several sizes, and the user's model and its classes are as before afterwards."""

from __future__ import annotations

import os
import threading

import pytest
import torch

from exporter import ExportOptions, Session, SpecError
from exporter.patches import PATCH_NAMES, applied, patch_named, suggested_patches
from exporter.report import report_html

os.environ.setdefault("HF_HUB_OFFLINE", "1")
transformers = pytest.importorskip("transformers")

IMAGE_DIMS = {"pixel_values": {0: "batch", 2: "height", 3: "width"}}


def _dinov2() -> torch.nn.Module:
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=64, image_size=32, patch_size=8)
    torch.manual_seed(0)
    return transformers.Dinov2Model(config).eval()


def _mobilenet(version: int) -> torch.nn.Module:
    torch.manual_seed(0)
    if version == 1:
        model = transformers.MobileNetV1Model(transformers.MobileNetV1Config(depth_multiplier=0.25, image_size=32))
    else:
        model = transformers.MobileNetV2Model(transformers.MobileNetV2Config(depth_multiplier=0.25, image_size=32))
    for module in model.modules():  # the default init shrinks activations to ~1e-39 over 14 layers
        if isinstance(module, torch.nn.Conv2d):
            torch.nn.init.kaiming_normal_(module.weight)
    return model.eval()


def _focalnet() -> torch.nn.Module:
    config = transformers.FocalNetConfig(image_size=32, patch_size=4, embed_dim=8, depths=[1, 1], focal_levels=[2, 2],
                                         hidden_sizes=[8, 16])
    torch.manual_seed(0)
    return transformers.FocalNetModel(config).eval()


def _mamba() -> torch.nn.Module:
    config = transformers.MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2,
                                      conv_kernel=4, use_cache=False)
    torch.manual_seed(0)
    return transformers.MambaModel(config).eval()


def _rwkv() -> torch.nn.Module:
    config = transformers.RwkvConfig(vocab_size=64, hidden_size=16, num_hidden_layers=2, attention_hidden_size=16,
                                     intermediate_size=32, context_length=64, use_cache=False)
    torch.manual_seed(0)
    return transformers.RwkvModel(config).eval()


def _recurrent_gemma() -> torch.nn.Module:
    config = transformers.RecurrentGemmaConfig(vocab_size=64, hidden_size=16, lru_width=16, intermediate_size=32,
                                               num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                                               head_dim=8, attention_window_size=16, use_cache=False)
    torch.manual_seed(0)
    return transformers.RecurrentGemmaModel(config).eval()


def _cpmant() -> torch.nn.Module:
    config = transformers.CpmAntConfig(vocab_size=64, hidden_size=16, num_attention_heads=2, dim_head=8, dim_ff=32,
                                       num_hidden_layers=2, prompt_length=4, use_cache=False)
    torch.manual_seed(0)
    return transformers.CpmAntModel(config).eval()


def _m2m100() -> torch.nn.Module:
    config = transformers.M2M100Config(vocab_size=64, d_model=16, encoder_layers=1, decoder_layers=1,
                                       encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=32,
                                       decoder_ffn_dim=32, max_position_embeddings=16, use_cache=False)
    torch.manual_seed(0)
    return transformers.M2M100Model(config).eval()


def _fsmt() -> torch.nn.Module:
    config = transformers.FSMTConfig(langs=["en", "de"], src_vocab_size=64, tgt_vocab_size=64, d_model=16,
                                     encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                                     decoder_attention_heads=2, encoder_ffn_dim=32, decoder_ffn_dim=32,
                                     max_position_embeddings=16, use_cache=False)
    torch.manual_seed(0)
    return transformers.FSMTModel(config).eval()


def _mobilevit() -> torch.nn.Module:
    """A 3-stage MobileViT whose batch-norm statistics are taken from a few images, so its
    outputs are not ~1e-6 (random convolutions over many layers shrink them to nothing)."""
    config = transformers.MobileViTConfig(image_size=64, patch_size=2, hidden_sizes=[16, 24, 32], num_attention_heads=2,
                                          neck_hidden_sizes=[8, 8, 16, 16, 24, 32, 64], mlp_ratio=2.0, expand_ratio=2.0)
    torch.manual_seed(0)
    model = transformers.MobileViTModel(config)
    for module in model.modules():
        if isinstance(module, (torch.nn.Conv2d, torch.nn.Linear)):
            torch.nn.init.kaiming_normal_(module.weight)
        if isinstance(module, torch.nn.BatchNorm2d):
            module.momentum = None  # the running statistics become the mean over the images below
    with torch.no_grad():
        for seed in range(3):
            model(torch.randn(8, 3, 64, 64, generator=torch.Generator().manual_seed(seed)))
    return model.eval()


def _switch() -> torch.nn.Module:
    config = transformers.SwitchTransformersConfig(vocab_size=64, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=2,
                                                   num_experts=4, expert_capacity=8, encoder_sparse_step=1)
    torch.manual_seed(0)
    return transformers.SwitchTransformersEncoderModel(config).eval()


def _image(height: int, width: int, batch: int = 2) -> torch.Tensor:
    return torch.randn(batch, 3, height, width, generator=torch.Generator().manual_seed(height * 100 + width))


def _assert_matches_eager(session: Session, model: torch.nn.Module, sizes: list[tuple[int, int]]) -> None:
    """ONNX (onnxruntime) vs the eager model, run with no patch active, at each size."""
    for height, width in sizes:
        x = _image(height, width, batch=3)
        with torch.no_grad():
            expected = model(x).last_hidden_state
        actual = torch.as_tensor(session.run_onnx(x)[0])
        assert actual.shape == expected.shape, (height, width)
        scale = float(expected.abs().max())
        assert scale > 1e-3, "outputs too small to compare"
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-4 * scale, msg=f"at {height}x{width}")


def _state(model: torch.nn.Module) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same_state(model: torch.nn.Module, before: dict) -> bool:
    after = model.state_dict()
    return after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


# -- options and registry ----------------------------------------------------------------------


def test_patches_option_takes_registry_names_once_and_refuses_others_listing_them():
    assert ExportOptions(patches=["tf_same_padding", "tf_same_padding"]).patches == ("tf_same_padding",)
    assert ExportOptions(patches="pos_embed_interpolation").patches == ("pos_embed_interpolation",)
    with pytest.raises(SpecError, match="pos_embed_interpolation, tf_same_padding, pad_to_patch_multiple, selective_scan_loop, "
                                        "unfold_resize, rwkv_attention_scan, linear_rnn_scan, range_list_tensor, "
                                        "sinusoidal_positions, delta_rule_scan, every_expert, pad_when_shorter, packed_images") as info:
        ExportOptions(patches=("tf_same_paddin",))
    assert "did you mean 'tf_same_padding'" in str(info.value)
    assert PATCH_NAMES == ("pos_embed_interpolation", "tf_same_padding", "pad_to_patch_multiple", "selective_scan_loop",
                           "unfold_resize", "rwkv_attention_scan", "linear_rnn_scan", "range_list_tensor",
                           "sinusoidal_positions", "delta_rule_scan", "every_expert", "pad_when_shorter",
                           "packed_images")


def test_each_patch_applies_only_to_the_models_whose_classes_carry_its_idiom():
    dinov2, mobilenet = _dinov2(), _mobilenet(2)
    assert [s.name for s in suggested_patches(dinov2)] == ["pos_embed_interpolation"]
    assert [s.name for s in suggested_patches(mobilenet)] == ["tf_same_padding"]
    assert [s.name for s in suggested_patches(_focalnet())] == ["pad_to_patch_multiple"]
    assert [s.name for s in suggested_patches(_mamba())] == ["selective_scan_loop"]
    assert [s.name for s in suggested_patches(_mobilevit())] == ["unfold_resize"]
    assert [s.name for s in suggested_patches(_rwkv())] == ["rwkv_attention_scan"]
    assert [s.name for s in suggested_patches(_recurrent_gemma())] == ["linear_rnn_scan"]
    assert [s.name for s in suggested_patches(_cpmant())] == ["range_list_tensor"]
    assert [s.name for s in suggested_patches(_m2m100())] == ["sinusoidal_positions"]
    assert [s.name for s in suggested_patches(_fsmt())] == ["sinusoidal_positions"]
    assert [s.name for s in suggested_patches(_olmo_hybrid_delta_layer())] == ["delta_rule_scan"]
    assert [s.name for s in suggested_patches(_switch())] == ["every_expert"]
    assert suggested_patches(torch.nn.Linear(2, 2)) == ()
    assert suggested_patches(dinov2, exclude=("pos_embed_interpolation",)) == ()


def test_pos_embed_diff_removes_exactly_the_early_return_at_the_training_size():
    diff = patch_named("pos_embed_interpolation").diff(_dinov2())
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [
        "-    if not torch.jit.is_tracing() and num_patches == num_positions and height == width:",
        "-        return self.position_embeddings",
    ]
    assert "Dinov2Embeddings.interpolate_pos_encoding (original)" in diff


def test_tf_padding_diff_shows_the_branch_on_the_size_replaced():
    diff = patch_named("tf_same_padding").diff(_mobilenet(1))
    assert "-    if in_height % stride_height == 0:" in diff
    assert "+    pad = ((size + stride - 1) // stride - 1) * stride + kernel - size" in diff
    assert "modeling_mobilenet_v1.apply_tf_padding (patched)" in diff


def test_patch_context_restores_class_and_module_after_an_exception_and_nested_in_threads():
    import transformers.models.dinov2.modeling_dinov2 as dinov2_module
    import transformers.models.mobilenet_v2.modeling_mobilenet_v2 as mobilenet_module

    dinov2, mobilenet = _dinov2(), _mobilenet(2)
    method = vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"]
    function = mobilenet_module.apply_tf_padding
    instance_attributes = set(vars(dinov2.embeddings))
    seen_in_thread = []

    def nested() -> None:
        with applied(dinov2, ("pos_embed_interpolation",)):
            seen_in_thread.append(vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"])

    with pytest.raises(RuntimeError, match="inside"):
        with applied(dinov2, ("pos_embed_interpolation",)), applied(mobilenet, ("tf_same_padding",)):
            patched = vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"]
            assert patched is not method and mobilenet_module.apply_tf_padding is not function
            thread = threading.Thread(target=nested)
            thread.start()
            thread.join()
            # the inner block ended first: the outer one's replacement is still in place
            assert vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"] is patched
            raise RuntimeError("inside")
    assert seen_in_thread == [patched]
    assert vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"] is method
    assert mobilenet_module.apply_tf_padding is function
    assert set(vars(dinov2.embeddings)) == instance_attributes


# -- DINOv2: position-embedding interpolation ------------------------------------------------


@pytest.fixture(scope="module")
def dinov2_exports():
    import transformers.models.dinov2.modeling_dinov2 as dinov2_module

    model = _dinov2()
    before = _state(model)
    method = vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"]
    plain = Session(model, (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    plain.run()
    patched = plain.with_options(patches=("pos_embed_interpolation",))
    patched.run()
    return model, before, method, plain, patched


def test_dinov2_exported_at_its_training_size_without_the_patch_is_captured_again_at_a_larger_image(dinov2_exports):
    model, _, _, plain, _ = dinov2_exports
    capture = plain.result("capture")
    assert [a.outcome for a in capture.attempts] == ["skipped", "ok"]  # the first held only at 32x32
    [note] = [w for w in capture.warnings if "captured again" in w]
    assert "pixel_values.shape[2]=64" in note and "torch traces only the path the model takes there" in note
    assert plain.succeeded and not plain.options.patches
    _assert_matches_eager(plain, model, [(32, 32), (40, 48), (64, 33)])


def test_dinov2_with_the_patch_matches_the_unpatched_eager_model_at_three_sizes(dinov2_exports):
    model, _, _, _, patched = dinov2_exports
    assert patched.succeeded
    assert "model patches pos_embed_interpolation" in patched.result("capture").detail
    _assert_matches_eager(patched, model, [(32, 32), (40, 48), (64, 33)])


def test_dinov2_patched_export_leaves_the_model_and_its_class_as_they_were(dinov2_exports):
    import transformers.models.dinov2.modeling_dinov2 as dinov2_module

    model, before, method, _, patched = dinov2_exports
    assert patched.succeeded
    assert vars(dinov2_module.Dinov2Embeddings)["interpolate_pos_encoding"] is method
    assert "interpolate_pos_encoding" not in vars(model.embeddings)
    assert _same_state(model, before)


def _tipsv2() -> torch.nn.Module:
    config = transformers.Tipsv2VisionConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                             image_size=32, patch_size=8, num_register_tokens=1)
    torch.manual_seed(0)
    return transformers.Tipsv2VisionModel(config).eval()


def test_tipsv2_resizing_to_an_int_of_the_size_fails_at_another_size_until_the_offered_patch_passes_the_size():
    """TIPSv2 gives ``interpolate`` ``size=(torch_int(height), ...)`` (an ``int()`` of the
    size) and checks it unless tracing: the grid is pinned at 4x4 patches even past the early
    return, and the patch passes the size itself."""
    model = _tipsv2()
    before = _state(model)
    plain = Session(model, (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    quick = {"sizes": {"height": [64]}, "edge_values": False}
    failed = plain.verify(**quick)
    assert failed.status == "failed" and "modeling_tipsv2.py" in failed.verdict + str(failed.failed_cases)
    assert plain.suggested_fixes.patch_names == ("pos_embed_interpolation",)
    diff = patch_named("pos_embed_interpolation").diff(model)
    changed = [line[0] + line[1:].strip() for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---")]
    assert changed == [
        "-if not torch.jit.is_tracing() and num_patches == num_positions and height == width:",
        "-return self.position_embeddings",
        "-size=(torch_int(height), torch_int(width)),",
        "+size=(height, width),",
        "-if not torch.jit.is_tracing():",
        "-if int(height) != patch_pos_embed.shape[-2] or int(width) != patch_pos_embed.shape[-1]:",
        '-raise ValueError("Width or height does not match with the interpolated position embeddings")',
    ]
    fixed = plain.apply_suggested_fixes()
    assert fixed.verify(**quick).status == "passed"
    _assert_matches_eager(fixed, model, [(32, 32), (40, 48), (64, 64)])
    assert _same_state(model, before)


def test_a_vit_refused_at_its_image_check_is_told_to_pass_interpolate_pos_encoding_which_then_verifies():
    config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                    image_size=32, patch_size=8)
    torch.manual_seed(0)
    model = transformers.ViTModel(config, add_pooling_layer=False).eval()
    pixels = torch.randn(2, 3, 32, 32)
    refused = Session(model, (), {"pixel_values": pixels}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    assert refused.run().status == "failed"
    assert "pass interpolate_pos_encoding=True" in refused.failed_stage.error.hint
    told = Session(model, (), {"pixel_values": pixels, "interpolate_pos_encoding": True},
                   ExportOptions(dynamic_shapes=IMAGE_DIMS))
    assert told.run().ok  # captured again past the training size, where the embeddings come back unchanged
    verdict = told.verify()
    assert verdict.status == "passed", verdict


def test_focalnet_failed_verify_offers_the_patch_and_applying_it_passes_verify():
    fresh = Session(_focalnet(), (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    quick = {"sizes": {"height": [33]}, "edge_values": False, "locate": False}
    result = fresh.verify(**quick)
    assert result.status == "failed"
    fixes = fresh.suggested_fixes
    assert fixes.patch_names == ("pad_to_patch_multiple",) and bool(fixes)
    assert fixes.after == fixes.before  # capture succeeded: no dim fix, the patch is the fix
    fixed = fresh.apply_suggested_fixes()
    assert fixed.options.patches == ("pad_to_patch_multiple",)
    assert fixed.spec == fresh.spec
    assert fixed.applied_fixes[-1].patch_names == ("pad_to_patch_multiple",)
    assert fixed.verify(**quick).status == "passed"
    assert not fixed.suggested_fixes.patches  # applied: not offered again


# -- MobileNetV1/V2: TensorFlow SAME padding ----------------------------------------------------


@pytest.mark.slow
def test_mobilenet_v1_without_the_patch_has_a_wrong_shape_at_an_odd_size_and_with_it_matches_eager():
    model = _mobilenet(1)
    before = _state(model)
    plain = Session(model, (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    plain.run()
    assert plain.succeeded
    wrong = torch.as_tensor(plain.run_onnx(_image(33, 33))[0])
    with torch.no_grad():
        expected = model(_image(33, 33)).last_hidden_state
    assert wrong.shape != expected.shape  # [2, 256, 1, 1] instead of [2, 256, 2, 2]

    patched = plain.with_options(patches=("tf_same_padding",))
    patched.run()
    _assert_matches_eager(patched, model, [(32, 32), (33, 35), (48, 40)])
    assert _same_state(model, before)


@pytest.mark.slow
def test_mobilenet_v2_capture_refusal_is_fixed_by_the_patch_keeping_height_and_width_dynamic():
    model = _mobilenet(2)
    plain = Session(model, (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    assert plain.run().status == "failed"  # int(features.shape[-2]) pins height and width
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("tf_same_padding",)
    assert fixes.after != fixes.before  # the dim fixes alone would make height and width static

    fixed = plain.apply_suggested_fixes()
    assert fixed.options.patches == ("tf_same_padding",)
    assert fixed.spec == plain.spec  # the patch was enough: no dim made static
    assert fixed.run().ok
    _assert_matches_eager(fixed, model, [(32, 32), (33, 35)])
    html = report_html(fixed, graphs=False)
    assert "model patches applied while capturing: tf_same_padding" in html


# -- FocalNet: padding to a multiple of the patch size ------------------------------------------


def test_focalnet_without_the_patch_drops_patches_at_an_odd_size_and_with_it_matches_eager():
    model = _focalnet()
    before = _state(model)
    plain = Session(model, (_image(32, 32),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    plain.run()
    assert plain.succeeded
    with torch.no_grad():
        expected = model(_image(33, 33)).last_hidden_state
    wrong = torch.as_tensor(plain.run_onnx(_image(33, 33))[0])
    assert (wrong.shape[1], expected.shape[1]) == (16, 25)  # the 32x32 example's 4x4 patches, not 5x5

    patched = plain.with_options(patches=("pad_to_patch_multiple",))
    patched.run()
    _assert_matches_eager(patched, model, [(32, 32), (33, 33), (35, 31), (69, 40)])
    assert _same_state(model, before)


# -- Mamba: the selective scan's loop over the sequence -----------------------------------------

TEXT_DIMS = {"input_ids": {0: "batch", 1: "seq"}}


def _ids(batch: int, seq: int) -> torch.Tensor:
    return torch.randint(0, 64, (batch, seq), generator=torch.Generator().manual_seed(batch * 100 + seq))


def _assert_onnx_matches_unpatched_eager(fixed, model):
    for batch, seq in [(2, 12), (1, 1), (3, 29)]:
        ids = _ids(batch, seq)
        with torch.no_grad():  # the unpatched model, run eagerly
            expected = model(ids).last_hidden_state
        actual = torch.as_tensor(fixed.run_onnx(ids)[0])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=f"at batch={batch}, seq={seq}")


def test_mamba_capture_refusal_at_the_scan_loop_is_fixed_by_the_patch_keeping_seq_dynamic():
    model = _mamba()
    before = _state(model)
    plain = Session(model, (_ids(2, 12),), {}, ExportOptions(dynamic_shapes=TEXT_DIMS))
    assert plain.run().status == "failed"  # the loop unrolled at 12 steps pins seq
    assert "in mamba_selective_scan" in plain.failed_stage.error.source
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("selective_scan_loop",)
    assert "-        for index in range(seq_len):" in fixes.patches[0].diff

    fixed = plain.apply_suggested_fixes()
    assert fixed.options.patches == ("selective_scan_loop",) and fixed.spec == plain.spec
    assert fixed.run().ok
    assert "Scan" in [node.op_type for node in fixed.model_proto.graph.node]
    _assert_onnx_matches_unpatched_eager(fixed, model)
    assert _same_state(model, before)


def test_the_selective_scan_replacement_computes_what_the_loop_computes_bit_for_bit():
    import transformers.models.mamba.modeling_mamba as modeling

    from exporter.patches.selective_scan import mamba_selective_scan

    generator = torch.Generator().manual_seed(0)
    batch, inner, seq, state = 2, 6, 9, 4
    hidden, dt, z = (torch.randn(batch, inner, seq, generator=generator) for _ in range(3))
    A = -torch.rand(inner, state, generator=generator)
    B, C = (torch.randn(batch, state, seq, generator=generator) for _ in range(2))
    D, bias = torch.randn(inner, generator=generator), torch.randn(inner, generator=generator)
    kwargs = {"D": D, "z": z, "delta_bias": bias, "delta_softplus": True, "return_last_state": True}

    expected = modeling.mamba_selective_scan(hidden, dt, A, B, C, **kwargs)
    actual = mamba_selective_scan(hidden, dt, A, B, C, **kwargs)

    assert all(torch.equal(a, e) for a, e in zip(actual, expected, strict=True))


@pytest.mark.parametrize(("build", "patch", "function"), [
    (_rwkv, "rwkv_attention_scan", "rwkv_linear_attention_cpu"),
    (_recurrent_gemma, "linear_rnn_scan", "_rnn_scan"),
    (_cpmant, "range_list_tensor", "_prepare_attention_mask"),
])
def test_a_loop_or_list_over_the_sequence_pins_it_until_the_offered_patch_keeps_seq_dynamic(build, patch, function):
    model = build()
    before = _state(model)
    plain = Session(model, (_ids(2, 12),), {}, ExportOptions(dynamic_shapes=TEXT_DIMS))
    assert plain.run().status == "failed"  # the loop unrolled at 12 steps pins seq
    assert plain.suggested_fixes.patch_names == (patch,)
    fixed = plain.apply_suggested_fixes()
    assert fixed.options.patches == (patch,) and fixed.spec == plain.spec and fixed.run().ok
    assert patch == "range_list_tensor" or "Scan" in [node.op_type for node in fixed.model_proto.graph.node]
    _assert_onnx_matches_unpatched_eager(fixed, model)
    assert _same_state(model, before)
    assert f"{function}" in plain.suggested_fixes.patches[0].diff


def test_the_rwkv_and_rg_lru_replacements_compute_what_the_loops_compute_bit_for_bit():
    import transformers.models.recurrent_gemma.modeling_recurrent_gemma as rg
    import transformers.models.rwkv.modeling_rwkv as rwkv

    from exporter.patches.recurrence_scan import _rnn_scan, rwkv_linear_attention_cpu

    generator = torch.Generator().manual_seed(0)
    batch, seq, width = 2, 9, 6
    decay, first = torch.randn(width, generator=generator), torch.randn(width, generator=generator)
    key, value = (torch.randn(batch, seq, width, generator=generator) for _ in range(2))
    expected = rwkv.rwkv_linear_attention_cpu(decay, first, key, value, return_state=True)
    actual = rwkv_linear_attention_cpu(decay, first, key, value, return_state=True)
    assert torch.equal(actual[0], expected[0]) and all(torch.equal(a, e) for a, e in zip(actual[1], expected[1], strict=True))

    layer = _recurrent_gemma().layers[0].temporal_block.rg_lru
    hidden, gate = torch.randn(batch, seq, width, generator=generator), torch.rand(batch, seq, width, generator=generator)
    reset = torch.zeros(batch, seq, width, dtype=torch.bool)
    reset[:, 0] = True
    start = torch.randn(batch, width, generator=generator)
    for states in (None, start):
        expected = rg.RecurrentGemmaRglru._rnn_scan(layer, hidden, gate, reset, states)
        actual = _rnn_scan(layer, hidden, gate, reset, states)
        assert all(torch.equal(a, e) for a, e in zip(actual, expected, strict=True))


def test_the_cpmant_mask_replacement_gives_the_list_built_mask_exactly():
    import transformers.models.cpmant.modeling_cpmant as modeling

    from exporter.patches.range_tensor import _prepare_attention_mask

    model = _cpmant()
    ids = _ids(3, 11)
    span = torch.zeros_like(ids)
    context = torch.tensor([[True] * 7 + [False] * 4] * 3)
    length = torch.tensor([11, 9, 4])
    expected = modeling.CpmAntModel._prepare_attention_mask(model, ids, span, context, length)
    actual = _prepare_attention_mask(model, ids, span, context, length)
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)


def test_jamba_is_offered_the_scan_patch_though_torch_reports_its_failure_at_a_later_use_of_seq():
    from exporter.sweep.zoos.transformers import tiny_model

    case = tiny_model("jamba")  # Mamba layers between attention layers, with a padding mask
    plain = Session(case.model, (), dict(case.kwargs), ExportOptions(dynamic_shapes=case.dynamic_shapes))
    assert plain.run().status == "failed"
    assert "in apply_mask_to_padding_states" in plain.failed_stage.error.source  # not in the loop
    assert any(g.kind == "specialization" and g.function == "mamba_selective_scan" for g in plain.guards)

    assert plain.suggested_fixes.patch_names == ("selective_scan_loop",)
    fixed = plain.apply_suggested_fixes()
    assert fixed.spec == plain.spec and fixed.run().ok
    assert fixed.verify(edge_values=False).status == "passed"


# -- MobileViT: resizing to a multiple of the patch size only when needed -----------------------


def test_mobilevit_fails_in_onnxruntime_at_another_size_until_the_offered_patch_keeps_the_grid_symbolic():
    model = _mobilevit()  # 64x64 images, 2x2 patches over 8x8 to 2x2 feature maps
    before = _state(model)
    plain = Session(model, (_image(64, 64),), {}, ExportOptions(dynamic_shapes=IMAGE_DIMS))
    plain.run()
    assert plain.succeeded
    quick = {"sizes": {"height": [40], "width": [40]}, "edge_values": False, "locate": False}
    assert plain.verify(**quick).status == "failed"  # the example's patch grid is baked into a Reshape
    assert plain.suggested_fixes.patch_names == ("unfold_resize",)

    fixed = plain.apply_suggested_fixes()
    assert fixed.options.patches == ("unfold_resize",) and fixed.spec == plain.spec
    assert fixed.verify(**quick).status == "passed"
    _assert_matches_eager(fixed, model, [(64, 64), (40, 40), (33, 71)])
    assert _same_state(model, before)


def test_the_unfold_resize_replacement_is_the_identity_resize_at_a_multiple_of_the_patch_size():
    model = _mobilevit()
    x = _image(64, 64)
    with torch.no_grad():
        expected = model(x).last_hidden_state
        with applied(model, ["unfold_resize"]):
            patched = model(x).last_hidden_state
    assert torch.equal(patched, expected)


# -- sinusoidal position tables that grow in eager PyTorch --------------------------------------

SEQ2SEQ_DIMS = {"input_ids": {0: "batch", 1: "seq"}, "decoder_input_ids": {0: "batch", 1: "decoder_seq"}}


def _seq2seq_inputs(batch: int, seq: int, decoder_seq: int) -> dict:
    ids = _ids(batch, seq + decoder_seq) % 62 + 2  # no padding id (1)
    return {"input_ids": ids[:, :seq], "decoder_input_ids": ids[:, seq:]}


def test_m2m100_fails_in_onnxruntime_past_its_table_until_the_offered_patch_computes_the_rows():
    model = _m2m100()  # a 16-row table (+2): eager grows it at 17 tokens, the export keeps 18 rows
    table = model.encoder.embed_positions.weights.clone()
    plain = Session(model, (), _seq2seq_inputs(2, 8, 6), ExportOptions(dynamic_shapes=SEQ2SEQ_DIMS))
    assert plain.run().ok
    verdict = plain.verify(edge_values=False)
    assert verdict.status == "failed"
    assert "indices element out of data bounds" in str(verdict) and "modeling_m2m_100.py" in str(verdict)
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("sinusoidal_positions",)
    assert "-        self.make_weights(max_pos + self.offset" in fixes.patches[0].diff

    fixed = plain.apply_suggested_fixes()
    assert fixed.options.patches == ("sinusoidal_positions",) and fixed.spec == plain.spec and fixed.run().ok
    assert fixed.verify(edge_values=False).status == "passed"
    assert torch.equal(model.encoder.embed_positions.weights, table)  # exports and verifies left it as built
    for batch, seq, decoder_seq in [(2, 40, 30), (1, 1, 1), (3, 17, 5)]:  # past the table, eagerly grown
        inputs = _seq2seq_inputs(batch, seq, decoder_seq)
        with torch.no_grad():
            expected = model(**inputs).last_hidden_state
        actual = torch.as_tensor(fixed.run_onnx(**inputs)[0])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=f"at {batch}, {seq}, {decoder_seq}")


def test_the_fsmt_replacement_gives_the_rows_the_grown_table_gives_without_growing_it():
    import copy

    model = _fsmt()
    reference = copy.deepcopy(model)
    inputs = _seq2seq_inputs(2, 29, 23)  # past the 18-row table
    with torch.no_grad():
        expected = reference(**inputs)[0]  # grows reference's tables
        with applied(model, ["sinusoidal_positions"]):
            actual = model(**inputs)[0]
    assert torch.equal(actual, expected)
    assert model.encoder.embed_positions.weight.shape[0] == 18  # the table as built
    assert reference.encoder.embed_positions.weight.shape[0] > 18


# -- the chunked delta rule's loop over chunks ---------------------------------------------------


def _olmo_hybrid_delta_layer() -> torch.nn.Module:
    from transformers.models.olmo_hybrid.modeling_olmo_hybrid import OlmoHybridGatedDeltaNet

    config = transformers.OlmoHybridConfig(hidden_size=16, linear_num_value_heads=2, linear_num_key_heads=2,
                                           linear_key_head_dim=8, linear_value_head_dim=8, num_attention_heads=2,
                                           num_key_value_heads=2, intermediate_size=32, num_hidden_layers=2,
                                           layer_types=["linear_attention", "full_attention"])
    torch.manual_seed(0)
    return OlmoHybridGatedDeltaNet(config, 0).eval()


@pytest.mark.parametrize(("module", "function", "key_heads", "decay_per_channel"), [
    ("qwen3_next", "torch_chunk_gated_delta_rule", 2, False),
    ("olmo_hybrid", "torch_chunk_gated_delta_rule", 1, False),  # grouped: 1 key head for 2 value heads
    ("kimi_linear", "chunk_kimi_delta_attention", 2, True),
    ("bailing_hybrid", "chunk_kimi_delta_attention", 2, True),
])
def test_the_delta_rule_replacements_compute_what_the_chunk_loops_compute_bit_for_bit(module, function, key_heads,
                                                                                      decay_per_channel):
    import importlib

    from exporter.patches import delta_rule_scan
    from exporter.patches.base import plain_function

    original = plain_function(getattr(importlib.import_module(f"transformers.models.{module}.modeling_{module}"), function))
    replacement = getattr(delta_rule_scan, function)
    generator = torch.Generator().manual_seed(0)
    batch, seq, dim = 2, 150, 8  # three chunks of 64, the last one padded
    query, key = (torch.randn(batch, seq, key_heads, dim, generator=generator) for _ in range(2))
    value = torch.randn(batch, seq, 2, dim, generator=generator)
    decay = -torch.rand((batch, seq, 2, dim) if decay_per_channel else (batch, seq, 2), generator=generator)
    beta = torch.rand(batch, seq, 2, generator=generator)
    state = torch.randn(batch, 2, dim, dim, generator=generator)
    for normalize in (False, True):
        kwargs = {"g": decay, "beta": beta, "initial_state": state, "output_final_state": True,
                  "use_qk_l2norm_in_kernel": normalize}
        expected = original(query, key, value, **kwargs)
        actual = replacement(query, key, value, **kwargs)
        assert all(torch.equal(a, e) for a, e in zip(actual, expected, strict=True)), normalize


@pytest.mark.slow
def test_a_delta_rule_layer_exported_with_the_patch_scans_its_chunks_and_matches_eager_at_other_chunk_counts():
    model = _olmo_hybrid_delta_layer()
    assert [s.name for s in suggested_patches(model)] == ["delta_rule_scan"]
    dims = {"hidden_states": {0: "batch", 1: "seq"}}
    hidden = torch.randn(2, 70, 16, generator=torch.Generator().manual_seed(0))  # two chunks of 64
    fixed = Session(model, (hidden,), {}, ExportOptions(dynamic_shapes=dims, patches=("delta_rule_scan",)))
    assert fixed.run().ok
    assert "Scan" in [node.op_type for node in fixed.model_proto.graph.node]
    for batch, seq in [(3, 200), (1, 5), (2, 64)]:  # four chunks, one, one full
        x = torch.randn(batch, seq, 16, generator=torch.Generator().manual_seed(seq))
        with torch.no_grad():
            expected = model(x)
        torch.testing.assert_close(torch.as_tensor(fixed.run_onnx(x)[0]), expected, rtol=1e-4, atol=1e-5,
                                   msg=f"at batch={batch}, seq={seq}")


# -- a mixture-of-experts loop over the experts hit ---------------------------------------------------------


def _text(batch: int, seq: int) -> dict:
    return {"input_ids": _ids(batch, seq), "attention_mask": torch.ones(batch, seq, dtype=torch.int64)}


def test_switch_transformers_refused_at_its_loop_over_the_experts_hit_is_fixed_by_looping_over_every_expert():
    model = _switch()  # 4 experts of capacity 8: tokens past it are dropped, as in eager
    before = _state(model)
    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    plain = Session(model, (), _text(2, 12), ExportOptions(dynamic_shapes=dims))
    assert plain.run().status == "failed"  # the number of experts hit depends on the values
    assert "for expert_idx in expert_hit:" in plain.failed_stage.error.source
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("every_expert",)
    assert "-    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()" in fixes.patches[0].diff

    fixed = plain.apply_suggested_fixes()
    assert fixed.run().ok and fixed.options.patches == ("every_expert",)
    assert fixed.verify().status == "passed"
    for batch, seq in [(1, 1), (3, 29)]:
        with torch.no_grad():  # the unpatched model, run eagerly
            expected = model(**_text(batch, seq)).last_hidden_state
        actual = torch.as_tensor(fixed.run_onnx(**_text(batch, seq))[0])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=f"at batch={batch}, seq={seq}")
    assert _same_state(model, before)


def test_looping_over_every_expert_computes_what_the_loop_over_the_experts_hit_computes_bit_for_bit():
    model = _switch()
    for inputs in (_text(3, 29), _text(1, 1)):  # experts over capacity; one token: three experts hit by none
        with torch.no_grad():
            expected = model(**inputs).last_hidden_state
            with applied(model, ["every_expert"]):
                actual = model(**inputs).last_hidden_state
        assert torch.equal(actual, expected)


# -- a sequence padded only when it is shorter ------------------------------------------------------------


def test_sew_d_one_frame_short_at_an_odd_frame_count_until_the_offered_patch_pads_always():
    from exporter.sweep.zoos.transformers import tiny_model

    case = tiny_model("sew-d")  # 1600 samples: 8 frames, pooled by 2, upsampled back to 8
    model = case.model
    before = _state(model)
    plain = Session(model, (), dict(case.kwargs), ExportOptions(dynamic_shapes=case.dynamic_shapes))
    assert plain.run().ok
    verdict = plain.verify(edge_values=False)
    assert verdict.status == "failed" and "shape [6, 8, 32] instead of [6, 9, 32]" in str(verdict)  # 9 frames
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("pad_when_shorter",)
    assert "-    if hidden_states.shape[1] < n_input_timesteps:" in fixes.patches[0].diff

    fixed = plain.apply_suggested_fixes()
    assert fixed.run().ok and fixed.verify(edge_values=False).status == "passed"
    for batch, samples in [(1, 3200), (3, 2000), (2, 1601)]:  # 9, 5 and 8 frames
        values = torch.randn(batch, samples, generator=torch.Generator().manual_seed(samples))
        with torch.no_grad():  # the unpatched model, run eagerly
            expected = model(input_values=values).last_hidden_state
            with applied(model, ["pad_when_shorter"]):
                assert torch.equal(model(input_values=values).last_hidden_state, expected)
        actual = torch.as_tensor(fixed.run_onnx(input_values=values)[0])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=f"at {batch}x{samples}")
    assert _same_state(model, before)


# -- images packed into one sequence by a loop over the batch ----------------------------------------------


def test_pixtral_batch_made_static_by_its_loop_over_images_stays_dynamic_with_the_offered_patch():
    from exporter.sweep.zoos.transformers import tiny_model

    case = tiny_model("pixtral")  # 2 images of 64x64, patches of 8: one sequence of 128 patches
    model = case.model
    before = _state(model)
    plain = Session(model, (), dict(case.kwargs), ExportOptions(dynamic_shapes=case.dynamic_shapes))
    assert plain.run().status == "failed"
    assert "makes it the constant 2" in str(plain.failed_stage.error)
    fixes = plain.suggested_fixes
    assert fixes.patch_names == ("packed_images",)
    assert "-        for embed, size in zip(patch_embeds, image_sizes)" in fixes.patches[0].diff

    fixed = plain.apply_suggested_fixes()
    assert fixed.run().ok and fixed.verify(edge_values=False).status == "passed"
    for batch, height, width in [(1, 32, 48), (3, 48, 32)]:
        pixels = _image(height, width, batch)
        with torch.no_grad():  # the unpatched model, run eagerly
            expected = model(pixel_values=pixels).last_hidden_state
        actual = torch.as_tensor(fixed.run_onnx(pixel_values=pixels)[0])
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5, msg=f"at {batch}x{height}x{width}")
    sizes = torch.tensor([[64, 64], [32, 40]])  # images of other sizes: the loop, as before
    with torch.no_grad():
        expected = model(pixel_values=_image(64, 64), image_sizes=sizes).last_hidden_state
        with applied(model, ["packed_images"]):
            assert torch.equal(model(pixel_values=_image(64, 64), image_sizes=sizes).last_hidden_state, expected)
    assert _same_state(model, before)
