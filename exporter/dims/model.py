"""The policy model, data only: Policy (AUTO / STATIC / DYNAMIC), Dim, Name, Derived and
AxisEntry (one axis and its policy). :class:`~exporter.dims.spec.DimSpec`, which parses and
renders them, is built on top in :mod:`exporter.dims.spec`."""

from __future__ import annotations

import enum
import keyword
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Union

from ..axis import Axis
from ..errors import SpecError


class Policy(enum.Enum):
    AUTO = "auto"
    STATIC = "static"
    DYNAMIC = "dynamic"

    def __repr__(self) -> str:
        return self.name


AUTO = Policy.AUTO
STATIC = Policy.STATIC
DYNAMIC = Policy.DYNAMIC


@dataclass(frozen=True)
class Dim:
    """A named dynamic dim with an optional inclusive range."""

    name: str
    min: int | None = None
    max: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.isidentifier() or keyword.iskeyword(self.name):
            raise SpecError(
                f"dim name {self.name!r} is not a Python identifier",
                hint="use a name such as 'batch' or 'seq_len' (letters, digits, underscores)",
            )
        for bound in ("min", "max"):
            value = getattr(self, bound)
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise SpecError(
                    f"Dim {self.name!r}: {bound}={value!r} must be a non-negative int or None",
                    hint=f"Dim({self.name!r}, min=1, max=4096)",
                )
        if self.min == 0:  # sizes are never negative: min=0 is no bound (and equals Dim(name))
            object.__setattr__(self, "min", None)
        if self.min is not None and self.max is not None and self.min > self.max:
            raise SpecError(
                f"Dim {self.name!r}: min={self.min} is greater than max={self.max}",
                hint=f"swap them: Dim({self.name!r}, min={self.max}, max={self.min})",
            )
        if self.max is not None and self.max <= (self.min or 0):
            # torch.export.Dim needs max > min: a range with one size is a static dim.
            raise SpecError(
                f"Dim {self.name!r}: min={self.min or 0} and max={self.max} allow a single size, "
                "which is a static dim, not a dynamic one",
                hint=f"use STATIC (or the int {self.max}) for that axis, "
                f"or widen the range: Dim({self.name!r}, min={self.min or 0}, max={(self.min or 0) + 1})"
                if self.max == (self.min or 0)
                else f"Dim({self.name!r}, max={self.max})",
            )

    def contains(self, size: int) -> bool:
        return (self.min is None or size >= self.min) and (self.max is None or size <= self.max)

    # torch's derived dims: Dim("dx") + 1, 2 * Dim("dx")
    def __add__(self, offset: int) -> Derived:
        return _derived(self, 1, offset)

    def __sub__(self, offset: int) -> Derived:
        return _derived(self, 1, -offset)

    def __mul__(self, scale: int) -> Derived:
        return _derived(self, scale, 0)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        bounds = "".join(
            f", {k}={v}" for k, v in (("min", self.min), ("max", self.max)) if v is not None
        )
        return f"Dim({self.name!r}{bounds})"


@dataclass(frozen=True, repr=False)
class Name(Dim):
    """A dim name as ``torch.onnx.export`` reads a string (``{0: "seq"}``, ``dynamic_axes``):
    dynamic (``Dim.DYNAMIC`` to torch), named ``seq`` in the ONNX model, and bounded by the
    model's guards: a guard that only bounds it (``seq <= 128``, ``seq != 1``) narrows its
    range instead of failing. Axes with one name share one ONNX ``dim_param`` and move
    together when verified, as torch.onnx users expect (torch ties their symbols only when
    the model's code equates them). A :class:`Dim` object is strict instead: a guard that
    narrows its range rejects the export, with a fix. A name has no bounds of its own."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.min is not None or self.max is not None:
            raise SpecError(
                f"the dim name {self.name!r} cannot carry bounds",
                hint=f"use a Dim for a range: Dim({self.name!r}, min={self.min or 0}, max={self.max})",
            )

    def __repr__(self) -> str:
        return repr(self.name)


@dataclass(frozen=True)
class Derived:
    """An axis whose size is ``scale * root + offset`` for a named :class:`Dim` ``root``
    (torch's derived dims: ``2 * dx``, ``dx + 1``). Write it as torch does,
    ``Dim("dx") * 2 + 1``, or give torch's ``2 * dx``."""

    root: Dim
    scale: int = 1
    offset: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.root, Dim) or isinstance(self.root, Name):
            raise SpecError(
                f"a derived dim needs a Dim as its root, not {self.root!r}",
                hint="dx = Dim('dx'); then use dx + 1 or 2 * dx",
            )
        if not isinstance(self.scale, int) or not isinstance(self.offset, int) or self.scale < 1:
            raise SpecError(
                f"derived dim {self.root.name}: scale={self.scale!r}, offset={self.offset!r} must be ints, scale >= 1",
                hint=f"e.g. 2 * {self.root.name} + 1",
            )

    @property
    def name(self) -> str:
        return repr(self)

    def size(self, root_size: int) -> int:
        return self.scale * root_size + self.offset

    def root_size(self, size: int) -> int | None:
        """The root's size for an axis of ``size``, None if none gives it."""
        base, rest = divmod(size - self.offset, self.scale)
        return base if rest == 0 else None

    def __add__(self, offset: int) -> Derived:
        return Derived(self.root, self.scale, self.offset + offset)

    def __sub__(self, offset: int) -> Derived:
        return Derived(self.root, self.scale, self.offset - offset)

    def __mul__(self, scale: int) -> Derived:
        return Derived(self.root, self.scale * scale, self.offset * scale)

    __rmul__ = __mul__

    def __repr__(self) -> str:
        text = self.root.name if self.scale == 1 else f"{self.scale}*{self.root.name}"
        if self.offset:
            text += f" {'+' if self.offset > 0 else '-'} {abs(self.offset)}"
        return text


def _derived(dim: Dim, scale: int, offset: int) -> Derived:
    return Derived(dim, scale, offset)


AxisPolicy = Union[Policy, Dim, Derived]


def default_dim_name(path: str, axis: int | None = None) -> str:
    """The name of an input axis's dim when the user gave none: ``x_dim0``,
    ``cache_0_key_dim2`` (``<input>_dim`` for a whole input). Always a valid identifier; the
    same for the spec, the inferred specs and the ONNX ``dim_param``."""
    name = re.sub(r"\W", "_", path) + (f"_dim{axis}" if axis is not None else "_dim")
    return name if name.isidentifier() and not keyword.iskeyword(name) else f"d_{name}"


@dataclass(frozen=True)
class AxisEntry:
    path: str
    axis: int
    policy: AxisPolicy

    @property
    def axis_key(self) -> Axis:
        """This entry's :class:`~exporter.axis.Axis` (``path``, ``axis``)."""
        return Axis(self.path, self.axis)


def named_dims(entries: Iterable[AxisEntry]) -> dict[str, Dim]:
    """Every named dim of ``entries`` by name, the roots of derived dims included."""
    out: dict[str, Dim] = {}
    for e in entries:
        dim = e.policy.root if isinstance(e.policy, Derived) else e.policy
        if isinstance(dim, Dim):
            out.setdefault(dim.name, dim)
    return out
