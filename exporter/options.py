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
    """

    opset_version: int | None = None
    dynamic_shapes: Any = None
    strategy: str = "auto"
    logger: logging.Logger | None = None
    optimize: bool = True
    dynamic_axes: Any = None
    runtime_asserts: bool = False

    def __post_init__(self) -> None:
        from .capture import strategy_names

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
