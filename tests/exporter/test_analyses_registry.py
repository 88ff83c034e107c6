"""Analyses are declared in one ordered registry (:data:`exporter.analyses.ANALYSES`): the
session's conveniences, ``analyze`` and ``submit`` all go through it, so an analysis
registered from outside the package runs, reports and is kept like the built-in ones."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
import torch

from exporter import ExportOptions, Session
from exporter.analyses import ANALYSES, Analyses, Analysis
from exporter.events import Observer


class Double(torch.nn.Module):
    def forward(self, x):
        return (x * 2).relu()


@dataclass(frozen=True)
class NodeCount:
    nodes: int
    status: str = "ok"


class NodeCountAnalysis(Analysis):
    name, label = "node_count", "counting nodes"

    def run(self, record, *, observer, cancel, extra=0, **options):
        observer.on_progress("node_count", 1, 1)
        return NodeCount(len(record.stage_output("optimize").graph) + extra)


class Heard(Observer):
    def __init__(self):
        self.events = []

    def on_analysis_start(self, name):
        self.events.append(("start", name))

    def on_analysis_end(self, name, result):
        self.events.append(("end", name, type(result).__name__))


@pytest.fixture
def node_count():
    analysis = ANALYSES.register(NodeCountAnalysis())
    yield analysis
    ANALYSES.unregister("node_count")


def session():
    return Session(Double(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))


def test_the_registry_lists_every_analysis_a_session_offers_in_order():
    assert ANALYSES.names[:5] == ("verify", "benchmark", "benchmark_sweep", "profile", "compare")
    assert {"compare_intermediates", "bisect_passes", "check_recorded"} <= set(ANALYSES.names)
    for analysis in ANALYSES:
        assert hasattr(Session, analysis.name) or analysis.name == "check_recorded", analysis
        assert analysis.label and analysis.needs == "optimize"


def test_a_registered_analysis_runs_through_analyze_and_submit_and_is_kept(node_count):
    exported = session()
    heard = Heard()
    result = exported.analyze("node_count", observer=heard, extra=1)
    assert result.nodes == len(exported.stage_output("optimize").graph) + 1
    assert heard.events == [("start", "node_count"), ("end", "node_count", "NodeCount")]
    assert exported.analyses["node_count"] is result

    later = exported.submit("node_count").result(timeout=60)
    assert later.nodes == result.nodes - 1 and exported.analyses["node_count"] is later


def test_an_unknown_analysis_is_refused_naming_the_registered_ones():
    exported = session()
    with pytest.raises(ValueError, match=r"unknown analysis 'verfy'; analyses are verify, benchmark"):
        exported.analyze("verfy")
    with pytest.raises(ValueError, match=r"or an analysis \(verify, benchmark, .*check_recorded\)"):
        exported.submit("verfy")


def test_after_unregistering_an_analysis_it_no_longer_runs(node_count):
    ANALYSES.unregister("node_count")
    try:
        with pytest.raises(ValueError, match="unknown analysis 'node_count'"):
            session().analyze("node_count")
    finally:
        ANALYSES.register(node_count)  # the fixture unregisters it


def test_a_second_analysis_of_one_name_needs_replace():
    registry = Analyses(NodeCountAnalysis())
    with pytest.raises(ValueError, match="registered already"):
        registry.register(NodeCountAnalysis())
    replacement = registry.register(NodeCountAnalysis(), replace=True)
    assert registry.named("node_count") is replacement and len(registry) == 1
    with pytest.raises(TypeError, match="an Analysis instance"):
        registry.register(NodeCountAnalysis)  # the class, not an instance


def test_the_conveniences_are_analyze_under_their_own_name():
    exported = session()
    heard = Heard()
    verified = exported.verify(observer=heard, sizes={"batch": [1, 5]})
    swept = exported.benchmark_sweep("batch", (1, 2), budget=0.01, min_runs=2, observer=heard)
    compared = exported.compare_intermediates(observer=heard)
    assert verified.ok and swept.status == "ok" and compared.first_bad is None
    assert [e[1] for e in heard.events] == ["verify", "verify", "benchmark_sweep", "benchmark_sweep",
                                             "compare_intermediates", "compare_intermediates"]
    assert set(exported.analyses) == {"verify", "benchmark_sweep", "compare_intermediates"}


def test_check_recorded_without_a_group_says_what_it_takes():
    with pytest.raises(TypeError, match=r"check_recorded takes group="):
        session().analyze("check_recorded")


def test_every_registered_analysis_returns_one_envelope_status_failure_seconds():
    from exporter import record
    from exporter.errors import Outcome

    exported = session()
    with record(Double()) as recording:
        recording.model(torch.randn(2, 4))
        recording.model(torch.randn(3, 4))
    options = {"benchmark": {"budget": 0.01, "min_runs": 2}, "compare": {"budget": 0.01, "min_runs": 2},
               "benchmark_sweep": {"sizes": (1, 2), "budget": 0.01, "min_runs": 2}, "profile": {"runs": 2},
               "check_recorded": {"group": recording.groups[0]}}
    for analysis in ANALYSES:
        result = exported.analyze(analysis.name, **options.get(analysis.name, {}))
        assert isinstance(result, Outcome), analysis.name
        assert result.failure is None and result.seconds > 0, analysis.name
        assert str(result.status) in ("ok", "pass", "passed"), (analysis.name, result.status)
