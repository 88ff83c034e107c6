"""Serializers: write a session's ONNX model or ExportedProgram, to a path or a file object.

:class:`OnnxSerializer` writes ONNX (its weights beside it in ``<name>.data`` past
:data:`exporter.serialize.PROTOBUF_LIMIT`), :class:`Pt2Serializer` a ``torch.export`` program.
A save to a path is atomic, even when killed: :mod:`exporter.atomic_save` stages and commits it
(the guarantee and how it is kept are in its docstring); :mod:`exporter.os_reasons` says in
words why the OS refused. Their public names (:func:`check_destination`,
:func:`remove_leftovers`, :data:`STALE_SECONDS`, :func:`os_reason`, :class:`OsReason`) are
importable from here too.

A serializer reads one member of what it saves: ``ort_model`` (ONNX) or ``exported_program``
(``.pt2``); a :class:`~exporter.Session` has both.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .atomic_save import (
    STALE_SECONDS,
    _tensors_of,
    _write_atomically,
    _write_external_atomically,
    check_destination,
    remove_leftovers,
)
from .errors import SerializeError
from .os_reasons import OsReason, os_reason
from . import serialize

if TYPE_CHECKING:
    from .ort_model import OrtModel

__all__ = [
    "OnnxSerializer",
    "Pt2Serializer",
    "Serializer",
    "SAVE_FORMATS",
    "check_destination",
    "default_serializer",
    "OsReason",
    "STALE_SECONDS",
    "os_reason",
    "remove_leftovers",
]

SAVE_FORMATS = {".onnx": "an ONNX model", ".pt2": "a torch.export ExportedProgram"}
"""The file endings a front end (``%onnx_export --save``, ``onnx-workbench export -o``) writes;
``Session.save`` itself writes ONNX under any other name, as ``torch.onnx.export`` does."""



@runtime_checkable
class Serializer(Protocol):
    """Writes a session's artefact to a path or a binary file object: what
    :meth:`~exporter.Session.save` calls with the :class:`~exporter.Session` (the built-in
    ones read one member of it: :class:`SavedOnnx`, :class:`SavedProgram`)."""

    def serialize(self, session: Any, destination: Any) -> Any: ...


class SavedOnnx(Protocol):
    """What :class:`OnnxSerializer` saves: the model as onnxruntime runs it."""

    @property
    def ort_model(self) -> OrtModel: ...


class SavedProgram(Protocol):
    """What :class:`Pt2Serializer` saves: the captured program."""

    @property
    def exported_program(self) -> Any: ...


def _is_path(destination: Any) -> bool:
    return isinstance(destination, (str, os.PathLike))


def default_serializer(destination: Any) -> OnnxSerializer | Pt2Serializer:
    if _is_path(destination) and Path(destination).suffix == ".pt2":
        return Pt2Serializer()
    return OnnxSerializer()


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
    ``session.ort_model_source``) is reused when the session has written one. Saves to a path
    are atomic, even killed (see :mod:`exporter.atomic_save`)."""

    external_data: bool | None = None

    def serialize(self, session: SavedOnnx, destination: Any) -> Any:
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

            def stage(model_path: Path) -> None:
                if written is not None and _copy_external(written, model_path):
                    return
                serialize.write_external_data(ort_model.model, model_path)  # ir.save leaves the model as it was

            return _write_external_atomically(target, stage)

        def write(directory: Path) -> None:
            (directory / target.name).write_bytes(ort_model.model_bytes)

        return _write_atomically(target, write, onnx_model=True)


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


@dataclass(frozen=True)
class Pt2Serializer:
    """The captured ``torch.export.ExportedProgram`` (``torch.export.save``), atomically (one
    ``os.replace`` of a staged file; leftovers of killed saves removed, as for ONNX)."""

    def serialize(self, session: SavedProgram, destination: Any) -> Any:
        import torch

        program = session.exported_program
        if not _is_path(destination):
            return _write_to_file_object(destination, lambda f: torch.export.save(program, f))
        target = Path(destination)
        return _write_atomically(target, lambda directory: torch.export.save(program, directory / target.name))
