"""Dim warnings: axes asked to be dynamic that torch cannot keep dynamic, known before export."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..axis import Axis
from ..dims import AUTO, Dim, DimSpec
from ..compat import size_oblivious_available

if TYPE_CHECKING:
    from ..inputs import BoundInputs


class DimPolicyWarning(UserWarning):
    """An axis asked to be dynamic that torch cannot keep dynamic."""


@dataclass(frozen=True)
class DimWarning:
    input: str
    axis: int
    message: str
    hint: str

    @property
    def axis_key(self) -> Axis:
        """The warned :class:`~exporter.axis.Axis` (``input``, ``axis``)."""
        return Axis(self.input, self.axis)

    def __str__(self) -> str:
        return f"{self.axis_key.label}: {self.message}; fix: {self.hint}"


def dim_warnings(spec: DimSpec, bound: BoundInputs) -> tuple[DimWarning, ...]:
    """Axes the spec asks to be dynamic that torch cannot keep dynamic, before any export:
    a named Dim whose max is below 2 (torch rejects the range), and, on a torch without
    size-oblivious capture, a size-0/1 example (torch would specialize it)."""
    oblivious = size_oblivious_available()
    out = []
    for entry in spec:
        example = bound.leaf(entry.path).shape[entry.axis]
        policy = entry.policy
        if isinstance(policy, Dim) and policy.max is not None and policy.max < 2:
            out.append(
                DimWarning(
                    entry.path, entry.axis,
                    f"{policy!r} allows only sizes up to {policy.max}; torch.export needs max >= 2 "
                    "for a dynamic dim and rejects this range",
                    f"make the axis STATIC, or use Dim({policy.name!r}, max=2) or more",
                )
            )
        elif not oblivious and example in (0, 1):
            out.append(
                DimWarning(
                    entry.path, entry.axis,
                    f"the example size is {example} and this torch cannot capture size-obliviously: "
                    f"torch.export specializes it to {example}"
                    + (" (and rejects a dynamic request)" if policy is not AUTO else ""),
                    "pass an example with size >= 2 on this axis",
                )
            )
    return tuple(out)
