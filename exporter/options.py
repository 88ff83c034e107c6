"""``ExportOptions``: how to export, one frozen value shared by the API, the CLI and the workbench."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from .errors import SpecError

__all__ = ["ExportOptions"]


@dataclass(frozen=True)
class ExportOptions:
    """How to export.

    Attributes:
        opset_version: ONNX opset; None uses ``torch.onnx.export``'s default.
        dynamic_shapes: the dim spec, in any form :meth:`exporter.DimSpec.parse` accepts.
        strategy: ``"auto"`` (try each in order) or one of ``"nonstrict"``, ``"strict"``,
            ``"draft"``, ``"fx_symbolic"`` (experimental).
        logger: receives one record per stage (name, status, seconds).
        optimize: run the ONNX optimizer (constant folding, fusions) after translation.
        dynamic_axes: legacy ``torch.onnx.export`` dynamic axes, merged with ``dynamic_shapes``.
        runtime_asserts: capture as ``torch.onnx.export`` does, turning a guard that narrows a
            dynamic dim (``seq != 1``, ``x.shape[0] == 3``) into a runtime assert instead of
            rejecting the spec or specializing the dim. More models export, but the asserts
            are dropped from the ONNX model, which can then be silently wrong at sizes torch
            never checked: ``session.verify()`` sweeps them. Off by default.
        input_names: names of the ONNX inputs for the flattened tensor inputs, in order
            (torch.onnx.export's option); inputs past the last name keep their default names
            (``x``, ``inputs.mask``; a transformers cache's ``past_key_values.0.key``). Legacy
            ``dynamic_axes`` may be keyed by them. The
            Python side (``run_onnx``, ``verify``, the dim spec) still takes inputs as forward
            does; ``session.onnx_input_names`` maps each input path to its ONNX name.
        output_names: names of the ONNX outputs, in order (torch.onnx.export's option);
            ``dynamic_axes`` entries keyed by them are accepted and skipped, since output dims
            follow from the inputs.
        fully_masked_rows: what the ONNX model returns for an attention query whose mask
            allows no key (a mask row all False): ``"zero"`` (default), 0 as PyTorch returns;
            ``"mean"``, torch.onnx.export's translation as it is, which returns the mean of
            ``v`` for such a row (NaN for a ``-inf`` float mask) and saves three small nodes
            per attention (onnxruntime latency of the demo block: 1.00-1.05x).
            See :mod:`exporter.masked_attention`.
        skip_passes: names of ONNX optimizer passes not to run (every round of each), e.g.
            ``("FoldConstantsPass",)``: the fix when one pass breaks a model
            (``session.bisect_passes()`` names it). Names: :data:`exporter.passes.PASS_NAMES`;
            an unknown name is a ``ValueError`` listing them.
        extra_rewrite_rules: onnxscript rewrite rules (``onnxscript.rewriter.pattern.RewriteRule``)
            run by the optimizer right after its default rules in each round, as the pass
            ``ExtraRewritePass``; empty by default.
    """

    opset_version: int | None = None
    dynamic_shapes: Any = None
    strategy: str = "auto"
    logger: logging.Logger | None = None
    optimize: bool = True
    dynamic_axes: Any = None
    runtime_asserts: bool = False
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    fully_masked_rows: str = "zero"
    skip_passes: tuple[str, ...] = ()
    extra_rewrite_rules: tuple[Any, ...] = ()

    def __post_init__(self) -> None:
        from .pipeline.capture import strategy_names
        from .passes import check_pass_names

        object.__setattr__(self, "skip_passes", check_pass_names(self.skip_passes or ()))
        object.__setattr__(self, "extra_rewrite_rules", tuple(self.extra_rewrite_rules or ()))

        for field_name in ("input_names", "output_names"):
            names = getattr(self, field_name)
            if names is not None:
                if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
                    raise SpecError(f"{field_name} must be a list of non-empty strings, got {names!r}",
                                    hint=f"{field_name}=['logits'] names the first output")
                object.__setattr__(self, field_name, tuple(names))

        from .masked_attention import FULLY_MASKED_ROWS

        if self.fully_masked_rows not in FULLY_MASKED_ROWS:
            raise SpecError(
                f"unknown fully_masked_rows={self.fully_masked_rows!r}",
                hint="; ".join(f"{name!r}: {meaning}" for name, meaning in FULLY_MASKED_ROWS.items()),
            )
        choices = ("auto",) + strategy_names()
        if self.strategy not in choices:
            import difflib

            close = difflib.get_close_matches(str(self.strategy), choices, n=1)
            raise SpecError(
                f"unknown strategy {self.strategy!r}",
                hint=(f"did you mean {close[0]!r}? " if close else "") + "choices: " + ", ".join(choices),
            )
        if self.opset_version is not None and (
            not isinstance(self.opset_version, int) or not 7 <= self.opset_version <= 25
        ):
            raise SpecError(
                f"opset_version={self.opset_version!r} is not a supported ONNX opset",
                hint="use None (the exporter default) or an int from 7 to 25; torchlib translates "
                "at opset 18 or above and converts lower opsets down",
            )
