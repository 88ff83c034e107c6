"""The staged export pipeline: capture → decompose → translate → optimize.

A :class:`Session` runs stages on demand and caches each result under a key made of what the
stage depends on, in a cache shared by every session derived from it with
:meth:`Session.with_options` / :meth:`Session.with_dims`. A new dim spec re-runs capture and
everything after it; a new opset re-runs translation onward; a spec seen before is served
from the cache. A stage never raises: success or failure it returns a :class:`StageResult`.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import time
import warnings
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .capture import STRATEGIES, CaptureAttempt, capture_error, get_strategy, is_constraint_violation
from .dims import DimSpec
from .errors import CaptureError, DecomposeError, ExportError, OptimizeError, TranslateError, first_line, user_source_line
from .inputs import BoundInputs, bind_inputs

if TYPE_CHECKING:
    from .api import ExportOptions

__all__ = ["STAGES", "Session", "StageResult"]

STAGES = ("capture", "decompose", "translate", "optimize")


@dataclass(frozen=True)
class StageResult:
    """What one stage produced: status ``ok`` / ``failed`` / ``skipped``, timing, output, error."""

    name: str
    status: str
    seconds: float
    output: Any = None
    error: ExportError | None = None
    attempts: tuple[CaptureAttempt, ...] = ()
    cached: bool = False
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.status != "failed"

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.name,
            "status": self.status,
            "seconds": round(self.seconds, 4),
            "cached": self.cached,
            "detail": self.detail or (first_line(self.error) if self.error else ""),
        }


class _StageCache:
    """Stage results keyed by (stage, dependency key); bounded so old specs are dropped."""

    def __init__(self, max_entries_per_stage: int = 8) -> None:
        self._max = max_entries_per_stage
        self._data: dict[str, OrderedDict[Any, StageResult]] = {s: OrderedDict() for s in STAGES}

    def get(self, stage: str, key: Any) -> StageResult | None:
        results = self._data[stage]
        if key in results:
            results.move_to_end(key)
            return results[key]
        return None

    def put(self, stage: str, key: Any, result: StageResult) -> None:
        results = self._data[stage]
        results[key] = result
        while len(results) > self._max:
            results.popitem(last=False)


class Session:
    """A lazily-run export of one model with one set of example inputs and options.

    ``Session(model, args, kwargs, options)`` validates the inputs and the dim spec at once
    (raising :class:`~exporter.SpecError`) and runs nothing else until asked:
    ``session.run(until="capture")``, or any property that needs a stage.
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
        from .api import ExportOptions

        self.model = model
        self.options = options if options is not None else ExportOptions()
        self.args = tuple(args)
        self.kwargs = dict(kwargs or {})
        self.inputs: BoundInputs = _inputs or bind_inputs(model, self.args, self.kwargs)
        self.spec: DimSpec = DimSpec.parse(
            self.options.dynamic_shapes, self.inputs, dynamic_axes=self.options.dynamic_axes
        )
        self._cache = _cache or _StageCache()
        self._results: dict[str, StageResult] = {}
        self._proto: Any = None
        self._bytes: bytes | None = None
        self._ort: Any = None

    # -- deriving sessions ------------------------------------------------------------------
    def with_options(self, **changes: Any) -> Session:
        """A session with some options changed that reuses every still-valid stage."""
        options = dataclasses.replace(self.options, **changes)
        return Session(self.model, self.args, self.kwargs, options, _cache=self._cache, _inputs=self.inputs)

    def with_dims(self, dynamic_shapes: Any = None, *, dynamic_axes: Any = None) -> Session:
        """A session with a new dim spec (any accepted form); the rest is reused."""
        return self.with_options(dynamic_shapes=dynamic_shapes, dynamic_axes=dynamic_axes)

    def with_axis(self, path: str, axis: int, policy: Any) -> Session:
        """A session with one input axis set to AUTO / STATIC / DYNAMIC / a Dim / a name."""
        return self.with_dims(self.spec.with_axis(self.inputs, path, axis, policy))

    # -- running ----------------------------------------------------------------------------
    def _key(self, stage: str) -> tuple:
        """What a stage's result depends on. Capture depends on the model's state (train/eval,
        its tensors) too, and decompositions on the opset's torchlib registry, which decides
        which operators stay whole (every opset below torchlib's own shares one)."""
        from ._torch_compat import module_state
        from .translate import registry_opset, resolve_opset

        capture = (self.spec, self.options.strategy, self.options.runtime_asserts, module_state(self.model))
        if stage == "capture":
            return capture
        opset = resolve_opset(self.options.opset_version)
        if stage == "decompose":
            return capture + (registry_opset(opset),)
        translate = capture + (opset,)
        return translate if stage == "translate" else translate + (self.options.optimize,)

    def run(self, until: str = "optimize") -> StageResult:
        """Run every stage up to ``until`` (reusing cached ones); return ``until``'s result,
        or the first failed stage's. Never raises for a stage failure."""
        if until not in STAGES:
            raise ValueError(f"unknown stage {until!r}; stages are {', '.join(STAGES)}")
        result: StageResult | None = None
        for stage in STAGES[: STAGES.index(until) + 1]:
            result = self.result(stage)
            if result.status == "failed":
                break
        assert result is not None
        return result

    def result(self, stage: str) -> StageResult:
        """The result of one stage, running it (and what it needs) if not yet known."""
        if stage in self._results:
            return self._results[stage]
        index = STAGES.index(stage)
        if index > 0:
            previous = self.result(STAGES[index - 1])
            if previous.status == "failed":
                result = StageResult(stage, "skipped", 0.0, detail=f"{previous.name} failed")
                self._results[stage] = result
                return result
        key = self._key(stage)
        cached = self._cache.get(stage, key)
        if cached is not None:
            result = dataclasses.replace(cached, cached=True)
            self._log(result)
        else:
            runner: Callable[[], StageResult] = getattr(self, f"_run_{stage}")
            result = runner()
            self._cache.put(stage, key, result)
            self._log(result)
        self._results[stage] = result
        return result

    def _log(self, result: StageResult) -> None:
        logger: logging.Logger | None = self.options.logger
        if logger is None:
            return
        suffix = " (cached)" if result.cached else ""
        detail = f": {result.detail}" if result.detail else ""
        if result.status == "failed":
            logger.error("%s failed after %.2f s%s\n%s", result.name, result.seconds, suffix, result.error)
        else:
            logger.info("%s %s in %.2f s%s%s", result.name, result.status, result.seconds, suffix, detail)

    def _previous_output(self, stage: str) -> Any:
        return self._results[STAGES[STAGES.index(stage) - 1]].output

    def _strategies(self) -> tuple[type, ...]:
        if self.options.strategy == "auto":
            return STRATEGIES
        return (get_strategy(self.options.strategy),)

    def _run_capture(self) -> StageResult:
        from .shapes import DimPolicyWarning

        for warning in self.dim_warnings:
            warnings.warn(str(warning), DimPolicyWarning, stacklevel=4)
        start = time.perf_counter()
        try:
            dynamic_shapes = self.spec.to_torch(self.inputs)
        except Exception as exc:  # noqa: BLE001 - a spec torch refuses is a failed capture
            error = exc if isinstance(exc, ExportError) else CaptureError(
                f"torch refused the dim spec: {first_line(exc)}", hint="check the Dim ranges in the spec"
            )
            return StageResult("capture", "failed", time.perf_counter() - start, error=error)
        attempts: list[CaptureAttempt] = []
        strategies = self._strategies()
        for i, cls in enumerate(strategies):
            strategy = cls(runtime_asserts=self.options.runtime_asserts)
            attempt = strategy(self.model, self.inputs.args, self.inputs.kwargs, dynamic_shapes)
            attempts.append(attempt)
            if attempt.success:
                return StageResult(
                    "capture", "ok", time.perf_counter() - start, attempt.program,
                    attempts=tuple(attempts), detail=f"strategy {attempt.strategy}",
                )
            if is_constraint_violation(attempt.error):
                reason = "skipped: the dim spec was rejected, another strategy would only hide it"
                attempts.extend(CaptureAttempt(c.name, 0.0, skipped_reason=reason) for c in strategies[i + 1 :])
                break
        error = capture_error(tuple(attempts))
        return StageResult("capture", "failed", time.perf_counter() - start, error=error, attempts=tuple(attempts))

    def _run_guarded(self, stage: str, error_type: type[ExportError], hint: str, work: Callable[[], Any]) -> StageResult:
        start = time.perf_counter()
        try:
            output = work()
        except Exception as exc:  # noqa: BLE001 - failure is data
            error = error_type(first_line(exc), source=user_source_line(exc), hint=hint)
            error.__cause__ = exc
            return StageResult(stage, "failed", time.perf_counter() - start, error=error)
        return StageResult(stage, "ok", time.perf_counter() - start, output)

    def _run_decompose(self) -> StageResult:
        from . import _torch_compat as compat
        from .translate import registry_opset, resolve_opset

        program = self._previous_output("decompose")
        opset = registry_opset(resolve_opset(self.options.opset_version))
        return self._run_guarded(
            "decompose",
            DecomposeError,
            "an operator could not be decomposed for ONNX; the error names it. "
            "Report it upstream with the exported program (session.save('model.pt2')).",
            lambda: compat.decompose_for_onnx(program, opset),
        )

    def _run_translate(self) -> StageResult:
        from .translate import constant_outputs, resolve_opset, translate

        program = self._previous_output("translate")
        opset = resolve_opset(self.options.opset_version)
        constants = constant_outputs(program)
        hint = (
            f"forward returns non-tensor values ({', '.join(constants)}), which ONNX cannot "
            "output: return tensors (torch.tensor(value)), or drop them from the outputs"
            if constants
            else "an operator has no ONNX translation at this opset: try a newer opset_version, "
            "or register a translation with torch.onnx's custom_translation_table"
        )
        return self._run_guarded(
            "translate",
            TranslateError,
            hint,
            lambda: translate(program, opset_version=opset, bound=self.inputs, spec=self.spec),
        )

    def _run_optimize(self) -> StageResult:
        from .translate import optimize

        model = self._previous_output("optimize")
        if not self.options.optimize:
            return StageResult("optimize", "skipped", 0.0, model, detail="optimize=False")
        return self._run_guarded(
            "optimize",
            OptimizeError,
            "export with ExportOptions(optimize=False) to get the unoptimized model",
            lambda: optimize(model),
        )

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
        return next((r for r in self.stages if r.status == "failed"), None)

    @property
    def succeeded(self) -> bool:
        return len(self.stages) == len(STAGES) and self.failed_stage is None

    def _output(self, stage: str) -> Any:
        result = self.run(stage)
        if result.status == "failed":
            raise result.error.with_session(self)  # type: ignore[union-attr]
        return result.output

    @property
    def exported_program(self) -> Any:
        """The captured ``torch.export.ExportedProgram`` (before ONNX decompositions)."""
        return self._output("capture")

    @property
    def decomposed_program(self) -> Any:
        return self._output("decompose")

    @property
    def onnx_model(self) -> Any:
        """The final ``onnx_ir.Model`` (optimized unless ``optimize=False``)."""
        return self._output("optimize")

    @property
    def model_proto(self) -> Any:
        """The final ``onnx.ModelProto``."""
        if self._proto is None:
            import onnx_ir as ir

            self._proto = ir.to_proto(self.onnx_model)
        return self._proto

    @property
    def model_bytes(self) -> bytes:
        """The final model serialized (what onnxruntime loads and ``save`` writes)."""
        if self._bytes is None:
            self._bytes = self.model_proto.SerializeToString()
        return self._bytes

    @property
    def ort_session(self) -> Any:
        """An onnxruntime CPU ``InferenceSession`` of the final model, built once."""
        if self._ort is None:
            import onnxruntime as ort

            options = ort.SessionOptions()
            options.log_severity_level = 3
            self._ort = ort.InferenceSession(self.model_bytes, options, providers=["CPUExecutionProvider"])
        return self._ort

    def raise_for_status(self) -> Session:
        failed = self.failed_stage
        if failed is not None:
            raise failed.error.with_session(self)  # type: ignore[union-attr]
        return self

    def save(self, destination: Any, *, serializer: Any = None) -> Any:
        """Write the model atomically: ONNX by default, the ExportedProgram for ``*.pt2``."""
        from .serialize import default_serializer

        serializer = serializer or default_serializer(destination)
        return serializer.serialize(self, destination)

    # -- running the ONNX model ------------------------------------------------------------
    def feeds(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """ONNX input feeds (name → numpy array) for inputs given like the model's forward."""
        bound = bind_inputs(self.model, args, kwargs)
        names = {value.name for value in self.onnx_model.graph.inputs}
        return {
            leaf.path: bound.values[leaf.index].detach().cpu().numpy()
            for leaf in bound.leaves
            if leaf.path in names
        }

    def run_onnx(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Run the ONNX model in onnxruntime (CPU) on inputs given like the model's forward."""
        return self.ort_session.run(None, self.feeds(*args, **kwargs))

    # -- display -----------------------------------------------------------------------------
    def to_frame(self) -> Any:
        """The stages as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([r.to_dict() for r in self.stages], columns=["stage", "status", "seconds", "cached", "detail"])

    def summary(self) -> str:
        lines = [f"Session({type(self.model).__name__}, {self.spec.describe()}, strategy={self.options.strategy!r})"]
        for r in self.stages:
            cached = ", cached" if r.cached else ""
            detail = r.detail or (first_line(r.error) if r.error else "")
            lines.append(f"  {r.name:<10} {r.status:<8} {r.seconds:7.3f} s{cached}  {detail}".rstrip())
        pending = [s for s in STAGES if s not in self._results]
        if pending:
            lines.append(f"  not run: {', '.join(pending)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return self.summary()

    def _repr_pretty_(self, printer: Any, cycle: bool) -> None:
        printer.text(self.summary())

    # -- verification and benchmarking --
    def verify(self, **options: Any) -> Any:
        """ONNX vs eager at the example inputs and over a sweep of sizes, plus the contract
        checks: a :class:`~exporter.verify.VerifyResult` (never raises). Options: see
        :func:`exporter.verify.verify`."""
        from .verify import verify

        return verify(self, **options)

    def benchmark(self, **options: Any) -> Any:
        """onnxruntime vs eager latency: a :class:`~exporter.bench.BenchmarkResult`. Options:
        see :func:`exporter.bench.benchmark`."""
        from .bench import benchmark

        return benchmark(self, **options)

    def benchmark_sweep(self, dim: Any = None, sizes: Any = (1, 2, 4, 8, 16, 32, 64), **options: Any) -> Any:
        """Latency against the size of one dynamic dim: a :class:`~exporter.bench.SweepResult`."""
        from .bench import benchmark_sweep

        return benchmark_sweep(self, dim, sizes, **options)

    def profile(self, **options: Any) -> Any:
        """onnxruntime per-node profile by op type and module: a :class:`~exporter.bench.ProfileResult`."""
        from .bench import profile

        return profile(self, **options)

    # -- shapes (guards, dim outcomes, fixes) --
    # guards, dims and suggested_fixes depend only on the spec, the inputs and the capture
    # result, none of which changes within a session: each is computed once.
    @functools.cached_property
    def guards(self) -> Any:
        """Every shape guard and runtime assert torch added while capturing (the attempt that
        succeeded, else the failed one), with the user's file, line and code: a
        :class:`~exporter.guards.Guards`. Runs capture if needed."""
        from .guards import guards_of

        return guards_of(self.attempts, self.inputs)

    @functools.cached_property
    def dims(self) -> Any:
        """Per input axis: requested policy, obtained result and why they differ: a
        :class:`~exporter.shapes.DimOutcomes`. Runs capture if needed."""
        from .shapes import dim_outcomes

        return dim_outcomes(self)

    @property
    def dim_warnings(self) -> tuple[Any, ...]:
        """Axes torch cannot keep dynamic as asked, known before any export runs."""
        from .shapes import dim_warnings

        return dim_warnings(self.spec, self.inputs)

    @functools.cached_property
    def suggested_fixes(self) -> Any:
        """torch's suggested fixes for a rejected spec, as a new spec and a diff: a
        :class:`~exporter.shapes.SuggestedFixes` (empty when capture succeeded)."""
        from .shapes import suggested_fixes_of

        return suggested_fixes_of(self)

    @property
    def applied_fixes(self) -> tuple[Any, ...]:
        """The fixes :meth:`apply_suggested_fixes` applied to reach this session, round by round."""
        return getattr(self, "_applied_fixes", ())

    def apply_suggested_fixes(self, max_rounds: int = 5) -> Session:
        """A session re-exported with torch's suggested fixes, applied round after round until
        capture succeeds, nothing more is suggested, or ``max_rounds`` is reached."""
        from .shapes import apply_suggested_fixes

        session, history = apply_suggested_fixes(self, max_rounds=max_rounds)
        session._applied_fixes = self.applied_fixes + history
        return session

    def infer_dims(self, more_inputs: Any) -> DimSpec:
        """A spec proposed from this session's inputs plus ``more_inputs`` (a
        ``torch.export.AdditionalInputs``, or a list of args tuples / kwargs dicts /
        ``(args, kwargs)`` pairs): axes that vary become named dims over the observed range."""
        from .shapes import infer_dim_spec

        return infer_dim_spec(self.model, self.inputs, more_inputs, spec=self.spec)
