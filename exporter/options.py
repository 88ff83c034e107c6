"""``ExportOptions``: how to export, one frozen value shared by the API, the CLI and the workbench.

Each option a front end offers is declared here once, as its field's :class:`~exporter.option_fields.Flag`
(option strings, parser, help, choices): ``onnx-workbench export`` and ``%onnx_export`` generate
their arguments from the fields (:func:`~exporter.option_fields.arguments_of`), and
:func:`options_from_arguments` reads what they parsed back into an ``ExportOptions``.
"""

from __future__ import annotations

import argparse
import difflib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .dims.grammar import (
    AXIS_REQUEST_HELP,
    AXIS_REQUEST_METAVAR,
    AxisRequest,
    AxisRequestsAction,
    axis_request_argument,
    spec_from_requests,
)
from .errors import SpecError
from .masked_attention import FULLY_MASKED_ROWS
from .option_fields import Flag, field_values, flag_field
from .patches.registry import check_patch_names
from .pipeline.names import STRATEGY_NAMES, check_pass_names

__all__ = ["ExportOptions", "options_from_arguments", "parse_opset", "parse_strategy"]

#: ``strategy=``: "auto" tries the capture strategies in this order.
STRATEGY_CHOICES = ("auto",) + STRATEGY_NAMES
#: The ONNX opsets ``opset_version=`` accepts.
OPSET_RANGE = range(7, 26)


def check_opset_version(opset: Any) -> None:
    """A SpecError unless ``opset`` is None or an ONNX opset this exporter accepts."""
    if opset is not None and (not isinstance(opset, int) or opset not in OPSET_RANGE):
        raise SpecError(
            f"opset_version={opset!r} is not a supported ONNX opset",
            hint=f"use None (the exporter default) or an int from {OPSET_RANGE.start} to {OPSET_RANGE.stop - 1}; "
            "torchlib translates at opset 18 or above and converts lower opsets down",
        )


def check_strategy(strategy: Any) -> None:
    """A SpecError, with the closest name, unless ``strategy`` is one of :data:`STRATEGY_CHOICES`."""
    if strategy not in STRATEGY_CHOICES:
        close = difflib.get_close_matches(str(strategy), STRATEGY_CHOICES, n=1)
        raise SpecError(
            f"unknown strategy {strategy!r}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "choices: " + ", ".join(STRATEGY_CHOICES),
        )


def _argument_error(exc: SpecError) -> argparse.ArgumentTypeError:
    """What argparse shows as ``argument --flag: <message>`` (exit 2, or the magic's UsageError)."""
    return argparse.ArgumentTypeError(exc.reason + (f"; {exc.hint}" if exc.hint else ""))


def parse_opset(text: str) -> int:
    """``--opset N``: an integer ``ExportOptions`` accepts, checked before anything is imported."""
    try:
        opset = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer (e.g. --opset 20)") from None
    try:
        check_opset_version(opset)
    except SpecError as exc:
        raise _argument_error(exc) from None
    return opset


def parse_strategy(text: str) -> str:
    """``--strategy S``: ``auto`` or a capture strategy's name."""
    try:
        check_strategy(text)
    except SpecError as exc:
        raise _argument_error(exc) from None
    return text


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
            (``session.bisect_passes()`` names it). Names: :data:`exporter.pipeline.names.PASS_NAMES`;
            an unknown name is a ``ValueError`` listing them.
        extra_rewrite_rules: onnxscript rewrite rules (``onnxscript.rewriter.pattern.RewriteRule``)
            run by the optimizer right after its default rules in each round, as the pass
            ``ExtraRewritePass``; empty by default.
        patches: names of model patches (:mod:`exporter.patches`) applied to the model's
            classes and module functions while it is captured, e.g. ``("pos_embed_interpolation",)``;
            the model object is left as it is. ``session.suggested_fixes`` lists those that apply.
    """

    opset_version: int | None = flag_field(None, Flag(
        ("--opset",), "ONNX opset (default: torch.onnx's)", parse=parse_opset, metavar="N",
    ))
    dynamic_shapes: Any = flag_field(None, Flag(
        ("--dynamic",), AXIS_REQUEST_HELP + " (repeat --dynamic for more axes)", parse=axis_request_argument,
        metavar=AXIS_REQUEST_METAVAR, action=AxisRequestsAction, nargs="+", dest="dynamic",
    ))
    strategy: str = flag_field("auto", Flag(
        ("--strategy",), "capture strategy (default: auto, which tries each in turn)", parse=parse_strategy,
        choices=STRATEGY_CHOICES,
    ))
    logger: logging.Logger | None = None
    optimize: bool = flag_field(True, Flag(("--no-optimize",), "skip the ONNX optimizer", action="store_false"))
    dynamic_axes: Any = None
    runtime_asserts: bool = flag_field(False, Flag(
        ("--runtime-asserts",), "capture like torch.onnx.export: guards that narrow a dynamic dim become "
        "runtime asserts (dropped from the ONNX model) instead of errors", action="store_true",
    ))
    input_names: tuple[str, ...] | None = None
    output_names: tuple[str, ...] | None = None
    fully_masked_rows: str = flag_field("zero", Flag(
        ("--fully-masked-rows",), "what attention returns for a query whose mask allows no key: zero, as "
        "PyTorch does (default), or mean (of v), as torch.onnx.export's graph does",
        choices=tuple(FULLY_MASKED_ROWS),
    ))
    skip_passes: tuple[str, ...] = flag_field((), Flag(
        ("--skip-pass",), "do not run this ONNX optimizer pass (repeatable), e.g. FoldConstantsPass; "
        "the names are exporter.pipeline.names.PASS_NAMES", action="append", metavar="NAME",
    ))
    extra_rewrite_rules: tuple[Any, ...] = ()
    patches: tuple[str, ...] = flag_field((), Flag(
        ("--patch",), "apply this model patch while capturing (repeatable), e.g. pos_embed_interpolation; "
        "the names are exporter.patches.PATCH_NAMES", action="append", metavar="NAME",
    ))

    def __post_init__(self) -> None:
        object.__setattr__(self, "patches", check_patch_names(self.patches or ()))
        object.__setattr__(self, "skip_passes", check_pass_names(self.skip_passes or ()))
        object.__setattr__(self, "extra_rewrite_rules", tuple(self.extra_rewrite_rules or ()))

        for field_name in ("input_names", "output_names"):
            names = getattr(self, field_name)
            if names is not None:
                if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
                    raise SpecError(f"{field_name} must be a list of non-empty strings, got {names!r}",
                                    hint=f"{field_name}=['logits'] names the first output")
                object.__setattr__(self, field_name, tuple(names))

        if self.fully_masked_rows not in FULLY_MASKED_ROWS:
            raise SpecError(
                f"unknown fully_masked_rows={self.fully_masked_rows!r}",
                hint="; ".join(f"{name!r}: {meaning}" for name, meaning in FULLY_MASKED_ROWS.items()),
            )
        check_strategy(self.strategy)
        check_opset_version(self.opset_version)


def options_from_arguments(
    arguments: argparse.Namespace, model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], *,
    dynamic_shapes: Any = None, **fields: Any,
) -> ExportOptions:
    """The ``ExportOptions`` a front end's parsed flags ask for (the flags generated from the
    fields). ``--dynamic``'s axis requests are checked against ``model``'s example inputs and
    set on top of ``dynamic_shapes`` (a factory's own, or None): a SpecError quotes a request
    that names no input or axis. ``fields`` sets the options that have no flag (``logger``)."""
    values = field_values(arguments, ExportOptions)
    requests: Sequence[AxisRequest] = values.pop("dynamic_shapes") or ()
    values["skip_passes"] = tuple(values["skip_passes"] or ())
    values["patches"] = tuple(values["patches"] or ())
    spec = spec_from_requests(model, args, kwargs, dynamic_shapes, requests)
    return ExportOptions(dynamic_shapes=spec, **values, **fields)
