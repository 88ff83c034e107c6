"""Serializers: write a session's ONNX model or ExportedProgram, atomically.

A path destination is written to a temporary file in the same directory and moved into place
with ``os.replace``, so a failure never leaves a partial file behind (nor replaces a good one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .errors import SerializeError

if TYPE_CHECKING:
    import onnx

    from .artifacts import ExportArtifacts

__all__ = [
    "OnnxSerializer",
    "Pt2Serializer",
    "check_destination",
    "default_serializer",
    "initializer_bytes",
    "needs_external_data",
    "write_external_data",
    "PROTOBUF_LIMIT",
]

# A single protobuf message cannot be serialized past 2 GiB. Read at call time (tests lower it
# to send a tiny model down the external-data paths).
PROTOBUF_LIMIT = 2 * 1024**3


def _is_path(destination: Any) -> bool:
    return isinstance(destination, (str, os.PathLike))


def default_serializer(destination: Any) -> OnnxSerializer | Pt2Serializer:
    if _is_path(destination) and Path(destination).suffix == ".pt2":
        return Pt2Serializer()
    return OnnxSerializer()


def initializer_bytes(model: Any) -> int:
    """The bytes of an ``onnx_ir.Model``'s initializers (its weights), summed without copying."""
    total = 0
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is not None:
            total += tensor.nbytes
    return total


def needs_external_data(model: Any) -> bool:
    """Whether ``model`` cannot be one serialized protobuf: its weights reach the limit less
    1/32 of it (headroom for the graph itself: 64 MiB at 2 GiB)."""
    limit = PROTOBUF_LIMIT
    return initializer_bytes(model) >= limit - limit // 32


def write_external_data(model: Any, path: Path) -> Path:
    """Save ``model`` at ``path`` with its weights in ``<name>.data`` beside it (never as one
    serialized blob of the whole model); returns ``path``."""
    import onnx_ir as ir

    path = Path(path)
    ir.save(model, path, external_data=path.name + ".data")
    return path


def check_destination(target: Any, *, create_parents: bool = False) -> Path:
    """Raise :class:`SerializeError` unless a file can be written at ``target``: it is not a
    directory, and its directory exists (is created with ``create_parents``) and accepts a new
    file (tried with a temporary file, removed at once). Cheap: call it before a long export."""
    target = Path(target)
    if target.is_dir():
        raise SerializeError(
            f"{str(target)!r} is a directory, not a file name",
            hint=f"give a file inside it: {str(target / 'model.onnx')!r}",
        )
    directory = target.parent
    if create_parents:
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise SerializeError(
                f"cannot create the directory {str(directory)!r}: {exc.strerror or exc}",
                hint="choose an output path in a writable directory",
            ) from exc
    elif not directory.is_dir():
        raise SerializeError(
            f"directory {str(directory)!r} does not exist",
            hint=f"create it first: Path({str(directory)!r}).mkdir(parents=True)",
        )
    try:
        with tempfile.NamedTemporaryFile(prefix=f".{target.name}-probe-", dir=directory):
            pass
    except OSError as exc:
        raise SerializeError(
            f"cannot write in the directory {str(directory)!r}: {exc.strerror or exc}",
            hint="choose an output path in a writable directory",
        ) from exc
    return target


def _write_atomically(target: Path, write: Callable[[Path], None]) -> Path:
    """``write(directory)`` fills a fresh temporary directory beside ``target`` with files
    named like the final ones; each is then moved into place, the target itself last."""
    check_destination(target)
    tmpdir = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
    try:
        write(tmpdir)
        for written in sorted(tmpdir.iterdir(), key=lambda p: p.name == target.name):
            os.replace(written, target.parent / written.name)
    except SerializeError:
        raise
    except Exception as exc:
        raise SerializeError(f"could not write {str(target)!r}: {exc}", hint="check the path and free disk space") from exc
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    return target


def _write_to_file_object(destination: Any, write: Callable[[Any], None]) -> Any:
    try:
        write(destination)
    except Exception as exc:
        raise SerializeError(
            f"could not write to {destination!r}: {exc}",
            hint="pass a path, or a file object opened in binary mode ('wb')",
        ) from exc
    return destination


@dataclass(frozen=True)
class OnnxSerializer:
    """ONNX protobuf. ``external_data=None`` stores weights beside the model (in
    ``<name>.data``) only when they near 2 GiB (:func:`needs_external_data`); True / False
    force either way. Without external data the bytes written are ``session.model_bytes``,
    whatever the destination. With it, the copy onnxruntime already loads from (see
    ``session.ort_model_source``) is reused when the session has written one."""

    external_data: bool | None = None

    def serialize(self, session: ExportArtifacts, destination: Any) -> Any:
        ort_model = session.ort_model
        external = self.external_data
        if external is None:
            external = ort_model.is_large
        if not _is_path(destination):
            if external:
                raise SerializeError(
                    "external data needs a file path, not a file object",
                    hint="save to a path such as 'model.onnx'",
                )
            return _write_to_file_object(destination, lambda f: f.write(ort_model.model_bytes))
        target = Path(destination)
        if external:
            written = ort_model.external_path

            def write(directory: Path) -> None:
                if written is not None and _copy_external(written, directory / target.name):
                    return
                write_external_data(ort_model.model, directory / target.name)  # ir.save leaves the model as it was
        else:

            def write(directory: Path) -> None:
                (directory / target.name).write_bytes(ort_model.model_bytes)

        return _write_atomically(target, write)


def _copy_external(source: Path, target: Path) -> bool:
    """Copy a model saved with external data to ``target`` (its data to ``<target>.data``),
    pointing the small model file at the new data file; False if ``source`` is gone."""
    import onnx

    data = source.with_name(source.name + ".data")
    if not (source.is_file() and data.is_file()):
        return False
    proto = onnx.load(str(source), load_external_data=False)
    for tensor in _tensors_of(proto.graph):
        for entry in tensor.external_data:
            if entry.key == "location":
                entry.value = target.name + ".data"
    destination = target.with_name(target.name + ".data")
    try:
        os.link(data, destination)  # same file system: no copy at all
    except OSError:
        shutil.copyfile(data, destination)
    target.write_bytes(proto.SerializeToString())  # weights are references: a small proto
    return True


def _tensors_of(graph: onnx.GraphProto) -> Iterator[onnx.TensorProto]:
    import onnx

    yield from graph.initializer
    for node in graph.node:
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.TENSOR:
                yield attribute.t
            elif attribute.type == onnx.AttributeProto.GRAPH:
                yield from _tensors_of(attribute.g)
            elif attribute.type == onnx.AttributeProto.GRAPHS:
                for sub in attribute.graphs:
                    yield from _tensors_of(sub)


@dataclass(frozen=True)
class Pt2Serializer:
    """The captured ``torch.export.ExportedProgram`` (``torch.export.save``)."""

    def serialize(self, session: ExportArtifacts, destination: Any) -> Any:
        import torch

        program = session.exported_program
        if not _is_path(destination):
            return _write_to_file_object(destination, lambda f: torch.export.save(program, f))
        target = Path(destination)
        return _write_atomically(target, lambda directory: torch.export.save(program, directory / target.name))
