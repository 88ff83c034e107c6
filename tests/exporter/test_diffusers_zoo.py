"""The diffusers zoo: every entry builds from its tiny config and runs eager on its example with
the dims it names; listing is lazy and a missing diffusers gives skipped entries; a few
entries go through the sweep end to end (real worker processes, exports, onnxruntime)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from exporter.sweep.zoos import diffusers as zoo

pytest.importorskip("diffusers")

NAMES = [m.name for m in zoo.MODELS]


def _tensors(value):
    import torch

    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors(item)


def _named_dims(dims, value):
    """(tensor, {axis: name}) for each tensor that ``dims`` names axes of."""
    if isinstance(dims, dict) and all(isinstance(k, int) for k in dims):
        yield value, dims
    elif isinstance(dims, dict):
        for key, sub in dims.items():
            yield from _named_dims(sub, value[key])


@pytest.mark.parametrize("name", NAMES)
def test_each_entry_builds_tiny_and_runs_eager_on_its_example_with_the_dims_it_names(name):
    import torch

    case = zoo.diffusers_model(name)
    assert not case.args and set(case.dynamic_shapes) == set(case.kwargs)  # every input named in the spec
    assert sum(p.numel() for p in case.model.parameters()) < 2_000_000
    assert not case.model.training
    with torch.no_grad():
        output = case.model(**case.kwargs)
    outputs = list(_tensors(output if isinstance(output, torch.Tensor) else
                            dict(output) if hasattr(output, "keys") else output))
    assert outputs and all(torch.isfinite(o).all() for o in outputs)
    assert any(o.abs().max() > 1e-4 for o in outputs), "outputs vanish: no comparison could tell a wrong export"
    sizes: dict[str, int] = {}
    named = [pair for key, dims in case.dynamic_shapes.items() for pair in _named_dims(dims, case.kwargs[key])]
    assert any(dims for _, dims in named)
    for tensor, dims in named:
        for axis, dim in dims.items():
            assert sizes.setdefault(dim, tensor.shape[axis]) == tensor.shape[axis], (name, dim)  # one name, one size
    assert sizes["batch"] == zoo.BATCH


def test_the_same_entry_builds_the_same_weights_and_inputs_each_time():
    import torch

    first, second = zoo.diffusers_model("dit"), zoo.diffusers_model("dit")
    assert all(torch.equal(a, b) for a, b in zip(first.model.state_dict().values(), second.model.state_dict().values(),
                                                 strict=True))
    assert torch.equal(first.kwargs["hidden_states"], second.kwargs["hidden_states"])


def test_zero_initialised_layers_are_drawn_so_a_controlnet_does_not_answer_zeros():
    # diffusers zero-initialises a ControlNet's output convolutions: every residual would be 0
    import torch

    case = zoo.diffusers_model("controlnet")
    with torch.no_grad():
        output = case.model(**case.kwargs)
    assert all(r.abs().max() > 0 for r in output.down_block_res_samples)


def test_the_zoo_is_registered_and_lists_every_family_without_building():
    from exporter.sweep.zoo import get_zoo

    entries = get_zoo("diffusers").entries()
    assert [e.name for e in entries] == NAMES and len(NAMES) >= 30
    assert all(e.factory is not None and e.source == "exporter.sweep.zoos.diffusers" for e in entries)


def test_importing_the_sweep_and_listing_zoos_does_not_import_diffusers():
    script = ("import sys, exporter.sweep, exporter.sweep.zoos.diffusers\n"
              "print('diffusers' in sys.modules, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_without_diffusers_every_entry_is_skipped_with_the_reason(monkeypatch):
    monkeypatch.setitem(sys.modules, "diffusers", None)  # what a failing import looks like
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: object())
    entries = zoo.DiffusersZoo().entries()
    assert len(entries) == len(NAMES) and all(e.factory is None for e in entries)
    assert all("diffusers does not import here" in (e.skip_reason or "") for e in entries)


def test_a_class_this_diffusers_lacks_is_skipped_with_its_name(monkeypatch):
    never_built = zoo._Model("future", "FutureTransformer9DModel", lambda d, torch: pytest.fail("built"))
    monkeypatch.setattr(zoo, "MODELS", (*zoo.MODELS, never_built))
    entries = {e.name: e for e in zoo.DiffusersZoo().entries()}
    assert entries["future"].factory is None
    assert "has no FutureTransformer9DModel" in (entries["future"].skip_reason or "")
    assert entries["flux"].factory is not None


def test_a_sweep_without_diffusers_records_skipped_units_without_a_process(tmp_path, monkeypatch):
    from exporter.sweep import sweep

    monkeypatch.setitem(sys.modules, "diffusers", None)
    results = sweep("diffusers", models=["unet_2d", "dit"], output_dir=tmp_path, progress=False)
    assert [r.status for r in results.records] == ["skipped", "skipped"]
    assert all(r.pid == 0 and "diffusers" in (r.error or "") for r in results.records)


@pytest.mark.slow  # two exports, their verify and torch.onnx.export baselines in fresh processes
def test_a_sweep_exports_verifies_and_compares_diffusers_models_end_to_end(tmp_path):
    from exporter.sweep import sweep

    units = ["unet_2d", "autoencoder_kl_decode"]
    results = sweep("diffusers", models=units, workers=1, output_dir=tmp_path, timeout=900, progress=False)
    assert [r.model for r in results.records] == units
    for record in results.records:
        # exported (a FrozenDict config and an output dataclass no longer stop it), verified, compared
        assert record.stages.get("optimize") == "ok" and record.verdict, record
        assert record.baseline and record.versus in ("same", "better"), record
    assert results.record("unet_2d").status == "passed"
