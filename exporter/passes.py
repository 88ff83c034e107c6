"""The ONNX optimizer's passes, run one by one and recorded: what each changed, how long it
took, whether the model still holds together; and the search for the pass after which
onnxruntime disagrees with PyTorch.

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

Each pass that ran in each round is one :class:`PassRecord` (the loop's passes appear once per
round, with ``round`` 0 or 1). The version converter is not among them: it runs in the
translate stage, before the optimizer. ``ExtraRewritePass`` runs only when
``ExportOptions(extra_rewrite_rules=...)`` gives rules (your own onnxscript rewrite rules, run
right after the default ones in each round).

A node is followed by identity through the passes (they change the model in place), so a
renamed node is "changed", not removed and added. Node counts are of the main graph and the
subgraphs of its If/Loop/Scan nodes; local functions are not counted (InlinePass removes them).
``checks`` is a structural check, cheap enough to run after every pass: every node input is
produced before it is read, and every graph output is produced (``onnx.checker`` on every
intermediate model would cost more than the optimizer itself on small models).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import OptimizeError, SpecError
from .presentation import Presentable

__all__ = [
    "PASS_NAMES",
    "Bisection",
    "NodeChange",
    "OptimizerPasses",
    "PassDiff",
    "PassRecord",
    "Probe",
    "bisect_passes",
    "check_pass_names",
    "run_passes",
]

# Every pass name the pipeline can run, in pipeline order (what skip_passes accepts).
PASS_NAMES = (
    "InlinePass",
    "FoldConstantsPass",
    "RewritePass",
    "ExtraRewritePass",
    "RemoveUnusedNodesPass",
    "RemoveUnusedFunctionsPass",
    "RemoveUnusedOpsetsPass",
    "LiftConstantsToInitializersPass",
    "LiftSubgraphInitializersToMainGraphPass",
    "DeduplicateInitializersPass",
    "CommonSubexpressionEliminationPass",
    "OutputFixPass",
    "NameFixPass",
    "OnnxFusionsPass",
)


def check_pass_names(names: Any) -> tuple[str, ...]:
    """``names`` as a tuple of known pass names (one string is one name); an unknown name is a
    :class:`~exporter.errors.SpecError` (a ``ValueError``) listing the pass names."""
    if isinstance(names, str):
        names = (names,)
    names = tuple(names)
    unknown = [n for n in names if n not in PASS_NAMES]
    if unknown:
        import difflib

        close = [c for n in unknown for c in difflib.get_close_matches(str(n), PASS_NAMES, n=1)]
        raise SpecError(
            f"unknown optimizer pass name(s) in skip_passes: {', '.join(map(repr, unknown))}",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + "the passes are: " + ", ".join(PASS_NAMES),
        )
    return names


def describe(name: str) -> str:
    from .pipeline.translate import OPTIMIZER_PASSES

    return OPTIMIZER_PASSES.get(name, "")


# -- records -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeChange:
    """One node a pass added, removed or changed. ``op`` is ``Add`` or ``domain::Op``;
    ``what`` says what changed on a changed node (``renamed from 'x'``, ``inputs``,
    ``attributes``, ``outputs``)."""

    kind: str  # "added" | "removed" | "changed"
    name: str
    op: str
    what: str = ""


@dataclass(frozen=True, repr=False)
class PassDiff(Presentable):
    """What one pass changed: nodes added, removed and changed, initializers added and removed."""

    index: int
    label: str  # "FoldConstantsPass (round 0)"
    description: str
    nodes_before: int
    nodes_after: int
    added: tuple[NodeChange, ...] = ()
    removed: tuple[NodeChange, ...] = ()
    changed: tuple[NodeChange, ...] = ()
    initializers_added: tuple[str, ...] = ()
    initializers_removed: tuple[str, ...] = ()

    @property
    def changes(self) -> tuple[NodeChange, ...]:
        return self.added + self.removed + self.changed

    @property
    def empty(self) -> bool:
        return not (self.changes or self.initializers_added or self.initializers_removed)

    def to_frame(self) -> Any:
        import pandas as pd

        rows = [{"change": c.kind, "node": c.name, "op": c.op, "what": c.what} for c in self.changes]
        rows += [{"change": "initializer added", "node": n, "op": "", "what": ""} for n in self.initializers_added]
        rows += [{"change": "initializer removed", "node": n, "op": "", "what": ""} for n in self.initializers_removed]
        return pd.DataFrame(rows, columns=["change", "node", "op", "what"])


@dataclass(frozen=True, repr=False)
class PassRecord(Presentable):
    """One pass as it ran (or was skipped, or raised) in the optimize stage.

    ``round``: the round of onnxscript's fixpoint loop (0 or 1) for the passes inside it,
    None for the others. ``modified``: what the pass itself reported. ``checks``: the model
    after it is structurally whole (``check_error`` says what is not). ``error``: the pass
    raised (the run stopped there). ``skipped``: named in ``skip_passes``."""

    index: int
    name: str
    description: str
    round: int | None
    seconds: float
    nodes_before: int
    nodes_after: int
    modified: bool = False
    added: tuple[NodeChange, ...] = ()
    removed: tuple[NodeChange, ...] = ()
    changed: tuple[NodeChange, ...] = ()
    initializers_before: int = 0
    initializers_after: int = 0
    initializers_added: tuple[str, ...] = ()
    initializers_removed: tuple[str, ...] = ()
    checks: bool = True
    check_error: str = ""
    error: str = ""
    skipped: bool = False
    # Builds a fresh instance of this pass (``model -> modified``): how bisect_passes replays it.
    _make: Callable[[], Callable[[Any], bool]] | None = field(default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        return self.name if self.round is None else f"{self.name} (round {self.round})"

    @property
    def status(self) -> str:
        if self.skipped:
            return "skipped"
        if self.error:
            return "failed"
        if not self.checks:
            return "broken"
        return "changed" if self.changes_model else "no change"

    @property
    def ran(self) -> bool:
        return not self.skipped and not self.error

    @property
    def changes_model(self) -> bool:
        return self.modified or bool(self.added or self.removed or self.changed
                                     or self.initializers_added or self.initializers_removed)

    @property
    def initializers_folded(self) -> int:
        """Constant tensors the pass added (folded results, lifted constants)."""
        return len(self.initializers_added)

    def diff(self) -> PassDiff:
        """What this pass changed, as its own result (text / HTML / ``to_frame()``)."""
        return PassDiff(self.index, self.label, self.description, self.nodes_before, self.nodes_after,
                        self.added, self.removed, self.changed, self.initializers_added, self.initializers_removed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.label,
            "status": self.status,
            "seconds": self.seconds,
            "nodes before": self.nodes_before,
            "nodes after": self.nodes_after,
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
            "initializers folded": self.initializers_folded,
            "checks": self.checks,
            "error": self.error or self.check_error,
        }


@dataclass(frozen=True, repr=False)
class OptimizerPasses(Presentable):
    """The optimize stage pass by pass: ``session.passes``. A sequence of :class:`PassRecord`
    (``passes[i]``, ``len``, iteration); ``to_frame()`` is one row per pass."""

    records: tuple[PassRecord, ...] = ()
    skip_passes: tuple[str, ...] = ()
    seconds: float = 0.0
    note: str = ""  # why there are none ("optimize=False")

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[PassRecord]:
        return iter(self.records)

    def __getitem__(self, index: int) -> PassRecord:
        return self.records[index]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(r.label for r in self.records)

    @property
    def ran(self) -> tuple[PassRecord, ...]:
        return tuple(r for r in self.records if r.ran)

    @property
    def failed(self) -> PassRecord | None:
        return next((r for r in self.records if r.error), None)

    def to_frame(self) -> Any:
        import pandas as pd

        columns = ["pass", "status", "seconds", "nodes before", "nodes after", "added", "removed", "changed",
                   "initializers folded", "checks", "error"]
        return pd.DataFrame([r.to_dict() for r in self.records], columns=columns)


# -- structure ------------------------------------------------------------------------------------


class _Same:
    """Compares by identity (a tensor attribute, a subgraph): no value comparison."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    __hash__ = None  # type: ignore[assignment]


_PLAIN = (int, float, str, bool, type(None))


def _attribute_key(value: Any) -> Any:
    if isinstance(value, _PLAIN):
        return value
    if isinstance(value, (list, tuple)) and all(isinstance(v, _PLAIN) for v in value):
        return tuple(value)
    return _Same(value)


def _op(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}::{node.op_type}"


def _what_changed(before: tuple, after: tuple) -> str:
    parts = []
    if before[0] != after[0]:
        parts.append(f"renamed from {before[0]!r}")
    if before[1] != after[1]:
        parts.append("inputs")
    if before[2] != after[2]:
        parts.append("attributes")
    if before[3] != after[3]:
        parts.append("outputs renamed")
    return ", ".join(parts)


def _walk(graph: Any, outer: set[int], nodes: dict[int, tuple[Any, tuple]], problems: list[str]) -> None:
    """Every node of ``graph`` and its subgraphs into ``nodes`` (id -> (node, signature)), and
    the first structural problem into ``problems``: one walk does both (the recording's cost)."""
    import onnx_ir as ir

    defined = set(outer)
    defined.update(map(id, graph.inputs))
    defined.update(map(id, graph.initializers.values()))
    for node in graph:
        inputs = tuple(node.inputs)
        if not problems:
            for value in inputs:
                if value is not None and id(value) not in defined:
                    problems.append(f"node {node.name!r} ({_op(node)}) reads {value.name!r}, which nothing before it produces")
                    break
        attributes = []
        for key, attribute in node.attributes.items():
            value = attribute.value
            if isinstance(value, _PLAIN):
                attributes.append((key, value))
                continue
            if isinstance(value, ir.Graph):
                _walk(value, defined, nodes, problems)
            elif isinstance(value, (list, tuple)) and value and isinstance(value[0], ir.Graph):
                for sub in value:
                    _walk(sub, defined, nodes, problems)
            attributes.append((key, _attribute_key(value)))
        nodes[id(node)] = (node, (node.name, inputs, tuple(attributes), tuple(o.name for o in node.outputs)))
        defined.update(map(id, node.outputs))
    if not problems:
        for value in graph.outputs:
            if id(value) not in defined:
                problems.append(f"graph output {value.name!r} is produced by no node")
                break


def _nodes(model: Any) -> list[Any]:
    return [node for node, _ in _Snapshot.of(model).nodes.values()]


@dataclass
class _Snapshot:
    nodes: dict[int, tuple[Any, tuple]]  # id -> (node kept alive, signature)
    initializers: tuple[str, ...]
    problem: str = ""

    @classmethod
    def of(cls, model: Any) -> _Snapshot:
        nodes: dict[int, tuple[Any, tuple]] = {}
        problems: list[str] = []
        _walk(model.graph, set(), nodes, problems)
        return cls(nodes, tuple(model.graph.initializers), problems[0] if problems else "")


def _diff(before: _Snapshot, after: _Snapshot) -> tuple[tuple[NodeChange, ...], ...]:
    added = tuple(NodeChange("added", n.name or "", _op(n)) for i, (n, _) in after.nodes.items() if i not in before.nodes)
    removed = tuple(NodeChange("removed", sig[0] or "", _op(n))
                    for i, (n, sig) in before.nodes.items() if i not in after.nodes)
    changed = tuple(
        NodeChange("changed", n.name or "", _op(n), _what_changed(before.nodes[i][1], sig))
        for i, (n, sig) in after.nodes.items()
        if i in before.nodes and before.nodes[i][1] != sig
    )
    old, new = set(before.initializers), set(after.initializers)
    return added, removed, changed, tuple(n for n in after.initializers if n not in old), \
        tuple(n for n in before.initializers if n not in new)


def structure_problem(model: Any) -> str:
    """'' when every node input is produced before it is read (graph inputs, initializers,
    earlier nodes, an outer graph's values for a subgraph) and every graph output is produced;
    else the first problem."""
    return _Snapshot.of(model).problem


# -- the pipeline ------------------------------------------------------------------------------


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


def _pipeline(model: Any, extra_rewrite_rules: Sequence[Any]) -> tuple[list[_Step], list[_Step], list[_Step], int]:
    """(before the loop, the loop's passes, after the loop, rounds): optimize_ir's defaults."""
    import onnx_ir.passes.common as common

    from . import compat

    parts = compat.onnxscript_optimizer_parts()
    fold = lambda: parts["FoldConstantsPass"](  # noqa: E731
        shape_inference=True, input_size_limit=parts["input_size_limit"],
        output_size_limit=parts["output_size_limit"], should_fold=lambda node: None)
    loop = [
        ("FoldConstantsPass", fold),
        ("RewritePass", lambda: parts["RewritePass"](parts["default_rewrite_rules"])),
        *([("ExtraRewritePass", lambda: parts["RewritePass"](tuple(extra_rewrite_rules)))] if extra_rewrite_rules else []),
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


def _onnx_opset(model: Any) -> int | None:
    return model.opset_imports.get("") or model.opset_imports.get("ai.onnx")


class PassFailed(OptimizeError):
    """A pass raised: named, with the records up to it (``passes``)."""


def run_passes(model: Any, *, skip_passes: Sequence[str] = (), extra_rewrite_rules: Sequence[Any] = (),
               record: bool = True) -> tuple[Any, OptimizerPasses]:
    """Run the optimizer's passes on ``model`` in place, one by one; return it with the
    records. A pass that raises stops the run: :class:`PassFailed` names it, says how to skip
    it, and carries the records (the failed one last, with its error) in ``.passes``."""
    skip = frozenset(check_pass_names(skip_passes))
    before, loop, tail, rounds = _pipeline(model, extra_rewrite_rules)
    records: list[PassRecord] = []
    start = time.perf_counter()
    # optimize_ir reuses one instance of each loop pass across its rounds: so do we.
    loop_runs = {step.name: step.make() for step in loop if step.name not in skip}

    last: list[_Snapshot] = []  # the model as the previous pass left it (its after is our before)

    def current() -> _Snapshot:
        if not last:
            last.append(_Snapshot.of(model))
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
        except Exception as exc:  # noqa: BLE001 - named and re-raised below
            seconds = time.perf_counter() - began
            failed = _failure(step, round_, index, exc, seconds, snapshot, records)
            records.append(failed)
            passes = OptimizerPasses(tuple(records), tuple(sorted(skip)), time.perf_counter() - start)
            raise _pass_error(failed, passes, exc) from exc
        seconds = time.perf_counter() - began
        if record:
            after = _Snapshot.of(model)
            last[0] = after
            added, removed, changed, init_added, init_removed = _diff(snapshot, after)
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
             snapshot: _Snapshot | None, records: list[PassRecord]) -> PassRecord:
    from .pipeline.translate import optimizer_failure

    cause = optimizer_failure(exc).cause
    count = len(snapshot.nodes) if snapshot is not None else 0
    return PassRecord(index, step.name, describe(step.name), round_, seconds, count, count,
                      checks=False, error=cause, _make=step.make)


def _pass_error(failed: PassRecord, passes: OptimizerPasses, exc: BaseException) -> PassFailed:
    from .pipeline.translate import OptimizerFailure

    failure = OptimizerFailure(failed.name, failed.description, failed.error,
                               tuple(r.name for r in passes.records[:-1] if r.ran))
    error = PassFailed(
        f"{failure}; to optimize without it: ExportOptions(skip_passes=[{failed.name!r}])",
        hint=f"skip that pass: ExportOptions(skip_passes=[{failed.name!r}]) (CLI/magic: --skip-pass {failed.name}), "
        "or export with ExportOptions(optimize=False) to use the unoptimized model",
    )
    error.optimizer_failure = failure  # type: ignore[attr-defined]
    error.passes = passes  # type: ignore[attr-defined]
    return error


def replay(model: Any, records: Sequence[PassRecord]) -> Any:
    """Run ``records``' passes (those that ran) again on ``model``, in place."""
    for r in records:
        if r.ran and r._make is not None:
            r._make()(model)
    return model


# -- bisection ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One verify run: the model after the first ``prefix`` passes, and how it compared."""

    prefix: int  # passes applied (0 = the translated model)
    after: str  # the last pass applied ("(translated model)" for 0)
    outcome: str  # "agrees" | "differs" | "cannot load" | "run failed"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.outcome == "agrees"


@dataclass(frozen=True, repr=False)
class Bisection(Presentable):
    """``session.bisect_passes()``: the first pass after which onnxruntime disagrees with
    PyTorch (or cannot load the model) on one case, found by binary search."""

    case: str
    culprit: PassRecord | None
    verdict: str
    probes: tuple[Probe, ...] = ()
    candidates: int = 0  # passes that changed the model (only they can change the numbers)
    passes: int = 0

    @property
    def verify_runs(self) -> int:
        return len(self.probes)

    @property
    def status(self) -> str:
        """``fail``: a pass is to blame; ``pass``: the case agrees after every pass; ``warning``:
        the case fails, but not because of a pass (the translated model fails too)."""
        if self.culprit is not None:
            return "fail"
        return "pass" if self.probes and self.probes[0].ok else "warning"

    @property
    def fix(self) -> str:
        return f"ExportOptions(skip_passes=[{self.culprit.name!r}])" if self.culprit is not None else ""

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(p) for p in self.probes], columns=["prefix", "after", "outcome", "detail"])


class _Checker:
    """Runs one case's inputs through the model after a prefix of the passes, against the
    eager outputs computed once."""

    def __init__(self, session: Any, args: tuple, kwargs: dict, tolerances: Any) -> None:
        import torch

        from . import compat
        from .model_state import preserved
        from .verify.core import _clone_tensors, _expected_outputs

        self.session, self.args, self.kwargs, self.tolerances = session, args, kwargs, tolerances
        with preserved(session.model), torch.inference_mode():
            eager = session.model(*_clone_tensors(args), **_clone_tensors(dict(kwargs)))
        self.expected = _expected_outputs(compat.tree_flatten_with_path(eager))

    def __call__(self, model: Any, prefix: int, after: str) -> Probe:
        import onnx_ir as ir

        from .ort_values import feeds
        from .session import ort_inference_session
        from .verify.tolerance import compare

        try:
            ort = ort_inference_session(ir.to_proto(model).SerializeToString())
        except Exception as exc:  # noqa: BLE001 - a model onnxruntime refuses is the answer
            return Probe(prefix, after, "cannot load", _first(exc))
        try:
            actual = ort.run(None, feeds(self.session, model, self.args, dict(self.kwargs)))
        except Exception as exc:  # noqa: BLE001
            return Probe(prefix, after, "run failed", _first(exc))
        names = [v.name for v in model.graph.outputs]
        if len(actual) != len(self.expected):
            return Probe(prefix, after, "differs", f"{len(actual)} outputs, PyTorch gives {len(self.expected)}")
        for i, (got, want) in enumerate(zip(actual, self.expected)):
            check = compare("bisect", names[i] if i < len(names) else f"#{i}", got, want, self.tolerances)
            if not check.ok:
                return Probe(prefix, after, "differs", _check_text(check))
        return Probe(prefix, after, "agrees")


def _first(exc: BaseException) -> str:
    from .errors import first_line

    return first_line(exc)


def _check_text(check: Any) -> str:
    try:
        return check.describe().split("; worst:")[0]
    except Exception:  # noqa: BLE001 - a summary line never fails the search
        return f"output {check.output!r}: {check.status}"


def bisect_passes(session: Any, passes: OptimizerPasses, translated: Any, case: Any = None,
                  tolerances: Any = None) -> Bisection:
    """Binary search over the passes that changed the model for the first one after which
    ``case`` (None: the example inputs; or ``(args, kwargs)``) fails in onnxruntime. The
    model after each prefix is kept, so every pass runs once per prefix it ends. Verify runs:
    1 (after all passes) + ceil(log2(changing passes + 1))."""
    if case is None:
        args, kwargs, case_name = session.inputs.args, dict(session.inputs.kwargs), "example"
    else:
        args, kwargs = case
        args, kwargs, case_name = tuple(args), dict(kwargs), "given inputs"
    ran = [r for r in passes.records if r.ran]
    if passes.failed is not None:
        failed = passes.failed
        return Bisection(case_name, failed, f"{failed.label} raised ({failed.error}): the optimize stage stopped there; "
                         f"skip it with ExportOptions(skip_passes=[{failed.name!r}])", (), 0, len(passes))
    check = _Checker(session, args, kwargs, tolerances)
    cache: dict[int, Any] = {0: translated}

    def model_after(prefix: int) -> Any:
        start = max(k for k in cache if k <= prefix)
        model = cache[start].clone()
        replay(model, ran[start:prefix])
        cache[prefix] = model
        return model

    def label(prefix: int) -> str:
        return "(translated model)" if prefix == 0 else ran[prefix - 1].label

    n = len(ran)
    probes: list[Probe] = []
    final = check(model_after(n), n, label(n))
    probes.append(final)
    if final.ok:
        return Bisection(case_name, None, f"onnxruntime agrees with PyTorch after all {n} passes on the {case_name} "
                         "inputs: no pass to blame here", tuple(probes), 0, len(passes))
    # Only a pass that changed the model can change its numbers: search over those.
    boundaries = [0] + [i + 1 for i, r in enumerate(ran) if r.changes_model]
    if boundaries[-1] != n:
        boundaries.append(n)
    lo, hi = -1, len(boundaries) - 1  # boundaries[hi] fails; boundaries[lo] agrees (lo=-1: not known)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        probe = check(model_after(boundaries[mid]), boundaries[mid], label(boundaries[mid]))
        probes.append(probe)
        if probe.ok:
            lo = mid
        else:
            hi = mid
    first_bad = boundaries[hi]
    if first_bad == 0:
        return Bisection(case_name, None, "the translated model already fails before any optimizer pass "
                         f"({final.outcome}): not the optimizer's doing", tuple(probes), len(boundaries) - 1, len(passes))
    culprit = ran[first_bad - 1]
    bad = next(p for p in probes if p.prefix == first_bad)
    verdict = (f"{culprit.label} (pass {culprit.index}) breaks the model: after it onnxruntime {_outcome_words(bad)} "
               f"on the {case_name} inputs; skip it with ExportOptions(skip_passes=[{culprit.name!r}])")
    return Bisection(case_name, culprit, verdict, tuple(probes), len(boundaries) - 1, len(passes))


def _outcome_words(probe: Probe) -> str:
    words = {"differs": "disagrees with PyTorch", "cannot load": "cannot load the model",
             "run failed": "fails to run the model"}[probe.outcome]
    return f"{words} ({probe.detail})" if probe.detail else words
