"""Saving: ONNX and .pt2, to paths and file objects, atomically."""

from __future__ import annotations

import errno
import io
import os

import onnx
import pytest
import torch

from exporter import ExportOptions, OnnxSerializer, SerializeError, Serializer, export
from exporter.serializers import check_destination, os_reason


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


# -- what a save replaces: stale data files, symlinks ----------------------------------------


def test_a_plain_save_over_an_external_data_save_removes_the_data_file_the_old_model_read(session, tmp_path):
    target = tmp_path / "model.onnx"
    session.save(target, serializer=OnnxSerializer(external_data=True))
    session.save(target, serializer=OnnxSerializer(external_data=False))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx"]
    assert onnx.load(target).SerializeToString() == session.model_bytes


def test_a_save_never_removes_a_data_file_it_did_not_name(session, tmp_path):
    target = tmp_path / "model.onnx"
    onnx.save_model(session.model_proto, target, save_as_external_data=True, location="weights.bin", size_threshold=0)
    (tmp_path / "model.onnx.data").write_bytes(b"not read by the model at model.onnx")
    session.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model.onnx", "model.onnx.data", "weights.bin"]


@pytest.mark.parametrize("external_data", [False, True])
def test_save_through_a_symlink_writes_the_file_it_points_to_and_keeps_the_link(session, tmp_path, external_data):
    import numpy as np
    import onnxruntime as ort

    real, link = tmp_path / "v1.onnx", tmp_path / "latest.onnx"
    real.write_bytes(b"an older model")
    link.symlink_to(real.name)
    assert session.save(link, serializer=OnnxSerializer(external_data=external_data)) == link
    assert link.is_symlink() and os.readlink(link) == real.name
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest.onnx", "v1.onnx"] + (["v1.onnx.data"] if external_data else [])
    x = np.ones((2, 3), np.float32)
    (out,) = ort.InferenceSession(str(link), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(out, session.model(torch.from_numpy(x)).detach().numpy(), rtol=1e-5, atol=1e-6)


def test_pt2_save_through_a_symlink_keeps_the_link(session, tmp_path):
    real, link = tmp_path / "v1.pt2", tmp_path / "latest.pt2"
    real.write_bytes(b"an older program")
    link.symlink_to(real)
    session.save(link)
    assert link.is_symlink() and sorted(p.name for p in tmp_path.iterdir()) == ["latest.pt2", "v1.pt2"]
    x = torch.randn(4, 3)
    torch.testing.assert_close(torch.export.load(real).module()(x), session.model(x))


# -- what the OS said, in words ----------------------------------------------------------------


def test_a_directory_that_refuses_new_files_is_named_and_said_to_refuse_not_to_be_missing(session):
    with pytest.raises(SerializeError) as info:
        session.save("/proc/model.onnx")
    message = str(info.value)
    assert "cannot create a file in '/proc': the file system refuses new files there" in message
    assert "ENOENT" in message and "although '/proc' exists" in message
    assert "a directory you can write to" in info.value.hint


def test_a_file_where_a_directory_should_be_is_named_as_the_obstacle(session, tmp_path):
    blocker = tmp_path / "weights"
    blocker.write_text("a file")
    with pytest.raises(SerializeError) as info:
        session.save(blocker / "model.onnx")
    assert f"{str(blocker)!r} is a file, not a directory (ENOTDIR)" in str(info.value)
    assert f"move the file {str(blocker)!r} away" in info.value.hint
    with pytest.raises(SerializeError, match="is a file, not a directory") as created:
        check_destination(blocker / "sub" / "model.onnx", create_parents=True)
    assert f"cannot create the directory {str(blocker / 'sub')!r}" in str(created.value)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes in read-only directories")
def test_a_read_only_directory_is_refused_with_permission_denied_in_words(session, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(SerializeError) as info:
            session.save(locked / "model.onnx")
    finally:
        locked.chmod(0o700)
    assert f"you have no permission to create files in {str(locked)!r} (EACCES" in str(info.value)
    assert "ls -ld" in info.value.hint


@pytest.mark.parametrize(("code", "words", "fix"), [
    (errno.EACCES, "you have no permission to create files in", "change its permissions"),
    (errno.EROFS, "is on a read-only file system (EROFS", "mounted read-only"),
    (errno.ENOSPC, "the disk is full (ENOSPC: No space left on device)", "free disk space"),
    (errno.ENAMETOOLONG, "the file name is too long", "shorter file name"),
])
def test_each_os_refusal_is_said_in_words_with_its_code_and_a_fix(tmp_path, code, words, fix):
    reason = os_reason(OSError(code, os.strerror(code)), tmp_path)
    assert words in reason.words and errno.errorcode[code] in reason.words
    assert fix in reason.fix


@pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")
@pytest.mark.parametrize("external_data", [False, True])
def test_a_save_keeps_the_permission_bits_of_the_files_it_replaces(session, tmp_path, external_data):
    target = tmp_path / "model.onnx"
    serializer = OnnxSerializer(external_data=external_data)
    session.save(target, serializer=serializer)
    written = [target] + ([tmp_path / "model.onnx.data"] if external_data else [])
    for path in written:
        path.chmod(0o640)
    session.save(target, serializer=serializer)
    assert [oct(path.stat().st_mode & 0o777) for path in written] == [oct(0o640)] * len(written)
