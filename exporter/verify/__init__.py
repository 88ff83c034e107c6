"""Is the ONNX model right, at the example inputs *and at other sizes*?

``torch.onnx.export(verify=True)`` compares outputs at the example inputs only. An exported
model can keep symbolic input dims and still compute the wrong thing at another size (a branch
on the example size baked in, a dropped runtime assert, a dim silently specialized): no error,
wrong numbers. :func:`verify` runs the ONNX model in onnxruntime and the original module in
eager PyTorch on the example inputs and on generated inputs at other sizes, and says which
sizes are wrong and why.

Sizes. Input axes that share one torch symbol (or one user ``Dim`` name) form a *dim group* and
always change together. Each group is swept over its *requested* range (the user's ``Dim``
min/max; ``[1, inf)`` for AUTO / DYNAMIC): the bounds, 1 and 2, an odd size and a size larger
than the example, each at most ``max_size``; and, whatever ``max_size`` says, exactly twice
the example (every divisibility of the example still holds: window partitions, strides), or
the requested max when twice is past it, even outside the range torch obtained, and the
example + 1 (- 1 past the range) when no other size in the obtained range has its parity (timm's halonet26t, example 256,
was compared at 255 and 256 only and fails in onnxruntime at 512; a raw-audio length of 2640 is
varied at 2641 and 5280); and for every remainder/divisibility guard torch
recorded (``Mod(h, 4) == 0``), the nearest in-range size that keeps all the group's guards and
the nearest that breaks each (Swin's window partition), see :func:`exporter.cases.guard_sizes`; one
size past the chunk the program cuts a dim into (``(seq + 63)//64``) when the example is under
half a chunk, see :mod:`exporter.cases.chunk_sizes`. Cases
inside the obtained range run first. Each case says whether it lies inside the range torch *obtained* for the dim
(``ExportedProgram.range_constraints``); the ONNX model does not check that range, so a size
outside it is exactly where a dropped runtime assert shows up. A group the model's guards tie
to others is *derived*, not swept: GPT-2 with a KV cache reads its attention mask over
``total = past_seq + seq``, so every case sizes ``total`` from ``past_seq`` and ``seq``
(:mod:`exporter.cases.derived`; ``independent=True`` sweeps it on its own).

Inputs. Floating tensors are random normal; 0/1 and bool tensors (masks) keep their pattern
(all ones stays all ones, otherwise a random padding suffix per row, never a whole row);
other integer tensors (token ids, indices) are drawn in the example's ``[min, max]``, kept
below any dim they could index that the case shrinks. Tensors with no swept axis are the
example tensors. ``make_inputs=`` replaces any of it (see :class:`InputCase`).

Edge values (:mod:`exporter.verify.values`). At the example size, a few cases each change one
input to a value sizes never reach: a mask (bool, or 0/1 integers no embedding reads) all ones,
all zeros, and with one fully masked row; ids (integers an embedding reads) all 0 and all at
the embedding's last row. A failing one is reported in plain words with the cause found in the
program and the fix when one exists (``fully_masked_rows="zero"`` for attention over a fully
masked row); ``edge_values=False`` skips them.

Tolerances (:data:`DEFAULT_TOLERANCES`, element-wise
``|onnx - eager| <= atol + rtol * |eager| + rtol * channel``, the last term the largest
``|eager|`` of the element's quietest slice, never another channel's, see :class:`Tolerance` and
:mod:`exporter.verify.channels`): float64 rtol 1e-6 / atol 1e-7; float32 rtol 1e-4 / atol 1e-5;
float16 rtol 1e-2 / atol 1e-3; bfloat16 rtol 2e-2 / atol 1e-2; integers and bool exact. NaN
equals NaN. An output of another dtype, of another shape or missing fails its case. With these
defaults an output below 1 is compared at its own scale, and one within ``atol`` of 0
everywhere is named in a ``vacuous`` finding (``not_verified``). A failing output names its
worst elements (index, expected, got, the tolerance applied); elements that pass only thanks to
the channel term are counted in a ``tolerance`` finding. :func:`exporter.verify_onnx` runs all
of this on an ONNX model you bring.

Verdict. ``passed`` only when every dim group swept was compared at a size other than the
example; when eager PyTorch raised at every other size (or none was tried) the result is
``not_verified``, with the reason. Every eager run is wrapped in
:func:`exporter.model_state.preserved`: the user's module is the same afterwards, and a module
that changes itself when called (Swin at 1x1 rebinds ``window_size``) is reported. An AUTO
axis torch made static is reported (``auto_static``), not swept and not a failure.

Where it goes wrong. For the first failing case, verify names the first ONNX node whose value
differs from its FX node's (:func:`first_divergence`), or says the captured program already
differs from eager PyTorch. That search is :mod:`exporter.verify.intermediates`, the engine of
``session.compare_intermediates()``: the same pairs, the same rule, values streamed in chunks.
The result keeps each case's inputs and eager outputs (``case_runs``, within a budget), so a
closer look at a case verify ran compares on the very inputs it used.

Everything returned is a frozen dataclass with ``to_frame()`` and ``summary()``; nothing here
raises for a wrong model or a failing run: failures are data.
"""

from ..cases import DimGroup, InputCase, dim_groups, make_case_inputs
from ..progress import Progress
from .contract import ContractCheck, ContractReport, check_contract
from .core import verify
from ..frames import source_of_stack
from .divergence import Divergence, first_divergence
from .program_run import run_program
from .results import CaseResult, Finding, VerifyResult
from .values import EdgeValue, edge_values
from .tolerance import DEFAULT_TOLERANCES, OutputCheck, Tolerance, compare, tolerance_for

__all__ = [
    "DEFAULT_TOLERANCES",
    "CaseResult",
    "ContractCheck",
    "ContractReport",
    "DimGroup",
    "Divergence",
    "EdgeValue",
    "Finding",
    "InputCase",
    "OutputCheck",
    "Progress",
    "Tolerance",
    "VerifyResult",
    "check_contract",
    "compare",
    "dim_groups",
    "edge_values",
    "first_divergence",
    "make_case_inputs",
    "run_program",
    "source_of_stack",
    "tolerance_for",
    "verify",
]
