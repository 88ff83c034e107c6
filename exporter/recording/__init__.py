"""Record, then export: infer the dim spec from the calls a model really receives.

::

    with exporter.recording.record(model) as rec:
        model.generate(input_ids, max_new_tokens=8)
    rec.groups                   # prefill and decode calls, every axis's observed sizes
    result = rec.export("decode")
    result.recorded.verdict      # ONNX vs the outputs recorded from eager, call by call
    result.sweep                 # session.verify() over other sizes
    result.ranges                # per axis: observed sizes, exported range, recorded calls outside it

Modules, one job each: :mod:`.calls` (one call's inputs/outputs, kept without needless copies),
:mod:`.observe` (the forward hooks), :mod:`.groups` (calls by signature, axes to dims),
:mod:`.replay` (export a group, check it on its calls), :mod:`.ranges` (observed sizes against
the exported ranges), :mod:`.recording` (the context manager and the result), :mod:`.present`
(how they show).
"""

from . import present as _present  # noqa: F401 - registers how recordings are shown
from .calls import RecordedCall
from .groups import CallGroup, RecordedAxis
from .ranges import AxisRange, RangeReport, compare_ranges
from .recording import Recorder, Recording, RecordingError, record
from .replay import RecordedCheck, RecordedExport

__all__ = [
    "AxisRange", "CallGroup", "RangeReport", "RecordedAxis", "RecordedCall", "RecordedCheck", "RecordedExport",
    "Recorder", "Recording", "RecordingError", "compare_ranges", "record",
]
