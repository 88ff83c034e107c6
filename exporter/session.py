"""The staged export pipeline: capture → decompose → translate → optimize.

A :class:`Session` runs stages on demand and caches each result under a key made of what the
stage depends on, in a cache shared by every session derived from it with
:meth:`Session.with_options` / :meth:`Session.with_dims`. A new dim spec re-runs capture and
everything after it; a new opset re-runs translation onward; a spec seen before is served
from the cache. A stage never raises: success or failure it returns a :class:`StageResult`.

The session is also a UI's model. Long work reports each step to an
:class:`~exporter.events.Observer` and stops at the next step once its
:class:`~exporter.events.CancelToken` is set; :meth:`Session.submit` runs it on the export
worker thread and returns a ``Future``. Two threads asking for the same stage get one
computation (the stage cache's doing), and what a session hands out (ONNX models, protos) is a
copy, so changing it changes no session. The session's lock guards its results only: no stage,
analysis or observer call runs under it, so a UI reads a session at any time without waiting.
The final model as onnxruntime loads it, with its lifecycle, is :attr:`Session.ort_model`
(:class:`~exporter.ort_model.OrtModel`).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from types import MappingProxyType
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ._quiet import captured_library_output, quiet_library_warnings
from .analyses import ANALYSES
from .diagnose import diagnosed
from .dims import DimSpec
from .errors import Status
from .events import CancelToken, Cancelled, LoggerObserver, Observer, fan_out
from .export_record import ExportRecord
from .verdict import ExportVerdict, export_verdict
from .graphs import graphs_of
from .guards import guards_of
from .inputs import BoundInputs, bind_inputs, onnx_input_names
from .options import ExportOptions
from .ort_model import OrtModel
from .ort_values import feeds, from_outputs, output_dtypes
from .pipeline.capture import CaptureAttempt
from .pipeline.pass_records import OptimizerPasses
from .pipeline.stage import StageContext, StageResult, run_stage_guarded
from .pipeline.stages import STAGES, cache_key, stage_named
from .pipeline.watch import watched
from .presentation import Presentable
from .report import write_report
from .serializers import default_serializer
from .shapes import apply_suggested_fixes, dim_outcomes, dim_warnings, infer_dim_spec, suggested_fixes_of
from .shapes.fixes import with_patches
from .shapes.ranges_metadata import with_range_metadata
from .worker import submit_work

if TYPE_CHECKING:
    from pathlib import Path

    import onnx
    import onnx_ir
    import onnxruntime
    import pandas

    from .serializers import Serializer
    from .bench import BenchmarkResult, ProfileResult, SweepResult
    from .bench.compare import Comparison
    from .graphs import SessionGraphs
    from .verify.intermediates import IntermediateComparison
    from .guards import Guards
    from .passes import Bisection
    from .shapes import DimOutcomes, SuggestedFixes
    from .verify import VerifyResult

__all__ = ["ANALYSES", "STAGES", "Session", "StageResult"]

class _AnalysisResult(Protocol):
    """What the session reads of an analysis result: its status (``cancelled`` ones are not kept)."""

    @property
    def status(self) -> Status: ...


_Result = TypeVar("_Result", bound=_AnalysisResult)


STAGE_CACHE_ENTRIES = 8
"""How many results per stage a session's cache keeps (derived sessions share it): the
specs, opsets... seen last. Front ends holding derived sessions keep as many."""


class _StageCache:
    """Stage results keyed by (stage, dependency key), bounded so old specs are dropped.

    Thread-safe: when two threads ask for one key, the first computes and the other waits for
    its result. A cancelled result is handed to the thread that computed it and not stored."""

    def __init__(self, max_entries_per_stage: int = STAGE_CACHE_ENTRIES) -> None:
        self._max = max_entries_per_stage
        self._data: dict[str, OrderedDict[Any, StageResult]] = {s: OrderedDict() for s in STAGES}
        self._lock = threading.Lock()
        self._running: dict[tuple[str, Any], threading.Event] = {}
        # Analyses (verify, benchmark...) by the exported model they ran on: sessions sharing
        # this cache and the same optimize output share them. Keyed by id(output), the output
        # kept alive beside them so the id is not reused.
        self._analyses: OrderedDict[int, tuple[Any, dict[str, Any]]] = OrderedDict()
        self._latest: dict[str, Any] = {}  # by analysis: the latest result, of whichever model

    def record_analysis(self, model: Any, name: str, result: Any) -> None:
        with self._lock:
            entry = self._analyses.setdefault(id(model), (model, {}))
            entry[1][name] = result
            self._latest[name] = result
            self._analyses.move_to_end(id(model))
            while len(self._analyses) > 4 * self._max:
                self._analyses.popitem(last=False)

    def latest(self, name: str) -> Any:
        with self._lock:
            return self._latest.get(name)

    def analyses_of(self, model: Any) -> dict[str, Any]:
        with self._lock:
            entry = self._analyses.get(id(model))
            return dict(entry[1]) if entry is not None and entry[0] is model else {}

    def clear(self) -> int:
        """Drop every stored result (a computation under way still finishes); how many."""
        with self._lock:
            count = sum(len(results) for results in self._data.values())
            for results in self._data.values():
                results.clear()
            return count

    def get_or_compute(self, stage: str, key: Any, compute: Callable[[], StageResult]) -> tuple[StageResult, bool]:
        """``(result, cached)``: the stored result, or ``compute()``'s (stored unless cancelled)."""
        while True:
            with self._lock:
                results = self._data[stage]
                if key in results:
                    results.move_to_end(key)
                    return results[key], True
                running = self._running.get((stage, key))
                if running is None:
                    running = self._running[(stage, key)] = threading.Event()
                    break
            running.wait()  # another thread computes it: take its result (or compute if it was cancelled)
        try:
            result = compute()
            if result.status != Status.CANCELLED:
                with self._lock:
                    results = self._data[stage]
                    results[key] = result
                    while len(results) > self._max:
                        results.popitem(last=False)
            return result, False
        finally:
            with self._lock:
                del self._running[(stage, key)]
            running.set()


# torch.export, its fake-tensor mode and the guard recorder are not safe to run concurrently:
# every stage computation in the process takes this lock.
_TORCH_LOCK = threading.RLock()


def _check_options_type(options: Any) -> None:
    """``options=`` takes an :class:`ExportOptions`; a dict (or anything else) is a TypeError
    naming the fix, before anything runs."""
    if options is None or isinstance(options, ExportOptions):
        return
    if isinstance(options, dict):
        fix = f"options=ExportOptions(**{{{', '.join(f'{k!r}: ...' for k in list(options)[:3])}}})"
    else:
        fix = "options=ExportOptions(...)"
    raise TypeError(f"options= takes an ExportOptions, not a {type(options).__name__}: write {fix} "
                    "(from exporter import ExportOptions)")


class Session(Presentable):
    """A lazily-run export of one model with one set of example inputs and options.

    ``Session(model, args, kwargs, options)`` validates the inputs and the dim spec at once
    (raising :class:`~exporter.SpecError`) and runs nothing else until asked:
    ``session.run(until="capture")``, ``session.submit(...)``, or any property that needs a
    stage. Its fields are read-only: derive a new session with :meth:`with_options`,
    :meth:`with_dims` or :meth:`with_axis`.
    """

    def __init__(
        self,
        model: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
        options: ExportOptions | None = None,
        *,
        _cache: _StageCache | None = None,
        _inputs: BoundInputs | None = None,
    ) -> None:
        from .program_model import as_model  # imports torch

        _check_options_type(options)
        model, args, kwargs, options = as_model(model, tuple(args), dict(kwargs or {}), options)
        self._model = model
        self._options = options if options is not None else ExportOptions()
        self._args = tuple(args)
        self._kwargs = dict(kwargs or {})
        self._inputs: BoundInputs = _inputs or bind_inputs(model, self._args, self._kwargs)
        self._spec: DimSpec = DimSpec.parse(
            self._options.dynamic_shapes, self._inputs, dynamic_axes=self._options.dynamic_axes,
            input_names=self._options.input_names, output_names=self._options.output_names,
        )
        self.onnx_input_names  # noqa: B018 - too many or clashing input_names fail here, not at translate
        self._cache = _cache or _StageCache()
        self._results: dict[str, StageResult] = {}
        self._lock = threading.Lock()  # guards self._results and self._ort_model, held for a dict access only
        self._ort_model: OrtModel | None = None
        self._applied_fixes: tuple[Any, ...] = ()

    # -- read-only fields ---------------------------------------------------------------------
    @property
    def model(self) -> Any:
        """The user's module (never changed by the session)."""
        return self._model

    @property
    def options(self) -> ExportOptions:
        return self._options

    @property
    def args(self) -> tuple[Any, ...]:
        return self._args

    @property
    def kwargs(self) -> dict[str, Any]:
        return dict(self._kwargs)

    @property
    def inputs(self) -> BoundInputs:
        """The example inputs bound to ``forward``'s signature, with their leaf paths."""
        return self._inputs

    @property
    def spec(self) -> DimSpec:
        """The dim spec, parsed and validated against the example inputs."""
        return self._spec

    # -- deriving sessions ------------------------------------------------------------------
    def with_options(self, **changes: Any) -> Session:
        """A session with some options changed that reuses every still-valid stage."""
        options = dataclasses.replace(self._options, **changes)
        return Session(self._model, self._args, self._kwargs, options, _cache=self._cache, _inputs=self._inputs)

    def with_dims(self, dynamic_shapes: Any = None, *, dynamic_axes: Any = None) -> Session:
        """A session with a new dim spec (any accepted form); the rest is reused."""
        return self.with_options(dynamic_shapes=dynamic_shapes, dynamic_axes=dynamic_axes)

    def with_axis(self, path: str, axis: int, policy: Any) -> Session:
        """A session with one input axis set to AUTO / STATIC / DYNAMIC / a Dim / a name."""
        return self.with_dims(self._spec.with_axis(self._inputs, path, axis, policy))

    # -- running ----------------------------------------------------------------------------
    def _observer(self, observer: Observer | None) -> Observer:
        """``observer`` (and the ``logger`` option's), shielded: one that raises is logged."""
        logger = self._options.logger
        return fan_out(LoggerObserver(logger) if logger is not None else None, observer)

    def run(self, until: str = "optimize", *, observer: Observer | None = None,
            cancel: CancelToken | None = None) -> StageResult:
        """Run every stage up to ``until`` (reusing cached ones); return ``until``'s result, or
        the first failed or cancelled stage's. Never raises for a stage failure.

        ``observer`` hears each stage start and end and each capture attempt; ``cancel`` is
        checked before each stage and between capture strategies: a cancelled stage has status
        ``cancelled``, is not cached, and the next ``run()`` computes it."""
        if until not in STAGES:
            raise ValueError(f"unknown stage {until!r}; stages are {', '.join(STAGES)}")
        observer = self._observer(observer)
        result: StageResult | None = None
        for stage in STAGES[: STAGES.index(until) + 1]:
            result = self._stage(stage, observer, cancel)
            if result.status in (Status.FAILED, Status.CANCELLED):
                break
        assert result is not None
        return result

    def result(self, stage: str, *, observer: Observer | None = None, cancel: CancelToken | None = None) -> StageResult:
        """The result of one stage, running it (and what it needs) if not yet known."""
        if stage not in STAGES:
            raise ValueError(f"unknown stage {stage!r}; stages are {', '.join(STAGES)}")
        return self._stage(stage, self._observer(observer), cancel)

    def _stage(self, stage: str, observer: Observer, cancel: CancelToken | None) -> StageResult:
        # The session lock guards self._results only: the previous stage, the computation and
        # the observer calls run unlocked (the stage cache computes each key once).
        with self._lock:
            known = self._results.get(stage)
        if known is not None:
            return known
        step = stage_named(stage)
        previous: StageResult | None = None
        if step.consumes is not None:
            previous = self._stage(step.consumes, observer, cancel)
            if previous.status == Status.CANCELLED:
                return previous
            if previous.status == Status.FAILED:
                result = self._record(StageResult(stage, Status.SKIPPED, 0.0, detail=f"{previous.name} failed"))
                observer.on_stage_end(result)
                return result
        if cancel is not None and cancel.cancelled:
            result = StageResult(stage, Status.CANCELLED, 0.0, detail="cancelled before it started")
            observer.on_stage_end(result)
            return result
        observer.on_stage_start(stage)
        context = StageContext(self._model, self._inputs, self._spec, self._options)
        consumed = previous.output if previous is not None else None

        def compute() -> StageResult:
            with watched(stage, observer), _TORCH_LOCK, quiet_library_warnings(), captured_library_output() as output:
                result = run_stage_guarded(stage, lambda: diagnosed(step.run(context, consumed, observer, cancel),
                                                                    self._spec, self._inputs, self._model))
            # Recorded before the cache hands it to another thread of this session waiting for
            # the same key: both then return this result, not a "cached" copy.
            return self._record(dataclasses.replace(result, library_output=output.text) if output.text else result)

        with _TORCH_LOCK:  # a capture running in another thread swaps the module's parameters
            key = cache_key(stage, context)
        result, cached = self._cache.get_or_compute(stage, key, compute)
        if cached:
            result = self._record(dataclasses.replace(result, cached=True))
        observer.on_stage_end(result)
        return result

    def _record(self, result: StageResult) -> StageResult:
        """Keep ``result`` as this session's (not a cancelled one); the first one kept stays."""
        if result.status == Status.CANCELLED:
            return result
        with self._lock:
            return self._results.setdefault(result.name, result)

    def submit(self, until: str = "optimize", *, observer: Observer | None = None,
               cancel: CancelToken | None = None, **options: Any) -> Future[Any]:
        """Run in the background on the export worker (one thread per process: torch.export
        cannot run concurrently) and return a ``concurrent.futures.Future``.

        ``until`` is a stage (the future gives its :class:`StageResult`, as :meth:`run` would)
        or an analysis of :data:`exporter.analyses.ANALYSES` (``verify``, ``benchmark``...: the
        future gives :meth:`analyze`'s result; ``options`` are passed to it). Set ``cancel`` to stop at the
        next step; the future then holds a result whose status is ``cancelled``."""
        if until in STAGES:
            if options:
                raise TypeError(f"submit({until!r}) takes no options, got {sorted(options)}")
            return submit_work(self.run, until, observer=observer, cancel=cancel)
        if until in ANALYSES:
            return submit_work(self.analyze, until, observer=observer, cancel=cancel, **options)
        raise ValueError(f"unknown task {until!r}; choose a stage ({', '.join(STAGES)}) "
                         f"or an analysis ({', '.join(ANALYSES.names)})")

    # -- results ----------------------------------------------------------------------------
    @property
    def stages(self) -> tuple[StageResult, ...]:
        """The stage results obtained so far, in pipeline order."""
        return tuple(self._results[s] for s in STAGES if s in self._results)

    @property
    def attempts(self) -> tuple[CaptureAttempt, ...]:
        return self.result("capture").attempts

    @property
    def strategy(self) -> str | None:
        """The capture strategy that succeeded."""
        return next((a.strategy for a in self.attempts if a.success), None)

    @property
    def failed_stage(self) -> StageResult | None:
        return next((r for r in self.stages if r.status == Status.FAILED), None)

    @property
    def succeeded(self) -> bool:
        return len(self.stages) == len(STAGES) and self.failed_stage is None

    def stage_output(self, stage: str) -> Any:
        """A stage's output as cached, running the stages up to it; raises the stage's
        :class:`~exporter.ExportError` if it failed. The object is shared by every session
        derived from this one: read it, never change it (:attr:`onnx_model` gives a copy)."""
        result = self.run(stage)
        if result.status == Status.CANCELLED:
            raise Cancelled()
        if result.status == Status.FAILED:
            raise result.error.with_session(self)  # type: ignore[union-attr]
        return result.output

    @property
    def exported_program(self) -> Any:
        """The captured ``torch.export.ExportedProgram`` (before ONNX decompositions)."""
        return self.stage_output("capture")

    @property
    def decomposed_program(self) -> Any:
        return self.stage_output("decompose")

    @property
    def onnx_model(self) -> onnx_ir.Model:
        """A copy of the final ``onnx_ir.Model`` (optimized unless ``optimize=False``): change
        it freely, the session and the bytes it saves stay as exported."""
        return self.ort_model.model.clone()

    @property
    def ort_model(self) -> OrtModel:
        """The final model as onnxruntime loads it, with its lifecycle: an
        :class:`~exporter.ort_model.OrtModel` (source, cached ``InferenceSession``, make room,
        release). Runs the export up to optimize if needed; raises the export's error when a
        stage failed."""
        model = self.stage_output("optimize")
        if self._ort_model is None:  # ranges torch narrowed go into the final model's metadata
            model = with_range_metadata(model, self)
        with self._lock:
            if self._ort_model is None:
                self._ort_model = OrtModel(model)
            return self._ort_model

    @property
    def model_proto(self) -> onnx.ModelProto:
        """A copy of the final ``onnx.ModelProto`` (what :meth:`save` writes). It holds every
        weight: for a large model (:attr:`is_large`) it is built on each call and not kept."""
        return self.ort_model.model_proto

    @property
    def is_large(self) -> bool:
        """Whether the model's weights are too large for one serialized protobuf (2 GiB,
        :data:`exporter.serialize.PROTOBUF_LIMIT`): it then exists only with external data."""
        return self.ort_model.is_large

    @property
    def model_bytes(self) -> bytes:
        """The final model serialized (what ``save`` writes without external data). Past the
        2 GiB protobuf limit (:attr:`is_large`) it cannot exist: raises
        :class:`~exporter.SerializeError` saying what to use instead."""
        return self.ort_model.model_bytes

    @property
    def ort_model_source(self) -> bytes | str:
        """What onnxruntime loads for this model: the serialized bytes when they fit in one
        protobuf, else the path of the model saved with its weights as external data in a
        temporary directory this session owns (written once; removed by :meth:`release` or
        when the session is garbage-collected). Give it to ``onnxruntime.InferenceSession``."""
        return self.ort_model.source

    @property
    def ort_session(self) -> onnxruntime.InferenceSession:
        """An onnxruntime CPU ``InferenceSession`` of the final model (from
        :attr:`ort_model_source`), built once; :meth:`release` frees it."""
        return self.ort_model.inference_session

    def release(self) -> None:
        """Free what this session built for onnxruntime: the ``InferenceSession``, the
        serialized bytes and full proto, the graphs, and the temporary directory holding the
        external-data copy of a large model (as torch's ``ONNXProgram.release()`` does).
        Idempotent. The stage results stay (they are shared with derived sessions): a released
        session still works, and rebuilds what it needs when next asked. Also called on leaving
        ``with session:``."""
        with self._lock:
            ort_model = self._ort_model
            self.__dict__.pop("graphs", None)
        if ort_model is not None:
            ort_model.release()

    def clear_cache(self) -> int:
        """Drop the stage results cached for this session and every session derived from it
        (the captured programs and ONNX models they hold; this session's own results stay until
        it is dropped or re-derived). Returns how many were dropped. The next derived session
        computes its stages again."""
        return self._cache.clear()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()

    def raise_for_status(self) -> Session:
        failed = self.failed_stage
        if failed is not None:
            raise failed.error.with_session(self)  # type: ignore[union-attr]
        return self

    def save(self, destination: Any, *, serializer: Serializer | None = None) -> Any:
        """Write the model atomically: ONNX by default, the ExportedProgram for ``*.pt2``."""
        serializer = serializer or default_serializer(destination)
        return serializer.serialize(self, destination)

    # -- running the ONNX model ------------------------------------------------------------
    @property
    def onnx_input_names(self) -> dict[str, str]:
        """The ONNX input name of every tensor input, by its path (``x``, ``cache.0.key``):
        the path itself (a transformers cache's tensors: ``past_key_values.0.key``), or the
        ``input_names`` option's name."""
        return onnx_input_names(self._inputs, self._options.input_names)

    def feeds(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """ONNX input feeds (ONNX input name → numpy array) for inputs given like the model's
        forward; a bfloat16 or float8 input, which numpy cannot hold, is an ``OrtValue`` of its
        ONNX type, and a complex one torch.onnx's real tensor with a trailing dim of 2."""
        return feeds(self, self.stage_output("optimize"), args, kwargs)

    def run_onnx(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Run the ONNX model in onnxruntime (CPU) on inputs given like the model's forward.
        Inputs of every dtype torch.onnx exports are converted through torch (bfloat16 and
        float8 as their bits, complex as a trailing real/imaginary dim), not ``.numpy()``.
        Outputs come back as numpy arrays (complex ones as complex arrays), except bfloat16
        and float8 outputs, which numpy cannot hold: those are torch tensors of their dtype."""
        raw = self.output_ort_session.run(None, feeds(self, self.stage_output("optimize"), args, kwargs))
        return from_outputs(raw, output_dtypes(self))

    @property
    def output_ort_session(self) -> onnxruntime.InferenceSession:
        """The onnxruntime session :meth:`run_onnx` and ``verify()`` read outputs through:
        :attr:`ort_session`, or, when an output has a dtype onnxruntime cannot hand to numpy
        (bfloat16, float8), a copy with those outputs cast exactly to float32 (built once;
        :meth:`release` frees it)."""
        return self.ort_model.output_session

    # -- display -----------------------------------------------------------------------------
    def to_frame(self) -> pandas.DataFrame:
        """The stages as a pandas DataFrame (``strategy`` is capture's; blank on the others)."""
        import pandas as pd

        rows = [{**r.to_dict(), "strategy": r.to_dict().get("strategy") or ""} for r in self.stages]
        return pd.DataFrame(rows, columns=["stage", "status", "seconds", "cached", "strategy", "detail"])

    # summary(), repr and _repr_html_: exporter.display.sections.session_section, through Presentable.

    def report(self, path: str | os.PathLike[str], *, verify: VerifyResult | None = None,
               benchmark: BenchmarkResult | None = None, graphs: bool = True) -> Path:
        """Write one standalone HTML report of this export (stages, dims, guards, the graphs as
        SVG when Graphviz is installed, and ``verify`` / ``benchmark`` results if given, else the
        latest kept: see :func:`~exporter.report.report_document`, which may verify a derived
        export whose family verifies quickly), that opens offline, atomically; returns its path."""
        return write_report(self, path, verify=verify, benchmark=benchmark, graphs=graphs)

    # -- analyses (exporter.analyses.ANALYSES: verify, benchmark, ...) --
    # Each runs between an on_analysis_start and an on_analysis_end event, and its result is
    # kept with the exported model it ran on (see analyses).
    def snapshot(self, until: str = "optimize") -> ExportRecord:
        """What this export produced up to ``until`` (running the stages it needs), as a
        frozen :class:`~exporter.export_record.ExportRecord`: what an analysis reads."""
        last = self.run(until)
        with self._lock:
            results = {name: self._results[name] for name in STAGES[: STAGES.index(until) + 1] if name in self._results}
        if last.status == Status.CANCELLED:
            results[last.name] = last
        optimized = results.get("optimize")
        ort_model = (lambda: self.ort_model) if optimized is not None and optimized.output is not None else None
        return ExportRecord(self._model, self._inputs, self._spec, self._options, until, MappingProxyType(results),
                            last_verify=self.last_verify, graphs=self.graphs, _guards=lambda: self.guards,
                            _ort_model=ort_model, _owner=self)

    def analyze(self, name: str, *, observer: Observer | None = None, cancel: CancelToken | None = None,
                **options: Any) -> Any:
        """Run the analysis ``name`` of :data:`exporter.analyses.ANALYSES` on this export
        (``verify``, ``benchmark``, ``benchmark_sweep``, ``profile``, ``compare``,
        ``compare_intermediates``, ``bisect_passes``, ``check_recorded`` and any registered
        since) with its ``options``, on a :meth:`snapshot` up to the stage it needs; its
        result is kept in :attr:`analyses`."""
        analysis = ANALYSES.named(name)
        observer = self._observer(observer)
        observer.on_analysis_start(name)
        try:
            result = analysis.run(self.snapshot(analysis.needs), observer=observer, cancel=cancel, **options)
        except Exception as exc:
            observer.on_analysis_end(name, exc)
            raise
        observer.on_analysis_end(name, result)
        return self._keep(name, result)

    def verify(self, *, observer: Observer | None = None, cancel: CancelToken | None = None,
               **options: Any) -> VerifyResult:
        """ONNX vs eager at the example inputs and over a sweep of sizes, plus the contract
        checks: a :class:`~exporter.verify.VerifyResult` (never raises). Options: see
        :func:`exporter.verify.verify`."""
        result: VerifyResult = self.analyze("verify", observer=observer, cancel=cancel, **options)
        return result

    def benchmark(self, *, observer: Observer | None = None, cancel: CancelToken | None = None,
                  **options: Any) -> BenchmarkResult:
        """onnxruntime vs eager latency: a :class:`~exporter.bench.BenchmarkResult`. Options:
        see :func:`exporter.bench.benchmark`."""
        result: BenchmarkResult = self.analyze("benchmark", observer=observer, cancel=cancel, **options)
        return result

    def compare(self, variants: Any = True, *, observer: Observer | None = None, cancel: CancelToken | None = None,
                **options: Any) -> Comparison:
        """Variants against onnxruntime, timed in the same interleaved rounds (the unoptimized
        model, onnxruntime's optimization levels, 1 / 2 / all threads by default; see
        :mod:`exporter.bench.compare`): a :class:`~exporter.bench.Comparison`. Options: those of
        :func:`exporter.bench.benchmark` (``budget`` is per variant)."""
        result: Comparison = self.analyze("compare", observer=observer, cancel=cancel, variants=variants, **options)
        return result

    def benchmark_sweep(self, dim: Any = None, sizes: Any = (1, 2, 4, 8, 16, 32, 64), *,
                        observer: Observer | None = None, cancel: CancelToken | None = None,
                        **options: Any) -> SweepResult:
        """Latency against the size of one dynamic dim: a :class:`~exporter.bench.SweepResult`."""
        result: SweepResult = self.analyze("benchmark_sweep", observer=observer, cancel=cancel, dim=dim,
                                           sizes=sizes, **options)
        return result

    def profile(self, *, observer: Observer | None = None, cancel: CancelToken | None = None,
                **options: Any) -> ProfileResult:
        """onnxruntime per-node profile by op type and module: a :class:`~exporter.bench.ProfileResult`."""
        result: ProfileResult = self.analyze("profile", observer=observer, cancel=cancel, **options)
        return result

    def compare_intermediates(self, case: Any = None, *, observer: Observer | None = None,
                              cancel: CancelToken | None = None, **options: Any) -> IntermediateComparison:
        """Every ONNX node's output against its FX node's value on one verify case (the
        example inputs by default): an :class:`~exporter.graphs.IntermediateComparison` with
        ``first_bad`` and ``values()`` for a graph overlay. Options: see
        :func:`exporter.graphs.compare_intermediates`. ``observer`` hears it start and end."""
        result: IntermediateComparison = self.analyze("compare_intermediates", observer=observer, cancel=cancel,
                                                      case=case, **options)
        return result

    def _exported_model(self) -> onnx_ir.Model | None:
        optimize = self._results.get("optimize")  # one read of a dict entry: no lock needed
        return optimize.output if optimize is not None and optimize.ok else None

    def _keep(self, name: str, result: _Result) -> _Result:
        """Record ``result`` with the exported model it ran on (not a cancelled one, which
        would hide the last complete result)."""
        model = self._exported_model()
        if model is not None and str(result.status) != "cancelled":
            self._cache.record_analysis(model, name, result)
        return result

    @property
    def analyses(self) -> dict[str, Any]:
        """The latest complete result of each analysis run on this session's exported model
        (``verify``, ``benchmark``, ``benchmark_sweep``, ``profile``, ``compare``), by name:
        by this session or by another one derived from it that exported the same model (the
        widget's runs are kept here too). Empty before the export has run. Nothing is run."""
        model = self._exported_model()
        return {} if model is None else self._cache.analyses_of(model)

    @property
    def last_verify(self) -> VerifyResult | None:
        """The latest :meth:`verify` result of this exported model (see :attr:`analyses`), or None."""
        return self.analyses.get("verify")

    @property
    def verdict(self) -> ExportVerdict:
        """What can be said of this export as it stands (:mod:`exporter.verdict`): ``passed``
        only when :attr:`last_verify` (this exported model's) passed; ``not verified`` when
        verify has not run on this spec (another spec's verify never counts). Nothing is run."""
        return export_verdict(self.stages, self.last_verify, complete=len(STAGES))

    def latest_analysis(self, name: str) -> Any:
        """The latest result of the analysis ``name`` run by this session or any session
        sharing its stage cache (:meth:`with_dims`...), whichever spec it ran on; None before any."""
        return self._cache.latest(name)

    # -- optimizer passes --
    @property
    def passes(self) -> OptimizerPasses:
        """The optimize stage pass by pass: an :class:`~exporter.pipeline.pass_records.OptimizerPasses` of
        :class:`~exporter.pipeline.pass_records.PassRecord` (name, seconds, nodes before/after, nodes added /
        removed / changed, initializers folded, whether the model still checks; ``passes[i].diff()``,
        ``passes.to_frame()``). Runs the export up to optimize if needed; raises the export's error
        when an earlier stage failed."""
        self.stage_output("translate")
        result = self.result("optimize")
        return result.passes if result.passes is not None else OptimizerPasses(note=result.detail)

    def bisect_passes(self, case: Any = None, *, tolerances: Any = None, observer: Observer | None = None) -> Bisection:
        """Name the first optimizer pass after which onnxruntime disagrees with PyTorch or cannot
        load the model, on one case: ``None`` (the example inputs) or ``(args, kwargs)``. A binary
        search over the passes that changed the model, re-running them from the translated
        model (each prefix's model is kept): 1 + ceil(log2(changing passes + 1)) verify runs.
        An :class:`~exporter.passes.Bisection`; its ``fix`` is the ``ExportOptions(skip_passes=...)``
        that leaves the pass out. ``observer`` hears it start and end."""
        self.stage_output("translate")  # an export that fails before optimize raises its error here
        result: Bisection = self.analyze("bisect_passes", observer=observer, case=case, tolerances=tolerances)
        return result

    # -- graphs --
    @functools.cached_property
    def graphs(self) -> SessionGraphs:
        """The FX and ONNX graphs of this export and the mapping between them: a
        :class:`~exporter.graphs.SessionGraphs` (each graph computed when first asked for)."""
        return graphs_of(self)

    # -- shapes (guards, dim outcomes, fixes) --
    # guards, dims and suggested_fixes depend only on the spec, the inputs and the capture
    # result, none of which changes within a session: each is computed once.
    @functools.cached_property
    def guards(self) -> Guards:
        """Every shape guard and runtime assert torch added while capturing (the attempt that
        succeeded, else the failed one), with the user's file, line and code: a
        :class:`~exporter.guards.Guards`. Runs capture if needed."""
        return guards_of(self.attempts, self.inputs)

    @functools.cached_property
    def dims(self) -> DimOutcomes:
        """Per input axis: requested policy, obtained result and why they differ: a
        :class:`~exporter.shapes.DimOutcomes`. Runs capture if needed."""
        return dim_outcomes(self)

    @property
    def dim_warnings(self) -> tuple[Any, ...]:
        """Axes torch cannot keep dynamic as asked, known before any export runs."""
        return dim_warnings(self.spec, self.inputs)

    @functools.cached_property
    def _dim_fixes(self) -> SuggestedFixes:
        return suggested_fixes_of(self)

    @property
    def suggested_fixes(self) -> SuggestedFixes:
        """torch's suggested fixes for a rejected spec, as a new spec and a diff, and the model
        patches that apply when capture or the latest verify failed: a
        :class:`~exporter.shapes.SuggestedFixes` (empty when capture succeeded and verify did not fail)."""
        fixes = self._dim_fixes  # runs capture if needed
        verified, stage = self.last_verify, self.failed_stage
        failed = stage is not None or (verified is not None and verified.status == "failed")
        source = stage.error.source if stage is not None and stage.error is not None else None
        pinned = tuple((g.file, g.line) for g in self.guards if g.kind == "specialization" and g.file and g.line) \
            if stage is not None and stage.name == "capture" else ()
        return with_patches(fixes, self.model, self.options.patches, failed, source, pinned)

    @property
    def applied_fixes(self) -> tuple[Any, ...]:
        """The fixes :meth:`apply_suggested_fixes` applied to reach this session, round by round."""
        return self._applied_fixes

    def apply_suggested_fixes(self, max_rounds: int = 5, *, observer: Observer | None = None,
                              cancel: CancelToken | None = None) -> Session:
        """A session re-exported with torch's suggested fixes, applied round after round until
        capture succeeds, nothing more is suggested, or ``max_rounds`` is reached (or ``cancel``
        is set: the rounds stop where they are)."""
        session, history = apply_suggested_fixes(self, max_rounds=max_rounds, observer=observer, cancel=cancel)
        session._applied_fixes = self.applied_fixes + history
        return session

    def infer_dims(self, more_inputs: Any) -> DimSpec:
        """A spec proposed from this session's inputs plus ``more_inputs`` (a
        ``torch.export.AdditionalInputs``, or a list of args tuples / kwargs dicts /
        ``(args, kwargs)`` pairs): axes that vary become named dims over the observed range."""
        return infer_dim_spec(self.model, self.inputs, more_inputs, spec=self.spec)
