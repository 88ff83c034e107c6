"""What the analyses read from an export, named as typed records instead of the whole session.

:func:`exporter.verify.verify`, :func:`exporter.bench.benchmark`, :func:`exporter.bench.profile`,
:func:`exporter.graphs.compare_intermediates` and :mod:`exporter.shapes` take an object that has
these members; :class:`exporter.Session` has them all (it satisfies the protocols structurally,
nothing here imports it), and so does the frozen :class:`~exporter.export_record.ExportRecord`
an analysis receives. A function that needs less asks for the narrower record:

- :class:`ExportInputs`: the model and what it was exported with (inputs, spec, options);
- :class:`ExportArtifacts`: that, plus what the pipeline produced (each stage's output, the
  guards) and the model as onnxruntime runs it;
- :class:`CapturedExport`: that, plus the capture stage's result and the guards torch
  recorded (what :mod:`exporter.shapes` reads).

An export's graphs are read through :class:`exporter.graphs.session_graphs.ExportGraphs`.

The final model as onnxruntime runs it is an :class:`~exporter.ort_model.OrtModel` (its source,
one cached ``InferenceSession``, make room before building another one of a large model,
release): ``ExportArtifacts.ort_model``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .dims import DimSpec
from .inputs import BoundInputs

if TYPE_CHECKING:
    from .guards import Guards
    from .options import ExportOptions
    from .ort_model import OrtModel
    from .pipeline.stage import StageResult

__all__ = ["CapturedExport", "ExportArtifacts", "ExportInputs"]


class ExportInputs(Protocol):
    """The model and what it is exported with."""

    @property
    def model(self) -> Any:
        """The ``torch.nn.Module`` (or callable) being exported."""
        ...

    @property
    def inputs(self) -> BoundInputs: ...

    @property
    def spec(self) -> DimSpec: ...

    @property
    def options(self) -> ExportOptions: ...


class CapturedExport(ExportInputs, Protocol):
    """An export's capture: the stage result (run if needed) and the guards torch recorded."""

    def result(self, stage: str) -> StageResult:
        """A stage's result (success or failure), running the stages up to it; never raises."""
        ...

    @property
    def guards(self) -> Guards: ...


class ExportArtifacts(ExportInputs, Protocol):
    """What an export produced: each stage's output, the guards torch recorded while capturing,
    and the final model as onnxruntime runs it."""

    def stage_output(self, stage: str) -> Any:
        """A stage's output (``capture`` / ``decompose``: an ``ExportedProgram``; ``translate`` /
        ``optimize``: an ``onnx_ir.Model``), running the stages up to it; raises the stage's
        :class:`~exporter.ExportError` if it failed. Shared: read it, never change it."""
        ...

    @property
    def exported_program(self) -> Any:
        """``stage_output("capture")``."""
        ...

    @property
    def decomposed_program(self) -> Any:
        """``stage_output("decompose")``."""
        ...

    @property
    def guards(self) -> Guards: ...

    @property
    def onnx_input_names(self) -> dict[str, str]:
        """The ONNX input name of every tensor input, by its path."""
        ...

    def feeds(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        """ONNX input feeds for inputs given like the model's forward."""
        ...

    @property
    def ort_model(self) -> OrtModel: ...

    @property
    def output_ort_session(self) -> Any:
        """The onnxruntime session outputs are read through (numpy-readable dtypes)."""
        ...
