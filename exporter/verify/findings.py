"""Verify's findings, declared: each a small function of the :class:`VerifyFacts` (the cases
run, the dim groups, the contract, the first divergence), asked in the order of
:data:`FINDING_CHECKS`; :func:`findings_of` lists what they find."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Any

from ..artifacts import ExportArtifacts
from ..cases import DimGroup
from ..compat import train_mode_dependent_modules
from ..errors import Status, first_line
from ..shapes.baked import baked_case_cause, baked_constants_of
from .contract import ContractReport
from .divergence import Divergence
from .results import CaseResult, Finding
from .ties import Tie
from .values import EdgeValue, Explanation, explain

__all__ = ["FINDING_CHECKS", "VerifyFacts", "causes_text", "findings_of", "excuse_ties", "training_finding", "with_ties"]


@dataclass(frozen=True)
class VerifyFacts:
    """What the findings read: the cases run, the swept groups, the contract, the export, the
    first divergence, and the groups ``sizes=`` named (None: it was not given)."""

    cases: Sequence[CaseResult]
    groups: Sequence[DimGroup]
    contract: ContractReport | None
    session: ExportArtifacts
    divergence: Divergence | None = None
    named: frozenset[str] | None = None

    @cached_property
    def example(self) -> CaseResult | None:
        return next((c for c in self.cases if c.is_example), None)

    @cached_property
    def others(self) -> list[CaseResult]:
        """The swept cases (not the example, not an edge value)."""
        return [c for c in self.cases if not c.is_example and not c.is_edge_value]

    @cached_property
    def checked(self) -> list[CaseResult]:
        """The swept cases eager PyTorch could run."""
        return [c for c in self.others if c.status != "eager_error"]

    @cached_property
    def bad(self) -> list[CaseResult]:
        return [c for c in self.checked if not c.ok]


def causes_text(causes: Sequence[str], limit: int = 2) -> str:
    """The first ``limit`` guards behind a group, and how many more ``session.guards`` lists."""
    more = len(causes) - limit
    return "; ".join(causes[:limit]) + (f"; and {more} more guard(s) (session.guards)" if more > 0 else "")


_BREAKS_GUARD = "breaks guard"


def case_cause(case: CaseResult, groups: Sequence[DimGroup]) -> str | None:
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
        guards = f" ({causes_text(group.causes)})" if group.causes else ""
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
            parts.append(f"{group.label}: {causes_text(group.causes)}")
    return "; ".join(parts) or None


def wrong_at_example(facts: VerifyFacts) -> list[Finding]:
    """The ONNX model is wrong (or fails) at the example inputs."""
    example = facts.example
    if example is None or example.ok or example.status == "eager_error":
        return []
    return [Finding("wrong_at_example", f"wrong at the example size ({example.sizes_text}): {example.describe()}",
                    example.name, example.sizes)]


def sweep_coverage(facts: VerifyFacts) -> list[Finding]:
    """Nothing dynamic to sweep, or right at the example size only."""
    if not facts.groups:
        return [Finding("not_swept", "no dim was requested dynamic: checked at the example size only")]
    example = facts.example
    if example is not None and example.ok and facts.checked and len(facts.bad) == len(facts.checked):
        return [Finding("example_only", f"correct at the example size only ({example.sizes_text}): wrong or failing "
                                        "at every other size tried")]
    return []


def derived_dims(facts: VerifyFacts) -> list[Finding]:
    """Groups sized from others instead of swept on their own."""
    return [Finding("derived_dim", f"{group.derived_text}: every case sizes {group.label} from "
                                   f"{' and '.join(group.derived_from)} instead of sweeping it on its own "
                                   "(independent=True sweeps it alone)")
            for group in facts.groups if group.derived is not None]


def auto_static(facts: VerifyFacts) -> list[Finding]:
    """AUTO axes torch made static: not swept, as AUTO permits."""
    return [Finding(
        "auto_static",
        f"{group.axes_text}: AUTO let torch decide, and torch made it static at {group.example}; the ONNX "
        f"model accepts only that size (onnxruntime refuses others), as AUTO permits: not swept",
        cause=causes_text(group.causes) if group.causes else None,
        fix="mark it STATIC to say so, or request it dynamic (a name or a Dim) to learn which code pins it",
    ) for group in facts.groups if group.auto_static]


def static_in_onnx(facts: VerifyFacts) -> list[Finding]:
    """Axes requested dynamic that the ONNX model declares as numbers."""
    static = [(g, d) for g in facts.groups for (axis, d) in zip(g.axes, g.onnx_dims)
              if not g.auto_static and (isinstance(d, int) or (isinstance(d, str) and d.lstrip("-").isdigit()))]
    if not static:
        return []
    listed = ", ".join(sorted({f"{g.axes_text} (requested {g.requested}, ONNX dim {d!r})" for g, d in static}))
    return [Finding("static_in_onnx", f"dims declared dynamic but static in the ONNX model: {listed}")]


def wrong_at_sizes(facts: VerifyFacts) -> list[Finding]:
    """Each swept case that is wrong or fails, with its cause: a baked constant, a guard."""
    if not facts.bad:
        return []
    baked = baked_constants_of(facts.session)
    findings = []
    said: dict[tuple[str, str], str] = {}  # an error already given in full: the sizes it was given at
    for c in facts.bad:
        what = {"ort_error": "onnxruntime fails", "error": "could not build inputs"}.get(c.status, "wrong")
        axes = [axis for g in facts.groups if g.label in c.changed for axis in g.axes]
        cause = "; ".join(filter(None, (baked_case_cause(baked, axes, c.error), case_cause(c, facts.groups)))) or None
        key = c.error_key
        first = said.setdefault(key, c.sizes_text) if key is not None else c.sizes_text
        detail = c.describe() if first == c.sizes_text else f"the same error as at {first}"
        findings.append(Finding("wrong_at_size", f"{what} at size {c.sizes_text}: {detail}", c.name, c.sizes, cause))
    return findings


def refused_by_eager(facts: VerifyFacts) -> list[Finding]:
    """Sizes the module itself refuses, one finding per set of changed groups."""
    skipped: dict[tuple[str, ...], list[CaseResult]] = {}
    for c in facts.others:
        if c.status == "eager_error":
            skipped.setdefault(c.changed, []).append(c)
    findings = []
    for changed, cases in skipped.items():
        if len(changed) == 1:
            where = f"{changed[0]} = " + ", ".join(str(dict(c.sizes)[changed[0]]) for c in cases)
        else:
            where = "; ".join(c.sizes_text for c in cases)
        findings.append(Finding(
            "eager_error",
            f"not checked at {where}: {cases[0].error} (the module itself does not support "
            f"{'these sizes' if len(cases) > 1 else 'this size'})",
            cases[0].name, cases[0].sizes,
        ))
    return findings


def contract_findings(facts: VerifyFacts) -> list[Finding]:
    """Unified dims said once each, and the contract's errors other than a dim made static
    (which ``static_in_onnx`` and the cases say)."""
    contract = facts.contract
    if contract is None:
        return []
    unified = [c.message for c in contract.checks if c.check == "unified dims"]
    return ([Finding("unified_dims", message) for message in dict.fromkeys(unified)]
            + [Finding("contract", f"{check.subject}: {check.message}") for check in contract.errors
               if check.check != "dynamic is symbolic"])


def not_verified(facts: VerifyFacts) -> list[Finding]:
    """A dim group that no case compared at a size other than its example: the verdict must not
    say PASSED for it. Eager PyTorch raised at every other size tried, or none was tried. With
    ``sizes=`` (``named``: the groups it names), a group it leaves out is ``not_varied``: said
    plainly, not a failure (the caller chose the sizes)."""
    groups, named, example = facts.groups, facts.named, facts.example
    if example is not None and example.status == "eager_error":
        return [Finding("not_verified", f"eager PyTorch could not run the example inputs: {example.error}", example.name,
                        example.sizes, fix="check that the module runs on the example inputs")]
    findings = []
    others = facts.others
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


def vacuous(facts: VerifyFacts) -> list[Finding]:
    """Outputs whose every value is within the default ``atol`` of 0, named one by one (each
    compared at its own scale, see :class:`~exporter.verify.tolerance.Tolerance`, and passing
    there): at the tolerance's absolute slack an ONNX model returning zeros would pass them too,
    and values this small are what random weights over many layers leave (activations shrink
    to ~1e-29), so verify cannot call them verified: the result is ``not_verified``. Only
    outputs that passed in every case compared are named (one that fails at its own scale is
    wrong, and said so), and none under tolerances given (applied as given)."""
    peaks: dict[str, list[float]] = {}
    judged: set[str] = set()  # floating outputs compared with the default tolerance
    failed: set[str] = set()
    diffs: dict[str, float] = {}  # the largest difference per output
    for check in (o for c in facts.cases if c.compared for o in c.outputs):
        if check.peak is None or not check.relative_atol or check.tolerance is None or check.tolerance.atol <= 0:
            continue
        judged.add(check.output)
        diffs[check.output] = max(diffs.get(check.output, 0.0), check.max_abs or 0.0)
        if not check.ok:
            failed.add(check.output)
        if check.vacuous:
            peaks.setdefault(check.output, []).append(check.peak)
        else:
            peaks.setdefault(check.output, []).append(float("inf"))
    small = {name: max(values) for name, values in peaks.items() if name not in failed and max(values) < float("inf")}
    if not small:
        return []
    largest = max(small.values())
    seen = max(diffs[name] for name in small)
    why = ("at the absolute tolerance an ONNX model returning zeros would pass too, and values this small are what "
           "random weights over many layers leave")
    fix = ("verify with weights whose outputs are not ~0 (a trained checkpoint; random weights over many layers "
           "shrink activations towards 0), or give tolerances= for outputs meant to be this small")
    if len(small) == len(judged):
        return [Finding(
            "vacuous",
            f"every value compared is within atol of 0 (largest |expected| {largest:.2g} in {len(small)} output(s)): "
            f"{why}, so no floating-point output was verified (compared at their own scale, they match: largest difference {seen:.2g})",
            fix=fix, outputs=tuple(small),
        )]
    names = ", ".join(repr(name) for name in small)
    return [Finding(
        "vacuous",
        f"output(s) {names} not verified: every value is within atol of 0 (largest |expected| {largest:.2g}); {why} "
        f"(compared at their own scale, they match: largest difference {seen:.2g}); the other outputs are verified",
        fix=fix, outputs=tuple(small),
    )]


def tolerance_notes(facts: VerifyFacts) -> list[Finding]:
    """Elements that pass only thanks to the channel-scaled part of the tolerance, said once:
    differences small beside the values of their channel (at most ``scale`` of the largest,
    see :mod:`exporter.verify.channels`), on elements near zero."""
    cases = facts.cases
    scaled = [(c, o) for c in cases for o in c.outputs if o.ok and o.scaled_only and not o.rounding]
    if not scaled:
        return []
    count = sum(o.scaled_only for _, o in scaled)
    case, check = max(scaled, key=lambda pair: pair[1].max_abs or 0.0)
    scale = check.tolerance.output_scale if check.tolerance is not None else 0.0
    return [Finding(
        "tolerance",
        f"{count} element(s) in {len({c.name for c, _ in scaled})} case(s) differ by more than atol + rtol*|expected| "
        f"but within {scale:g} of the largest |value| in their channel ({check.tolerance}): float noise on "
        f"values near zero (largest |diff|: output {check.output!r} at {case.sizes_text or case.name}, "
        f"{check.max_abs:.3g})",
        case.name, case.sizes,
        fix="tolerances={'float32': Tolerance(rtol, atol, scale=0)} compares element by element without the scale",
    )]


def rounding_notes(facts: VerifyFacts) -> list[Finding]:
    """Outputs beyond the tolerance that passed as float32 rounding (:mod:`.rounding`), said once."""
    rounded = [(c, o) for c in facts.cases for o in c.outputs if o.ok and o.rounding]
    if not rounded:
        return []
    case, check = max(rounded, key=lambda pair: pair[1].max_abs or 0.0)
    theirs, own = check.rounding or (0.0, 0.0)
    return [Finding(
        "rounding",
        f"{len(rounded)} output(s) in {len({c.name for c, _ in rounded})} case(s) differ from eager PyTorch beyond "
        f"{check.tolerance}, by float32 rounding the model amplifies (largest: output {check.output!r} at "
        f"{case.sizes_text or case.name}, |diff| {check.max_abs:.3g}): run in float64, eager float32 is {own:.3g} from "
        f"the exact outputs and onnxruntime {theirs:.3g}: rounding, not the export, so they pass",
        case.name, case.sizes,
    )]


def model_changes_itself(facts: VerifyFacts) -> list[Finding]:
    """The module changed its own state when run (each change was put back after the run)."""
    changed = [c for c in facts.cases if c.state_changes]
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


def edge_value_findings(facts: VerifyFacts) -> list[Finding]:
    """Failing edge-value cases in plain words, with the fix when known: one finding per
    input and explanation (``attention_mask`` all False and one row all False fail for one
    reason); one per case the module itself refuses."""
    session, divergence = facts.session, facts.divergence
    findings: list[Finding] = []
    grouped: dict[tuple[Any, ...], list[tuple[CaseResult, EdgeValue]]] = {}
    explained: dict[tuple[Any, ...], Explanation] = {}
    example_wrong = any(c.name == "example" and c.status == "fail" for c in facts.cases)
    for c in facts.cases:
        if not c.is_edge_value or c.ok or c.edge is None:
            continue
        if c.status == "eager_error":
            findings.append(Finding(
                "eager_error", f"not checked with {c.name}: {c.error} (the module itself does not accept this value)",
                c.name, c.sizes,
            ))
            continue
        if example_wrong and c.status == "fail":  # wrong with the example's own values: not this value's doing
            explanation = Explanation("onnxruntime differs from PyTorch as it does with the example's values",
                                      "the example itself is already wrong: see the first divergence")
        else:
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


def excuse_ties(cases: Sequence[CaseResult], ties: Mapping[str, Tie]) -> list[CaseResult]:
    """The cases, each one whose outputs differ only through indices picked among (near-)equal
    values (an excused :class:`~.ties.Tie`) passing: the ONNX model is as right as the op allows."""
    return [replace(c, status=Status.PASS) if c.status == "fail" and c.name in ties and ties[c.name].excused else c
            for c in cases]


def with_ties(findings: list[Finding], cases: Sequence[CaseResult], ties: Mapping[str, Tie]) -> list[Finding]:
    """The findings with what the ties say (:mod:`.ties`): a tie that is not excused is the
    likely cause of its case's finding; the excused ones are one ``tie`` finding, and a
    ``not_verified`` one when no other case compared what follows the pick."""
    def with_cause(finding: Finding) -> Finding:
        tie = ties.get(finding.case or "")
        if tie is None or tie.excused or finding.kind not in ("wrong_at_example", "wrong_at_size", "wrong_at_value"):
            return finding
        return replace(finding, cause="; ".join(filter(None, (tie.cause, finding.cause))))

    shown = [with_cause(f) for f in findings]
    excused = [ties[c.name] for c in cases if c.name in ties and ties[c.name].excused]
    if not excused:
        return shown
    first = excused[0]
    where = ", ".join(next(c.sizes_text or c.name for c in cases if c.name == t.case) for t in excused)
    shown.append(Finding("tie", f"{len(excused)} case(s) ({where}) differ from eager PyTorch only from where "
                                f"{first.selection.op} picks among near-equal values: not counted as wrong",
                         first.case, cause=first.cause))
    if not any(c.ok and c.compared and c.name not in ties for c in cases):
        shown.append(Finding("not_verified", f"nothing after {first.selection.op} was compared: in every case it picks "
                                             "among near-equal values and PyTorch and onnxruntime pick differently",
                             first.case))
    return shown


def training_finding(training: list[tuple[str, Any]]) -> Finding:
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




FINDING_CHECKS: tuple[Callable[[VerifyFacts], Iterable[Finding]], ...] = (
    wrong_at_example, sweep_coverage, derived_dims, auto_static, static_in_onnx, wrong_at_sizes, refused_by_eager,
    tolerance_notes, rounding_notes, vacuous, not_verified, model_changes_itself, edge_value_findings, contract_findings,
)
"""Verify's findings, in the order a result lists them."""


def findings_of(facts: VerifyFacts) -> list[Finding]:
    return [finding for check in FINDING_CHECKS for finding in check(facts)]
