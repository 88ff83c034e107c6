"""``compare_intermediates``: the inputs of the case, the FX run, the onnxruntime runs per chunk, the rows."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ...artifacts import ExportArtifacts
from ...graphs.session_graphs import ExportGraphs
from ...cases import dim_groups, make_case_inputs, plan_cases
from ...errors import Failure, Status, first_line
from ...events import CancelToken, Cancelled
from ..program_run import program_inputs
from ..eager import run_eager
from ..values import edge_value_inputs
from .export_path import export_path_cause
from .fx_side import FxRunner, nbytes, program_vs_eager
from .inside import locate_inside
from .judge import node_rows
from .ort_side import OrtRunner
from .plan import NodePlan, Plan, chunks, pair_names, plan_of
from .result import InsideFinding, IntermediateComparison, IntermediateRow

if TYPE_CHECKING:
    from ..case_runs import CaseRuns
    from ..tolerance import Tolerance

__all__ = ["DEFAULT_MAX_BYTES", "IntermediatesSource", "compare_inputs", "compare_intermediates"]

DEFAULT_MAX_BYTES = 256 << 20


class VerifiedCase(Protocol):
    """What the comparison reads of one of verify's cases (a :class:`~exporter.verify.CaseResult`)."""

    @property
    def name(self) -> str: ...

    @property
    def sizes(self) -> tuple[tuple[str, int], ...]: ...

    @property
    def edge(self) -> Any:
        """The :class:`~exporter.verify.values.EdgeValue` the case tried, if any."""
        ...


class Verification(Protocol):
    """What the comparison reads of a verify result (a :class:`~exporter.verify.VerifyResult`):
    its cases, and the inputs and eager outputs it kept."""

    @property
    def cases(self) -> Sequence[VerifiedCase]: ...

    @property
    def case_runs(self) -> CaseRuns | None: ...

    def case(self, name: str) -> VerifiedCase: ...


class IntermediatesSource(ExportArtifacts, ExportGraphs, Protocol):
    """What :func:`compare_intermediates` reads from an export (a :class:`~exporter.Session`):
    its artifacts, its graphs' node mapping, and the latest verify result (for a case name,
    the inputs it ran on and eager PyTorch's outputs there)."""

    @property
    def last_verify(self) -> Verification | None: ...


@dataclass(frozen=True)
class _Case:
    """The inputs of the comparison, and eager PyTorch's outputs on them when verify kept them."""

    name: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    expected: tuple[Any, ...] | None = None


def compare_intermediates(
    session: IntermediatesSource,
    case: str | VerifiedCase | None = None,
    *,
    args: Sequence[Any] | None = None,
    kwargs: Mapping[str, Any] | None = None,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    cancel: CancelToken | None = None,
) -> IntermediateComparison:
    """Compare every ONNX node's output with its FX node's value on one set of inputs.

    ``case``: None or ``"example"`` (the example inputs), a verify case name (of
    ``session.last_verify``) or a :class:`~exporter.verify.CaseResult` from
    ``session.verify().cases``: the inputs that case ran on (kept by verify, within its
    memory budget; else rebuilt as verify builds them: the same values when verify ran with
    its default ``sizes``/``seed``/``max_size`` and no ``make_inputs`` hook, else the same
    sizes with fresh values). When verify kept eager PyTorch's outputs for the case and the
    module and those inputs are unchanged since, they are reused (``eager_from="verify"``)
    instead of running the model again. ``args`` / ``kwargs``: explicit inputs, given like
    the model's forward (``case`` then only names them). ``tolerances``: as
    :func:`exporter.verify.verify` takes them. ``max_bytes``: the intermediate values held
    per side at once (see the package docstring). ``cancel``: checked before each run and
    between the FX interpreter's nodes and the onnxruntime chunks; a cancelled comparison has
    status ``cancelled`` and no rows.

    Never raises for a wrong model or a failing run (a result with ``error``); raises the
    stage's :class:`~exporter.ExportError` when the export itself failed, and ``ValueError``
    for a case name verify did not run."""
    start = time.perf_counter()
    session.stage_output("optimize")  # a failed stage raises its ExportError here
    return _run(session, _case_inputs(session, case, args, kwargs), tolerances, max_bytes, cancel, start)


def compare_inputs(session: ExportArtifacts, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], expected: tuple[Any, ...] | None = None,
                   *, tolerances: Mapping[str, Tolerance] | Tolerance | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                   cancel: CancelToken | None = None) -> IntermediateComparison:
    """:func:`compare_intermediates` on inputs already built (verify's own case, named
    ``name``), with eager PyTorch's outputs on them when known (else they are computed)."""
    return _run(session, _Case(name, args, kwargs, expected), tolerances, max_bytes, cancel, time.perf_counter())


def _run(session: ExportArtifacts, case: _Case, tolerances: Any, max_bytes: int, cancel: CancelToken | None,
         start: float) -> IntermediateComparison:
    program = session.stage_output("decompose")
    model = session.stage_output("optimize")
    plan = plan_of(_graphs(session), program, model)
    try:
        return _compare(session, case, program, model, plan, tolerances, max_bytes, cancel or CancelToken(), start)
    except Cancelled:
        return IntermediateComparison(case.name, Status.CANCELLED, seconds=time.perf_counter() - start)


def _graphs(session: ExportArtifacts) -> Any:
    """The session's graphs (their FX <-> ONNX mapping names each row's module and source)."""
    graphs = getattr(session, "graphs", None)
    if graphs is None:
        from ...graphs.session_graphs import graphs_of

        graphs = graphs_of(session)
    return graphs


def _compare(session: ExportArtifacts, case: _Case, program: Any, model: Any, plan: Plan, tolerances: Any,
             max_bytes: int, cancel: CancelToken, start: float) -> IntermediateComparison:
    """compare_intermediates once the inputs are known; raises Cancelled when ``cancel`` is set."""
    cancel.check()
    name = case.name

    def failed(at: str, message: str, exc: BaseException, *, fx_runs: int = 0, chunks: int = 0,
               program_differs: str | None = None, eager_from: str | None = None) -> IntermediateComparison:
        failure = replace(Failure.from_exception(exc, "compare_intermediates"), message=message)
        return IntermediateComparison(name, Status.FAILED, error=message, seconds=time.perf_counter() - start,
                                      fx_runs=fx_runs, chunks=chunks, program_differs=program_differs, failure=failure,
                                      eager_from=eager_from, error_at=at)

    try:
        feeds = session.feeds(*case.args, **case.kwargs)  # before eager: a forward may write into its inputs
    except Exception as exc:  # noqa: BLE001
        return failed("inputs", f"could not build the ONNX inputs: {first_line(exc)}", exc)
    runner = OrtRunner(model, session.ort_model)
    try:
        if max_bytes >= plan.fx.last_bytes:  # one chunk, as last time: its session is built meanwhile
            runner.prepare(pair_names([n for n in plan.nodes if n.pairs]))
        return _compare_prepared(name, session, case, program, model, plan, tolerances, max_bytes, cancel, start,
                                 feeds, runner, failed)
    finally:
        runner.close()


def _compare_prepared(name: str, session: ExportArtifacts, case: _Case, program: Any, model: Any, plan: Plan,
                      tolerances: Any,
                      max_bytes: int, cancel: CancelToken, start: float, feeds: Mapping[str, Any], runner: OrtRunner,
                      failed: Any) -> IntermediateComparison:
    """Eager PyTorch (unless verify kept its outputs), the FX run, the chunks, the result."""
    expected, eager_from = case.expected, "verify"
    if expected is None:
        eager_from = "this call"
        try:
            expected = tuple(run_eager(session.model, case.args, case.kwargs, what="when called by compare_intermediates"))
        except Exception as exc:  # noqa: BLE001
            return failed("eager", f"eager PyTorch raised {first_line(exc)}", exc)

    flat_inputs = program_inputs(program, session, case.args, case.kwargs)
    try:
        outputs, sizes, kept = plan.fx.run(flat_inputs, plan.wanted, max_bytes, cancel)
    except Exception as exc:  # noqa: BLE001
        return failed("program", f"the decomposed program cannot run at these inputs ({first_line(exc)}): torch.export "
                      "assumed something that only holds near the example", exc, eager_from=eager_from)
    program_differs = program_vs_eager(
        name, plan.output_names, outputs, expected, tolerances,
        cause=functools.partial(export_path_cause, session.model, case.args, case.kwargs, name, plan.output_names, outputs,
                                tolerances))
    del outputs, expected
    fx_runs = 1
    peak = sum(nbytes(v) for v in kept.values()) if kept is not None else 0
    rows, peak, fx_runs, error = _compare_chunks(name, chunks(plan, sizes, max_bytes), plan.fx, flat_inputs, kept,
                                                 feeds, runner, tolerances, peak, fx_runs, cancel)
    if error is not None:
        message, cause = error
        return failed("onnxruntime", message, cause, fx_runs=fx_runs, chunks=runner.runs, program_differs=program_differs,
                      eager_from=eager_from)
    all_rows = tuple(rows.get(n.name) or plan.skipped[n.name] for n in plan.nodes)
    inside = None
    first = next((r for r in all_rows if r.bad), None)
    if first is not None:
        cancel.check()
        runs = [fx_runs]

        def fetch(names: set[str]) -> dict[str, Any]:
            runs[0] += 1
            return plan.fx.run(flat_inputs, frozenset(names), None, cancel)[2] or {}

        inside = locate_inside(name, plan, first, fetch, feeds, model, program, tolerances)
        fx_runs = runs[0]
        if inside is not None and inside.culprit not in (None, first.onnx_node):
            all_rows = tuple(_culprit_row(row, inside) if row.onnx_node == inside.culprit else row for row in all_rows)
    bad = any(r.bad for r in all_rows) or program_differs is not None
    return IntermediateComparison(
        name, Status.FAILED if bad else Status.PASSED, all_rows, None, program_differs, runner.runs, fx_runs, peak,
        time.perf_counter() - start, eager_from=eager_from, inside=inside,
    )


def _culprit_row(row: IntermediateRow, inside: InsideFinding) -> IntermediateRow:
    """The row of a node without an FX value that the search inside a translation named: it
    fails, with the translation's error on FX inputs as its numbers."""
    return replace(row, status=Status.FAIL, onnx_value=inside.onnx_value, fx_value=inside.fx_node, max_abs=inside.max_abs,
                   max_rel=inside.max_rel, atol_applied=inside.atol_applied, reason=inside.reason)


def _compare_chunks(name: str, chunked: Sequence[Sequence[NodePlan]], fx: FxRunner, inputs: Sequence[Any],
                    kept: dict[str, Any] | None, feeds: Mapping[str, Any], runner: OrtRunner, tolerances: Any,
                    peak: int, fx_runs: int,
                    cancel: CancelToken) -> tuple[dict[str, IntermediateRow], int, int, tuple[str, BaseException] | None]:
    """Each chunk: its FX values (kept, or from one more FX run), one onnxruntime run, its rows."""
    rows: dict[str, IntermediateRow] = {}
    for chunk in chunked:
        cancel.check()
        if kept is not None:
            fx_values = kept
        else:
            needed = {fx for node in chunk for _, fx in node.pairs}
            _, _, every = fx.run(inputs, needed, None, cancel)
            fx_values = every or {}  # no budget: every wanted value
            fx_runs += 1
        try:
            onnx_values = runner.run(pair_names(chunk), feeds, keep=len(chunked) == 1)
        except Exception as exc:  # noqa: BLE001
            message = f"onnxruntime could not run the model with its intermediate values: {first_line(exc)}"
            return rows, peak, fx_runs, (message, exc)
        held = sum(nbytes(v) for v in onnx_values.values()) + sum(nbytes(fx_values[fx]) for node in chunk
                                                                 for _, fx in node.pairs if fx in fx_values)
        peak = max(peak, held)
        rows.update(node_rows(name, chunk, onnx_values, fx_values, tolerances))
        del onnx_values
        if kept is None:
            del fx_values
    return rows, peak, fx_runs, None


def _case_inputs(session: IntermediatesSource, case: str | VerifiedCase | None, args: Sequence[Any] | None,
                 kwargs: Mapping[str, Any] | None) -> _Case:
    if args is not None or kwargs is not None:
        return _Case(case if isinstance(case, str) else "inputs", tuple(args or ()), dict(kwargs or {}))
    verified = session.last_verify
    runs = verified.case_runs if verified is not None else None
    if case is None or case == "example" or (not isinstance(case, str) and case.name == "example"):
        expected = runs.eager_outputs("example", session.model) if runs is not None else None
        return _Case("example", tuple(session.inputs.args), dict(session.inputs.kwargs), expected)
    if isinstance(case, str):
        names = [c.name for c in verified.cases] if verified is not None else []
        if verified is None or case not in names:
            known = ", ".join(repr(n) for n in names) or "none: run session.verify() first"
            raise ValueError(f"no verify case {case!r}; cases are: example, {known}")
        case = verified.case(case)
    if runs is not None and verified is not None and any(c is case for c in verified.cases):
        run = runs.get(case.name)
        if run is not None:  # the very inputs verify ran
            return _Case(case.name, run.args, dict(run.kwargs), runs.eager_outputs(case.name, session.model))
    return _Case(case.name, *_rebuild(session, case))


def _rebuild(session: ExportArtifacts, case: VerifiedCase) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The inputs verify built for ``case`` (see :func:`compare_intermediates`)."""
    if case.edge is not None:
        args, kwargs = edge_value_inputs(session, case.edge)
        return tuple(args), dict(kwargs)
    program = session.stage_output("capture")
    groups = dim_groups(session, program, session.stage_output("optimize"))
    seed = 0
    try:
        for i, plan in enumerate(plan_cases(groups, 512, None), start=1):
            if plan.name == case.name and tuple(plan.sizes) == tuple(case.sizes):
                seed = i
                break
    except Exception:  # noqa: BLE001 - no plan: the same sizes with fresh values
        pass
    args, kwargs, _ = make_case_inputs(session, program, groups, dict(case.sizes), seed=seed)
    return tuple(args), dict(kwargs)
