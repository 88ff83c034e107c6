"""Why each input dim came out dynamic or static; torch's suggested fixes; specs from examples.

* :func:`dim_outcomes` → :class:`DimOutcomes`: per input axis, the requested policy, the
  obtained result (dynamic with its symbol and range, or static with its size) and, when they
  differ, the reason: the guards that narrowed or specialized it, with the user's lines. Dims
  torch found equal share one name (the ONNX ``dim_param``).
* :func:`suggested_fixes_of` → :class:`SuggestedFixes`: torch's "Suggested fixes:" for a
  rejected spec, mapped onto the dim-policy model, with a diff against the user's spec;
  :func:`apply_suggested_fixes` re-exports with them until torch accepts (bounded).
* :func:`infer_dim_spec`: a spec from several example input sets.
* :func:`dim_warnings`: axes torch cannot keep dynamic as asked,
  known before any export.

About size-0/1 examples: plain ``torch.export`` specializes such a dim to the example value;
capture here runs size-obliviously like ``torch.onnx.export`` (see
``compat.size_oblivious_capture``), which keeps it dynamic; the table says so.
"""

from . import fixes, outcomes
from .fixes import DimFix, SuggestedFixes, apply_suggested_fixes, parse_fix_line, suggested_fixes_of
from .inference import infer_dim_spec
from .outcomes import DimOutcome, DimOutcomes, dim_outcomes
from .policy_warnings import DimPolicyWarning, DimWarning, dim_warnings

# build_fixes and the outcome constants are importable from here too, as before the split,
# but were never in __all__.
build_fixes = fixes.build_fixes
DYNAMIC_RESULT = outcomes.DYNAMIC_RESULT
STATIC_RESULT = outcomes.STATIC_RESULT
FAILED_RESULT = outcomes.FAILED_RESULT
FRAME_COLUMNS = outcomes.FRAME_COLUMNS

__all__ = [
    "DimFix",
    "DimOutcome",
    "DimOutcomes",
    "DimPolicyWarning",
    "DimWarning",
    "SuggestedFixes",
    "apply_suggested_fixes",
    "dim_outcomes",
    "dim_warnings",
    "infer_dim_spec",
    "parse_fix_line",
    "suggested_fixes_of",
]

