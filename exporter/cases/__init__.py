"""The cases an analysis runs a model on: dim groups, the sizes a sweep tries, generated inputs.

:func:`exporter.verify.verify` sweeps sizes with them and :func:`exporter.bench.benchmark`
times a model at given sizes with them; both generate their inputs here, the same way.

- :mod:`~exporter.cases.groups`: :class:`DimGroup` (input axes that share one size) and how a
  caller names one (a label, an axis);
- :mod:`~exporter.cases.grouping`: :func:`dim_groups`, the groups of an export, read from its
  spec, captured program, guards and ONNX model;
- :mod:`~exporter.cases.derived`: groups the guards tie to others (``total = past_seq + seq``);
- :mod:`~exporter.cases.guarded_sizes`: sizes that keep and that break remainder guards;
- :mod:`~exporter.cases.stride_sizes`: sizes on both sides of the strides the program divides a dim by;
- :mod:`~exporter.cases.plan`: :func:`plan_cases`, the cases of a sweep, and :func:`extra_cases`,
  those that can see a branch, within a budget;
- :mod:`~exporter.cases.inputs`: :func:`make_case_inputs`, the inputs of one case.
"""

from .derived import derive_groups
from .grouping import dim_groups, input_dims_by_path, onnx_input_dims
from .groups import DimGroup, complete_sizes, policy_text, resolve_group, sizes_by_label
from .guarded_sizes import guard_sizes
from .inputs import InputCase, is_mask, make_case_inputs
from .plan import CasePlan, extra_cases, ordered_cases, plan_cases

__all__ = [
    "CasePlan",
    "DimGroup",
    "InputCase",
    "complete_sizes",
    "derive_groups",
    "dim_groups",
    "extra_cases",
    "guard_sizes",
    "input_dims_by_path",
    "is_mask",
    "make_case_inputs",
    "onnx_input_dims",
    "ordered_cases",
    "plan_cases",
    "policy_text",
    "resolve_group",
    "sizes_by_label",
]
