"""The whole verification: run every case in onnxruntime and eager PyTorch, draw findings."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..artifacts import ExportArtifacts
from ..cases import CasePlan, DimGroup, InputCase, dim_groups, make_case_inputs, plan_cases, sizes_by_label
from ..compat import formats, train_mode_dependent_modules, tree_flatten_with_path
from ..errors import Failure, first_line
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..frames import source_of_stack
from ..model_state import StateReport, preserved
from ..node_metadata import fx_name_of
from ..ort_values import feeds as ort_feeds
from ..progress import Progress
from ..shapes.baked import baked_case_cause, baked_constants_of
from .contract import ContractReport, check_contract
from .case_runs import keep_case_runs
from .divergence import Divergence, first_divergence
from .ties import tie_cause
from .eager import clone_tensors, expected_outputs
from .results import CaseResult, Finding, VerifyResult
from .tolerance import DEFAULT_TOLERANCES, OutputCheck, Tolerance, compare, tolerance_for
from .values import EdgeValue, Explanation, edge_value_inputs, explain
from .values import edge_values as find_edge_values

if TYPE_CHECKING:
    import onnxruntime


def _run_case(
    session: ExportArtifacts,
    ort_session: onnxruntime.InferenceSession,
    name: str,
    sizes: tuple[tuple[str, int], ...],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any],
    output_names: Sequence[str],
    tolerances: Mapping[str, Tolerance] | Tolerance | None,
) -> tuple[CaseResult, list[Any] | None]:
    import torch

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
        # Never change the user's model: a forward that rebinds its own attributes (Swin at 1x1
        # sets window_size=1) or updates buffers is put back after every run, and reported.
        with preserved(session.model, what=f"when called at {where}" if where else "when called") as report, \
                torch.inference_mode():
            eager = session.model(*eager_args, **eager_kwargs)
        expected = expected_outputs(tree_flatten_with_path(eager))
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, "eager_error", error=f"eager PyTorch raised {first_line(exc)}",
                          seconds=time.perf_counter() - start, state_changes=_state_changes(report)), None
    changes = _state_changes(report)
    try:
        if feeds_error is not None:
            raise feeds_error
        actual = ort_session.run(None, feeds)
    except Exception as exc:  # noqa: BLE001
        return CaseResult(name, sizes, "ort_error", error=_ort_error_text(exc, session),
                          seconds=time.perf_counter() - start, state_changes=changes), expected
    checks: list[OutputCheck] = []
    for i in range(max(len(expected), len(actual))):
        label = output_names[i] if i < len(output_names) else f"#{i}"
        if i >= len(actual) or i >= len(expected):
            checks.append(OutputCheck(name, label, "missing"))
            continue
        checks.append(compare(name, label, actual[i], expected[i], tolerances))
    status = "pass" if all(c.ok for c in checks) else "fail"
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


def _training_finding(training: list[tuple[str, Any]]) -> Finding:
    """The model was left in training mode: which modules (by path, at most three), why their
    outputs differ, and the fix."""
    named = [f"{name} ({type(module).__name__})" if name else type(module).__name__ for name, module in training]
    named = named[:3] + ([f"{len(named) - 3} more"] if len(named) > 3 else [])
    dropout, _ = train_mode_dependent_modules()  # (dropout base class, batch norm base class)
    causes = []
    if any(isinstance(module, dropout) for _, module in training):
        causes.append("dropout draws a new random mask on every call")
    if any(not isinstance(module, dropout) for _, module in training):
        causes.append("batch norm normalizes with the batch's own statistics and updates its running ones")
    return Finding(
        "training_mode",
        f"the model is in training mode: {', '.join(named)} make eager outputs differ from run to run "
        "and from the exported inference graph",
        cause=" and ".join(causes) + " while the module is in training mode",
        fix="call model.eval() before exporting, then export again (verify does not switch your module)",
    )


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


def _causes_text(causes: Sequence[str], limit: int = 2) -> str:
    """The first ``limit`` guards behind a group, and how many more ``session.guards`` lists."""
    more = len(causes) - limit
    return "; ".join(causes[:limit]) + (f"; and {more} more guard(s) (session.guards)" if more > 0 else "")


_BREAKS_GUARD = "breaks guard"


def _case_cause(case: CaseResult, groups: Sequence[DimGroup]) -> str | None:
    parts: list[str] = []
    for group in groups:
        if group.label not in case.changed:
            continue
        size = dict(case.sizes)[group.label]
        broken = next((text for kind, n, text in group.guard_sizes if kind == "breaks guard" and n == size), None)
        if broken is not None and case.name == f"{group.label}={size} {_BREAKS_GUARD}":
            parts.append(
                f"{group.label}={size} breaks the guard {broken}, which held at the example {group.example}: "
                "the program (and the ONNX model) keeps only the branch the example took"
            )
            continue
        guards = f" ({_causes_text(group.causes)})" if group.causes else ""
        if group.specialized:
            onnx = ", ".join(map(repr, group.onnx_dims))
            parts.append(
                f"{group.axes_text} was specialized to {group.example} during capture{guards}; "
                + (f"the ONNX input still declares {onnx}, so onnxruntime accepts {size} and computes as for {group.example}"
                   if group.onnx_accepts_any_size else f"the ONNX model declares {onnx}")
            )
        elif not group.in_obtained_range(size):
            parts.append(
                f"torch verified the program only for {group.label} in {group.describe_range()}{guards}; "
                f"{size} is outside it and the ONNX model does not check that range (a dropped runtime assert)"
            )
        elif group.causes and group.derived is None:  # a derived group follows the others: theirs say it
            parts.append(f"{group.label}: {_causes_text(group.causes)}")
    return "; ".join(parts) or None


def _findings(cases: Sequence[CaseResult], groups: Sequence[DimGroup], contract: ContractReport | None,
              session: ExportArtifacts, divergence: Divergence | None = None,
              named: frozenset[str] | None = None) -> list[Finding]:
    findings: list[Finding] = []
    example = next((c for c in cases if c.is_example), None)
    others = [c for c in cases if not c.is_example and not c.is_edge_value]
    checked = [c for c in others if c.status != "eager_error"]
    bad = [c for c in checked if not c.ok]
    if example is not None and not example.ok and example.status != "eager_error":
        findings.append(Finding("wrong_at_example", f"wrong at the example size ({example.sizes_text}): {example.describe()}", example.name, example.sizes))
    if not groups:
        findings.append(Finding("not_swept", "no dim was requested dynamic: checked at the example size only"))
    elif example is not None and example.ok and checked and len(bad) == len(checked):
        findings.append(Finding("example_only", f"correct at the example size only ({example.sizes_text}): wrong or failing at every other size tried"))
    for group in groups:
        if group.derived is not None:
            sources = " and ".join(group.derived_from)
            findings.append(Finding(
                "derived_dim",
                f"{group.derived_text}: every case sizes {group.label} from {sources} instead of sweeping it "
                f"on its own (independent=True sweeps it alone)",
            ))
    for group in groups:
        if group.auto_static:
            guards = _causes_text(group.causes) if group.causes else None
            findings.append(Finding(
                "auto_static",
                f"{group.axes_text}: AUTO let torch decide, and torch made it static at {group.example}; the ONNX "
                f"model accepts only that size (onnxruntime refuses others), as AUTO permits: not swept",
                cause=guards,
                fix="mark it STATIC to say so, or request it dynamic (a name or a Dim) to learn which code pins it",
            ))
    static = [
        (g, d) for g in groups for (axis, d) in zip(g.axes, g.onnx_dims)
        if not g.auto_static and (isinstance(d, int) or (isinstance(d, str) and d.lstrip("-").isdigit()))
    ]
    if static:
        listed = ", ".join(sorted({f"{g.axes_text} (requested {g.requested}, ONNX dim {d!r})" for g, d in static}))
        findings.append(Finding("static_in_onnx", f"dims declared dynamic but static in the ONNX model: {listed}"))
    baked = baked_constants_of(session) if bad else ()
    for c in bad:
        what = {"ort_error": "onnxruntime fails", "error": "could not build inputs"}.get(c.status, "wrong")
        axes = [axis for g in groups if g.label in c.changed for axis in g.axes]
        cause = "; ".join(filter(None, (baked_case_cause(baked, axes, c.error), _case_cause(c, groups)))) or None
        findings.append(Finding("wrong_at_size", f"{what} at size {c.sizes_text}: {c.describe()}", c.name, c.sizes, cause))
    skipped: dict[tuple[str, ...], list[CaseResult]] = {}
    for c in others:
        if c.status == "eager_error":
            skipped.setdefault(c.changed, []).append(c)
    for changed, group_cases in skipped.items():
        if len(changed) == 1:
            where = f"{changed[0]} = " + ", ".join(str(dict(c.sizes)[changed[0]]) for c in group_cases)
        else:
            where = "; ".join(c.sizes_text for c in group_cases)
        findings.append(Finding(
            "eager_error",
            f"not checked at {where}: {group_cases[0].error} (the module itself does not support "
            f"{'these sizes' if len(group_cases) > 1 else 'this size'})",
            group_cases[0].name, group_cases[0].sizes,
        ))
    findings.extend(_tolerance_notes(cases))
    findings.extend(_vacuous(cases))
    findings.extend(_not_verified(cases, groups, named))
    findings.extend(_state_findings(cases))
    findings.extend(_edge_findings([c for c in cases if c.is_edge_value], session, divergence))
    if contract is not None:
        unified = [c for c in contract.checks if c.check == "unified dims"]
        for message in dict.fromkeys(c.message for c in unified):
            findings.append(Finding("unified_dims", message))
        for check in contract.errors:
            if check.check != "dynamic is symbolic":
                findings.append(Finding("contract", f"{check.subject}: {check.message}"))
    return findings


def _with_tie_cause(findings: list[Finding], session: ExportArtifacts, divergence: Divergence,
                    inputs: tuple[tuple[Any, ...], Mapping[str, Any]]) -> list[Finding]:
    """The failing case's finding with the likely cause when its first divergence is indices
    picked among equal values (:mod:`.ties`): the ONNX model is as right as the op allows."""
    try:
        cause = tie_cause(session, divergence, *inputs)
    except Exception:  # noqa: BLE001 - an explanation that cannot be made is left out
        return findings
    if cause is None:
        return findings
    return [replace(f, cause="; ".join(filter(None, (cause, f.cause))))
            if f.case == divergence.case and f.kind in ("wrong_at_example", "wrong_at_size", "wrong_at_value") else f
            for f in findings]


def _not_verified(cases: Sequence[CaseResult], groups: Sequence[DimGroup],
                  named: frozenset[str] | None = None) -> list[Finding]:
    """A dim group that no case compared at a size other than its example: the verdict must not
    say PASSED for it. Eager PyTorch raised at every other size tried, or none was tried. With
    ``sizes=`` (``named``: the groups it names), a group it leaves out is ``not_varied``: said
    plainly, not a failure (the caller chose the sizes)."""
    example = next((c for c in cases if c.is_example), None)
    if example is not None and example.status == "eager_error":
        return [Finding("not_verified", f"eager PyTorch could not run the example inputs: {example.error}", example.name,
                        example.sizes, fix="check that the module runs on the example inputs")]
    findings = []
    others = [c for c in cases if not c.is_example and not c.is_edge_value]
    for group in groups:
        if group.auto_static or group.derived is not None:
            continue
        if named is not None and group.label not in named:
            findings.append(Finding("not_varied", f"{group.label} not varied: sizes= did not name it (kept at {group.example})"))
            continue
        tried = [c for c in others if group.label in c.changed]
        if any(c.compared for c in tried):
            continue
        refused = [c for c in tried if c.status == "eager_error"]
        if refused:
            sizes = ", ".join(str(dict(c.sizes)[group.label]) for c in refused)
            message = (f"{group.label} not verified at other sizes: eager PyTorch raised at every other size tried "
                       f"({group.label} = {sizes}): {refused[0].error}")
            fix = (f"give sizes the module supports: verify(sizes={{{group.label!r}: [...]}}), or build valid "
                   "inputs with make_inputs=")
        elif tried:
            continue  # inputs could not be built: a failed case already says so
        else:
            lo, hi = group.requested_range
            why = (f"its range {group.describe_range('requested')} holds no other size" if hi is not None and hi <= lo
                   else "no other size was tried (sizes= named other groups, or every size was past max_size)")
            message = f"{group.label} not varied: {why}"
            fix = f"verify(sizes={{{group.label!r}: [...]}}) with sizes to compare"
        findings.append(Finding("not_verified", message, refused[0].name if refused else None,
                                refused[0].sizes if refused else (), fix=fix))
    return findings


def _vacuous(cases: Sequence[CaseResult]) -> list[Finding]:
    """Every floating value compared is within its absolute tolerance of 0 (a dead or
    zero-initialised network: random weights over many layers shrink activations to ~1e-29):
    an ONNX model that returned zeros would pass too, so the comparison verified nothing."""
    if any(not c.ok for c in cases if c.compared):
        return []
    peaks = []  # (largest |expected|, its atol) per compared output
    for check in (o for c in cases if c.compared for o in c.outputs if o.status == "pass"):
        tolerance, applied = check.tolerance, check.atol_applied
        if tolerance is None or applied is None or tolerance.output_scale <= 0:
            continue
        peaks.append(((applied - tolerance.atol) / tolerance.output_scale, tolerance.atol))
    if not peaks or any(peak > atol for peak, atol in peaks):
        return []
    return [Finding(
        "vacuous",
        f"every value compared is within atol of 0 (largest |expected| {max(p for p, _ in peaks):.2g} in {len(peaks)} "
        "output(s)): "
        "an ONNX model returning zeros would pass too, so nothing was verified",
        fix="verify with weights whose outputs are not ~0 (a trained checkpoint; random weights over many layers "
            "shrink activations towards 0)",
    )]


def _tolerance_notes(cases: Sequence[CaseResult]) -> list[Finding]:
    """Elements that pass only thanks to the output-scaled part of the tolerance, said once."""
    scaled = [(c, o) for c in cases for o in c.outputs if o.ok and o.scaled_only]
    if not scaled:
        return []
    count = sum(o.scaled_only for _, o in scaled)
    case, check = max(scaled, key=lambda pair: pair[1].max_abs or 0.0)
    return [Finding(
        "tolerance",
        f"{count} element(s) in {len({c.name for c, _ in scaled})} case(s) differ by more than atol + rtol*|expected| "
        f"but within the output-scaled tolerance ({check.tolerance}): float noise on values near zero "
        f"(largest: output {check.output!r} at {case.sizes_text or case.name}, |diff| {check.max_abs:.3g} <= "
        f"{check.atol_applied:.3g})",
        case.name, case.sizes,
        fix="tolerances={'float32': Tolerance(rtol, atol, scale=0)} compares element by element without the scale",
    )]


def _state_findings(cases: Sequence[CaseResult]) -> list[Finding]:
    """The module changed its own state when run (each change was put back after the run)."""
    changed = [c for c in cases if c.state_changes]
    if not changed:
        return []
    first = changed[0]
    shown = "; ".join(first.state_changes[:3]) + (f" (and {len(first.state_changes) - 3} more)" if len(first.state_changes) > 3 else "")
    more = f"; {len(changed) - 1} other case(s) changed it too" if len(changed) > 1 else ""
    return [Finding(
        "model_changes_itself",
        f"this model changes itself when called at {first.sizes_text}: {shown}{more}; verify put it back after every "
        "run, so every case ran the model as you gave it",
        first.name, first.sizes,
        fix="outside verify the change sticks: a call at such a size changes later calls at other sizes",
    )]


def _edge_findings(cases: Sequence[CaseResult], session: ExportArtifacts, divergence: Divergence | None) -> list[Finding]:
    """Failing edge-value cases in plain words, with the fix when known: one finding per
    input and explanation (``attention_mask`` all False and one row all False fail for one
    reason); one per case the module itself refuses."""
    findings: list[Finding] = []
    grouped: dict[tuple[Any, ...], list[tuple[CaseResult, EdgeValue]]] = {}
    explained: dict[tuple[Any, ...], Explanation] = {}
    for c in cases:
        if c.ok or c.edge is None:
            continue
        if c.status == "eager_error":
            findings.append(Finding(
                "eager_error", f"not checked with {c.name}: {c.error} (the module itself does not accept this value)",
                c.name, c.sizes,
            ))
            continue
        try:
            explanation = explain(c.edge, session, divergence)
        except Exception as exc:  # noqa: BLE001 - an explanation never fails verify
            explanation = Explanation("onnxruntime differs from PyTorch", f"(could not explain: {first_line(exc)})")
        if c.status in ("ort_error", "error"):
            explanation = replace(explanation, message="onnxruntime fails" if c.status == "ort_error" else "could not build inputs")
        key = (c.edge.input, c.status, explanation)
        grouped.setdefault(key, []).append((c, c.edge))
        explained[key] = explanation
    for key, group in grouped.items():
        explanation = explained[key]
        labels = " or ".join(edge.label for _, edge in group)
        first, first_edge = group[0]
        findings.append(Finding(
            "wrong_at_value",
            f"With {first_edge.input} {labels}, {explanation.message} (at the example size; {first.describe()})",
            first.name, first.sizes, explanation.cause, explanation.fix, explanation.options,
        ))
    return findings


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
            :class:`Tolerance` for everything; defaults in :data:`DEFAULT_TOLERANCES`.
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
        return VerifyResult("cancelled", seconds=time.perf_counter() - start)
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
                             make_inputs, locate, seed, reporter, start, cases, edge_cases, named)
    except Cancelled:
        return VerifyResult("cancelled", tuple(cases), groups, contract, seconds=time.perf_counter() - start)


def _edge_cases(session: ExportArtifacts, program: Any) -> tuple[EdgeValue, ...]:
    try:
        return find_edge_values(session, program)
    except Exception:  # noqa: BLE001 - no edge case is better than no verification
        return ()


def _error_result(exc: BaseException, start: float, groups: tuple[Any, ...] = (), prefix: str = "") -> VerifyResult:
    text = f"{prefix}: {first_line(exc)}" if prefix else first_line(exc)
    return VerifyResult("error", groups=groups, seconds=time.perf_counter() - start, error=text,
                        failure=Failure.from_exception(exc, "verify"))


def _verify_cases(session: ExportArtifacts, program: Any, model: Any, groups: Sequence[DimGroup], plans: Sequence[CasePlan],
                  contract: ContractReport, ort_session: onnxruntime.InferenceSession, tolerances: Mapping[str, Tolerance] | Tolerance | None,
                  make_inputs: Callable[[InputCase], tuple[tuple[Any, ...], dict[str, Any]] | None] | None, locate: bool, seed: int,
                  reporter: Reporter, start: float, cases: list[CaseResult],
                  edge_cases: Sequence[EdgeValue] = (), named: frozenset[str] | None = None) -> VerifyResult:
    output_names = [v.name for v in model.graph.outputs]
    example_sizes = tuple((g.label, g.example) for g in groups)
    total = len(plans) + len(edge_cases) + 1
    inputs: dict[str, tuple[tuple[Any, ...], dict[str, Any], list[Any] | None]] = {}

    reporter.progress("verify", 0, total, "example inputs")
    result, expected = _run_case(session, ort_session, "example", example_sizes, session.inputs.args,
                                 session.inputs.kwargs, output_names, tolerances)
    cases.append(result)
    inputs["example"] = (session.inputs.args, dict(session.inputs.kwargs), expected)
    swept: dict[str, list[int]] = {g.label: [g.example] for g in groups}
    for i, plan in enumerate(plans, start=1):
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
            cases.append(CaseResult(plan.name, plan.sizes, "error", error=f"inputs: {first_line(exc)}", changed=changed, outside_obtained=outside))
            continue
        result, expected = _run_case(session, ort_session, plan.name, plan.sizes, args, kwargs, output_names, tolerances)
        cases.append(replace(result, changed=changed, outside_obtained=outside))
        inputs[plan.name] = (args, kwargs, expected)
        for label, size in plan.sizes:
            if size not in swept[label]:
                swept[label].append(size)
    groups = tuple(replace(g, sizes=tuple(swept[g.label])) for g in groups)
    for i, edge in enumerate(edge_cases, start=len(plans) + 1):
        reporter.progress("verify", i, total, edge.name)
        try:
            args, kwargs = edge_value_inputs(session, edge)
        except Exception as exc:  # noqa: BLE001
            cases.append(CaseResult(edge.name, example_sizes, "error", error=f"inputs: {first_line(exc)}", edge=edge))
            continue
        result, expected = _run_case(session, ort_session, edge.name, example_sizes, args, kwargs, output_names, tolerances)
        cases.append(replace(result, edge=edge))
        inputs[edge.name] = (args, kwargs, expected)

    divergence = None
    training = _training_modules(session.model)
    if locate and not training:  # in training mode the cause is known: no node to blame
        wrong = next((c for c in cases if c.status == "fail"), None)
        if wrong is not None:
            reporter.progress("verify", total, total, f"locating the first divergent node of {wrong.name}")
            args, kwargs, expected = inputs[wrong.name]
            try:
                divergence = first_divergence(session, wrong.name, args, kwargs, expected or [], tolerances=tolerances)
            except Exception as exc:  # noqa: BLE001
                divergence = Divergence(wrong.name, "unknown", f"could not locate: {first_line(exc)}")
    findings = _findings(cases, groups, contract, session, divergence, named)
    if divergence is not None and divergence.stage == "onnx":
        findings = _with_tie_cause(findings, session, divergence, inputs[divergence.case][:2])
    if training:
        findings.insert(0, _training_finding(training))
    failed = any(not c.ok and c.status != "eager_error" for c in cases) or not contract.ok or bool(training)
    unverified = any(f.kind in ("not_verified", "vacuous") for f in findings)
    reporter.progress("verify", total, total, "done")
    overrides = {} if isinstance(tolerances, Tolerance) else dict(tolerances or {})
    merged = {dtype: tolerance_for(dtype, tolerances) for dtype in {**DEFAULT_TOLERANCES, **overrides}}
    runs = keep_case_runs(session.model, inputs, first=[c.name for c in cases if not c.ok])
    return VerifyResult(
        "failed" if failed else "not_verified" if unverified else "passed",
        tuple(cases),
        groups,
        contract,
        tuple(findings),
        divergence,
        MappingProxyType(merged),
        time.perf_counter() - start,
        case_runs=runs,
    )
