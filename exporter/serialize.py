"""Serializers: write a session's ONNX model or ExportedProgram, atomically.

A path destination is written to a temporary file in the same directory and moved into place
with ``os.replace``, so a failure never leaves a partial file behind (nor replaces a good one).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SerializeError

__all__ = ["OnnxSerializer", "Pt2Serializer", "default_serializer", "PROTOBUF_LIMIT"]

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


@dataclass(frozen=True)
class OnnxSerializer:
    """ONNX protobuf. ``external_data=None`` stores weights beside the model (in
    ``<name>.data``) only when they reach 2 GiB; True / False force either way."""

    external_data: bool | None = None

    def serialize(self, session: Any, destination: Any) -> Any:
        import onnx_ir as ir

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
            destination.write(session.model_proto.SerializeToString())
            return destination
        target = Path(destination)
        if not target.parent.is_dir():
            raise SerializeError(
                f"directory {str(target.parent)!r} does not exist",
                hint=f"create it first: Path({str(target.parent)!r}).mkdir(parents=True)",
            )
        data_name = target.name + ".data"
        tmpdir = tempfile.mkdtemp(prefix=".onnx-save-", dir=target.parent)
        try:
            tmp_model = Path(tmpdir) / target.name
            ir.save(model, tmp_model, external_data=data_name if external else None)
            if external:
                os.replace(Path(tmpdir) / data_name, target.parent / data_name)
            os.replace(tmp_model, target)
        except SerializeError:
            raise
        except Exception as exc:
            raise SerializeError(f"could not write {str(target)!r}: {exc}", hint="check the path and free disk space") from exc
        finally:
            shutil.rmtree(tmpdir, ignore_errors=True)
        return target


@dataclass(frozen=True)
class Pt2Serializer:
    """The captured ``torch.export.ExportedProgram`` (``torch.export.save``)."""

    def serialize(self, session: Any, destination: Any) -> Any:
        import torch

        program = session.exported_program
        if not _is_path(destination):
            torch.export.save(program, destination)
            return destination
        target = Path(destination)
        fd, tmp = tempfile.mkstemp(prefix=".pt2-save-", suffix=".pt2", dir=target.parent if target.parent.is_dir() else None)
        os.close(fd)
        try:
            torch.export.save(program, tmp)
            os.replace(tmp, target)
        except Exception as exc:
            raise SerializeError(f"could not write {str(target)!r}: {exc}", hint="check the path and free disk space") from exc
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return target
