"""Saving: ONNX and .pt2, to paths and file objects, atomically."""

from __future__ import annotations

import io

import onnx
import pytest
import torch

from exporter import ExportOptions, OnnxSerializer, SerializeError, Serializer, export


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 64)  # weights above ir.save's 256-byte inline threshold

    def forward(self, x):
        return self.linear(x)


@pytest.fixture(scope="module")
def session():
    return export(Tiny().eval(), torch.randn(2, 3), options=ExportOptions(dynamic_shapes={"x": {0: "batch"}}))


def test_save_to_path_writes_a_loadable_onnx_model(session, tmp_path):
    target = session.save(tmp_path / "model.onnx")
    loaded = onnx.load(target)
    onnx.checker.check_model(loaded)
    assert loaded.graph.input[0].name == "x"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_save_to_a_binary_file_object(session):
    buffer = io.BytesIO()
    session.save(buffer)
    assert onnx.load_from_string(buffer.getvalue()).graph.output[0].name == "output"


def test_external_data_on_request_writes_weights_beside_the_model(session, tmp_path):
    session.save(tmp_path / "model.onnx", serializer=OnnxSerializer(external_data=True))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data"]
    loaded = onnx.load(tmp_path / "model.onnx", load_external_data=False)
    assert any(init.data_location == onnx.TensorProto.EXTERNAL for init in loaded.graph.initializer)


def test_pt2_suffix_saves_the_exported_program(session, tmp_path):
    target = session.save(tmp_path / "program.pt2")
    program = torch.export.load(target)
    x = torch.randn(5, 3)
    torch.testing.assert_close(program.module()(x), session.model(x))


@pytest.mark.parametrize("external_data", [False, True])
def test_failed_save_leaves_no_partial_file_and_keeps_the_old_one(session, tmp_path, monkeypatch, external_data):
    import pathlib

    import onnx_ir

    target = tmp_path / "model.onnx"
    session.save(target)
    before = target.read_bytes()

    def write_half_then_fail(path, *args, **kwargs):  # a disk that fills up mid-write
        with open(path if isinstance(path, (str, pathlib.Path)) else args[0], "wb") as f:
            f.write(b"partial")
        raise OSError("No space left on device")

    if external_data:
        monkeypatch.setattr(onnx_ir, "save", lambda model, path, **kw: write_half_then_fail(path))
    else:
        monkeypatch.setattr(pathlib.Path, "write_bytes", write_half_then_fail)
    with pytest.raises(SerializeError, match="No space left on device"):
        session.save(target, serializer=OnnxSerializer(external_data=external_data))
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]


def test_custom_serializer_satisfies_the_protocol_and_is_used(session, tmp_path):
    class NodeCount:
        def serialize(self, session, destination):
            destination.write_text(str(len(session.model_proto.graph.node)))
            return destination

    assert isinstance(NodeCount(), Serializer)
    target = session.save(tmp_path / "count.txt", serializer=NodeCount())
    assert int(target.read_text()) == len(session.model_proto.graph.node) > 0


def test_save_into_a_missing_directory_says_how_to_fix_it(session, tmp_path):
    with pytest.raises(SerializeError, match="does not exist") as info:
        session.save(tmp_path / "nope" / "model.onnx")
    assert "mkdir" in info.value.hint


def test_path_and_file_object_get_the_same_bytes(session, tmp_path):
    buffer = io.BytesIO()
    session.save(buffer)
    assert session.save(tmp_path / "model.onnx").read_bytes() == buffer.getvalue() == session.model_bytes


def test_a_text_mode_file_object_is_a_serialize_error_that_says_binary(session, tmp_path):
    with open(tmp_path / "model.onnx", "w") as text_file, pytest.raises(SerializeError) as info:
        session.save(text_file)
    assert "'wb'" in info.value.hint


def test_pt2_into_a_missing_directory_names_that_directory(session, tmp_path):
    with pytest.raises(SerializeError, match="does not exist") as info:
        session.save(tmp_path / "nope" / "program.pt2")
    assert str(tmp_path / "nope") in str(info.value)
