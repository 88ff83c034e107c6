"""From zoos to units: which (model, spec, options) a sweep runs."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

from .unit import Unit
from .zoo import Zoo, get_zoo, select, zoos_in

__all__ = ["IMPORT_ROW", "BrokenZoo", "ZooSpec", "import_error_line", "plan_units", "resolve_zoos"]

#: What ``zoos=`` accepts: a built-in or user zoo's name, the path of a ``.py`` file that
#: declares zoos, a :class:`~exporter.sweep.Zoo`, or a list of them.
ZooSpec = Union[str, Zoo, Sequence[Union[str, Zoo]]]


#: The model name of the row that stands for a zoo file that did not import.
IMPORT_ROW = "(import)"


@dataclass(frozen=True)
class BrokenZoo:
    """A zoo file that raised when imported: ``error`` says where, in one line."""

    path: str
    error: str

    @property
    def name(self) -> str:
        return Path(self.path).stem


def import_error_line(path: str, exc: BaseException) -> str:
    """One line for a zoo file that raised at import: the exception and the file's own line
    that raised (the deepest frame in the file; a SyntaxError's line)."""
    import traceback

    where: tuple[int | None, str] | None = None
    if isinstance(exc, SyntaxError) and exc.lineno:
        where = (exc.lineno, (exc.text or "").strip())
    else:
        own = [f for f in traceback.extract_tb(exc.__traceback__) if os.path.abspath(f.filename) == os.path.abspath(path)]
        if own:
            where = (own[-1].lineno, (own[-1].line or "").strip())
    message = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    return text + (f" (line {where[0]}: {where[1]})" if where else "")


def resolve_zoos(zoos: ZooSpec) -> list[Zoo | BrokenZoo]:
    """The zoos named by ``zoos``, in order; a ``.py`` file that raises when imported is a
    :class:`BrokenZoo` (said in one line on stderr), the others still resolve."""
    items: Iterable[str | Zoo] = [zoos] if isinstance(zoos, (str, Zoo)) else zoos
    found: list[Zoo | BrokenZoo] = []
    for item in items:
        if isinstance(item, Zoo):
            found.append(item)
        elif item.endswith(".py"):
            try:
                declared = zoos_in(item)
            except Exception as exc:  # noqa: BLE001 - the user's file raised: a row, and the other zoos run
                broken = BrokenZoo(os.path.abspath(item), import_error_line(item, exc))
                print(f"sweep: cannot import {item}: {broken.error}", file=sys.stderr)
                found.append(broken)
                continue
            if not declared:
                raise ValueError(f"{item} declares no zoo: decorate its factories with @exporter.sweep.zoo_entry(...)")
            found.extend(declared)
        else:
            found.append(get_zoo(item))
    return found


def plan_units(zoos: ZooSpec, *, models: Iterable[str] | None = None, specs: Sequence[str] = ("dynamic",),
               opset: int | None = None, strategy: str = "auto", optimize: bool = True, verify: bool = True,
               benchmark: bool = False, baseline: bool = True, limit: int | None = None) -> list[Unit]:
    """One unit per (zoo entry matching ``models``, spec), the first ``limit`` entries of
    each zoo when given. Entries that cannot run here become units carrying their
    ``skip_reason`` (recorded as ``skipped``, never dropped); a zoo file that raises at
    import is one unit, :data:`IMPORT_ROW`, carrying the error (recorded as ``build_failed``
    at stage ``import``)."""
    units = []
    for zoo in resolve_zoos(zoos):
        if isinstance(zoo, BrokenZoo):
            units.append(Unit(zoo.name, IMPORT_ROW, zoo.path, specs[0] if specs else "dynamic", opset, strategy, optimize,
                              verify, benchmark, baseline, import_error=zoo.error))
            continue
        entries = select(zoo.entries(), models)
        for entry in entries[:limit] if limit is not None else entries:
            for spec in specs:
                units.append(Unit(zoo.name, entry.name, entry.source or zoo.source, spec, opset, strategy, optimize,
                                  verify, benchmark, baseline, entry.skip_reason))
    return units
