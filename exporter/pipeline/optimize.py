"""The optimize stage: onnxscript's optimizer (what ``torch.onnx.export(optimize=True)`` runs),
pass by pass and recorded, with a fallback to the unoptimized model when only the optimizer fails.

:func:`run_passes` runs exactly what ``torch.onnx.export(optimize=True)`` runs (onnxscript
0.7's ``optimizer.optimize_ir`` with its defaults, then ``rewriter.onnx_fusions.fuse``), in the
same order, with the same options, so the final model is byte-identical to
``compat.optimize_onnx_ir``'s::

    InlinePass
    round 0, 1 (stops after a round that changed nothing; optimize_ir(num_iterations=2)):
        FoldConstantsPass, RewritePass, [ExtraRewritePass], RemoveUnusedNodesPass,
        RemoveUnusedFunctionsPass, RemoveUnusedOpsetsPass
    RemoveUnusedNodesPass, LiftConstantsToInitializersPass, LiftSubgraphInitializersToMainGraphPass,
    DeduplicateInitializersPass, CommonSubexpressionEliminationPass, OutputFixPass, NameFixPass
    OnnxFusionsPass (opset 23 only: RMSNormalization, RotaryEmbedding, GQA)

Each pass that ran in each round is one :class:`~exporter.pipeline.pass_records.PassRecord`
(the loop's passes appear once per round, with ``round`` 0 or 1). The version converter is not
among them: it runs in the translate stage, before the optimizer. ``ExtraRewritePass`` runs only
when ``ExportOptions(extra_rewrite_rules=...)`` gives rules (your own onnxscript rewrite rules,
run right after the default ones in each round). The pass names are
:data:`exporter.pipeline.names.PASS_NAMES`.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .. import compat
from ..errors import OptimizeError, Status
from .names import check_pass_names
from .pass_records import OptimizerPasses, PassRecord, Snapshot, diff
from .stage import StageResult, run_guarded
from .translate import check_opset_forms

if TYPE_CHECKING:
    import onnx_ir as ir

    from ..events import CancelToken


__all__ = [
    "OPTIMIZER_PASSES",
    "OptimizerFailure",
    "PassFailed",
    "optimize",
    "optimize_recorded",
    "optimize_stage",
    "optimizer_failure",
    "replay",
    "run_passes",
    "trace_leftover_initializers",
]


def optimize(model: ir.Model, *, skip_passes: Sequence[str] = (), extra_rewrite_rules: Sequence[Any] = ()) -> ir.Model:
    """Constant folding, dead-code removal and fusions on a copy of ``model`` (see
    :func:`optimize_recorded`, which also gives the record of every pass)."""
    return optimize_recorded(model, skip_passes=skip_passes, extra_rewrite_rules=extra_rewrite_rules)[0]


def optimize_recorded(model: ir.Model, *, skip_passes: Sequence[str] = (),
                      extra_rewrite_rules: Sequence[Any] = ()) -> tuple[ir.Model, OptimizerPasses]:
    """What ``torch.onnx.export(optimize=True)`` runs, pass by pass, on a copy of ``model``:
    ``(optimized, passes)`` with an :class:`~exporter.pipeline.pass_records.OptimizerPasses`
    record. ``skip_passes``: pass names not to run (:data:`exporter.pipeline.names.PASS_NAMES`).
    A pass that fails is a :class:`PassFailed` naming the pass, what it does and how to skip
    it (onnx_ir's own says ``'<onnx_ir.passes.PassManager object at 0x…>' pass``), carrying
    the records up to it as ``.passes``; an optimized model in a form its opset lacks is an
    :class:`~exporter.errors.OptimizeError`."""
    optimized, passes = run_passes(model.clone(), skip_passes=skip_passes, extra_rewrite_rules=extra_rewrite_rules)
    check_opset_forms(optimized, "optimize")
    return optimized, passes


def trace_leftover_initializers(model: ir.Model) -> dict[str, str]:
    """Initializers whose value is a FakeTensor (or another tracing tensor) instead of data, by
    name: what a module attribute left by an earlier trace (torch.onnx.export's, torch.export's)
    becomes. Such a model can be neither optimized nor saved."""
    found = {}
    for name, value in model.graph.initializers.items():
        kind = compat.trace_tensor_kind(getattr(value.const_value, "raw", None))
        if kind is not None:
            found[name] = kind
    return found


# The passes of onnxscript's optimizer (what torch.onnx.export(optimize=True) runs), by class
# name: what each one does, for an error that says which failed.
OPTIMIZER_PASSES: dict[str, str] = {
    "InlinePass": "inlines the model's local functions (torchlib's) into the main graph",
    "FoldConstantsPass": "constant folding: computes nodes whose inputs are all constants and stores the results",
    "RewritePass": "pattern rewrites: fuses or simplifies known node patterns",
    "RemoveUnusedNodesPass": "removes nodes and initializers nothing uses",
    "RemoveUnusedFunctionsPass": "removes local functions nothing calls",
    "RemoveUnusedOpsetsPass": "removes opset imports no node uses",
    "LiftConstantsToInitializersPass": "turns Constant nodes into initializers",
    "LiftSubgraphInitializersToMainGraphPass": "moves initializers of If/Loop/Scan bodies to the main graph",
    "DeduplicateInitializersPass": "merges initializers that hold the same values",
    "DeduplicateHashedInitializersPass": "merges initializers that hold the same values",
    "CommonSubexpressionEliminationPass": "merges nodes that compute the same thing from the same inputs",
    "OutputFixPass": "adds Identity nodes where a graph output is an input or repeated",
    "NameFixPass": "gives every node and value a unique name",
    "IdentityEliminationPass": "removes redundant Identity nodes",
    "ShapeInferencePass": "ONNX shape inference over the graph",
    "TopologicalSortPass": "sorts the nodes topologically",
    "ExtraRewritePass": "pattern rewrites with the rules given in ExportOptions(extra_rewrite_rules=...)",
    "OnnxFusionsPass": "fuses RMSNormalization, RotaryEmbedding and GQA patterns into opset 23 ops",
}
# Containers that only run other passes: the failure is in one of theirs.
_PASS_CONTAINERS = ("PassManager", "Sequential")


@dataclass(frozen=True)
class OptimizerFailure:
    """Which optimizer pass failed, what it does, and the error underneath."""

    pass_name: str | None  # "FoldConstantsPass"; None when no pass could be named
    description: str  # from OPTIMIZER_PASSES ("" for a pass not in it)
    cause: str  # the innermost error: "RuntimeError: .numpy() is not supported for tensor subclasses."
    after: tuple[str, ...] = ()  # the passes that ran before it, by class name

    def __str__(self) -> str:
        if self.pass_name is None:
            return f"the ONNX optimizer failed: {self.cause}"
        what = f" ({self.description})" if self.description else ""
        return f"the ONNX optimizer's {self.pass_name}{what} failed: {self.cause}"


_PASS_OBJECT = re.compile(r"<(?:[\w.]+\.)?(\w+) object at 0x[0-9a-fA-F]+>")


def optimizer_failure(exc: BaseException) -> OptimizerFailure:
    """Name the innermost pass in a chain of onnx_ir ``PassError`` s (their messages name the
    pass by its object repr) and the error that made it fail."""
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or (None if current.__suppress_context__ else current.__context__)
    name, after = None, ()
    for error in chain:  # outermost first: the last named pass is the innermost
        text = str(error)
        if "pass" not in text:
            continue
        running, _, ran = text.partition(" pass after the following passes:")
        found = [n for n in _PASS_OBJECT.findall(running) if n not in _PASS_CONTAINERS]
        if found:
            name = found[-1]
            after = tuple(n for n in _PASS_OBJECT.findall(ran) if n not in _PASS_CONTAINERS)
    root = next((e for e in reversed(chain) if type(e).__name__ != "PassError"), chain[-1])
    line = (str(root).strip().splitlines() or [""])[0]
    cause = f"{type(root).__name__}: {line}" if line else type(root).__name__
    return OptimizerFailure(name, OPTIMIZER_PASSES.get(name or "", ""), cause, after)


def describe(name: str) -> str:
    """What the pass ``name`` does, in words ('' for a pass not in :data:`OPTIMIZER_PASSES`)."""
    return OPTIMIZER_PASSES.get(name, "")


# -- running the passes one by one ------------------------------------------------------------------


@dataclass(frozen=True)
class _Step:
    name: str
    round: int | None
    make: Callable[[], Callable[[Any], bool]]


def _as_step(make_pass: Callable[[], Any]) -> Callable[[], Callable[[Any], bool]]:
    def make() -> Callable[[Any], bool]:
        instance = make_pass()
        return lambda model: bool(instance(model).modified)

    return make


def _user_rules(rules: Sequence[Any], warnings: list[str]) -> list[Any]:
    """The user's rules as the optimizer runs them, each stopped (and said in ``warnings``)
    once it keeps rewriting its own output: the README's "up to two rounds" holds even for a
    rule whose replacement matches its own pattern, which would otherwise never end."""
    from ..compat.rewrite_budget import bounded_rewrite_rules, rule_label

    def runaway(index: int, rewrites: int) -> None:
        warnings.append(
            f"the rewrite rule {rule_label(rules[index], index)} kept matching its own output: stopped after "
            f"{rewrites} rewrites (its replacement matches its pattern; make the replacement differ from the "
            "pattern, or add a condition=... that refuses the rule's own output)")

    return bounded_rewrite_rules(compat.linear_rewrite_rules(rules), runaway)


def _pipeline(model: ir.Model, extra_rewrite_rules: Sequence[Any],
              warnings: list[str] | None = None) -> tuple[list[_Step], list[_Step], list[_Step], int]:
    """(before the loop, the loop's passes, after the loop, rounds): optimize_ir's defaults.
    What the user's rules did that the stage should warn about goes to ``warnings``."""
    import onnx_ir.passes.common as common

    said: list[str] = warnings if warnings is not None else []
    parts = compat.onnxscript_optimizer_parts()
    fold = lambda: parts["FoldConstantsPass"](  # noqa: E731
        shape_inference=True, input_size_limit=parts["input_size_limit"],
        output_size_limit=parts["output_size_limit"], should_fold=lambda node: None)
    loop = [
        ("FoldConstantsPass", fold),
        ("RewritePass", lambda: parts["RewritePass"](parts["default_rewrite_rules"])),
        *([("ExtraRewritePass", lambda: parts["RewritePass"](_user_rules(extra_rewrite_rules, said)))]
          if extra_rewrite_rules else []),
        ("RemoveUnusedNodesPass", common.RemoveUnusedNodesPass),
        ("RemoveUnusedFunctionsPass", common.RemoveUnusedFunctionsPass),
        ("RemoveUnusedOpsetsPass", common.RemoveUnusedOpsetsPass),
    ]
    after = [
        ("RemoveUnusedNodesPass", common.RemoveUnusedNodesPass),
        ("LiftConstantsToInitializersPass", lambda: common.LiftConstantsToInitializersPass(lift_all_constants=True, size_limit=0)),
        ("LiftSubgraphInitializersToMainGraphPass", common.LiftSubgraphInitializersToMainGraphPass),
        ("DeduplicateInitializersPass", common.DeduplicateInitializersPass),
        ("CommonSubexpressionEliminationPass", common.CommonSubexpressionEliminationPass),
        ("OutputFixPass", common.OutputFixPass),
        ("NameFixPass", common.NameFixPass),
    ]
    fuse = parts["fuse"]

    def make_fusions() -> Callable[[Any], bool]:
        return lambda m: any(fuse(m).values())

    before = [_Step("InlinePass", None, _as_step(common.InlinePass))]
    tail = [_Step(name, None, _as_step(make)) for name, make in after]
    if _onnx_opset(model) == 23:  # fuse() does nothing at any other opset
        tail.append(_Step("OnnxFusionsPass", None, make_fusions))
    return before, [_Step(name, 0, _as_step(make)) for name, make in loop], tail, parts["fixpoint_steps"]


def _onnx_opset(model: ir.Model) -> int | None:
    return model.opset_imports.get("") or model.opset_imports.get("ai.onnx")


class PassFailed(OptimizeError):
    """A pass raised: ``optimizer_failure`` names it, ``passes`` holds the records up to it
    (the failed one last, with its error)."""

    def __init__(self, message: str, *, passes: OptimizerPasses | None = None,
                 failure: OptimizerFailure | None = None, hint: str | None = None) -> None:
        self.passes = passes if passes is not None else OptimizerPasses()
        self.optimizer_failure = failure
        super().__init__(message, hint=hint)


def run_passes(model: ir.Model, *, skip_passes: Sequence[str] = (), extra_rewrite_rules: Sequence[Any] = (),
               record: bool = True, warnings: list[str] | None = None) -> tuple[ir.Model, OptimizerPasses]:
    """Run the optimizer's passes on ``model`` in place, one by one; return it with the
    records. A pass that raises stops the run: :class:`PassFailed` names it, says how to skip
    it, and carries the records (the failed one last, with its error) in ``.passes``. A user
    rule stopped for rewriting its own output over and over is said in ``warnings``."""
    skip = frozenset(check_pass_names(skip_passes))
    before, loop, tail, rounds = _pipeline(model, extra_rewrite_rules, warnings)
    records: list[PassRecord] = []
    start = time.perf_counter()
    # optimize_ir reuses one instance of each loop pass across its rounds: so do we.
    loop_runs = {step.name: step.make() for step in loop if step.name not in skip}

    last: list[Snapshot] = []  # the model as the previous pass left it (its after is our before)

    def current() -> Snapshot:
        if not last:
            last.append(Snapshot.of(model))
        return last[0]

    def run(step: _Step, round_: int | None, runner: Callable[[Any], bool] | None = None) -> bool:
        index = len(records)
        if step.name in skip:
            count = len(current().nodes) if record else 0
            records.append(PassRecord(index, step.name, describe(step.name), round_, 0.0, count, count,
                                      skipped=True, _make=step.make))
            return False
        snapshot = current() if record else None
        runner = runner or step.make()
        began = time.perf_counter()
        try:
            modified = runner(model)
        except Exception as exc:
            seconds = time.perf_counter() - began
            failed = _failure(step, round_, index, exc, seconds, snapshot, records)
            records.append(failed)
            passes = OptimizerPasses(tuple(records), tuple(sorted(skip)), time.perf_counter() - start)
            raise _pass_error(failed, passes, exc) from exc
        seconds = time.perf_counter() - began
        if snapshot is not None:
            after = Snapshot.of(model)
            last[0] = after
            added, removed, changed, init_added, init_removed = diff(snapshot, after)
            records.append(PassRecord(
                index, step.name, describe(step.name), round_, seconds, len(snapshot.nodes), len(after.nodes),
                modified, added, removed, changed, len(snapshot.initializers), len(after.initializers),
                init_added, init_removed, not after.problem, after.problem, _make=step.make))
        else:
            records.append(PassRecord(index, step.name, describe(step.name), round_, seconds, 0, 0, modified,
                                      _make=step.make))
        return modified

    for step in before:
        run(step, None)
    for round_ in range(rounds):
        changed = False
        for step in loop:
            changed = run(step, round_, loop_runs.get(step.name)) or changed
        if not changed:  # optimize_ir(stop_if_no_change=True)
            break
    for step in tail:
        run(step, None)
    return model, OptimizerPasses(tuple(records), tuple(sorted(skip)), time.perf_counter() - start)


def _failure(step: _Step, round_: int | None, index: int, exc: BaseException, seconds: float,
             snapshot: Snapshot | None, records: list[PassRecord]) -> PassRecord:
    cause = optimizer_failure(exc).cause
    count = len(snapshot.nodes) if snapshot is not None else 0
    return PassRecord(index, step.name, describe(step.name), round_, seconds, count, count,
                      checks=False, error=cause, _make=step.make)


def _pass_error(failed: PassRecord, passes: OptimizerPasses, exc: BaseException) -> PassFailed:
    failure = OptimizerFailure(failed.name, failed.description, failed.error,
                               tuple(r.name for r in passes.records[:-1] if r.ran))
    return PassFailed(
        f"{failure}; to optimize without it: ExportOptions(skip_passes=[{failed.name!r}])",
        hint=f"skip that pass: ExportOptions(skip_passes=[{failed.name!r}]) (CLI/magic: --skip-pass {failed.name}), "
        "or export with ExportOptions(optimize=False) to use the unoptimized model",
        passes=passes, failure=failure,
    )


def replay(model: ir.Model, records: Sequence[PassRecord], *, cancel: CancelToken | None = None) -> ir.Model:
    """Run ``records``' passes (those that ran) again on ``model``, in place. ``cancel`` is
    checked before each pass (:class:`~exporter.events.Cancelled` when it was set)."""
    for r in records:
        if cancel is not None:
            cancel.check()
        if r.ran and r._make is not None:
            r._make()(model)
    return model


# -- the stage ----------------------------------------------------------------------------------------


def optimize_stage(model: ir.Model, *, enabled: bool, skip_passes: Sequence[str] = (),
                   extra_rewrite_rules: Sequence[Any] = ()) -> StageResult:
    """The optimize stage on the translated ``model``: the optimized copy, or ``model`` itself
    when ``enabled`` is false (skipped) or when only the optimizer failed (a warning: the
    unoptimized model is whole). A model holding tracing leftovers fails: it is broken too."""
    if not enabled:
        return StageResult("optimize", Status.SKIPPED, 0.0, model, detail="optimize=False",
                           passes=OptimizerPasses(note="optimize=False: no pass ran"))
    recorded: list[OptimizerPasses] = []
    said: list[str] = []

    def work() -> ir.Model:
        try:
            optimized, passes = run_passes(model.clone(), skip_passes=skip_passes,
                                           extra_rewrite_rules=extra_rewrite_rules, warnings=said)
        except PassFailed as error:
            recorded.append(error.passes)
            raise
        recorded.append(passes)
        check_opset_forms(optimized, "optimize")
        return optimized

    result = run_guarded("optimize", OptimizeError,
                         "export with ExportOptions(optimize=False) to get the unoptimized model", work)
    passes = recorded[0] if recorded else None
    if result.status != Status.FAILED:
        if said and result.status == Status.OK:
            return replace(result, status=Status.WARNING, detail=said[0], warnings=(*result.warnings, *said),
                           passes=passes)
        return replace(result, passes=passes, warnings=(*result.warnings, *said))
    reason = result.error.reason if result.error is not None else ""
    leftovers = trace_leftover_initializers(model)
    if leftovers:  # the translated model is broken too: no fallback
        names = ", ".join(f"{name!r} ({kind})" for name, kind in list(leftovers.items())[:4])
        error = OptimizeError(
            f"the model holds tracing leftovers instead of constants: {names}; {reason}",
            hint="an earlier trace of this module object (torch.onnx.export, torch.export) stored them as "
            f"module attributes: delete them (del model.{next(iter(leftovers))}) or build the model again, then export",
        )
        error.__cause__ = result.error
        return replace(result, error=error, passes=passes)
    # Only the optimizer failed: the translated model is whole, hand it out as optimize=False
    # would, and say so (a warning, not a failure).
    warning = f"the unoptimized model is used (as with optimize=False): {reason}"
    return StageResult("optimize", Status.WARNING, result.seconds, model, detail=warning, warnings=(warning,),
                       passes=passes)
