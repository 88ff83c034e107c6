"""The exported model as onnxruntime loads it, with a lifecycle of its own.

An :class:`OrtModel` wraps one final ``onnx_ir.Model`` and builds, on demand and once, what
onnxruntime needs: the serialized bytes (or, past the 2 GiB protobuf limit, the model saved
with external data in a temporary directory it owns), a CPU ``InferenceSession``, and the copy
outputs are read through when numpy cannot hold an output's dtype. :meth:`OrtModel.make_room`
frees the cached sessions of a large model before another copy of its weights is loaded (a
benchmark's, a profile's); :meth:`OrtModel.release` frees everything, and the next request
builds it again. :attr:`exporter.Session.ort_model` is the session's one.
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import serialize
from .errors import SerializeError

if TYPE_CHECKING:
    import onnx
    import onnx_ir
    import onnxruntime

__all__ = ["OrtModel", "UNREADABLE_OUTPUTS", "ort_inference_session"]

# onnxruntime runs these but cannot hand them to numpy ("No corresponding Numpy type") or, for
# float8 e4m3fn, hands over the raw bits as uint8: outputs of these types are read through an
# exact Cast to float32 appended to a copy of the model.
UNREADABLE_OUTPUTS = ("BFLOAT16", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2", "FLOAT8E5M2FNUZ",
                      "FLOAT4E2M1", "FLOAT8E8M0")


def ort_inference_session(source: bytes | str | os.PathLike[str], options: Any = None,
                          providers: Sequence[str] = ("CPUExecutionProvider",)) -> onnxruntime.InferenceSession:
    """An onnxruntime ``InferenceSession`` from :attr:`OrtModel.source` (bytes, or the path of
    a model with external data), its log silenced unless ``options`` say: a run that fails
    raises with onnxruntime's message, which verify reports in its finding; the log would
    print the same error again, in red, in the notebook.

    Without the CPU memory arena unless ``options`` say: verify runs a handful of sizes once
    each, and the arena keeps the largest of them (grown in powers of two) for the session's
    life. An unrolled chunked model (Bailing-Hybrid's delta rule) held 2.1 GB after runs at
    16 and 32 tokens with it, 0.2 GB without, at the same speed within noise; the benchmark
    builds its own session, as a deployment would, with the arena."""
    import onnxruntime as ort

    if options is None:
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.enable_cpu_mem_arena = False
    if isinstance(source, os.PathLike):
        source = os.fspath(source)
    return ort.InferenceSession(source, options, providers=list(providers))


class OrtModel:
    """One exported model as onnxruntime loads it. Thread-safe: two threads asking for the
    same thing get one copy of it. The ``onnx_ir.Model`` is shared (a session's stage output):
    nothing here changes it."""

    def __init__(self, model: onnx_ir.Model) -> None:
        self._model = model
        self._lock = threading.RLock()
        self._proto: onnx.ModelProto | None = None
        self._bytes: bytes | None = None
        self._session: onnxruntime.InferenceSession | None = None
        self._output_session: onnxruntime.InferenceSession | None = None  # self._session when outputs are readable
        self._external: Path | None = None  # the model saved with external data, once written
        self._tempdir: str | None = None
        self._tempdir_finalizer: weakref.finalize[..., Any] | None = None

    @property
    def model(self) -> onnx_ir.Model:
        """The final model (shared: read it, never change it)."""
        return self._model

    @property
    def is_large(self) -> bool:
        """Whether the weights are too large for one serialized protobuf
        (:data:`exporter.serialize.PROTOBUF_LIMIT`, read at each call)."""
        return serialize.needs_external_data(self._model)

    # -- serialized forms ---------------------------------------------------------------------
    @property
    def model_proto(self) -> onnx.ModelProto:
        """A copy of the model as an ``onnx.ModelProto``. A large model's is built on each call
        and not kept (it holds every weight)."""
        import onnx
        import onnx_ir as ir

        if self.is_large:
            return ir.to_proto(self._model)
        proto = onnx.ModelProto()
        proto.CopyFrom(self._full_proto())
        return proto

    def _full_proto(self) -> onnx.ModelProto:
        with self._lock:
            if self._proto is None:
                import onnx_ir as ir

                self._proto = ir.to_proto(self._model)
            return self._proto

    @property
    def model_bytes(self) -> bytes:
        """The model serialized, built once. Past the protobuf limit it cannot exist: raises
        :class:`~exporter.SerializeError` saying what to use instead."""
        with self._lock:
            if self._bytes is None:
                self._bytes = self._serialize()
            return self._bytes

    def _serialize(self) -> bytes:
        size = serialize.initializer_bytes(self._model)
        hint = ("save it with session.save('model.onnx') (weights go to model.onnx.data beside it); "
                "run it with session.run_onnx() / session.ort_session, or give onnxruntime "
                "session.ort_model_source (a path to the model with external data)")
        if self.is_large:
            limit = serialize.PROTOBUF_LIMIT
            raise SerializeError(
                f"the model cannot be one serialized protobuf: its weights are {size / 2**30:.2f} GiB "
                f"({size} bytes), at or past the protobuf limit of {limit / 2**30:.2f} GiB",
                hint=hint,
            )
        try:
            return self._full_proto().SerializeToString()
        except Exception as exc:  # protobuf's EncodeError: the graph itself pushed it past the limit
            raise SerializeError(f"the model cannot be one serialized protobuf: {exc}", hint=hint) from exc

    @property
    def source(self) -> bytes | str:
        """What onnxruntime loads: :attr:`model_bytes` when they fit in one protobuf, else the
        path of the model saved with its weights as external data in a temporary directory this
        object owns (written once; removed by :meth:`release` or when this object is
        garbage-collected)."""
        with self._lock:
            if not self.is_large:
                return self.model_bytes
            return str(self._write_external())

    @property
    def external_path(self) -> Path | None:
        """The model saved with external data if :attr:`source` has written it, else None."""
        with self._lock:
            return self._external

    def _write_external(self) -> Path:
        if self._external is not None and self._external.is_file():
            return self._external
        if self._tempdir is None or not os.path.isdir(self._tempdir):
            self._tempdir = tempfile.mkdtemp(prefix="onnx-workbench-")
            self._tempdir_finalizer = weakref.finalize(self, shutil.rmtree, self._tempdir, True)
        staging = Path(tempfile.mkdtemp(prefix=".writing-", dir=self._tempdir))
        try:  # written whole in a staging directory, then moved into place: never half a model
            serialize.write_external_data(self._model, staging / "model.onnx")
            final = Path(self._tempdir) / "model"
            shutil.rmtree(final, ignore_errors=True)  # a copy whose files were removed under us
            os.replace(staging, final)
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        self._external = final / "model.onnx"
        return self._external

    # -- onnxruntime sessions -----------------------------------------------------------------
    @property
    def inference_session(self) -> onnxruntime.InferenceSession:
        """The CPU ``onnxruntime.InferenceSession`` of :attr:`source`, built once."""
        with self._lock:
            if self._session is None:
                self._session = ort_inference_session(self.source)
            return self._session

    @property
    def output_session(self) -> onnxruntime.InferenceSession:
        """The session outputs are read through: :attr:`inference_session`, or, when an output
        has a dtype numpy cannot hold (:data:`UNREADABLE_OUTPUTS`: bfloat16, float8), a copy with
        those outputs cast exactly to float32 (built once)."""
        with self._lock:
            if self._output_session is None:
                self._output_session = self._readable_outputs_session() or self.inference_session
            return self._output_session

    def _readable_outputs_session(self) -> onnxruntime.InferenceSession | None:
        """A session of the model with each unreadable output cast to float32; None when every
        output is readable. A large model is edited without its weights: the small model file
        is loaded alone and the edited copy is written beside it, so it finds the same data."""
        import onnx

        outputs = self._model.graph.outputs
        if not any(value.dtype is not None and value.dtype.name in UNREADABLE_OUTPUTS for value in outputs):
            return None
        source = self.source
        proto = onnx.load_from_string(source) if isinstance(source, bytes) else onnx.load(source, load_external_data=False)
        codes = {getattr(onnx.TensorProto, name) for name in UNREADABLE_OUTPUTS if hasattr(onnx.TensorProto, name)}
        for output in proto.graph.output:
            if output.type.tensor_type.elem_type not in codes:
                continue
            raw = output.name
            readable = f"{raw}__as_float32"
            proto.graph.node.append(onnx.helper.make_node("Cast", [raw], [readable], to=onnx.TensorProto.FLOAT))
            output.name = readable
            output.type.tensor_type.elem_type = onnx.TensorProto.FLOAT
        if isinstance(source, bytes):
            return ort_inference_session(proto.SerializeToString())
        edited = os.path.join(os.path.dirname(source), "readable_outputs.onnx")
        with open(edited, "wb") as handle:
            handle.write(proto.SerializeToString())  # weights are references: a small proto
        return ort_inference_session(edited)

    # -- lifecycle ----------------------------------------------------------------------------
    def make_room(self) -> None:
        """Before another onnxruntime session of a large model is built (a benchmark's or a
        profile's, with their own options), free the cached ones: at most one onnxruntime copy
        of the weights is alive. They are rebuilt when next asked. A small model keeps them."""
        with self._lock:
            if (self._session is None and self._output_session is None) or not self.is_large:
                return
            self._session = self._output_session = None
        gc.collect()

    def release(self) -> None:
        """Free everything built for onnxruntime: the sessions, the serialized bytes and full
        proto, and the temporary directory of the external-data copy. Idempotent; what is
        asked for next is built again."""
        with self._lock:
            self._session = None
            self._output_session = None
            self._bytes = None
            self._proto = None
            self._external = None
            finalizer, self._tempdir_finalizer, self._tempdir = self._tempdir_finalizer, None, None
        if finalizer is not None:
            gc.collect()  # onnxruntime sessions are freed before their model files are removed
            finalizer()

    def __repr__(self) -> str:
        built = [name for name, value in (("bytes", self._bytes), ("external data", self._external),
                                          ("session", self._session)) if value is not None]
        return f"OrtModel({', '.join(built) or 'nothing built'})"
