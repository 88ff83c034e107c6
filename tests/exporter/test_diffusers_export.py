"""diffusers models from tiny configs (random weights, no hub): their FrozenDict configs survive
an export that fails in any stage, and their outputs (BaseOutput dataclasses, pytree nodes
registered without a flatten_with_keys_fn) export, verify and get readable names."""

from __future__ import annotations

import os

import pytest
import torch

os.environ.setdefault("HF_HUB_OFFLINE", "1")
diffusers = pytest.importorskip("diffusers")

from module_fingerprint import modules_state  # noqa: E402
from torch.utils import _pytree  # noqa: E402

from exporter import CaptureError, ExportError, ExportOptions, Session, compat, export, record  # noqa: E402
from exporter.pipeline import capture as capture_module  # noqa: E402
from exporter.pipeline import stages  # noqa: E402

DIMS = {"sample": {0: "batch", 2: "height", 3: "width"}}


def _unet():
    torch.manual_seed(0)
    return diffusers.UNet2DModel(
        sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
        down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
        norm_num_groups=8,
    ).eval()


def _inputs(batch=1, size=16):
    generator = torch.Generator().manual_seed(batch * 100 + size)
    return torch.randn(batch, 3, size, size, generator=generator), torch.tensor([10])


def _whole(model):
    """What must survive any export: the config (its keys, values, type), its JSON, vars() of every module.
    The JSON first: diffusers' to_json_string() writes _class_name and _diffusers_version into
    the config itself the first time."""
    text = model.to_json_string()
    return (type(model.config), dict(model.config), len(model.config), text, modules_state(list(model.modules())))


@pytest.mark.slow
def test_a_unet2d_exports_with_dynamic_batch_height_width_verifies_and_names_its_output_sample():
    unet = _unet()
    before = _whole(unet)
    node = _pytree.SUPPORTED_NODES[diffusers.models.unets.unet_2d.UNet2DOutput]
    session = export(unet, *_inputs(), options=ExportOptions(dynamic_shapes=DIMS))
    model = session.result("optimize").output
    # an ONNX graph names a value once: the output named after UNet2DOutput.sample beside the
    # sample input is out_sample, as Optimum names it (torch.onnx.export: conv2d_24)
    assert [v.name for v in model.graph.inputs] == ["sample", "timestep"]
    assert [v.name for v in model.graph.outputs] == ["out_sample"]
    assert session.verify().status == "passed"
    assert _whole(unet) == before and len(unet.config) == 29 + 2  # + _class_name, _diffusers_version
    assert _pytree.SUPPORTED_NODES[diffusers.models.unets.unet_2d.UNet2DOutput] is node  # registry untouched
    assert node.flatten_with_keys_fn is None
    sample, timestep = _inputs(2, 24)
    (out,) = session.run_onnx(sample, timestep)
    with torch.no_grad():
        expected = unet(sample, timestep).sample
    torch.testing.assert_close(torch.from_numpy(out), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.slow
def test_a_unet2d_export_failing_in_each_stage_leaves_its_config_json_and_every_module_as_they_were(monkeypatch):
    unet = _unet()
    before = _whole(unet)
    options = ExportOptions(dynamic_shapes=DIMS, strategy="nonstrict")

    def fail(*args, **kwargs):
        raise Exception("forced failure")  # a bare Exception, as FrozenDict's update() raised

    # capture: torch.export runs on the model (it swaps its parameters for fake ones), then it fails
    real_capture = capture_module.NonStrictStrategy._capture

    def capture_then_fail(self, model, *args):
        real_capture(self, model, *args)
        model.leftover = torch.ones(1)
        raise Exception("forced failure after the trace")

    with monkeypatch.context() as patch:
        patch.setattr(capture_module.NonStrictStrategy, "_capture", capture_then_fail)
        with pytest.raises(CaptureError):
            export(unet, *_inputs(), options=options)
    assert _whole(unet) == before

    session = Session(unet, _inputs(), options=options)
    assert session.run("capture").status == "ok"
    # each session reuses the stages before the one it fails: a failed result is cached, so the
    # next one changes an option of the failed stage (a new opset re-runs decompose, new
    # output names re-run translate)
    translating = session.with_options(opset_version=compat.default_opset() + 1)
    optimizing = translating.with_options(output_names=("noise",))
    for stage, failing, function in (("decompose", session, "decompose"),
                                     ("translate", translating, "constant_outputs"),
                                     ("optimize", optimizing, "optimize_stage")):
        with monkeypatch.context() as patch:
            patch.setattr(stages, function, fail)
            result = failing.run()
        assert result.name == stage and result.status == "failed" and isinstance(result.error, ExportError)
        assert result.error.stage == stage and "forced failure" in str(result.error)
        assert _whole(unet) == before, stage


@pytest.mark.slow
def test_a_vae_decodes_to_out_sample_and_an_encode_returning_a_distribution_fails_as_in_torch():
    torch.manual_seed(0)
    vae = diffusers.AutoencoderKL(
        in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",),
        up_block_types=("UpDecoderBlock2D",), block_out_channels=(8,), layers_per_block=1, latent_channels=4,
        norm_num_groups=8, sample_size=16,
    ).eval()
    before = _whole(vae)
    x = torch.randn(1, 3, 16, 16)
    session = export(vae, x)  # forward returns DecoderOutput(sample=...)
    assert [v.name for v in session.result("optimize").output.graph.outputs] == ["out_sample"]

    class Encode(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.vae = vae

        def forward(self, sample):
            return self.vae.encode(sample)  # AutoencoderKLOutput(latent_dist=DiagonalGaussianDistribution)

    # the distribution is no pytree: torch.export refuses it (so does torch.onnx.export)
    with pytest.raises(CaptureError) as caught:
        export(Encode(), x, options=ExportOptions(strategy="nonstrict"))
    assert "DiagonalGaussianDistribution" in str(caught.value) and "register" in str(caught.value)

    class Latents(Encode):
        def forward(self, sample):
            dist = self.vae.encode(sample).latent_dist
            return {"latent_dist": {"mean": dist.mean, "std": dist.std}}

    named = export(Latents(), x)
    assert [v.name for v in named.result("optimize").output.graph.outputs] == ["latent_dist.mean", "latent_dist.std"]
    assert _whole(vae) == before


@pytest.mark.slow
def test_a_unet2d_condition_model_exports_with_text_length_dynamic_and_keeps_its_config():
    torch.manual_seed(0)
    unet = diffusers.UNet2DConditionModel(
        sample_size=8, in_channels=4, out_channels=4, layers_per_block=1, block_out_channels=(16, 32),
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"),
        cross_attention_dim=32, attention_head_dim=8, norm_num_groups=8,
    ).eval()
    before = _whole(unet)
    sample, timestep, text = torch.randn(1, 4, 8, 8), torch.tensor([10]), torch.randn(1, 4, 32)
    session = export(unet, sample, timestep, text, options=ExportOptions(dynamic_shapes={
        "sample": {0: "batch", 2: "height", 3: "width"}, "encoder_hidden_states": {0: "batch", 1: "text"}}))
    assert [v.name for v in session.result("optimize").output.graph.outputs] == ["out_sample"]
    (out,) = session.run_onnx(torch.randn(2, 4, 16, 16), timestep, torch.randn(2, 7, 32))
    assert out.shape == (2, 4, 16, 16)
    assert _whole(unet) == before


def test_the_recorder_reads_a_unet2d_output():
    unet = _unet()
    with record(unet) as rec, torch.no_grad():
        unet(*_inputs(1, 16))
        unet(*_inputs(2, 8))
    (call, _) = rec.recording.calls
    (sample,) = call.output_tensors()
    assert sample.shape == (1, 3, 16, 16)
    assert len(rec.groups) == 1
