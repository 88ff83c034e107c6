"""Export a group of recorded calls and check the ONNX model on those very calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..presentation import Presentable
from ..verify.recorded import RecordedCheck, check_recorded
from ..verify.tolerance import Tolerance
from .groups import CallGroup
from .ranges import RangeReport, compare_ranges

if TYPE_CHECKING:
    from ..session import Session
    from ..verify import VerifyResult

__all__ = ["RecordedCheck", "RecordedExport", "check_recorded", "export_group", "merged_spec"]


@dataclass(frozen=True, repr=False)
class RecordedExport(Presentable):
    """The session exported from a recorded group, and its two verdicts: on the recorded
    calls themselves (:attr:`recorded`) and over the usual size sweep (:attr:`sweep`, None
    when not asked for)."""

    group: CallGroup
    session: Session
    recorded: RecordedCheck
    sweep: VerifyResult | None = None
    left_out: tuple[str, ...] = ()  # constant keyword inputs not passed (see export_group)
    bounded: tuple[str, ...] = ()  # torch's ranges applied to the proposal: "past = Dim('past', max=4095)"

    @property
    def ok(self) -> bool:
        return self.recorded.ok and (self.sweep is None or self.sweep.ok)

    @property
    def ranges(self) -> RangeReport:
        """Per axis, the sizes recorded next to the range the export accepts."""
        return compare_ranges(self.group, self.session)


def export_group(
    model: Any,
    group: CallGroup,
    *,
    sweep: bool = True,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    **options: Any,
) -> RecordedExport:
    """Export ``model`` with the group's proposed spec (``dynamic_shapes`` in ``options``
    widens or narrows it axis by axis: see :func:`merged_spec`) and its
    :attr:`~CallGroup.example` call, then check it on the recorded calls and, when ``sweep``,
    with ``session.verify()``. When capture rejects the spec only because the model's guards
    bound a proposed dim (a sliding window's ``past <= 4095``), the bound is applied (torch's
    suggested range) and said in :attr:`RecordedExport.bounded`. Raises the export's
    :class:`~exporter.ExportError` when a stage fails."""
    from ..inputs import bind_inputs
    from ..options import ExportOptions
    from ..session import Session

    args, kwargs = group.example.inputs()
    left_out = tuple(_through_var_keyword(model, kwargs))
    kwargs = {name: value for name, value in kwargs.items() if name not in left_out}
    spec = merged_spec(group.dynamic_shapes, options.pop("dynamic_shapes", None), bind_inputs(model, args, kwargs))
    session = Session(model, args, kwargs, ExportOptions(dynamic_shapes=spec, **options))
    session, bounded = _bounded_by_guards(session)
    session.run()
    session.raise_for_status()
    recorded: RecordedCheck = session.analyze("check_recorded", group=group, tolerances=tolerances, left_out=left_out)
    swept = session.verify(tolerances=tolerances) if sweep else None
    return RecordedExport(group, session, recorded, swept, left_out, bounded)


def merged_spec(proposal: Any, given: Any, bound: Any) -> Any:
    """The proposal with ``given`` (any ``dynamic_shapes`` form) laid over it axis by axis: an
    axis ``given`` names takes its policy (``{"input_ids": {0: "batch"}}`` widens one axis and
    keeps the rest of the proposal); a ``Dim`` given under a proposed name (``Dim("past",
    max=64)``) replaces that dim everywhere, in derived axes too (``past + 1``)."""
    from ..dims import DimSpec
    from ..dims.parse import parse_dynamic_shapes

    if given is None:
        return proposal
    over = ({(e.path, e.axis): e.policy for e in given} if isinstance(given, DimSpec)
            else parse_dynamic_shapes(given, bound))
    return _laid_over(proposal, over, bound)


def _laid_over(proposal: Any, over: Mapping[tuple[str, int], Any], bound: Any) -> Any:
    from ..dims import Derived, Dim, DimSpec, Name
    from ..dims.parse import parse_dynamic_shapes
    from ..dims.spec import build

    value = ({(e.path, e.axis): e.policy for e in proposal} if isinstance(proposal, DimSpec)
             else parse_dynamic_shapes(proposal, bound))
    strict = {p.name: p for p in over.values() if isinstance(p, Dim) and not isinstance(p, Name)}
    for key, policy in value.items():
        if isinstance(policy, Derived) and policy.root.name in strict:
            value[key] = Derived(strict[policy.root.name], policy.scale, policy.offset)
        elif isinstance(policy, Dim) and policy.name in strict:
            value[key] = strict[policy.name]
    value.update(over)
    return build(bound, value)


def _bounded_by_guards(session: Session, rounds: int = 3) -> tuple[Session, tuple[str, ...]]:
    """``session`` with torch's suggested ranges applied while capture fails only on guards
    that bound a dim (``Dim('past', max=4095)``, also in the derived ``past + 1``), and those
    ranges; ``session`` unchanged when capture succeeds or a fix would do more than bound a dim."""
    bounded: list[str] = []
    for _ in range(rounds):
        if session.run("capture").status != "failed":
            break
        fixes = session.suggested_fixes
        if not fixes.fixes or any(fix.kind != "range" or fix.policy is None for fix in fixes):
            break
        over = {(axis.path, axis.index): fix.policy for fix in fixes for axis in fix.axes}
        try:
            spec = _laid_over(session.spec, over, session.inputs)
        except Exception:  # noqa: BLE001 - a fix that does not fit: the capture error stands
            break
        if spec == session.spec:
            break
        bounded.extend(fix.text.split("  #")[0] for fix in fixes)
        session = session.with_dims(spec)
    return session, tuple(bounded)


def _through_var_keyword(model: Any, kwargs: Mapping[str, Any]) -> list[str]:
    """The constant keyword inputs that reach ``forward`` through its ``**kwargs``
    (transformers' ``return_dict``): torch.export takes no dims when one is there, so they
    are left out of the export and of the replayed calls (the model's default applies)."""
    import inspect

    parameters = inspect.signature(model.forward).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return []
    return [name for name, value in kwargs.items()
            if name not in parameters and (value is None or isinstance(value, (bool, int, float, str)))]
