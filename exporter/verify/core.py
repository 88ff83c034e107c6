"""The whole verification: run every case in onnxruntime and eager PyTorch, draw findings."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..artifacts import ExportArtifacts
from ..cases import CasePlan, DimGroup, InputCase, dim_groups, extra_cases, make_case_inputs, plan_cases, sizes_by_label
from ..compat import formats, train_mode_dependent_modules, tree_flatten_with_path
from ..errors import Failure, Status, first_line
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..frames import source_of_stack
from ..model_state import StateReport
from ..node_metadata import fx_name_of
from ..ort_values import feeds as ort_feeds
from ..progress import Progress
from .contract import ContractReport, check_contract
from .case_runs import keep_case_runs
from .divergence import Divergence, first_divergence
from .eager import EagerRunner, clone_tensors, expected_outputs
from .findings import VerifyFacts, excuse_ties, findings_of, training_finding, with_ties
from .randomness import random_draws
from .rounding import Float64Reference, rounding_rejudged
from .ties import tied_cases
from .results import CaseResult, VerifyResult
from .tolerance import DEFAULT_TOLERANCES, OutputCheck, Tolerance, compare, tolerance_for
from .values import EdgeValue, eager_returns_nan, edge_value_inputs
from .values import edge_values as find_edge_values

if TYPE_CHECKING:
    import onnxruntime


def _run_case(
    session: ExportArtifacts,
    runner: EagerRunner,
    ort_session: onnxruntime.InferenceSession,
    name: str,
    sizes: tuple[tuple[str, int], ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    output_names: Sequence[str],
    tolerances: Mapping[str, Tolerance] | Tolerance | None,
    reference: Float64Reference | None = None,
) -> tuple[CaseResult, list[Any] | None]:
    start = time.perf_counter()
    feeds: dict[str, Any] | None = None
    feeds_error: BaseException | None = None
    try:  # copied before eager runs: a module that writes into its inputs must not change them
        feeds = ort_feeds(session, session.stage_output("optimize"), args, dict(kwargs))
    except Exception as exc:  # noqa: BLE001
        feeds_error = exc
    where = ", ".join(f"{label}={size}" for label, size in sizes)
    report = None
    try:
        eager_args, eager_kwargs = clone_tensors(args), clone_tensors(dict(kwargs))
        # Never change the user's model: the run is on the job's twin (a cell calling the model
        # meanwhile sees nothing); a forward that rebinds its own attributes (Swin at 1x1 sets
        # window_size=1) or updates buffers is put back after every run, and reported.
        with runner.running(f"when called at {where}" if where else "when called") as (twin, report):
            eager = twin(*eager_args, **eager_kwargs)
        expected = expected_outputs(tree_flatten_with_path(eager))
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, Status.EAGER_ERROR, error=f"eager PyTorch raised {first_line(exc)}",
                          seconds=time.perf_counter() - start, state_changes=_state_changes(report)), None
    changes = _state_changes(report)
    try:
        if feeds_error is not None:
            raise feeds_error
        actual = ort_session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, Status.ORT_ERROR, error=_ort_error_text(exc, session),
                          seconds=time.perf_counter() - start, state_changes=changes), expected
    checks: list[OutputCheck] = []
    for i in range(max(len(expected), len(actual))):
        label = output_names[i] if i < len(output_names) else f"#{i}"
        if i >= len(actual) or i >= len(expected):
            checks.append(OutputCheck(name, label, Status.MISSING))
            continue
        checks.append(compare(name, label, actual[i], expected[i], tolerances))
    if not all(c.ok for c in checks):
        checks = rounding_rejudged(checks, actual, expected, reference, args, kwargs)
    status = Status.PASS if all(c.ok for c in checks) else Status.FAIL
    return CaseResult(name, sizes, status, tuple(checks), seconds=time.perf_counter() - start,
                      state_changes=changes), expected


def _state_changes(report: StateReport | None) -> tuple[str, ...]:
    """What an eager run changed on the module (each put back), as text."""
    if report is None or not report.changed:
        return ()
    return tuple(str(change) for change in report.changes)


def _training_modules(model: Any) -> list[tuple[str, Any]]:
    """Dropout / batch-norm submodules left in training mode: (module path, module). A
    dropout with ``p=0`` drops nothing: its output does not depend on the mode."""
    kinds = train_mode_dependent_modules()
    modules = getattr(model, "named_modules", None)
    if modules is None:
        return []
    return [(name, module) for name, module in modules()
            if isinstance(module, kinds) and getattr(module, "training", False)
            and not (isinstance(module, kinds[0]) and getattr(module, "p", None) == 0)]


def _ort_error_text(exc: BaseException, session: ExportArtifacts) -> str:
    """onnxruntime's message, plus the FX node and source line of the ONNX node it names."""
    text = formats.ort_error_message(exc)
    name = formats.ort_error_node(exc)
    if name is not None:
        try:
            node = next((n for n in session.stage_output("optimize").graph if n.name == name), None)
        except Exception:  # noqa: BLE001
            node = None
        if node is not None:
            source = source_of_stack(formats.stack_trace_text(node))
            fx_name = fx_name_of(node)
            text += f" [ONNX node {node.name!r} ({node.op_type}) from FX {fx_name}" + (f" at {source}" if source else "") + "]"
    return text


def verify(
    session: ExportArtifacts,
    *,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    sizes: Mapping[Any, Sequence[int]] | None = None,
    make_inputs: Callable[[InputCase], tuple[tuple[Any, ...], dict[str, Any]] | None] | None = None,
    max_size: int = 512,
    independent: bool = False,
    edge_values: bool = True,
    locate: bool = True,
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
) -> VerifyResult:
    """Compare the ONNX model in onnxruntime with the eager module, at the example inputs
    and at other sizes of every dynamic dim; check the ONNX input/output contract; locate
    the first divergent node of the first wrong case. Never raises for a bad model.

    Args:
        tolerances: per-dtype overrides (``{"float32": Tolerance(1e-3, 1e-4)}``) or one
            :class:`Tolerance` for everything; defaults in :data:`DEFAULT_TOLERANCES`. With
            the defaults, a float32 output beyond them by a little passes when onnxruntime is
            as close to the model run in float64 as eager float32 is (rounding the model
            amplifies, :mod:`exporter.verify.rounding`); tolerances given are applied as given.
        sizes: sweep exactly these sizes per dim group, keyed by its label
            (``{"batch": [1, 5, 64]}``) or by one of its axes (``{Axis("x", 0): [1, 5]}``,
            ``{"x.0": [1, 5]}``), instead of the generated ones. Not for a derived group
            (``ValueError``): size the groups it follows.
        make_inputs: hook called for every generated case with an :class:`InputCase`;
            return ``(args, kwargs)`` to replace its inputs, or None to keep them.
        max_size: largest size a generated case may use, except the sizes scaled to the
            example (exactly twice the example, or the requested ``Dim`` max when twice is
            past it, always tried, even outside the range torch obtained; the example + 1
            when no other size has its parity), and the sizes chosen from the remainder
            guards, which stay near the example so every dim is varied.
        independent: sweep every torch symbol on its own. By default axes that callers size
            together move together: axes sharing a Dim or a name, axes torch found equal, and
            AUTO/DYNAMIC axes of different inputs at the same index with the same example size
            (``input_ids`` and ``attention_mask`` batch), so no case feeds sizes no caller sends.
            A group the model's guards tie to others is derived from them, not swept: GPT-2 with
            a cache reads its attention mask over ``total = past_seq + seq`` (a ``derived_dim``
            finding says so; see :mod:`exporter.cases.derived`). ``independent=True`` derives none.
        edge_values: also try edge values at the example size (see :mod:`exporter.verify.values`):
            a mask input all ones, all zeros and with one fully masked row; ids at 0 and at
            the last row of the embedding that reads them. The ``make_inputs`` hook is not
            called for these: each is the example inputs with one tensor changed.
        locate: find the first divergent node of the first wrong case.
        progress: called with a :class:`Progress` after every case.
        observer: an :class:`~exporter.events.Observer`, told the progress after every case.
        cancel: a :class:`~exporter.events.CancelToken` checked between cases; once set, the
            result has status ``cancelled`` and holds the cases run so far.

    The result is ``passed`` only when every dim group swept was compared at a size other
    than the example; ``not_verified`` when eager PyTorch raised at every other size of a group
    (or none was tried), with the reason in a ``not_verified`` finding; ``failed`` when a case
    differs or onnxruntime fails, or the contract is broken. Every eager run leaves the module
    as it was (:func:`exporter.model_state.preserved`).

    Raises ``ValueError`` at once for a bad argument (a ``sizes=`` key naming no dim group,
    or a derived one).
    """
    if max_size < 1:
        raise ValueError(f"max_size must be at least 1, got {max_size}")
    reporter = Reporter(observer, cancel, progress)
    start = time.perf_counter()
    try:
        program = session.stage_output("capture")
        model = session.stage_output("optimize")
    except Cancelled:
        return VerifyResult(Status.CANCELLED, seconds=time.perf_counter() - start)
    except Exception as exc:  # noqa: BLE001 - the export failed: nothing to verify
        return _error_result(exc, start)
    groups = dim_groups(session, program, model, independent=independent)
    plans = plan_cases(groups, max_size, sizes)  # a caller's typo raises here, before any broad except
    named = frozenset(sizes_by_label(groups, sizes, "sizes= dim group")) if sizes else None
    try:
        contract = check_contract(session, model, program)
        ort_session = session.output_ort_session
    except Exception as exc:  # noqa: BLE001 - e.g. no onnxruntime kernel for a dtype
        missing = formats.ort_missing_kernel(exc)
        if missing is not None:
            prefix = (
                f"onnxruntime has no CPU kernel for {missing} with this model's types, so it cannot run the "
                "model here (a limit of onnxruntime, not a wrong model)"
            )
        else:
            prefix = "onnxruntime cannot load the model"
        return _error_result(exc, start, groups, prefix=prefix)
    cases: list[CaseResult] = []
    try:
        edge_cases = _edge_cases(session, program) if edge_values else ()
        return _verify_cases(session, program, model, groups, plans, contract, ort_session, tolerances,
                             make_inputs, locate, seed, reporter, start, cases, edge_cases, named, max_size)
    except Cancelled:
        return VerifyResult(Status.CANCELLED, tuple(cases), groups, contract, seconds=time.perf_counter() - start)


def _edge_cases(session: ExportArtifacts, program: Any) -> tuple[EdgeValue, ...]:
    try:
        return find_edge_values(session, program)
    except Exception:  # noqa: BLE001 - no edge case is better than no verification
        return ()


def _error_result(exc: BaseException, start: float, groups: tuple[Any, ...] = (), prefix: str = "") -> VerifyResult:
    text = f"{prefix}: {first_line(exc)}" if prefix else first_line(exc)
    return VerifyResult(Status.ERROR, groups=groups, seconds=time.perf_counter() - start, error=text,
                        failure=Failure.from_exception(exc, "verify"))


def _verify_cases(session: ExportArtifacts, program: Any, model: Any, groups: Sequence[DimGroup], plans: Sequence[CasePlan],
                  contract: ContractReport, ort_session: onnxruntime.InferenceSession, tolerances: Mapping[str, Tolerance] | Tolerance | None,
                  make_inputs: Callable[[InputCase], tuple[tuple[Any, ...], dict[str, Any]] | None] | None, locate: bool, seed: int,
                  reporter: Reporter, start: float, cases: list[CaseResult],
                  edge_cases: Sequence[EdgeValue] = (), named: frozenset[str] | None = None,
                  max_size: int | None = None) -> VerifyResult:
    output_names = [v.name for v in model.graph.outputs]
    example_sizes = tuple((g.label, g.example) for g in groups)
    total = len(plans) + len(edge_cases) + 1
    inputs: dict[str, tuple[tuple[Any, ...], dict[str, Any], list[Any] | None]] = {}

    reporter.progress("verify", 0, total, "example inputs")
    reference = Float64Reference(session.model) if tolerances is None else None  # given ones are applied as given
    runner = EagerRunner(session.model)
    result, expected = _run_case(session, runner, ort_session, "example", example_sizes, session.inputs.args,
                                 session.inputs.kwargs, output_names, tolerances, reference)
    cases.append(result)
    inputs["example"] = (session.inputs.args, dict(session.inputs.kwargs), expected)
    randomness = random_draws(session.model, program, session.inputs.args, session.inputs.kwargs, example_sizes,
                              expected, output_names, tolerances, result.outputs) if result.status == "fail" and expected else None
    swept: dict[str, list[int]] = {g.label: [g.example] for g in groups}

    def sweep() -> Iterator[CasePlan]:
        nonlocal total
        yield from plans
        if named is None:  # generated sizes: then those that can see a branch, as the time taken allows
            runs = [(c.sizes, c.seconds) for c in cases if c.status in (Status.PASS, Status.FAIL)]
            extra = extra_cases(groups, plans, runs, max_size)
            total += len(extra)
            yield from extra

    for i, plan in enumerate(sweep(), start=1):
        reporter.progress("verify", i, total, f"{plan.name}: {', '.join(f'{k}={v}' for k, v in plan.sizes)}")
        assignment = dict(plan.sizes)
        changed = tuple(g.label for g in groups if assignment[g.label] != g.example)
        outside = tuple(g.label for g in groups if not g.in_obtained_range(assignment[g.label]))
        try:
            args, kwargs, shapes = make_case_inputs(session, program, groups, assignment, seed=seed + i)
            if make_inputs is not None:
                replacement = make_inputs(InputCase(plan.name, MappingProxyType(assignment), MappingProxyType(shapes), args, MappingProxyType(kwargs)))
                if replacement is not None:
                    args, kwargs = tuple(replacement[0]), dict(replacement[1])
        except Exception as exc:  # noqa: BLE001
            cases.append(CaseResult(plan.name, plan.sizes, Status.ERROR, error=f"inputs: {first_line(exc)}", changed=changed, outside_obtained=outside))
            continue
        result, expected = _run_case(session, runner, ort_session, plan.name, plan.sizes, args, kwargs, output_names, tolerances,
                                     reference)
        cases.append(replace(result, changed=changed, outside_obtained=outside))
        inputs[plan.name] = (args, kwargs, expected)
        for label, size in plan.sizes:
            if size not in swept[label]:
                swept[label].append(size)
    groups = tuple(replace(g, sizes=tuple(swept[g.label])) for g in groups)
    for i, edge in enumerate(edge_cases, start=total - len(edge_cases)):
        reporter.progress("verify", i, total, edge.name)
        try:
            args, kwargs = edge_value_inputs(session, edge)
        except Exception as exc:  # noqa: BLE001
            cases.append(CaseResult(edge.name, example_sizes, Status.ERROR, error=f"inputs: {first_line(exc)}", edge=edge))
            continue
        result, expected = _run_case(session, runner, ort_session, edge.name, example_sizes, args, kwargs, output_names, tolerances,
                                     reference)
        nan = eager_returns_nan(edge, expected, inputs["example"][2]) if result.status == Status.FAIL else None
        if nan is not None:  # eager's own NaN: not counted against the export
            result = replace(result, status=Status.EAGER_ERROR, outputs=(), error=nan)
        cases.append(replace(result, edge=edge))
        inputs[edge.name] = (args, kwargs, expected)

    divergence = None
    training = _training_modules(session.model)
    if locate and not training and randomness is None:  # the cause known: no node to blame
        wrong = next((c for c in cases if c.status == "fail"), None)
        if wrong is not None:
            reporter.progress("verify", total, total, f"locating the first divergent node of {wrong.name}")
            args, kwargs, expected = inputs[wrong.name]
            try:
                divergence = first_divergence(session, wrong.name, args, kwargs, expected or [], tolerances=tolerances)
            except Exception as exc:  # noqa: BLE001
                divergence = Divergence(wrong.name, "unknown", f"could not locate: {first_line(exc)}")
    ties = tied_cases(session, divergence, [c.name for c in cases if c.status == "fail"], inputs, tolerances)
    cases = excuse_ties(cases, ties)
    findings = with_ties(findings_of(VerifyFacts(cases, groups, contract, session, divergence, named)), cases, ties)
    if training:
        findings.insert(0, training_finding(training))
    elif randomness is not None:  # every comparison is with other draws: none fails, none passes
        findings = [randomness, *(f for f in findings if not f.fails and f.kind != "tolerance")]
    compared_cases = cases if randomness is None or training else []
    failed = any(not c.ok and c.status != "eager_error" for c in compared_cases) or not contract.ok or bool(training)
    unverified = any(f.kind in ("not_verified", "vacuous", "random") for f in findings)
    reporter.progress("verify", total, total, "done")
    overrides = {} if isinstance(tolerances, Tolerance) else dict(tolerances or {})
    merged = {dtype: tolerance_for(dtype, tolerances) for dtype in {**DEFAULT_TOLERANCES, **overrides}}
    runs = keep_case_runs(session.model, inputs, first=[c.name for c in cases if not c.ok])
    return VerifyResult(
        Status.FAILED if failed else Status.NOT_VERIFIED if unverified else Status.PASSED,
        tuple(cases),
        groups,
        contract,
        tuple(findings),
        divergence,
        MappingProxyType(merged),
        time.perf_counter() - start,
        case_runs=runs,
    )
