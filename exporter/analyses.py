"""The analyses of an exported model, declared like the pipeline's stages.

An :class:`Analysis` says its ``name``, the words a UI shows while it runs (``label``), the
stage whose output it reads (``needs``), and how it runs on an export: ``run(record, *,
observer, cancel, **options)``, where ``record`` is the frozen
:class:`~exporter.export_record.ExportRecord` of the export up to ``needs`` (it never runs a
stage nor derives another export). :data:`ANALYSES` is the ordered registry a
:class:`~exporter.Session` reads: ``session.analyze(name, ...)`` and ``session.submit(name,
...)`` accept every name in it, ``session.verify()`` and the other conveniences are
``analyze`` under their own name, and each result is kept with the exported model it ran
on (``session.analyses``). Adding one is a subclass and a ``register``::

    class NodeCount(Analysis):
        name, label = "node_count", "counting nodes"

        def run(self, record, *, observer, cancel, **options):
            return NodeCountResult(len(record.stage_output("optimize").graph))

    ANALYSES.register(NodeCount())
    session.analyze("node_count")

The widget finds a tab for it in :mod:`workbench.views.registry`. The heavy modules an
analysis uses are imported when it runs, so this registry is cheap to import.
"""

from __future__ import annotations

import importlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .export_record import ExportRecord
    from .events import CancelToken, Observer

__all__ = ["ANALYSES", "Analyses", "Analysis", "BenchmarkAnalysis", "BenchmarkSweepAnalysis", "BisectPassesAnalysis",
           "CheckRecordedAnalysis", "CompareAnalysis", "CompareIntermediatesAnalysis", "FunctionAnalysis",
           "ProfileAnalysis", "VerifyAnalysis"]


class Analysis(ABC):
    """One analysis of an exported model. Subclasses set the class attributes and ``run``."""

    name: ClassVar[str]
    label: ClassVar[str]
    """How a UI names it while it runs (a progress bar, a job bar): ``"latency vs size"``."""
    needs: ClassVar[str] = "optimize"
    """The stage whose output it reads: a UI exports up to it first."""

    @abstractmethod
    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None, **options: Any) -> Any:
        """The result (with a ``status``; failures as data) of this analysis of ``record``
        (an :class:`~exporter.export_record.ExportRecord`: what the export produced up to
        :attr:`needs`, frozen). A cancelled run returns a result whose status is ``cancelled``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class FunctionAnalysis(Analysis):
    """An analysis that is one function of the export, ``function(record, *, observer, cancel,
    **options)``, named by its module (relative to this package) and name: imported when run."""

    module: ClassVar[str]
    function: ClassVar[str]

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None,
            **options: Any) -> Any:
        function = getattr(importlib.import_module(self.module, __package__), self.function)
        return function(record, observer=observer, cancel=cancel, **options)


class VerifyAnalysis(FunctionAnalysis):
    """ONNX vs eager over a sweep of sizes: :func:`exporter.verify.verify`."""

    name, label, module, function = "verify", "verify", ".verify", "verify"


class BenchmarkAnalysis(FunctionAnalysis):
    """onnxruntime vs eager latency: :func:`exporter.bench.benchmark`."""

    name, label, module, function = "benchmark", "benchmark", ".bench", "benchmark"


class BenchmarkSweepAnalysis(Analysis):
    """Latency against the size of one dynamic dim: :func:`exporter.bench.benchmark_sweep`."""

    name, label = "benchmark_sweep", "latency vs size"

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None,
            dim: Any = None, sizes: Any = (1, 2, 4, 8, 16, 32, 64), **options: Any) -> Any:
        from .bench import benchmark_sweep

        return benchmark_sweep(record, dim, sizes, observer=observer, cancel=cancel, **options)


class ProfileAnalysis(FunctionAnalysis):
    """onnxruntime's per-node profile: :func:`exporter.bench.profile`."""

    name, label, module, function = "profile", "profile", ".bench", "profile"


class CompareAnalysis(Analysis):
    """Variants timed in the same interleaved rounds: :mod:`exporter.bench.compare`."""

    name, label = "compare", "compare variants"

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None,
            variants: Any = True, **options: Any) -> Any:
        from .bench import benchmark
        from .bench.compare import Comparison

        result = benchmark(record, compare=variants, observer=observer, cancel=cancel, **options)
        if result.comparison is not None:
            return result.comparison
        return Comparison("onnxruntime", (), error=result.error or result.ort.error, cancelled=result.cancelled,
                          failure=result.failure, seconds=result.seconds)


class CompareIntermediatesAnalysis(Analysis):
    """Every ONNX node against its FX node on one case: :func:`exporter.graphs.compare_intermediates`."""

    name, label = "compare_intermediates", "comparing intermediate values"

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None, case: Any = None,
            **options: Any) -> Any:
        from .verify.intermediates import compare_intermediates

        return compare_intermediates(record, case, cancel=cancel, **options)


class BisectPassesAnalysis(Analysis):
    """The first optimizer pass after which onnxruntime disagrees: :func:`exporter.passes.bisect_passes`."""

    name, label = "bisect_passes", "bisecting the optimizer passes"

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None, case: Any = None,
            tolerances: Any = None, **options: Any) -> Any:
        from .passes import bisect_passes

        if options:
            raise TypeError(f"bisect_passes takes case= and tolerances=, not {', '.join(sorted(options))}")
        return bisect_passes(record, record.passes, record.stage_output("translate"), case, tolerances)


class CheckRecordedAnalysis(Analysis):
    """The ONNX model on recorded calls, against their recorded outputs:
    :func:`exporter.verify.recorded.check_recorded` (``group=`` the recorded group)."""

    name, label = "check_recorded", "checking the recorded calls"

    def run(self, record: ExportRecord, *, observer: Observer, cancel: CancelToken | None, group: Any = None,
            tolerances: Any = None, left_out: tuple[str, ...] = (), **options: Any) -> Any:
        from .verify.recorded import check_recorded

        if group is None or options:
            raise TypeError("check_recorded takes group= (a recorded CallGroup: rec.groups[0]), tolerances= "
                            f"and left_out={', not ' + ', '.join(sorted(options)) if options else ''}")
        return check_recorded(record, group, tolerances, left_out)


class Analyses:
    """The ordered registry of analyses: iterate it, look one up by name, register one."""

    def __init__(self, *analyses: Analysis) -> None:
        self._by_name: dict[str, Analysis] = {}
        for analysis in analyses:
            self.register(analysis)

    def register(self, analysis: Analysis, *, replace: bool = False) -> Analysis:
        """Add ``analysis`` at the end (``replace``: take the place of the one of its name)."""
        if not isinstance(analysis, Analysis):
            raise TypeError(f"register takes an Analysis instance, not {type(analysis).__name__}")
        if analysis.name in self._by_name and not replace:
            raise ValueError(f"an analysis named {analysis.name!r} is registered already "
                             "(register(..., replace=True) replaces it)")
        self._by_name[analysis.name] = analysis
        return analysis

    def unregister(self, name: str) -> Analysis:
        """Remove the analysis named ``name``; returns it."""
        return self._by_name.pop(self.named(name).name)

    def named(self, name: str) -> Analysis:
        try:
            return self._by_name[name]
        except KeyError:
            raise ValueError(f"unknown analysis {name!r}; analyses are {', '.join(self.names)}") from None

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name

    def __iter__(self) -> Iterator[Analysis]:
        return iter(tuple(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)

    def __repr__(self) -> str:
        return f"Analyses({', '.join(self.names)})"


ANALYSES = Analyses(VerifyAnalysis(), BenchmarkAnalysis(), BenchmarkSweepAnalysis(), ProfileAnalysis(),
                    CompareAnalysis(), CompareIntermediatesAnalysis(), BisectPassesAnalysis(),
                    CheckRecordedAnalysis())
