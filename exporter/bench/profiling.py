"""profile(): onnxruntime's per-node profile, mapped to ONNX ops, torch modules and FX nodes."""

from __future__ import annotations

import math
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportArtifacts
from ..compat import formats
from ..errors import AnalysisOutcome, Failure, first_line
from ..events import CancelToken, Cancelled, Observer, Reporter
from ..node_metadata import fx_name_of, module_path_of
from ..presentation import Presentable
from ..progress import Progress
from .runner import BenchConfig, OrtRunner, bench_config, default_threads, inputs_for


@dataclass(frozen=True)
class NodeTime:
    """Kernel time of one onnxruntime node over the profiled runs."""

    node: str
    kernel: str  # the op onnxruntime ran (may be a fused op such as FusedGemm)
    op_type: str | None  # the ONNX op of the model node it maps to
    module: str | None  # the torch module path of that node ("" = top level)
    fx_node: str | None
    calls: int
    total_us: float


@dataclass(frozen=True, repr=False)
class ProfileResult(AnalysisOutcome, Presentable):
    """onnxruntime per-node kernel times, aggregated by op type and by module path."""

    runs: int
    nodes: tuple[NodeTime, ...]
    config: BenchConfig | None = None
    error: str | None = None
    failure: Failure | None = None
    cancelled: bool = False
    seconds: float = 0.0  # how long profile() took, set-up included

    @property
    def total_us(self) -> float:
        """Kernel time summed over every node and every profiled run."""
        return math.fsum(n.total_us for n in self.nodes)

    @property
    def us_per_run(self) -> float:
        """Kernel time of one run: :attr:`total_us` over :attr:`runs`."""
        return self.total_us / max(self.runs, 1)

    def to_frame(self, by: str = "node") -> Any:
        """``by``: ``node`` (one row per node), ``op_type`` (by the kernel onnxruntime ran) or ``module``."""
        import pandas as pd

        frame = pd.DataFrame(
            [(n.node, n.kernel, n.op_type, n.module, n.fx_node, n.calls, n.total_us) for n in self.nodes],
            columns=["node", "kernel", "op_type", "module", "fx_node", "calls", "total_us"],
        )
        runs = max(self.runs, 1)
        total = frame["total_us"].sum() or 1.0
        if by == "node":
            frame["us_per_run"] = frame["total_us"] / runs
            frame["share"] = frame["total_us"] / total
            return frame.sort_values("total_us", ascending=False, ignore_index=True)
        key = {"op_type": "kernel", "kernel": "kernel", "module": "module"}.get(by)
        if key is None:
            raise ValueError("by must be 'node', 'op_type' or 'module'")
        frame[key] = frame[key].fillna("(unmapped)").replace("", "(top level)")
        grouped = frame.groupby(key, as_index=False).agg(nodes=("node", "nunique"), calls=("calls", "sum"), total_us=("total_us", "sum"))
        grouped["us_per_run"] = grouped["total_us"] / runs
        grouped["share"] = grouped["total_us"] / total
        grouped = grouped.rename(columns={"kernel": "op_type"})
        return grouped.sort_values("total_us", ascending=False, ignore_index=True)

    def by_op_type(self) -> Any:
        return self.to_frame("op_type")

    def by_module(self) -> Any:
        return self.to_frame("module")


def _node_map(model: Any) -> dict[str, tuple[str, str | None, str | None]]:
    out = {}
    for node in model.graph:
        if node.name:
            out[node.name] = (node.op_type, module_path_of(formats.name_scopes_text(node)), fx_name_of(node))
    return out


def _map_node(name: str, known: Mapping[str, tuple[str, str | None, str | None]]) -> tuple[str | None, str | None, str | None]:
    base = name.removeprefix("fused ")
    if base in known:
        return known[base]
    prefixes = [k for k in known if base.startswith(k)]
    if prefixes:
        return known[max(prefixes, key=len)]
    return (None, None, None)


def parse_profile(events: Sequence[Mapping[str, Any]], model: Any, skip_runs: int = 1) -> tuple[int, tuple[NodeTime, ...]]:
    """Aggregate onnxruntime profile events (``end_profiling()`` JSON) per node, skipping
    the node events of the first ``skip_runs`` ``model_run``s."""
    runs = sorted((e["ts"], e["ts"] + e.get("dur", 0)) for e in events if e.get("cat") == "Session" and e.get("name") == "model_run")
    cutoff = runs[skip_runs - 1][1] if skip_runs and len(runs) >= skip_runs else -1
    known = _node_map(model)
    totals: dict[str, list[Any]] = {}
    for event in events:
        if event.get("cat") != "Node" or not str(event.get("name", "")).endswith("_kernel_time"):
            continue
        if event.get("ts", 0) <= cutoff:
            continue
        name = event["name"][: -len("_kernel_time")]
        entry = totals.setdefault(name, [event.get("args", {}).get("op_name", "?"), 0, 0.0])
        entry[1] += 1
        entry[2] += float(event.get("dur", 0))
    nodes = []
    for name, (kernel, calls, total) in totals.items():
        op_type, module, fx_node = _map_node(name, known)
        nodes.append(NodeTime(name, kernel, op_type, module, fx_node, calls, total))
    nodes.sort(key=lambda n: -n.total_us)
    return max(0, len(runs) - skip_runs), tuple(nodes)


def profile(
    session: ExportArtifacts,
    *,
    inputs: tuple[tuple[Any, ...], dict[str, Any]] | None = None,
    sizes: Mapping[str, int] | None = None,
    runs: int = 20,
    threads: int | None = None,
    provider: str = "CPUExecutionProvider",
    optimization_level: str = "all",
    seed: int = 0,
    progress: Callable[[Progress], Any] | None = None,
    observer: Observer | None = None,
    cancel: CancelToken | None = None,
) -> ProfileResult:
    """Run onnxruntime's per-node profiler for ``runs`` runs (after one warm-up run) and map
    each node to its ONNX op, torch module path and FX node through the node metadata.
    With ``optimization_level="all"`` onnxruntime may fuse nodes; a fused node is mapped
    through the model node whose name it carries."""
    import json

    started = time.perf_counter()
    reporter = Reporter(observer, cancel, progress)
    threads = default_threads(threads)
    try:
        args, kwargs, _ = inputs_for(session, sizes, inputs, seed)
        feeds = session.feeds(*args, **kwargs)
        model = session.stage_output("optimize")
        with tempfile.TemporaryDirectory(prefix="workbench-profile-") as directory:
            session.ort_model.make_room()
            runner = OrtRunner(session.ort_model.source, threads=threads, provider=provider,
                               optimization_level=optimization_level, profile_prefix=os.path.join(directory, "ort"))
            binding = runner.bind(feeds)  # the first (warm-up) run
            for i in range(runs):
                runner.run(binding)
                reporter.progress("profile", i + 1, runs, f"run {i + 1}/{runs}")
            path = runner.session.end_profiling()
            with open(path, encoding="utf-8") as handle:
                events = json.load(handle)
    except Cancelled:
        return ProfileResult(0, (), None, "cancelled", cancelled=True, seconds=time.perf_counter() - started)
    except Exception as exc:  # noqa: BLE001 - the export failed or onnxruntime refused the model
        return ProfileResult(0, (), None, first_line(exc), failure=Failure.from_exception(exc, "profile"),
                             seconds=time.perf_counter() - started)
    counted, nodes = parse_profile(events, model, skip_runs=1)
    return ProfileResult(counted, nodes, bench_config(runner, threads, provider, 0.0, runs, 0.0),
                         seconds=time.perf_counter() - started)
