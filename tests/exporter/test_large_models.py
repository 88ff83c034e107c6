"""Models past the 2 GiB protobuf limit: every feature loads them from external data.

No test builds a 2 GiB model: ``exporter.serialize.PROTOBUF_LIMIT`` is read at call time and
lowered to 1 KiB, so a model with a few KiB of weights takes the external-data paths. Every
serialized ``ModelProto`` is recorded: none may hold the weights (be one blob of the model).
"""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

import exporter.serialize
from exporter import ExportError, ExportOptions, SerializeError, export
from exporter.serialize import initializer_bytes


class Stack(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(32, 64)
        self.fc2 = torch.nn.Linear(64, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture(scope="module")
def exported():
    torch.manual_seed(0)
    return export(Stack().eval(), torch.randn(2, 32), options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))


@pytest.fixture
def tmpdir_root(tmp_path, monkeypatch):
    """Temporary directories go under a fresh directory the test can inspect."""
    import tempfile

    root = tmp_path / "tmp"
    root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(root))
    return root


@pytest.fixture
def blobs(monkeypatch):
    """The sizes of every ModelProto serialized while the test runs."""
    sizes: list[int] = []
    original = onnx.ModelProto.SerializeToString

    def recording(self, *args, **kwargs):
        data = original(self, *args, **kwargs)
        sizes.append(len(data))
        return data

    monkeypatch.setattr(onnx.ModelProto, "SerializeToString", recording)
    return sizes


@pytest.fixture
def large(exported, monkeypatch, tmpdir_root, blobs):
    """A fresh session (sharing the exported stages) of a model 'past the limit'."""
    monkeypatch.setattr(exporter.serialize, "PROTOBUF_LIMIT", 1024)
    session = exported.with_options()
    weights = initializer_bytes(session.stage_output("optimize"))
    assert weights > 8 * 1024 and session.is_large
    yield session
    assert all(size < weights for size in blobs), f"a whole-model blob was serialized: {blobs} vs {weights} bytes of weights"
    session.release()


def eager(session, x):
    with torch.no_grad():
        return session.model(x).numpy()


def test_model_bytes_past_the_limit_raises_a_serialize_error_naming_limit_size_and_what_to_use(large):
    with pytest.raises(SerializeError) as info:
        _ = large.model_bytes
    error = info.value
    assert isinstance(error, ExportError)
    weights = initializer_bytes(large.stage_output("optimize"))
    assert "protobuf limit" in str(error) and f"{weights} bytes" in str(error)
    assert "session.save(" in error.hint and "ort_session" in error.hint and "ort_model_source" in error.hint


def test_ort_model_source_is_a_path_to_external_data_written_once_in_a_session_owned_temp_dir(large, tmpdir_root, monkeypatch):
    writes = []
    original = exporter.serialize.write_external_data
    monkeypatch.setattr(exporter.serialize, "write_external_data", lambda *a: writes.append(a) or original(*a))
    source = large.ort_model_source
    assert isinstance(source, str) and Path(source).is_file() and Path(source + ".data").is_file()
    assert Path(source).is_relative_to(tmpdir_root)
    small = onnx.load(source, load_external_data=False)
    inline = [init for init in small.graph.initializer if init.data_location != onnx.TensorProto.EXTERNAL]
    assert sum(len(init.raw_data) for init in inline) <= 512  # only ir.save's tiny tensors stay inline
    assert large.ort_model_source == source and len(writes) == 1


def test_below_the_limit_ort_model_source_is_the_model_bytes(exported):
    assert not exported.is_large
    assert exported.ort_model_source is exported.model_bytes


def test_run_onnx_past_the_limit_matches_eager(large):
    x = torch.randn(5, 32)
    (out,) = large.run_onnx(x)
    np.testing.assert_allclose(out, eager(large, x), rtol=1e-4, atol=1e-5)


def test_verify_past_the_limit_passes_at_the_example_and_the_sweep(large):
    result = large.verify(max_size=8)
    assert result.ok, result.summary()
    assert len(result.cases) >= 2


def test_benchmark_sweep_and_profile_past_the_limit_run_from_the_external_data_path(large, monkeypatch):
    sources = []
    import exporter.bench.runner as runner_module

    original = runner_module.OrtRunner.__init__

    def recording(self, model, **kwargs):
        sources.append(model)
        original(self, model, **kwargs)

    monkeypatch.setattr(runner_module.OrtRunner, "__init__", recording)
    result = large.benchmark(budget=0.02, min_runs=5, threads=1)
    assert result.ok, result.error
    sweep = large.benchmark_sweep("batch", (1, 4), budget=0.02, min_runs=5, threads=1)
    assert sweep.error is None and len(sweep.points) == 2
    profile = large.profile(runs=2, threads=1, optimization_level="disable")
    assert profile.error is None and {"fc1", "fc2"} <= set(profile.by_module()["module"])
    assert sources and all(isinstance(s, str) and s == large.ort_model_source for s in sources)


def test_benchmark_compare_past_the_limit_loads_the_unoptimized_model_from_its_own_external_data(large):
    comparison = large.compare(["unoptimized"], budget=0.02, min_runs=5, threads=1, eager=False)
    assert comparison.status == "ok", comparison.error
    row = comparison.row("unoptimized")
    assert row.error is None and row.model_mb * 2**20 >= initializer_bytes(large.stage_output("optimize"))


def test_graphs_past_the_limit_need_no_serialized_model(large):
    assert len(large.graphs.onnx_optimized.nodes) > 0
    assert len(large.graphs.fx.nodes) > 0


def test_save_past_the_limit_reuses_the_written_copy_and_round_trips_in_onnxruntime(large, tmp_path, monkeypatch):
    source = large.ort_model_source
    monkeypatch.setattr(exporter.serialize, "write_external_data",
                        lambda *a: pytest.fail("save re-serialized the weights instead of reusing the copy"))
    (tmp_path / "out").mkdir()
    target = large.save(tmp_path / "out" / "m.onnx")
    assert sorted(p.name for p in target.parent.iterdir()) == ["m.onnx", "m.onnx.data"]
    assert Path(source).is_file() and Path(source + ".data").is_file()  # the session's copy is intact
    x = torch.randn(3, 32)
    (out,) = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, {"x": x.numpy()})
    np.testing.assert_allclose(out, eager(large, x), rtol=1e-4, atol=1e-5)


def test_save_past_the_limit_without_a_written_copy_writes_external_data(large, tmp_path, tmpdir_root):
    target = large.save(tmp_path / "m.onnx")
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "tmp") == ["m.onnx", "m.onnx.data"]
    assert list(tmpdir_root.iterdir()) == []  # saving made no session copy
    (out,) = ort.InferenceSession(str(target), providers=["CPUExecutionProvider"]).run(None, {"x": np.ones((1, 32), np.float32)})
    assert out.shape == (1, 8)


def test_release_closes_the_ort_session_removes_the_temp_dir_and_is_idempotent(large, tmpdir_root):
    x = torch.randn(2, 32)
    large.run_onnx(x)
    session_ref = weakref.ref(large.ort_session)
    assert len(list(tmpdir_root.iterdir())) == 1
    large.release()
    gc.collect()
    assert session_ref() is None
    assert list(tmpdir_root.iterdir()) == []
    large.release()  # idempotent
    (out,) = large.run_onnx(x)  # a released session rebuilds what it needs
    np.testing.assert_allclose(out, eager(large, x), rtol=1e-4, atol=1e-5)
    assert len(list(tmpdir_root.iterdir())) == 1
    with large:
        large.run_onnx(x)
    assert list(tmpdir_root.iterdir()) == []  # leaving `with session:` releases it


def test_temp_dir_is_removed_when_the_session_is_garbage_collected(large, tmpdir_root):
    derived = large.with_options()
    derived.run_onnx(torch.randn(2, 32))
    assert len(list(tmpdir_root.iterdir())) == 1
    del derived
    gc.collect()
    assert list(tmpdir_root.iterdir()) == []


def test_a_failed_external_write_leaves_no_partial_model_and_the_next_call_succeeds(large, tmpdir_root, monkeypatch):
    original = exporter.serialize.write_external_data

    def half_written(model, path):
        Path(path).write_bytes(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(exporter.serialize, "write_external_data", half_written)
    with pytest.raises(OSError, match="disk full"):
        _ = large.ort_model_source
    (owned,) = tmpdir_root.iterdir()
    assert list(owned.iterdir()) == []  # the staging directory is gone
    monkeypatch.setattr(exporter.serialize, "write_external_data", original)
    assert onnx.load(large.ort_model_source, load_external_data=False).graph.input[0].name == "x"


def test_release_of_a_small_model_frees_its_onnxruntime_session(exported, tmpdir_root):
    session = exported.with_options()
    session.run_onnx(torch.randn(2, 32))
    session_ref = weakref.ref(session.ort_session)
    session.release()
    gc.collect()
    assert session_ref() is None and list(tmpdir_root.iterdir()) == []
    assert session.run_onnx(torch.randn(2, 32))[0].shape == (2, 8)


def test_intermediates_past_the_limit_run_from_external_data_and_remove_their_temp_dir(large, tmpdir_root):
    from exporter.verify import first_divergence

    x = torch.ones(2, 32)
    result = large.compare_intermediates(args=(x,))
    assert result.ok and result.compared > 2
    assert list(tmpdir_root.iterdir()) == []
    located = first_divergence(large, "ones", (x,), {}, [eager(large, x)])  # verify's search, on the same engine
    assert located.stage == "onnx" and located.compared > 2 and located.onnx_node is None
    assert list(tmpdir_root.iterdir()) == []


def test_limit_is_read_at_call_time(exported, monkeypatch):
    session = exported.with_options()
    assert not session.is_large
    monkeypatch.setattr(exporter.serialize, "PROTOBUF_LIMIT", 1024)
    assert session.is_large
    monkeypatch.setattr(exporter.serialize, "PROTOBUF_LIMIT", 2 * 1024**3)
    assert isinstance(session.ort_model_source, bytes)


def test_ports_past_the_limit_are_read_from_the_model_without_serializing_its_weights(large):
    from exporter.ports import default_opset, onnx_ports

    model = large.stage_output("optimize")
    ports = onnx_ports(model)
    assert [(p.kind, p.name, p.dtype, p.shape) for p in ports] == [
        ("input", "x", "FLOAT", ("batch", 32)), ("output", "output", "FLOAT", ("batch", 8))]
    assert ports == onnx_ports(large.model_proto) and default_opset(model) == default_opset(large.model_proto)


def test_benchmark_sweep_and_profile_past_the_limit_free_the_sessions_onnxruntime_copy_before_building_their_own(large, monkeypatch):
    import exporter.bench.runner as runner_module

    alive_at_build = []
    original = runner_module.OrtRunner.__init__

    def recording(self, model, **kwargs):
        alive_at_build.append(previous() is not None)
        original(self, model, **kwargs)

    monkeypatch.setattr(runner_module.OrtRunner, "__init__", recording)
    x = torch.randn(2, 32)
    for call in (lambda: large.benchmark(budget=0.02, min_runs=5, threads=1),
                 lambda: large.benchmark_sweep("batch", (2,), budget=0.02, min_runs=5, threads=1),
                 lambda: large.profile(runs=1, threads=1)):
        large.run_onnx(x)
        previous = weakref.ref(large.ort_session)
        call()
    assert alive_at_build == [False, False, False]
    np.testing.assert_allclose(large.run_onnx(x)[0], eager(large, x), rtol=1e-4, atol=1e-5)  # rebuilt


def test_below_the_limit_benchmark_keeps_the_sessions_onnxruntime_session(exported):
    session = exported.with_options()
    ort_session = session.ort_session
    assert session.benchmark(budget=0.02, min_runs=5, threads=1, eager=False).ok
    assert session.ort_session is ort_session


def test_model_proto_past_the_limit_is_built_per_call_and_not_kept_by_the_session(large, monkeypatch):
    import onnx_ir

    calls = []
    original = onnx_ir.to_proto
    monkeypatch.setattr(onnx_ir, "to_proto", lambda model: calls.append(model) or original(model))
    first, second = large.model_proto, large.model_proto
    assert first is not second and len(calls) == 2  # nothing cached: no full copy kept alive
    assert [i.name for i in first.graph.input] == ["x"] and len(first.graph.initializer) == 4
