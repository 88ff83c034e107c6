"""One input axis, the key every table, chart, guard and sweep uses, and all its display forms.

An :class:`Axis` is an input's leaf path (``x``, ``cache.0.key``) and an axis index. Its
display forms come from here and nowhere else::

    Axis("x", 0).label    'x.shape[0]'   messages, guard expressions, dim group labels
    Axis("x", 0).dotted   'x.0'          table cells, chart rows and gids, --dynamic x.0=...
    str(Axis("x", 0))     'x.shape[0]'

:meth:`Axis.parse` reads any of them back (and an ``(input, axis)`` pair). ``Axis`` is a
``NamedTuple``: immutable, hashable, ordered by input then index, and equal to the plain
``(path, index)`` pair older code and user code pass, so ``("x", 0) in guard.axes`` holds.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

__all__ = ["Axis"]

_LABEL = re.compile(r"^(?P<path>.+)\.shape\[(?P<index>\d+)\]$")
_DOTTED = re.compile(r"^(?P<path>.+)\.(?P<index>\d+)$")
_FORMS = "'x.shape[0]', 'x.0' or ('x', 0)"


# The fields, declared apart: a field named ``index`` replaces ``tuple.index`` (the method), which
# the class form of NamedTuple reports as an incompatible override.
_AxisFields = NamedTuple("_AxisFields", [("path", str), ("index", int)])


class Axis(_AxisFields):
    """One axis of one tensor input: ``path`` is the input's leaf path, ``index`` the axis."""

    __slots__ = ()

    @property
    def label(self) -> str:
        """``x.shape[0]``: how messages and guard expressions name the axis."""
        return f"{self.path}.shape[{self.index}]"

    @property
    def dotted(self) -> str:
        """``x.0``: how tables, chart rows and the command line name the axis."""
        return f"{self.path}.{self.index}"

    def __str__(self) -> str:
        return self.label

    @classmethod
    def parse(cls, value: Any) -> Axis:
        """An :class:`Axis` from ``"x.shape[0]"``, ``"x.0"``, ``("x", 0)`` or an ``Axis``.

        The last dot-component of a dotted form is the axis (``cache.0.key.2`` is
        ``cache.0.key``, axis 2). Raises ``ValueError`` for anything else."""
        if isinstance(value, Axis):
            return value
        if isinstance(value, str):
            text = value.strip()
            match = _LABEL.match(text) or _DOTTED.match(text)
            if match is None:
                raise ValueError(f"{value!r} does not name an input axis; write {_FORMS}")
            return cls(match.group("path"), int(match.group("index")))
        if isinstance(value, (tuple, list)) and len(value) == 2:
            path, index = value
            if isinstance(path, str) and path and isinstance(index, int) and not isinstance(index, bool) and index >= 0:
                return cls(path, index)
        raise ValueError(f"{value!r} does not name an input axis; write {_FORMS}")

    @classmethod
    def of(cls, path: Any, index: int | None = None) -> Axis:
        """``Axis.of("x", 0)`` or ``Axis.of(<any form parse accepts>)``: for methods that take
        an axis either as ``(path, axis)`` arguments or as one key."""
        return cls.parse(path if index is None else (path, index))
