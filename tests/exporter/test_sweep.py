"""Zoo sweeps end to end: real worker processes, real exports and onnxruntime, a real local
Ray cluster (started once for the module). The models are the user zoo in
``sweep_models.py``, imported by the workers from its path."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from exporter.sweep import load_results, sweep

SWEEP_MODELS = str(Path(__file__).with_name("sweep_models.py"))
UNITS = ["mlp", "baked", "vanishing"]


@pytest.fixture(scope="module")
def ray_cluster():
    pytest.importorskip("ray")
    from exporter.sweep.engines import connect_ray

    try:
        ray = connect_ray(num_cpus=2)  # a local cluster, started again if the loaded machine makes it time out
    except Exception as exc:
        if "timed out during startup" not in str(exc):
            raise
        message = f"Ray's local node did not register within Ray's fixed 30 s, three times: {exc}"
        if os.environ.get("CI"):  # CI installs Ray (the sweep extra): there it must run, not skip
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    yield ray
    ray.shutdown()


@pytest.fixture(scope="module")
def local_run(tmp_path_factory):
    directory = tmp_path_factory.mktemp("local")
    return sweep(SWEEP_MODELS, models=UNITS, engine="local", workers=2, output_dir=directory, timeout=180, progress=False)


@pytest.fixture(scope="module")
def ray_run(tmp_path_factory, ray_cluster):
    directory = tmp_path_factory.mktemp("ray")
    return sweep(SWEEP_MODELS, models=UNITS, engine="ray", workers=2, output_dir=directory, timeout=180, progress=False)


def test_each_unit_gives_a_record_with_its_stages_verdict_and_baseline(local_run):
    assert [r.model for r in local_run.records] == UNITS
    mlp = local_run.record("mlp")
    assert mlp.status == "passed", mlp
    assert list(mlp.stages) == ["build", "eager", "capture", "decompose", "translate", "optimize", "verify", "baseline"]
    assert mlp.verdict.startswith("Verification PASSED")
    assert mlp.baseline == "passed" and mlp.versus == "same"
    assert mlp.onnx_bytes and mlp.onnx_bytes > 0 and mlp.versions["torch"]
    assert mlp.pid != os.getpid() and mlp.seconds["total"] > 0
    baked = local_run.record("baked")
    assert baked.status == "export_failed" and baked.failed_stage == "capture"
    assert baked.error and baked.failure_class
    assert baked.baseline is not None and baked.versus is not None
    assert set(local_run.executed) == {r.unit_id for r in local_run.records}


def test_outputs_too_small_to_compare_leave_both_exporters_not_verified_not_one_worse(local_run):
    """torch.onnx.export's model is compared on the very cases verify compared: when those
    tell nothing (every value within atol of 0), its match tells nothing either."""
    vanishing = local_run.record("vanishing")
    assert vanishing.status == "not_verified", vanishing
    assert vanishing.baseline == "not_verified" and vanishing.versus == "same"
    assert "atol of 0" in vanishing.baseline_error


def test_records_are_appended_to_jsonl_as_units_finish(local_run):
    lines = (Path(local_run.directory) / "records.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["model"] for line in lines) == sorted(UNITS)
    finished = [json.loads(line)["finished"] for line in lines]
    assert all(later >= earlier - 1.0 for earlier, later in zip(finished, finished[1:]))  # in the order they finished


@pytest.mark.slow  # starts a local Ray cluster (10-35 s here) and runs the units again on it
@pytest.mark.xdist_group("notebooks")  # a local Ray cluster: on the worker that runs notebook 09's, never beside it
def test_local_and_ray_engines_give_the_same_table(local_run, ray_run):
    assert [r.outcome() for r in ray_run.records] == [r.outcome() for r in local_run.records]
    assert {r.pid for r in ray_run.records}.isdisjoint({r.pid for r in local_run.records})


def test_a_rerun_resumes_and_runs_no_unit_again(local_run):
    again = sweep(SWEEP_MODELS, models=UNITS, engine="local", workers=2, output_dir=local_run.directory, progress=False)
    assert again.executed == ()
    assert again.records == local_run.records  # same pids and timestamps: read back, not rerun
    lines = (Path(local_run.directory) / "records.jsonl").read_text().splitlines()
    assert len(lines) == len(UNITS)


def test_a_hanging_unit_times_out_and_one_past_its_memory_cap_is_oom(tmp_path):
    started = time.monotonic()
    results = sweep(SWEEP_MODELS, models=["hang", "oom", "grows"], workers=2, output_dir=tmp_path, timeout=20,
                    memory_gb=1.5, progress=False)
    hang, oom, grows = results.record("hang"), results.record("oom"), results.record("grows")
    assert hang.status == "timeout" and hang.failed_stage == "eager", hang  # its forward never returns
    assert "killed after 20 s in eager" in (hang.error or "")
    assert oom.status == "oom" and oom.failed_stage == "build", oom  # 16 GiB at once: the address-space backstop
    # Resident memory passing the cap is killed by the watch, long before the backstop (4.5 GiB).
    assert grows.status == "oom" and grows.failed_stage == "build", grows
    assert "resident, past its memory cap of 1.5 GiB in build" in (grows.error or ""), grows.error
    assert time.monotonic() - started < 60
    assert {r.status for r in load_results(tmp_path).records} == {"timeout", "oom"}


def test_ctrl_c_cancels_kills_the_running_unit_and_keeps_what_finished(tmp_path):
    pid_file = tmp_path / "pid"
    code = ("import sys\nfrom exporter.sweep import sweep\n"
            f"r = sweep({SWEEP_MODELS!r}, models=['hang'], workers=1, output_dir={str(tmp_path / 'out')!r}, progress=False)\n"
            "print('interrupted', r.interrupted)\n")
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "SWEEP_TEST_PID_FILE": str(pid_file)})
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert time.monotonic() < deadline and process.poll() is None, process.communicate()
        time.sleep(0.2)
    unit_pid = int(pid_file.read_text())
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=30)
    assert "interrupted True" in out, err
    assert "sweep interrupted" in err
    time.sleep(0.5)
    with pytest.raises(ProcessLookupError):
        os.kill(unit_pid, 0)


def test_the_subcommand_writes_the_dashboard_and_coverage_and_diffs(local_run, tmp_path, capsys):
    import argparse

    from exporter.sweep.cli import add_sweep_parser, run_sweep_command

    parser = argparse.ArgumentParser()
    add_sweep_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["sweep", "--zoo", SWEEP_MODELS, *(f"--model={m}" for m in UNITS), "-o", local_run.directory,
                              "--dashboard", str(tmp_path / "d.html"), "--coverage", str(tmp_path / "c.md"),
                              "--diff", local_run.directory, "--no-progress"])
    assert run_sweep_command(args) == 0
    out = capsys.readouterr().out
    assert f"{len(UNITS)} units:" in out and f"no change ({len(UNITS)} unchanged)" in out
    assert "baked" in (tmp_path / "d.html").read_text() and "| mlp | dynamic | pass |" in (tmp_path / "c.md").read_text()


def test_a_failed_unit_is_exported_again_with_the_model_patches_its_session_offers(tmp_path):
    pytest.importorskip("transformers")
    results = sweep(SWEEP_MODELS, models=["focalnet"], engine="local", workers=1, output_dir=tmp_path, timeout=300,
                    progress=False)
    record = results.record("focalnet")
    assert record.status == "verify_failed"  # the export's own status is kept
    assert record.fixed_by == ("pad_to_patch_multiple",) and record.fixed_status == "passed" and record.fixed
    assert results.with_offered_patches() == \
        "1 of 1 failed unit(s) offered model patches pass with them (session.apply_suggested_fixes())"
    assert r"| pass (pad\_to\_patch\_multiple) |" in results.coverage_markdown()  # cells are escaped
    assert "wrong · patched: pass" in results.dashboard()
    assert "fixed = session.apply_suggested_fixes()  # patches pad_to_patch_multiple" in results.dashboard()
    assert load_results(tmp_path).record("focalnet").fixed_by == ("pad_to_patch_multiple",)  # through JSON


def test_a_failure_with_no_patch_to_offer_records_none(local_run):
    baked = local_run.record("baked")
    assert baked.failed and baked.fixed_by == () and baked.fixed_status is None
    assert local_run.with_offered_patches() is None


def test_the_transformers_zoo_draws_all_zero_weight_matrices_and_leaves_the_rest():
    import torch

    from exporter.sweep.zoos.transformers import randomize_zero_matrices

    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.Linear(3, 2))
    torch.nn.init.zeros_(model[0].weight)
    torch.nn.init.zeros_(model[0].bias)
    untouched = model[1].weight.detach().clone()

    randomize_zero_matrices(model)

    assert model[0].weight.any()  # a zero-initialised router would make every score tie
    assert not model[0].bias.any()  # biases and norms start at zero in checkpoints too
    assert torch.equal(model[1].weight, untouched)


def test_the_transformers_zoo_gives_batch_norms_the_statistics_of_the_example_so_deep_outputs_do_not_vanish():
    import torch

    from exporter.sweep.zoos.transformers import calibrate_batch_norms

    class Stack(torch.nn.Module):  # small random convolutions, as a tiny config initialises them
        def __init__(self):
            super().__init__()
            layers = []
            for _ in range(8):
                conv = torch.nn.Conv2d(8, 8, 3, padding=1)
                torch.nn.init.normal_(conv.weight, std=0.02)
                torch.nn.init.zeros_(conv.bias)
                layers += [conv, torch.nn.BatchNorm2d(8), torch.nn.ReLU()]
            self.layers = torch.nn.Sequential(*layers)

        def forward(self, pixel_values):
            return self.layers(pixel_values)

    model = Stack().eval()
    x = torch.randn(2, 8, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        before = float(model(x).abs().max())
        calibrate_batch_norms(model, {"pixel_values": x})
        after = float(model(x).abs().max())
    assert before < 1e-6 < 0.1 < after  # shrunk tenfold per layer at statistics 0 and 1
    assert not model.training and all(m.momentum == 0.1 for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d))


@pytest.mark.parametrize(("model_type", "half"), [("qwen2_5_vl_text", 8), ("glm4v_moe_text", 4)])
def test_the_transformers_zoo_gives_multimodal_rotary_sections_summing_to_half_the_tiny_rotary_dim(model_type, half):
    import torch
    import transformers
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from transformers.models.auto.modeling_auto import MODEL_MAPPING_NAMES

    from exporter.sweep.zoos.transformers import shrink_config

    config = shrink_config(CONFIG_MAPPING[model_type]())  # the model defaults to [16, 24, 24] / [8, 12, 12]
    sections = config.rope_parameters["mrope_section"]
    assert sum(sections) == half and len(sections) == 3  # GLM-4V rotates half of each 16-channel head
    model = getattr(transformers, MODEL_MAPPING_NAMES[model_type])(config).eval()
    with torch.no_grad():
        model(input_ids=torch.randint(3, 100, (2, 5)))  # "split_with_sizes expects split_sizes to sum exactly to 8"


def test_the_transformers_zoo_shrinks_a_config_with_per_stage_head_counts_and_rope_parameters():
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    from exporter.sweep.zoos.transformers import shrink_config

    config = shrink_config(CONFIG_MAPPING["maskformer"]())  # a Swin backbone: num_heads per stage, a list
    assert isinstance(config.backbone_config.num_heads, list)
