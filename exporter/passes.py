"""The optimizer's passes as an analysis: the search for the pass after which onnxruntime
disagrees with PyTorch (``session.bisect_passes()``).

The optimize stage (:mod:`exporter.pipeline.optimize`) runs the passes one by one and records
them (:mod:`exporter.pipeline.pass_records`: ``session.passes``, each pass's ``diff()``);
:func:`bisect_passes` replays prefixes of those records from the translated model and runs each
in onnxruntime against the eager outputs, by binary search.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .errors import Failure, Status, first_line
from .pipeline.optimize import replay
from .pipeline.pass_records import OptimizerPasses, PassRecord
from .presentation import Presentable

if TYPE_CHECKING:
    import onnx_ir as ir

    from .artifacts import ExportArtifacts

__all__ = ["Bisection", "Probe", "bisect_passes"]


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
    failure: Failure | None = None  # the search itself never fails: a probe that cannot run is a finding
    seconds: float = 0.0

    @property
    def verify_runs(self) -> int:
        return len(self.probes)

    @property
    def status(self) -> Status:
        """``fail``: a pass is to blame; ``pass``: the case agrees after every pass; ``warning``:
        the case fails, but not because of a pass (the translated model fails too)."""
        if self.culprit is not None:
            return Status.FAIL
        return Status.PASS if self.probes and self.probes[0].ok else Status.WARNING

    @property
    def fix(self) -> str:
        return f"ExportOptions(skip_passes=[{self.culprit.name!r}])" if self.culprit is not None else ""

    def to_frame(self) -> Any:
        import pandas as pd

        return pd.DataFrame([dataclasses.asdict(p) for p in self.probes], columns=["prefix", "after", "outcome", "detail"])


class _Checker:
    """Runs one case's inputs through the model after a prefix of the passes, against the
    eager outputs computed once."""

    def __init__(self, session: ExportArtifacts, args: tuple[Any, ...], kwargs: dict[str, Any], tolerances: Any) -> None:
        from .verify.eager import run_eager

        self.session, self.args, self.kwargs, self.tolerances = session, args, kwargs, tolerances
        self.expected = run_eager(session.model, args, kwargs, what="when called by bisect_passes")

    def __call__(self, model: ir.Model, prefix: int, after: str) -> Probe:
        import onnx_ir as ir

        from .ort_values import feeds
        from .ort_model import ort_inference_session
        from .verify.tolerance import compare

        try:
            ort = ort_inference_session(ir.to_proto(model).SerializeToString())
        except Exception as exc:  # noqa: BLE001 - a model onnxruntime refuses is the answer
            return Probe(prefix, after, "cannot load", first_line(exc))
        try:
            actual = ort.run(None, feeds(self.session, model, self.args, dict(self.kwargs)))
        except Exception as exc:  # noqa: BLE001
            return Probe(prefix, after, "run failed", first_line(exc))
        names = [v.name or f"#{i}" for i, v in enumerate(model.graph.outputs)]
        if len(actual) != len(self.expected):
            return Probe(prefix, after, "differs", f"{len(actual)} outputs, PyTorch gives {len(self.expected)}")
        for i, (got, want) in enumerate(zip(actual, self.expected)):
            check = compare("bisect", names[i] if i < len(names) else f"#{i}", got, want, self.tolerances)
            if not check.ok:
                return Probe(prefix, after, "differs", _check_text(check))
        return Probe(prefix, after, "agrees")


def _check_text(check: Any) -> str:
    try:
        return check.describe().split("; worst:")[0]
    except Exception:  # noqa: BLE001 - a summary line never fails the search
        return f"output {check.output!r}: {check.status}"


def bisect_passes(session: ExportArtifacts, passes: OptimizerPasses, translated: ir.Model, case: Any = None,
                  tolerances: Any = None) -> Bisection:
    """Binary search over the passes that changed the model for the first one after which
    ``case`` (None: the example inputs; or ``(args, kwargs)``) fails in onnxruntime. The
    model after each prefix is kept, so every pass runs once per prefix it ends. Verify runs:
    1 (after all passes) + ceil(log2(changing passes + 1))."""
    start = time.perf_counter()
    result = _bisect(session, passes, translated, case, tolerances)
    return dataclasses.replace(result, seconds=time.perf_counter() - start)


def _bisect(session: ExportArtifacts, passes: OptimizerPasses, translated: ir.Model, case: Any,
            tolerances: Any) -> Bisection:
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
    cache: dict[int, ir.Model] = {0: translated}

    def model_after(prefix: int) -> ir.Model:
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
