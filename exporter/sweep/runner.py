"""One unit, start to end, inside the worker process: build → eager → export → verify →
benchmark → ``torch.onnx.export`` baseline. Each step's outcome is data in the
:class:`UnitRecord`; nothing here raises for a bad model, nor for an error of the sweep's own
code around a step: that is recorded at the step it was in (never a dead worker, "crashed")."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .case import SweepCase
from .outcome import error_line, is_out_of_memory, library_versions, package_versions, short, versus
from .record import UnitRecord
from .unit import Unit
from .zoo import load_case

__all__ = ["run_unit"]

BENCHMARK_BUDGET = 0.5
ORT_FAILED = "onnxruntime failed at"  # how a baseline problem that raised (not a wrong value) begins


class _OutOfMemory(Exception):
    """An allocation failed during ``stage``: the unit ends as ``oom``."""

    def __init__(self, stage: str, error: str) -> None:
        super().__init__(error)
        self.stage, self.error = stage, error


@dataclass
class _Progress:
    """What the unit did so far (mutable while it runs, turned into a frozen record at the end)."""

    unit: Unit
    report: Callable[[str], None]
    stages: dict[str, str] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    unverified_outputs: tuple[str, ...] = ()  # outputs verify compared but cannot call verified (~0)
    refuses_only: bool = False  # verify failed only where onnxruntime raised, right at the example
    libraries: dict[str, str] = field(default_factory=dict)  # the versions of the packages the model comes from
    current: str = "build"  # the stage running now
    began: float = 0.0

    def begin(self, stage: str) -> float:
        self.report(stage)
        self.current, self.began = stage, time.perf_counter()
        return self.began

    def end(self, stage: str, status: str, started: float) -> None:
        self.stages[stage] = status
        self.seconds[stage] = round(time.perf_counter() - started, 3)

    def fail(self, stage: str, status: str, exc: BaseException | str) -> None:
        if is_out_of_memory(exc):
            raise _OutOfMemory(stage, exc if isinstance(exc, str) else error_line(exc))
        from .buckets import failure_class

        error = exc if isinstance(exc, str) else error_line(exc)
        self.fields.update(status=status, failed_stage=stage, error=short(error), failure_class=failure_class(error))

    def unexpected(self, exc: BaseException) -> None:
        """An error the stages did not catch (the sweep's own code around a step): the stage
        it was in failed, with this error; a stage after the export keeps the unit's status."""
        stage = self.current
        if stage not in self.stages:
            self.end(stage, "failed", self.began)
        else:
            self.stages[stage] = "failed"
        if "failed_stage" in self.fields:  # the unit failed already: that failure stays its error
            if stage == "baseline":
                self.fields["baseline_error"] = short(error_line(exc))
            return
        self.fail(stage, _FAILED_STATUS.get(stage, self.fields.get("status", "exported")), exc)


# The status of a unit whose stage failed (after the export, its status stays).
_FAILED_STATUS = {"build": "build_failed", "eager": "build_failed", "capture": "export_failed", "verify": "verify_failed"}


def run_unit(unit: Unit, report: Callable[[str], None] = lambda stage: None) -> UnitRecord:
    """Run ``unit`` in this process and return its record. ``report(stage)`` is called as
    each stage starts (the worker writes it down, so a unit killed for time or memory still
    says where it was)."""
    started = time.time()
    progress = _Progress(unit, report)
    try:
        _run_stages(unit, progress)
    except _OutOfMemory as oom:
        progress.fields.update(status="oom", failed_stage=oom.stage, error=short(oom.error), failure_class="out of memory")
    except MemoryError as exc:
        progress.fields.update(status="oom", failed_stage=progress.current, error=short(error_line(exc)),
                               failure_class="out of memory")
    except Exception as exc:  # noqa: BLE001 - the sweep's own error around a stage: a labelled record, not a dead worker
        try:
            progress.unexpected(exc)
        except _OutOfMemory as oom:
            progress.fields.update(status="oom", failed_stage=oom.stage, error=short(oom.error),
                                   failure_class="out of memory")
    return UnitRecord(
        unit_id=unit.unit_id, zoo=unit.zoo, model=unit.model, spec=unit.spec, options=unit.options,
        stages=progress.stages, seconds={**progress.seconds, "total": round(time.time() - started, 3)},
        versions={**package_versions(), **progress.libraries}, source=unit.source, host=socket.gethostname(), pid=os.getpid(),
        started=started, finished=time.time(), **{"status": "exported", **progress.fields},
    )


def _run_stages(unit: Unit, progress: _Progress) -> None:
    case = _build(unit, progress)
    if case is None:
        return
    example_outputs = _eager(case, progress)
    if example_outputs is None:
        return
    session, exported = _export(unit, case, progress)
    checked_cases: Sequence[tuple[tuple[Any, ...], dict[str, Any], Sequence[Any]]] = [(tuple(case.args), dict(case.kwargs), example_outputs)]
    if exported:
        if unit.verify:
            checked_cases = _verify(session, progress) or checked_cases
        if unit.benchmark and "status" not in progress.fields:
            _benchmark(session, progress)
    if session is not None:
        if unit.verify and progress.fields.get("status") in ("export_failed", "verify_failed"):
            _with_offered_patches(session, progress)
        session.release()
    if unit.baseline:
        _baseline(unit, case, checked_cases, progress)


def _build(unit: Unit, progress: _Progress) -> SweepCase | None:
    """The factory's case, or None (build failed)."""
    started = progress.begin("build")
    try:
        case = load_case(unit.zoo, unit.model, unit.source or None)
    except Exception as exc:  # noqa: BLE001 - a model that does not build is a record, not a crash
        progress.end("build", "failed", started)
        progress.fail("build", "build_failed", exc)
        return None
    try:
        progress.libraries = library_versions(case.model)
    except Exception:  # noqa: BLE001 - a model whose modules() raises: its versions are not known, it still runs
        progress.libraries = {}
    progress.end("build", "ok", started)
    return case


def _eager(case: SweepCase, progress: _Progress) -> list[Any] | None:
    """Eager PyTorch's outputs at the example, flattened to their leaves as verify reads
    them, or None (the model does not run, or its outputs cannot be read: build failed)."""
    import torch

    from .. import compat

    started = progress.begin("eager")
    try:
        with torch.no_grad():
            outputs = case.model(*case.args, **dict(case.kwargs))
    except Exception as exc:  # noqa: BLE001 - a model that does not run on its example is a record
        progress.end("eager", "failed", started)
        progress.fail("eager", "build_failed", exc)
        return None
    try:
        leaves = [leaf for _, leaf in compat.tree_flatten_with_path(outputs)]
    except Exception as exc:  # noqa: BLE001 - an output type pytree cannot read (diffusers' BaseOutput)
        progress.end("eager", "failed", started)
        progress.fail("eager", "build_failed", f"the outputs ({type(outputs).__qualname__}) cannot be flattened: "
                                                f"{error_line(exc)}")
        return None
    progress.end("eager", "ok", started)
    return leaves


def _grown_case(case: SweepCase) -> list[tuple[tuple[Any, ...], dict[str, Any], list[Any]]]:
    """The example with every named dim one larger (the same name, the same size), and eager
    PyTorch's outputs there: where the baseline is checked when verify gives no sizes (our
    export failed, or verify is off). Empty when the spec's form is not a dict by input name
    or a tuple by position, or eager PyTorch raises at that size."""
    import torch

    from .. import compat

    spec = case.dynamic_shapes
    args, kwargs = list(case.args), dict(case.kwargs)
    slots: list[tuple[Any, Any, Any]]  # (the list or dict holding the input, its key, its named axes)
    if isinstance(spec, dict):
        slots = [(kwargs, name, axes) for name, axes in spec.items() if name in kwargs]
    elif isinstance(spec, (tuple, list)) and len(spec) == len(args):
        slots = [(args, i, axes) for i, axes in enumerate(spec)]
    else:
        return []
    sizes: dict[str, int] = {}
    for container, key, axes in slots:
        value = container[key]
        if not isinstance(value, torch.Tensor) or not isinstance(axes, dict) or not axes:
            continue
        shape = list(value.shape)
        for axis, name in axes.items():
            shape[axis] = sizes.setdefault(str(name), value.shape[axis] + 1)
        container[key] = _like(value, shape)
    if not sizes:
        return []
    try:
        with torch.no_grad():
            outputs = case.model(*args, **kwargs)
        leaves = [leaf for _, leaf in compat.tree_flatten_with_path(outputs)]
    except Exception:  # noqa: BLE001 - no such size for this model: the example alone is checked
        return []
    return [(tuple(args), kwargs, leaves)]


def _like(value: Any, shape: list[int]) -> Any:
    """A tensor of ``shape`` with values like ``value``'s (a constant stays that constant)."""
    import torch

    generator = torch.Generator().manual_seed(1)
    if value.numel() and bool((value == value.flatten()[0]).all()):
        return torch.full(shape, value.flatten()[0].item(), dtype=value.dtype)
    if value.is_floating_point():
        return torch.randn(shape, generator=generator, dtype=value.dtype)
    low, high = int(value.min()), int(value.max())
    return torch.randint(low, high + 1, shape, generator=generator, dtype=value.dtype)


def _export(unit: Unit, case: SweepCase, progress: _Progress) -> tuple[Any, bool]:
    """The session (None when it could not be made) and whether it exported."""
    from ..options import ExportOptions
    from ..session import Session

    started = progress.begin("capture")
    try:
        options = ExportOptions(dynamic_shapes=case.dynamic_shapes if unit.spec == "dynamic" else None,
                                opset_version=unit.opset, strategy=unit.strategy, optimize=unit.optimize)
        session = Session(case.model, tuple(case.args), dict(case.kwargs), options)
        session.run()
    except Exception as exc:  # noqa: BLE001 - e.g. a SpecError for the factory's dim names
        progress.end("capture", "failed", started)
        progress.fail("capture", "export_failed", exc)
        return None, False
    for stage in session.stages:
        progress.stages[stage.name] = stage.status.value
        progress.seconds[stage.name] = round(stage.seconds, 3)
    failed = session.failed_stage
    if failed is not None:
        progress.fail(failed.name, "export_failed", failed.error if failed.error is not None else failed.detail)
        return session, False
    if not session.is_large:
        progress.fields["onnx_bytes"] = len(session.model_bytes)
    return session, True


def _with_offered_patches(session: Any, progress: _Progress) -> None:
    """A failed unit exported again with the model patches its session offers as fixes (the
    dim spec unchanged, as ``apply_suggested_fixes``' first round), and verified: what a user
    gets with one click. Recorded as ``fixed_by`` / ``fixed_status`` beside the unit's own
    status, which it does not change."""
    started = progress.begin("fixes")
    try:
        offered = tuple(session.suggested_fixes.patch_names)
        if not offered:
            return
        patched = session.with_options(patches=session.options.patches + offered)
        patched.run()
        verdict = None if patched.failed_stage is not None else patched.verify().status
        patched.release()
    except Exception as exc:  # a fix that raises is recorded, not a crash
        if is_out_of_memory(exc):
            raise _OutOfMemory("fixes", error_line(exc)) from exc
        progress.end("fixes", "failed", started)
        return
    status = {None: "export_failed", "passed": "passed", "not_verified": "not_verified"}.get(verdict, "verify_failed")
    progress.end("fixes", status, started)
    progress.fields.update(fixed_by=offered, fixed_status=status)


def _verify(session: Any, progress: _Progress) -> list[tuple[tuple[Any, ...], dict[str, Any], Sequence[Any]]]:
    """Verify; return the size cases it compared (inputs and eager outputs) for the baseline."""
    started = progress.begin("verify")
    result = session.verify()
    progress.end("verify", result.status, started)
    progress.fields["verdict"] = short(result.verdict)
    progress.unverified_outputs = result.unverified_outputs
    failed = result.failed_cases
    progress.refuses_only = bool(failed) and all(c.status == "ort_error" for c in failed) and any(
        c.name == "example" and c.status == "pass" for c in result.cases)
    if result.status == "passed":
        progress.fields["status"] = "passed"
    elif result.status == "not_verified":
        progress.fields["status"] = "not_verified"
    elif result.status == "failed":
        wrong = result.failed_cases
        progress.fail("verify", "verify_failed", wrong[0].describe() if wrong else result.verdict)
    else:
        progress.fail("verify", "verify_failed", result.error or result.verdict)
    runs = result.case_runs
    kept: list[tuple[tuple[Any, ...], dict[str, Any], Sequence[Any]]] = []
    for case in result.cases:
        run = runs.get(case.name) if runs is not None else None
        if run is not None and run.expected is not None and case.compared and not case.is_edge_value:
            kept.append((tuple(run.args), dict(run.kwargs), list(run.expected)))
    return kept


def _benchmark(session: Any, progress: _Progress) -> None:
    started = progress.begin("benchmark")
    result = session.benchmark(budget=BENCHMARK_BUDGET, min_runs=10)
    progress.end("benchmark", "failed" if result.error else "ok", started)
    if result.error is None:
        progress.fields["speedup"] = round(float(result.speedup), 3)


def _baseline(unit: Unit, case: SweepCase, checked: Sequence[tuple[tuple[Any, ...], dict[str, Any], Sequence[Any]]],
              progress: _Progress) -> None:
    """The same call through ``torch.onnx.export(..., dynamo=True)``, run in onnxruntime at the
    example and at the sizes verify compared, and how it compares with ours."""
    import torch

    started = progress.begin("baseline")
    if len(checked) == 1 and unit.spec == "dynamic":
        checked = [*checked, *_grown_case(case)]
    try:
        program = torch.onnx.export(
            case.model, tuple(case.args), kwargs=dict(case.kwargs),
            dynamic_shapes=case.dynamic_shapes if unit.spec == "dynamic" else None,
            dynamo=True, opset_version=unit.opset, optimize=unit.optimize, verbose=False,
        )
    except Exception as exc:  # the baseline failing is what we measure
        if is_out_of_memory(exc):
            raise _OutOfMemory("baseline", error_line(exc)) from exc
        progress.end("baseline", "export_failed", started)
        _set_baseline(progress, "export_failed", error_line(exc))
        return
    status, error = ("passed" if len(checked) > 1 else "example_only"), None
    try:
        run = _ort_runner(program)
    except Exception as exc:  # noqa: BLE001 - a model onnxruntime cannot load is the finding
        checked, status, error = (), "verify_failed", f"onnxruntime cannot load it: {error_line(exc)}"
    problems = [p for p in (_compare(run, args, kwargs, expected) for args, kwargs, expected in checked) if p]
    if problems:
        status, error = "verify_failed", problems[0]
    refuses_only = bool(checked) and 0 < len(problems) < len(checked) and \
        all(p.startswith(ORT_FAILED) for p in problems) and _compare(run, *checked[0]) is None
    if status != "verify_failed" and progress.unverified_outputs:  # the same cases: its match there tells nothing
        names = ", ".join(repr(name) for name in progress.unverified_outputs)
        status, error = "not_verified", (
            f"output(s) {names}: every value compared is within atol of 0, a model returning zeros would pass too")
    progress.end("baseline", status, started)
    _set_baseline(progress, status, error, refuses_only)


def _set_baseline(progress: _Progress, status: str, error: str | None, refuses_only: bool = False) -> None:
    ours = progress.fields.get("status", "exported")
    progress.fields.update(baseline=status, baseline_error=short(error) if error else None,
                           versus=versus(ours, status, ours_refuses_only=progress.refuses_only,
                                         baseline_refuses_only=refuses_only))


def _ort_runner(program: Any) -> Callable[[tuple[Any, ...], dict[str, Any]], list[Any]]:
    """Run ``torch.onnx.export``'s model in onnxruntime on inputs given as to the module:
    keyword inputs fed by name (the ONNX inputs are named after them), the others in order."""
    import numpy
    import onnxruntime
    import torch

    from .. import compat

    options = onnxruntime.SessionOptions()
    options.enable_cpu_mem_arena = False  # as verify runs ours (ort_inference_session): the same memory
    session = onnxruntime.InferenceSession(program.model_proto.SerializeToString(), options,
                                           providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]

    def run(args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Any]:
        named = {k: v for k, v in kwargs.items() if k in names and isinstance(v, torch.Tensor)}
        rest = [leaf for _, leaf in compat.tree_flatten_with_path(
            (args, {k: v for k, v in kwargs.items() if k not in named})) if isinstance(leaf, torch.Tensor)]
        positional = iter(rest)
        feeds = {name: (named[name] if name in named else next(positional)).numpy() for name in names}
        return [torch.from_numpy(numpy.asarray(out)) for out in session.run(None, feeds)]

    return run


def _compare(run: Callable[[tuple[Any, ...], dict[str, Any]], list[Any]], args: tuple[Any, ...], kwargs: dict[str, Any], expected: Sequence[Any]) -> str | None:
    """None when the outputs of ``run`` match ``expected`` under verify's own tolerances
    (:func:`exporter.verify.tolerance.compare`), else what differs."""
    import torch

    from ..verify.tolerance import compare

    sizes = ", ".join(f"{tuple(v.shape)}" for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor))
    try:
        outputs = run(args, kwargs)
    except Exception as exc:  # noqa: BLE001 - onnxruntime failing at a size is the finding
        return f"{ORT_FAILED} {sizes}: {error_line(exc)}"
    if len(outputs) != len(expected):
        return f"{len(outputs)} outputs where eager PyTorch gives {len(expected)}"
    for i, (got, want) in enumerate(zip(outputs, expected)):
        if not isinstance(want, torch.Tensor):
            continue
        check = compare("baseline", f"output {i}", got, want)
        if not check.ok:
            return f"{check.describe()} (inputs {sizes})"
    return None
