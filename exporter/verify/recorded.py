"""The ONNX model on recorded calls, against the outputs eager PyTorch returned while they were
recorded (:func:`exporter.record`): the ``check_recorded`` analysis. It reads a group of calls
through :class:`RecordedCalls`, so nothing here imports the recorder."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ..errors import Failure, Status
from ..presentation import Presentable
from .tolerance import OutputCheck, Tolerance, compare

__all__ = ["RecordedCall", "RecordedCalls", "RecordedCheck", "check_recorded"]


class RecordedCall(Protocol):
    """One recorded call: its inputs and the outputs eager PyTorch returned."""

    @property
    def index(self) -> int: ...

    @property
    def intact(self) -> bool:
        """False when a kept tensor was written in place after the call was recorded."""
        ...

    def inputs(self) -> tuple[tuple[Any, ...], dict[str, Any]]: ...

    def output_tensors(self) -> list[Any]: ...


class RecordedCalls(Protocol):
    """A group of recorded calls (:class:`exporter.recording.CallGroup`)."""

    @property
    def name(self) -> str: ...

    @property
    def calls(self) -> Sequence[RecordedCall]: ...


class RunsOnnx(Protocol):
    """What the check runs: the exported model (a :class:`~exporter.Session`)."""

    @property
    def model_proto(self) -> Any: ...

    def run_onnx(self, *args: Any, **kwargs: Any) -> list[Any]: ...


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
    failure: Failure | None = None  # a call onnxruntime refuses is a skipped call, not a failure of the check
    seconds: float = 0.0

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
    def status(self) -> Status:
        """``ok`` when every recorded call was compared and agrees; ``failed`` when an output
        differs or onnxruntime refused a call; ``skipped`` when some calls could not be compared."""
        if self.failed or self.refused:
            return Status.FAILED
        return Status.OK if self.ok else Status.SKIPPED

    @property
    def refused(self) -> tuple[tuple[int, str], ...]:
        """``(call index, reason)`` of the calls onnxruntime refused to run (a failure)."""
        return tuple((index, reason) for index, reason in self.skipped if reason.startswith(_REFUSED))

    @property
    def verdict(self) -> str:
        """One sentence that states only what was compared, and what failed: the first call
        whose output differs (and how), the first call onnxruntime refused (and why)."""
        outputs = len(self.checks) // max(self.compared, 1)
        text = (f"ONNX vs recorded eager outputs: {self.compared} of {self.calls} recorded {self.group} calls "
                f"compared ({outputs} outputs each)")
        failed = self.failed
        if failed:
            bad = {check.case for check in failed}
            text += f", {len(bad)} differ (first, {failed[0].case}: {failed[0].describe()})"
        elif self.compared:
            text += ", all within tolerance" if not self.skipped else ", each compared one within tolerance"
        refused = self.refused
        if refused:
            index, reason = refused[0]
            text += f"; onnxruntime refused {len(refused)} (first, call {index}: {_first_line(reason[len(_REFUSED):])})"
        left = len(self.skipped) - len(refused)
        if left:
            why = next(reason for reason in (r for _, r in self.skipped) if not reason.startswith(_REFUSED))
            text += f"; {left} not compared ({why})"
        return text


_REFUSED = "onnxruntime raised"  # how a call onnxruntime refused is recorded in ``skipped``


def _first_line(text: str, limit: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _output_names(session: RunsOnnx, count: int) -> list[str]:
    names = [value.name for value in session.model_proto.graph.output]
    return names if len(names) == count else [f"output.{i}" for i in range(count)]


def check_recorded(
    session: RunsOnnx,
    group: RecordedCalls,
    tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
    left_out: tuple[str, ...] = (),
) -> RecordedCheck:
    """Run the ONNX model on every recorded call of ``group`` and compare its outputs with the
    recorded ones (never re-runs eager PyTorch). Never raises for a wrong model."""
    start = time.perf_counter()
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
            skipped.append((call.index, f"{_REFUSED} {type(exc).__name__}: {exc}"))
            continue
        expected = call.output_tensors()
        names = _output_names(session, len(expected))
        if len(actual) != len(expected):
            checks.append(OutputCheck(case, "outputs", Status.SHAPE_MISMATCH, expected_shape=(len(expected),),
                                      actual_shape=(len(actual),), dtype="output count"))
            continue
        checks.extend(compare(case, name, got, want, tolerances)
                      for name, got, want in zip(names, actual, expected, strict=True))
    return RecordedCheck(group.name, len(group.calls), tuple(checks), tuple(skipped),
                         seconds=time.perf_counter() - start)


