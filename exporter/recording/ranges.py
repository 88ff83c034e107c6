"""Per axis, the sizes a model received while recorded next to the range its export accepts,
and the recorded calls that fall outside it (what the workbench's Dims tab shows)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..presentation import Presentable
from ..shapes.outcomes import range_text
from .groups import CallGroup

if TYPE_CHECKING:
    from ..session import Session

__all__ = ["AxisRange", "RangeReport", "compare_ranges"]


@dataclass(frozen=True)
class AxisRange:
    """One input axis: observed sizes (``min``, ``max`` over the recorded calls) and the range
    the exported model accepts (``exported_min``/``exported_max``, None when unbounded or
    unknown; ``exported`` says which: ``dynamic``, ``static``, ``failed`` or ``not run``).
    ``outside`` lists the recorded calls (by index) whose size the export does not accept,
    ``outside_sizes`` their sizes on this axis (in the same order); ``sizes`` every recorded
    call's size on this axis, in call order."""

    path: str
    axis: int
    observed: tuple[int, int]
    proposed: str
    exported: str
    exported_min: int | None
    exported_max: int | None
    outside: tuple[int, ...] = ()
    outside_sizes: tuple[int, ...] = ()
    sizes: tuple[int, ...] = ()

    @property
    def label(self) -> str:
        """``x.0``: the input leaf and the axis."""
        return f"{self.path}.{self.axis}"

    @property
    def accepted_text(self) -> str:
        """The range the export accepts, as the Dims rows write it: ``[2, inf]``; a static
        axis ``[4, 4]``; "" when the export did not say (failed, not run)."""
        if self.exported == "static":
            return f"[{self.exported_min}, {self.exported_max}]"
        return range_text(self.exported_min, self.exported_max) if self.exported == "dynamic" else ""

    @property
    def outside_lines(self) -> tuple[str, ...]:
        """One line per recorded call outside the range: ``call 0: x.0 = 1, outside [2, inf]``."""
        return tuple(f"call {index}: {self.label} = {size}, outside {self.accepted_text}"
                     for index, size in zip(self.outside, self.outside_sizes, strict=True))

    @property
    def exported_text(self) -> str:
        """The export's result for this axis in one phrase: ``dynamic [2, inf]``, ``static 16``,
        or why there is none (``failed``, ``not run``, ``not exported``)."""
        if self.exported not in ("dynamic", "static"):
            return self.exported
        if self.exported == "static":
            return f"static {self.exported_min}"
        return f"dynamic {self.accepted_text}"  # as the Dims rows write it: dynamic [2, inf]


@dataclass(frozen=True, repr=False)
class RangeReport(Presentable):
    """Every axis of a recorded group against an export of it."""

    group: str
    axes: tuple[AxisRange, ...]

    @property
    def outside_calls(self) -> tuple[int, ...]:
        """The recorded calls some axis of which the export does not accept."""
        return tuple(sorted({index for axis in self.axes for index in axis.outside}))

    @property
    def outside_lines(self) -> tuple[str, ...]:
        """Every recorded call an axis of which the export does not accept, named with the size
        and the range: ``call 0: x.0 = 1, outside [2, inf]`` (by call, then axis)."""
        lines = [(index, order, line) for order, axis in enumerate(self.axes)
                 for index, line in zip(axis.outside, axis.outside_lines, strict=True)]
        return tuple(line for _, _, line in sorted(lines))


def compare_ranges(group: CallGroup, session: Session) -> RangeReport:
    """``group``'s observed sizes against the ranges ``session`` obtained (``session.dims``).
    Axes that share one ONNX dim (one name: ``input_ids.0`` and ``attention_mask.0`` are both
    ``batch``) read one range, the one every axis of it was exported for (torch may bound one
    axis's symbol, ``at least 2`` from a size-oblivious guard, and not another's)."""
    outcomes = {(o.input, o.axis): o for o in session.dims}
    shared: dict[str, tuple[int | None, int | None]] = {}
    for o in outcomes.values():
        if o.obtained == "dynamic" and o.dim and o.dim.isidentifier():
            low, high = shared.get(o.dim, (o.min, o.max))
            lows = [v for v in (low, o.min) if v is not None]
            highs = [v for v in (high, o.max) if v is not None]
            shared[o.dim] = (max(lows) if lows else None, min(highs) if highs else None)
    axes = []
    for axis in group.axes:
        outcome = outcomes.get((axis.path, axis.axis))
        if outcome is None or outcome.obtained not in ("dynamic", "static"):
            state = "not exported" if outcome is None else outcome.obtained
            axes.append(AxisRange(axis.path, axis.axis, axis.observed, axis.policy, state, None, None,
                                  sizes=axis.sizes))
            continue
        low, high = shared.get(outcome.dim or "", (outcome.min, outcome.max)) if outcome.dynamic else (
            outcome.min, outcome.max)
        outside = tuple(
            (call.index, size) for call, size in zip(group.calls, axis.sizes, strict=True)
            if (low is not None and size < low) or (high is not None and size > high)
        )
        axes.append(AxisRange(axis.path, axis.axis, axis.observed, axis.policy, outcome.obtained, low, high,
                              tuple(index for index, _ in outside), tuple(size for _, size in outside), axis.sizes))
    return RangeReport(group.name, tuple(axes))
