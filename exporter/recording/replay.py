"""Export a group of recorded calls and check the ONNX model on those very calls."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..presentation import Presentable
from ..verify.tolerance import OutputCheck, Tolerance, compare
from .groups import CallGroup
from .ranges import RangeReport, compare_ranges

if TYPE_CHECKING:
    from ..session import Session
    from ..verify import VerifyResult

__all__ = ["RecordedCheck", "RecordedExport", "check_recorded", "export_group"]


@dataclass(frozen=True, repr=False)
class RecordedCheck(Presentable):
    """ONNX (onnxruntime) outputs against the outputs eager PyTorch returned while recorded.

    Attributes:
        group: the group's name.
        checks: one :class:`~exporter.verify.tolerance.OutputCheck` per output per call
            (case ``call 3``).
        skipped: ``(call index, reason)`` of the calls not compared.
    """

    group: str
    calls: int
    checks: tuple[OutputCheck, ...] = ()
    skipped: tuple[tuple[int, str], ...] = ()

    @property
    def compared(self) -> int:
        return len({check.case for check in self.checks})

    @property
    def failed(self) -> tuple[OutputCheck, ...]:
        return tuple(check for check in self.checks if not check.ok)

    @property
    def ok(self) -> bool:
        return not self.skipped and self.compared == self.calls and not self.failed

    @property
    def verdict(self) -> str:
        """One sentence that states only what was compared."""
        outputs = len(self.checks) // max(self.compared, 1)
        text = (f"ONNX vs recorded eager outputs: {self.compared} of {self.calls} recorded {self.group} calls "
                f"compared ({outputs} outputs each)")
        bad = {check.case for check in self.failed}
        text += f", {len(bad)} differ" if bad else ", all within tolerance"
        if self.skipped:
            text += f"; {len(self.skipped)} not compared"
        return text


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

    @property
    def ok(self) -> bool:
        return self.recorded.ok and (self.sweep is None or self.sweep.ok)

    @property
    def ranges(self) -> RangeReport:
        """Per axis, the sizes recorded next to the range the export accepts."""
        return compare_ranges(self.group, self.session)


def _output_names(session: Session, count: int) -> list[str]:
    names = [value.name for value in session.model_proto.graph.output]
    return names if len(names) == count else [f"output.{i}" for i in range(count)]


def check_recorded(
    session: Session,
    group: CallGroup,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    left_out: tuple[str, ...] = (),
) -> RecordedCheck:
    """Run the ONNX model on every recorded call of ``group`` and compare its outputs with the
    recorded ones (never re-runs eager PyTorch). Never raises for a wrong model."""
    checks: list[OutputCheck] = []
    skipped: list[tuple[int, str]] = []
    for call in group.calls:
        case = f"call {call.index}"
        if not call.intact:
            skipped.append((call.index, "a kept tensor was written in place after it was recorded"))
            continue
        args, kwargs = call.inputs()
        kwargs = {name: value for name, value in kwargs.items() if name not in left_out}
        try:
            actual = session.run_onnx(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - a failed run is this call's verdict
            skipped.append((call.index, f"onnxruntime raised {type(exc).__name__}: {exc}"))
            continue
        expected = call.output_tensors()
        names = _output_names(session, len(expected))
        if len(actual) != len(expected):
            checks.append(OutputCheck(case, "outputs", "shape_mismatch", expected_shape=(len(expected),),
                                      actual_shape=(len(actual),), dtype="output count"))
            continue
        checks.extend(compare(case, name, got, want, tolerances)
                      for name, got, want in zip(names, actual, expected, strict=True))
    return RecordedCheck(group.name, len(group.calls), tuple(checks), tuple(skipped))


def export_group(
    model: Any,
    group: CallGroup,
    *,
    sweep: bool = True,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    **options: Any,
) -> RecordedExport:
    """Export ``model`` with the group's proposed spec (``dynamic_shapes`` in ``options``
    replaces it) and its :attr:`~CallGroup.example` call, then check it on the recorded calls
    and, when ``sweep``, with ``session.verify()``. Raises the export's
    :class:`~exporter.ExportError` when a stage fails."""
    from ..api import export
    from ..options import ExportOptions

    spec = options.pop("dynamic_shapes", group.dynamic_shapes)
    args, kwargs = group.example.inputs()
    left_out = tuple(_through_var_keyword(model, kwargs))
    kwargs = {name: value for name, value in kwargs.items() if name not in left_out}
    session = export(model, *args, options=ExportOptions(dynamic_shapes=spec, **options), **kwargs)
    recorded = check_recorded(session, group, tolerances, left_out)
    swept = session.verify(tolerances=tolerances) if sweep else None
    return RecordedExport(group, session, recorded, swept, left_out)


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
