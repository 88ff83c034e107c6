"""The ONNX side of a comparison: the optimized model in onnxruntime with node outputs exposed
as graph outputs."""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ...serialize import initializer_bytes, needs_external_data, write_external_data

if TYPE_CHECKING:
    import onnxruntime

    from ...ort_model import OrtModel

__all__ = ["OrtRunner", "forget_sessions"]


def forget_sessions() -> None:
    """Drop the exposed-outputs session kept for the next call (the next call builds one)."""
    _SESSIONS.clear()


class OrtRunner:
    """The model in onnxruntime (no graph optimization: every node computes its own output),
    run once per chunk with that chunk's values as extra graph outputs.

    The model is serialized once. Its weights stay in that protobuf when they are small
    (under :data:`_INLINE_WEIGHTS`, and the model fits one protobuf; a copy of the session's :class:`~exporter.ort_model.OrtModel`
    proto, which verify and the benchmark build too, so it is serialized once per export);
    otherwise they are written once to a temporary directory and each chunk's model is a small graph file beside them that refers to them, so a chunk
    never copies the weights in memory. The session of a one-chunk run of a small model
    (weights under :data:`_CACHED_WEIGHTS`) is kept for the next call on the same model (one
    entry; the chunks of a streamed run are not kept): another case costs no session build. :meth:`close` removes the directory."""

    def __init__(self, model: Any, ort_model: OrtModel) -> None:
        self._model = model
        self._ort_model = ort_model
        self._proto: Any = None
        self._directory: Any = None
        self._types: dict[str, Any] = {}
        self._pending: tuple[tuple[Any, ...], threading.Thread, dict[str, Any]] | None = None
        self.runs = 0

    @functools.cached_property
    def weight_bytes(self) -> int:
        """The model's initializer bytes (summed once: every chunk asks)."""
        return initializer_bytes(self._model)

    def prepare(self, names: Sequence[str]) -> bool:
        """Start building the one-chunk session of ``names`` on a thread of its own, to be
        ready when :meth:`run` asks for it (the FX side and eager PyTorch run meanwhile:
        onnxruntime builds a session outside the GIL). Only for a small model whose weights
        stay inline, and when the session kept from the last call does not serve; True when a
        build started. A :meth:`run` of other names waits for it and drops it."""
        wanted = list(dict.fromkeys(names))
        key = (id(self._model), tuple(wanted))
        if self._pending is not None or self._cached(key) is not None:
            return False
        if self.weight_bytes > _CACHED_WEIGHTS or needs_external_data(self._model):
            return False
        box: dict[str, Any] = {}

        def build() -> None:
            try:
                box["session"] = self._session(wanted)
            except BaseException as exc:  # noqa: BLE001 - handed to run(), which raises it
                box["error"] = exc

        thread = threading.Thread(target=build, name="compare-intermediates-onnxruntime", daemon=True)
        thread.start()
        self._pending = (key, thread, box)
        return True

    def run(self, names: Sequence[str], feeds: Mapping[str, Any], *, keep: bool = True) -> dict[str, Any]:
        """The values ``names`` on ``feeds``. ``keep``: keep this session for the next call
        (a one-chunk run; a chunk of a streamed run would evict the whole model's session)."""
        wanted = list(dict.fromkeys(names))
        self.runs += 1
        key = (id(self._model), tuple(wanted))
        prepared = self._take_pending(key)
        cached = self._cached(key)
        if cached is not None:
            return self._read(cached, wanted, feeds)
        session = prepared if prepared is not None else self._session(wanted)
        values = self._read(session, wanted, feeds)
        if keep and self._directory is None and self.weight_bytes <= _CACHED_WEIGHTS:
            _SESSIONS["entry"] = (weakref.ref(self._model), key, session)
        return values

    def close(self) -> None:
        self._take_pending(None)
        if self._directory is not None:
            self._directory.cleanup()
            self._directory = None

    def _cached(self, key: tuple[Any, ...]) -> Any:
        cached = _SESSIONS.get("entry")
        if cached is not None and cached[0]() is self._model and cached[1] == key:
            return cached[2]
        return None

    def _take_pending(self, key: tuple[Any, ...] | None) -> Any:
        """The session :meth:`prepare` built, when it was for ``key`` (its build error raised);
        None otherwise. Waits for the build either way: it edits the shared proto."""
        if self._pending is None:
            return None
        pending_key, thread, box = self._pending
        self._pending = None
        thread.join()
        if pending_key != key:
            return None
        if "error" in box:
            raise box["error"]
        return box["session"]

    def _base_proto(self) -> Any:
        import onnx_ir as ir

        self._types = {v.name: v.dtype for node in self._model.graph for v in node.outputs if v.name}
        if self.weight_bytes <= _INLINE_WEIGHTS and not needs_external_data(self._model):
            if self._ort_model.model is self._model and not self._ort_model.is_large:
                return self._ort_model.model_proto
            return ir.to_proto(self._model)
        import tempfile
        from pathlib import Path

        import onnx

        self._directory = tempfile.TemporaryDirectory(prefix="onnx-workbench-intermediates-")
        path = write_external_data(self._model, Path(self._directory.name) / "model.onnx")
        return onnx.load(str(path), load_external_data=False)  # the graph, weights by reference

    def _session(self, names: Sequence[str]) -> Any:
        import onnxruntime as ort

        if self._proto is None:
            self._proto = self._base_proto()
        options = ort.SessionOptions()
        options.log_severity_level = 4
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        options.enable_cpu_mem_arena = False  # a chunk's values go back to the system, not to an arena
        options.intra_op_num_threads = 1  # no thread pool to build, nor threads spinning beside the FX side
        outputs = self._proto.graph.output
        count = len(outputs)
        present = {o.name for o in outputs}
        for name in names:
            if name not in present and self._types.get(name) is not None:
                added = outputs.add()
                added.name = name
                added.type.tensor_type.elem_type = int(self._types[name])
        try:
            data = self._proto.SerializeToString()
        finally:
            del outputs[count:]
        if self._directory is None:
            return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
        import os

        path = os.path.join(self._directory.name, f"chunk_{self.runs}.onnx")
        with open(path, "wb") as f:
            f.write(data)
        try:
            return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])
        finally:
            os.remove(path)

    @staticmethod
    def _read(ort_session: onnxruntime.InferenceSession, names: Sequence[str], feeds: Mapping[str, Any]) -> dict[str, Any]:
        return dict(zip(names, ort_session.run(list(names), dict(feeds))))


_INLINE_WEIGHTS = 256 << 20
_CACHED_WEIGHTS = 64 << 20
_SESSIONS: dict[str, tuple[Any, tuple[Any, ...], Any]] = {}
