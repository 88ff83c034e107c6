"""The ONNX file facts saving and onnxruntime both need: the 2 GiB protobuf limit, a model's
weight bytes, whether it needs external data, and a (non-atomic) write with external data.

The serializers (:mod:`exporter.serializers`) and :class:`~exporter.ort_model.OrtModel` build on
these; :data:`PROTOBUF_LIMIT` is read at call time (tests lower it to send a tiny model down
the external-data paths).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["PROTOBUF_LIMIT", "initializer_bytes", "needs_external_data", "write_external_data"]

# A single protobuf message cannot be serialized past 2 GiB.
PROTOBUF_LIMIT = 2 * 1024**3


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
    serialized blob of the whole model); returns ``path``. Not atomic: write into a directory
    of your own (the serializers stage it and commit it: :mod:`exporter.atomic_save`)."""
    import onnx_ir as ir

    path = Path(path)
    ir.save(model, path, external_data=path.name + ".data")
    return path
