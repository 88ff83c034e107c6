"""Serializers: write a session's ONNX model or ExportedProgram, atomically.

A path destination is written to a temporary file in the same directory and moved into place
with ``os.replace``, so a failure never leaves a partial file behind (nor replaces a good one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SerializeError

__all__ = ["OnnxSerializer", "Pt2Serializer", "check_destination", "default_serializer", "PROTOBUF_LIMIT"]

PROTOBUF_LIMIT = 2 * 1024**3  # a single protobuf file cannot exceed 2 GiB


def _is_path(destination: Any) -> bool:
    return isinstance(destination, (str, os.PathLike))


def default_serializer(destination: Any) -> Any:
    if _is_path(destination) and Path(destination).suffix == ".pt2":
        return Pt2Serializer()
    return OnnxSerializer()


def _initializer_bytes(model: Any) -> int:
    total = 0
    for value in model.graph.initializers.values():
        tensor = value.const_value
        if tensor is not None:
            total += tensor.nbytes
    return total


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
    ``<name>.data``) only when they reach 2 GiB; True / False force either way. Without
    external data the bytes written are ``session.model_bytes``, whatever the destination."""

    external_data: bool | None = None

    def serialize(self, session: Any, destination: Any) -> Any:
        model = session.onnx_model
        external = self.external_data
        if external is None:
            external = _initializer_bytes(model) >= PROTOBUF_LIMIT
        if not _is_path(destination):
            if external:
                raise SerializeError(
                    "external data needs a file path, not a file object",
                    hint="save to a path such as 'model.onnx'",
                )
            return _write_to_file_object(destination, lambda f: f.write(session.model_bytes))
        target = Path(destination)
        if external:
            import onnx_ir as ir

            def write(directory: Path) -> None:
                ir.save(model, directory / target.name, external_data=target.name + ".data")
        else:

            def write(directory: Path) -> None:
                (directory / target.name).write_bytes(session.model_bytes)

        return _write_atomically(target, write)


@dataclass(frozen=True)
class Pt2Serializer:
    """The captured ``torch.export.ExportedProgram`` (``torch.export.save``)."""

    def serialize(self, session: Any, destination: Any) -> Any:
        import torch

        program = session.exported_program
        if not _is_path(destination):
            return _write_to_file_object(destination, lambda f: torch.export.save(program, f))
        target = Path(destination)
        return _write_atomically(target, lambda directory: torch.export.save(program, directory / target.name))
