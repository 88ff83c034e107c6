"""What one export produced, as a value: the record an analysis reads.

``session.snapshot()`` runs the export up to a stage (``optimize`` by default) and hands back
an :class:`ExportRecord`: the model, its bound inputs, the spec and options, each stage's
result, the guards torch recorded, the latest verify result, the graphs, and the final model
as onnxruntime runs it. Reading a record never runs a stage and never derives another export:
a stage that failed raises its :class:`~exporter.ExportError` when its output is read, as the
session would. Deriving a new export (other options, another spec) stays on the session.

Every analysis of :data:`exporter.analyses.ANALYSES` receives one (``Analysis.run(record,
...)``); it satisfies :class:`~exporter.artifacts.ExportArtifacts`, so the analysis functions
(``exporter.verify.verify``, ``exporter.bench.benchmark``...) take a record or a session alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .dims import DimSpec
from .errors import Status
from .events import Cancelled
from .inputs import BoundInputs, onnx_input_names
from .options import ExportOptions
from .ort_values import feeds, from_outputs, output_dtypes
from .pipeline.pass_records import OptimizerPasses
from .pipeline.stage import StageResult

if TYPE_CHECKING:
    from .errors import ErrorSession
    from .guards import Guards
    from .ort_model import OrtModel

__all__ = ["ExportRecord"]


@dataclass(frozen=True, eq=False, repr=False)
class ExportRecord:
    """One export's products up to a stage (:attr:`until`), frozen when the analysis started.

    ``results`` holds each stage's :class:`~exporter.pipeline.stage.StageResult` up to
    :attr:`until`, by name; ``last_verify`` the verify result of this exported model when the
    record was made (None before any); ``graphs`` the export's graphs (built when first read,
    shared with the session). The guards and the final model as onnxruntime runs it
    (:attr:`ort_model`) are built when first read, from the stage outputs recorded."""

    model: Any
    inputs: BoundInputs
    spec: DimSpec
    options: ExportOptions
    until: str
    results: Mapping[str, StageResult]
    last_verify: Any = None
    graphs: Any = None
    _guards: Callable[[], Guards] | None = field(default=None, repr=False)
    _ort_model: Callable[[], OrtModel] | None = field(default=None, repr=False)
    _owner: ErrorSession | None = field(default=None, repr=False)

    def result(self, stage: str) -> StageResult:
        """A stage's result as recorded (one the record does not reach raises ``ValueError``)."""
        try:
            return self.results[stage]
        except KeyError:
            raise ValueError(f"this record of the export stops at {self.until}: it has no {stage} result "
                             f"(an analysis that reads {stage} declares needs = {stage!r})") from None

    def stage_output(self, stage: str) -> Any:
        """A stage's output; raises the :class:`~exporter.ExportError` of the stage that failed
        at or before it. Shared: read it, never change it."""
        for name, result in self.results.items():  # in pipeline order
            if result.status == Status.CANCELLED:
                raise Cancelled()
            if result.status == Status.FAILED:
                assert result.error is not None
                raise result.error.with_session(self._owner) if self._owner is not None else result.error
            if name == stage:
                return result.output
        return self.result(stage).output

    @property
    def guards(self) -> Guards:
        """Every shape guard and runtime assert torch added while capturing (see
        :attr:`exporter.Session.guards`)."""
        self.result("capture")
        assert self._guards is not None
        return self._guards()

    @property
    def exported_program(self) -> Any:
        """``stage_output("capture")``."""
        return self.stage_output("capture")

    @property
    def decomposed_program(self) -> Any:
        """``stage_output("decompose")``."""
        return self.stage_output("decompose")

    @property
    def passes(self) -> OptimizerPasses:
        """The optimize stage pass by pass (see :attr:`exporter.Session.passes`)."""
        self.stage_output("translate")
        result = self.result("optimize")
        return result.passes if result.passes is not None else OptimizerPasses(note=result.detail)

    @property
    def ort_model(self) -> OrtModel:
        """The final model as onnxruntime loads it (raises the export's error when a stage failed)."""
        self.stage_output("optimize")
        if self._ort_model is None:
            raise ValueError("this record has no onnxruntime model")
        return self._ort_model()

    @property
    def model_proto(self) -> Any:
        """A copy of the final ``onnx.ModelProto``."""
        return self.ort_model.model_proto

    @property
    def output_ort_session(self) -> Any:
        """The onnxruntime session outputs are read through (see :attr:`exporter.Session.output_ort_session`)."""
        return self.ort_model.output_session

    @property
    def onnx_input_names(self) -> dict[str, str]:
        """The ONNX input name of every tensor input, by its path."""
        return onnx_input_names(self.inputs, self.options.input_names)

    def feeds(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """ONNX input feeds for inputs given like the model's forward."""
        return feeds(self, self.stage_output("optimize"), args, kwargs)

    def run_onnx(self, *args: Any, **kwargs: Any) -> list[Any]:
        """Run the ONNX model in onnxruntime (CPU) on inputs given like the model's forward."""
        raw = self.output_ort_session.run(None, feeds(self, self.stage_output("optimize"), args, kwargs))
        return from_outputs(raw, output_dtypes(self))

    def __repr__(self) -> str:
        stages = ", ".join(f"{name} {result.status}" for name, result in self.results.items())
        return f"ExportRecord({type(self.model).__name__}, spec={self.spec!s}, {stages})"
