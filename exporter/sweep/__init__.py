"""Zoo sweeps: export many models, each in a fresh process, and see what works.

>>> from exporter.sweep import sweep
>>> results = sweep("transformers", models=["bert", "gpt2"], workers=2)   # engine="ray" for a cluster
>>> results.to_frame()          # one row per (model, spec, options)
>>> results.buckets()           # failures by stage and root cause
>>> results.dashboard("sweep.html")

Units run in worker processes with a deadline and a memory cap; records are appended to
``output_dir/records.jsonl`` as units finish, and a rerun skips the units already there.
Importing this package imports nothing heavy.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

_EXPORTS = {
    "SweepCase": ".case",
    **dict.fromkeys(("ENGINES", "Engine", "LocalEngine", "RayEngine", "get_engine"), ".engines"),
    "Limits": ".isolation",
    **dict.fromkeys(("UnitRecord", "STATUSES"), ".record"),
    **dict.fromkeys(("SweepResults", "load_results"), ".results"),
    **dict.fromkeys(("SweepDiff", "diff_results"), ".diff"),
    "failure_class": ".buckets",
    "coverage_markdown": ".coverage",
    "dashboard_html": ".dashboard",
    "plan_units": ".plan",
    **dict.fromkeys(("run_units", "sweep"), ".run"),
    "Unit": ".unit",
    **dict.fromkeys(("ZOOS", "Zoo", "ZooEntry", "get_zoo", "load_case", "zoo_entry"), ".zoo"),
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)

if TYPE_CHECKING:
    from .buckets import failure_class
    from .case import SweepCase
    from .coverage import coverage_markdown
    from .dashboard import dashboard_html
    from .diff import SweepDiff, diff_results
    from .engines import ENGINES, Engine, LocalEngine, RayEngine, get_engine
    from .isolation import Limits
    from .plan import plan_units
    from .record import STATUSES, UnitRecord
    from .results import SweepResults, load_results
    from .run import run_units, sweep
    from .unit import Unit
    from .zoo import ZOOS, Zoo, ZooEntry, get_zoo, load_case, zoo_entry

__all__ = [
    "ENGINES",
    "Engine",
    "Limits",
    "LocalEngine",
    "RayEngine",
    "STATUSES",
    "SweepCase",
    "SweepDiff",
    "SweepResults",
    "Unit",
    "UnitRecord",
    "ZOOS",
    "Zoo",
    "ZooEntry",
    "coverage_markdown",
    "dashboard_html",
    "diff_results",
    "failure_class",
    "get_engine",
    "get_zoo",
    "load_case",
    "load_results",
    "plan_units",
    "run_units",
    "sweep",
    "zoo_entry",
]
