"""From zoos to units: which (model, spec, options) a sweep runs."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Union

from .unit import Unit
from .zoo import Zoo, get_zoo, select, zoos_in

__all__ = ["ZooSpec", "plan_units", "resolve_zoos"]

#: What ``zoos=`` accepts: a built-in or user zoo's name, the path of a ``.py`` file that
#: declares zoos, a :class:`~exporter.sweep.Zoo`, or a list of them.
ZooSpec = Union[str, Zoo, Sequence[Union[str, Zoo]]]


def resolve_zoos(zoos: ZooSpec) -> list[Zoo]:
    """The zoos named by ``zoos``, in order."""
    items: Iterable[str | Zoo] = [zoos] if isinstance(zoos, (str, Zoo)) else zoos
    found: list[Zoo] = []
    for item in items:
        if isinstance(item, Zoo):
            found.append(item)
        elif item.endswith(".py"):
            declared = zoos_in(item)
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
    ``skip_reason`` (recorded as ``skipped``, never dropped)."""
    units = []
    for zoo in resolve_zoos(zoos):
        entries = select(zoo.entries(), models)
        for entry in entries[:limit] if limit is not None else entries:
            for spec in specs:
                units.append(Unit(zoo.name, entry.name, entry.source or zoo.source, spec, opset, strategy, optimize,
                                  verify, benchmark, baseline, entry.skip_reason))
    return units
