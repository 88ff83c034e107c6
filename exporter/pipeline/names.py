"""The names the pipeline's choices go by, for the options to check without loading a stage:
the capture strategies in the order ``strategy="auto"`` tries them, and the optimizer's passes
in pipeline order (what ``skip_passes`` accepts); and the rule an ONNX output's name follows
when an input already has it (:func:`output_name`). Imports nothing from the project but
:mod:`exporter.errors`.
"""

from __future__ import annotations

from collections.abc import Iterable

from ..errors import SpecError

__all__ = ["PASS_NAMES", "STRATEGY_NAMES", "check_pass_names", "output_name"]

# exporter.pipeline.capture.STRATEGIES, by name (tests/exporter/test_capture.py keeps them equal).
STRATEGY_NAMES = ("nonstrict", "strict", "draft", "fx_symbolic")

# Every pass name the optimize stage can run, in pipeline order (exporter.pipeline.optimize).
PASS_NAMES = (
    "InlinePass",
    "FoldConstantsPass",
    "RewritePass",
    "ExtraRewritePass",
    "RemoveUnusedNodesPass",
    "RemoveUnusedFunctionsPass",
    "RemoveUnusedOpsetsPass",
    "LiftConstantsToInitializersPass",
    "LiftSubgraphInitializersToMainGraphPass",
    "DeduplicateInitializersPass",
    "CommonSubexpressionEliminationPass",
    "OutputFixPass",
    "NameFixPass",
    "OnnxFusionsPass",
)


def check_pass_names(names: str | Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple of known pass names (one string is one name); an unknown name is a
    :class:`~exporter.errors.SpecError` (a ``ValueError``) listing the pass names."""
    found = (names,) if isinstance(names, str) else tuple(names)
    unknown = [n for n in found if n not in PASS_NAMES]
    if unknown:
        import difflib

        close = [c for n in unknown for c in difflib.get_close_matches(str(n), PASS_NAMES, n=1)]
        raise SpecError(
            f"unknown optimizer pass name(s) in skip_passes: {', '.join(map(repr, unknown))}",
            hint=(f"did you mean {close[0]!r}? " if close else "")
            + "the passes are: " + ", ".join(PASS_NAMES),
        )
    return found


def output_name(name: str, taken: Iterable[str | None]) -> str:
    """The ONNX name of the output whose path is ``name``: ``name`` itself unless an input or
    an earlier output has it (an ONNX graph names each value once), then ``out_<name>``, as
    Optimum names a diffusers UNet's output ``out_sample`` beside its ``sample`` input;
    numbered (``out_sample_2``) if that is taken too."""
    taken = set(taken)
    if name not in taken:
        return name
    candidate, number = f"out_{name}", 2
    while candidate in taken:
        candidate, number = f"out_{name}_{number}", number + 1
    return candidate
