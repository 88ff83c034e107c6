"""The onnxruntime session behind every measurement (IO binding), and what a run is set up with."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from ..artifacts import ExportArtifacts
from ..cases import dim_groups, make_case_inputs, sizes_by_label


_LEVELS = {"disable": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC", "extended": "ORT_ENABLE_EXTENDED", "all": "ORT_ENABLE_ALL"}
SPINNING_KEYS = ("session.intra_op.allow_spinning", "session.inter_op.allow_spinning")


class OrtRunner:
    """One onnxruntime session with explicit options; :meth:`bind` prepares an IO binding.

    ``spinning``: whether onnxruntime's pool threads keep spinning after a run (onnxruntime's
    default; fastest when onnxruntime runs alone, but the spinning threads steal the CPU from
    whatever runs next). :meth:`parked` switches it off for a block and restores it.

    ``model`` is what onnxruntime loads: ``session.ort_model.source`` (the serialized model,
    or the path of a model saved with external data past 2 GiB)."""

    def __init__(
        self,
        model: bytes | str | os.PathLike[str],
        *,
        threads: int,
        provider: str = "CPUExecutionProvider",
        optimization_level: str = "all",
        profile_prefix: str | None = None,
        spinning: bool = True,
    ) -> None:
        if optimization_level not in _LEVELS:
            raise ValueError(f"optimization_level must be one of {sorted(_LEVELS)}, not {optimization_level!r}")
        self._build: dict[str, Any] = dict(model=os.fspath(model) if isinstance(model, os.PathLike) else model, threads=threads, provider=provider,
                           optimization_level=optimization_level, profile_prefix=profile_prefix)
        self._parked: OrtRunner | None = None
        self._alive: list[Any] = []
        self.spinning = spinning
        self.session = self._new_session(spinning)
        self.provider = self.session.get_providers()[0]

    def _new_session(self, spinning: bool) -> Any:
        import onnxruntime as ort

        threads, optimization_level = self._build["threads"], self._build["optimization_level"]
        profile_prefix = self._build["profile_prefix"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, _LEVELS[optimization_level])
        options.log_severity_level = 4  # a failing run raises with the message; no second copy on stderr
        if profile_prefix is not None:
            options.enable_profiling = True
            options.profile_file_prefix = profile_prefix
        for key in SPINNING_KEYS:
            options.add_session_config_entry(key, "1" if spinning else "0")
        self.options = options
        session = ort.InferenceSession(self._build["model"], options, providers=[self._build["provider"]])
        self.settings: dict[str, Any] = {
            "intra_op_num_threads": threads,
            "inter_op_num_threads": 1,
            "execution_mode": "sequential",
            "graph_optimization_level": _LEVELS[optimization_level],
            "io_binding": True,
            "enable_cpu_mem_arena": bool(options.enable_cpu_mem_arena),
            "enable_mem_pattern": bool(options.enable_mem_pattern),
            "allow_spinning": spinning,
        }
        return session

    @contextmanager
    def parked(self) -> Iterator[OrtRunner]:
        """Within the block, :attr:`session` is one whose pool threads do not spin after a run
        (built once, on first use, with otherwise the same options); the spinning session and
        settings come back afterwards. Bind inputs inside the block."""
        if not self.spinning:
            yield self
            return
        if self._parked is None:
            self._parked = OrtRunner(spinning=False, **self._build)
        saved = (self.session, self.options, self.settings, self.spinning)
        self.session, self.options, self.settings = self._parked.session, self._parked.options, self._parked.settings
        self.spinning = False
        try:
            yield self
        finally:
            self.session, self.options, self.settings, self.spinning = saved

    def bind(self, feeds: Mapping[str, Any]) -> Any:
        """An IO binding with inputs as OrtValues and outputs preallocated by one run."""
        import numpy as np
        import onnxruntime as ort

        binding = self.session.io_binding()
        kept = []
        for item in self.session.get_inputs():
            value = feeds[item.name]  # an OrtValue already for dtypes numpy lacks (bfloat16, float8)
            if not isinstance(value, ort.OrtValue):
                value = ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(value))
            binding.bind_ortvalue_input(item.name, value)
            kept.append(value)
        outputs = [o.name for o in self.session.get_outputs()]
        for name in outputs:
            binding.bind_output(name, "cpu")
        self.session.run_with_iobinding(binding)
        produced = binding.get_outputs()
        binding.clear_binding_outputs()
        for name, value in zip(outputs, produced):
            binding.bind_ortvalue_output(name, value)
        self._alive.append((binding, kept, produced))  # the OrtValues must outlive the binding
        return binding

    def run(self, binding: Any) -> None:
        self.session.run_with_iobinding(binding)


@dataclass(frozen=True)
class BenchConfig:
    """What the numbers were measured under."""

    threads: int
    provider: str
    session_options: Mapping[str, Any]
    budget: float
    min_runs: int
    precision: float
    onnxruntime_version: str
    torch_version: str
    cpu_count: int | None = None
    spinning: bool | None = None  # onnxruntime pool threads spinning after a run
    interleaved: bool = False  # engines timed in alternating rounds (A B B A ...)
    torch_interop_threads: int | None = None

    def describe(self) -> str:
        level = self.session_options.get("graph_optimization_level", "?")
        spin = "" if self.spinning is None else f", spinning {'on' if self.spinning else 'off'}"
        rounds = "; interleaved rounds" if self.interleaved else ""
        return (
            f"{self.threads} thread(s), {self.provider}, {level}, IO binding{spin}; eager in inference_mode "
            f"with torch.set_num_threads({self.threads}){rounds}; onnxruntime {self.onnxruntime_version}, "
            f"torch {self.torch_version}"
        )


def bench_config(runner: OrtRunner | None, threads: int, provider: str, budget: float, min_runs: int, precision: float,
                 interleaved: bool = False) -> BenchConfig:
    import onnxruntime as ort
    import torch

    return BenchConfig(
        threads=threads,
        provider=runner.provider if runner else provider,
        session_options=dict(runner.settings) if runner else {},
        budget=budget,
        min_runs=min_runs,
        precision=precision,
        onnxruntime_version=ort.__version__,
        torch_version=torch.__version__,
        cpu_count=os.cpu_count(),
        spinning=runner.settings.get("allow_spinning") if runner else None,
        interleaved=interleaved,
        torch_interop_threads=torch.get_num_interop_threads(),
    )


def source_mb(source: bytes | str | os.PathLike[str]) -> float:
    """The size in MiB of what onnxruntime loads: the bytes, or a model file and its
    external data files (``<name>.data``)."""
    if isinstance(source, (bytes, bytearray, memoryview)):
        return len(source) / 2**20
    path = os.fspath(source)
    data = path + ".data"
    return (os.path.getsize(path) + (os.path.getsize(data) if os.path.exists(data) else 0)) / 2**20


def default_threads(threads: int | None) -> int:
    if threads is not None:
        return int(threads)
    import torch

    return torch.get_num_threads()


def inputs_for(session: ExportArtifacts, sizes: Mapping[Any, int] | None, inputs: tuple[tuple[Any, ...], dict[str, Any]] | None, seed: int) -> tuple[tuple[Any, ...], dict[str, Any], tuple[tuple[str, int], ...]]:
    if inputs is not None:
        return tuple(inputs[0]), dict(inputs[1]), ()
    if not sizes:
        return session.inputs.args, dict(session.inputs.kwargs), ()
    program = session.exported_program
    groups = dim_groups(session, program)
    by_label = sizes_by_label(groups, sizes)  # keys may be labels or axes (Axis, "x.0")
    args, kwargs, _ = make_case_inputs(session, program, groups, by_label, seed=seed)
    return args, kwargs, tuple(by_label.items())
