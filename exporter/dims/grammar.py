"""The text grammar of one axis request, ``INPUT.AXIS=POLICY``: the one parser the command line
(``onnx-workbench export --dynamic``), the ``%onnx_export`` magic and the widget use.

::

    x.0=batch              a dim name: what a string means in dynamic_shapes and in
                           torch.onnx.export (dynamic, named "batch" in the ONNX model; a guard
                           that only bounds it narrows its range instead of failing)
    x.1=seq:1:4096         a strict Dim("seq", min=1, max=4096); either bound may be empty
    x.1=seq::              a strict Dim("seq") without bounds
    mask.1=auto            auto, static or dynamic (any case)
    cache.0.key.2=past     INPUT is an input name or a pytree leaf path; the last
                           dot-component is the axis (negative counts from the end)

Everything here is checked from the text alone (no torch, no model): a malformed request is a
:class:`~exporter.SpecError` that quotes the text, says what is wrong and gives the corrected
text. :func:`spec_from_requests` then checks the requests against the model's example inputs
(unknown input, axis out of range, an axis given twice).
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import ExportError, SpecError
from ..inputs import bind_inputs
from .model import AUTO, DYNAMIC, STATIC, AxisPolicy, Dim, Name
from .parse import check_axis, find_leaf
from .spec import DimSpec
from .tree import Tree

__all__ = [
    "AXIS_REQUEST_HELP",
    "AXIS_REQUEST_METAVAR",
    "AxisRequest",
    "AxisRequestsAction",
    "axis_request_argument",
    "check_unique",
    "one_line",
    "parse_axis_request",
    "parse_policy",
    "spec_from_requests",
]

POLICY_WORDS = {"auto": AUTO, "static": STATIC, "dynamic": DYNAMIC}
AXIS_REQUEST_METAVAR = "INPUT.AXIS=NAME"
AXIS_REQUEST_HELP = (
    "make an input axis dynamic: NAME is a dim name (torch.onnx.export's meaning: dynamic, named in "
    "the ONNX model, bounded by the model's guards), name:min:max (a strict Dim; either bound may be "
    "empty), auto, static or dynamic; INPUT may be a pytree path such as cache.0.key"
)
_EXAMPLES = "e.g. x.0=batch, x.1=seq:1:4096, cache.0.key.2=past"


@dataclass(frozen=True)
class AxisRequest:
    """One ``INPUT.AXIS=POLICY``: the leaf path, the axis as written (may be negative), the
    policy, and the text it was read from (quoted by every error about it)."""

    path: str
    axis: int
    policy: AxisPolicy
    text: str = field(default="", compare=False)

    @property
    def target(self) -> str:
        """``x.0``: the axis as written, without the policy."""
        return f"{self.path}.{self.axis}"


def _refused(text: str, what: str, fix: str, *, path: str | None = None, axis: int | None = None) -> SpecError:
    return SpecError(f"{text!r}: {what}", input=path, axis=axis, hint=fix)


def parse_axis_request(text: str) -> AxisRequest:
    """``x.0=batch``, ``cache.0.key.2=seq:1:4096``, ``mask.1=auto`` → :class:`AxisRequest`;
    a :class:`~exporter.SpecError` quoting ``text`` otherwise."""
    text = text.strip()
    target, equals, policy_text = text.partition("=")
    path, dot, axis_text = target.strip().rpartition(".")
    if not equals:
        example = f"{target}.0=batch" if "." not in target else f"{target}=batch"
        raise _refused(text, f"is not {AXIS_REQUEST_METAVAR}: no '=' before the policy", f"e.g. {example}")
    if not dot or not path:
        raise _refused(
            text, f"is not {AXIS_REQUEST_METAVAR}: the axis is missing before '='",
            f"name the input and the axis, e.g. {target or 'x'}.0={policy_text or 'batch'}",
        )
    try:
        axis = int(axis_text)
    except ValueError:
        raise _refused(
            text, f"the axis {axis_text!r} is not an integer",
            f"the last dot-component is the axis index, e.g. {path}.0={policy_text or 'batch'}", path=path,
        ) from None
    policy = parse_policy(policy_text, request=text, target=f"{path}.{axis}")
    return AxisRequest(path, axis, policy, text)


def parse_policy(text: str, *, request: str | None = None, target: str | None = None) -> AxisPolicy:
    """The POLICY of a request: ``auto`` / ``static`` / ``dynamic`` (any case), a dim name
    (:class:`~exporter.dims.Name`), or ``name:min:max`` (a strict :class:`~exporter.dims.Dim`;
    either bound may be empty). ``request`` (the whole text) and ``target`` (``x.0``) make the
    errors quote what the user wrote (without them, as for the widget's fields, the fixes are
    the POLICY alone)."""
    quoted = request if request is not None else text
    at = f"{target}=" if target else ""
    stripped = text.strip()
    if not stripped:
        raise _refused(quoted, "no policy after '='", f"{at}batch (a dim name), {at}auto or {at}static")
    if stripped.lower() in POLICY_WORDS:
        return POLICY_WORDS[stripped.lower()]
    name, *bounds = stripped.split(":")
    if len(bounds) not in (0, 2):
        given = bounds[0] if bounds else ""
        raise _refused(
            quoted, f"{stripped!r} is neither NAME nor NAME:MIN:MAX (a range needs two colons)",
            f"{at}{name}:{given}:  (min only), {at}{name}::{given or 64}  (max only) or {at}{name}",
        )
    if not name.isidentifier():
        raise _refused(
            quoted, f"{name!r} is not a dim name (a Python identifier such as batch or seq_len)",
            f"{at}batch" + (f":{bounds[0]}:{bounds[1]}" if bounds else "")
            + ", or auto / static / dynamic",
        )
    if not bounds:
        return _checked(lambda: Name(name), quoted, at)
    low, high = (_bound(bound, which, quoted, at, name) for bound, which in zip(bounds, ("min", "max")))
    if low is not None and high is not None and low > high:
        raise _refused(quoted, f"min {low} is greater than max {high}", f"{at}{name}:{high}:{low}")
    if high is not None and high <= (low or 0):
        raise _refused(
            quoted, f"min {low or 0} and max {high} allow a single size: that is a static axis",
            f"{at}static (the example size), or a wider range: {at}{name}:{low or 0}:{(low or 0) + 1}",
        )
    return _checked(lambda: Dim(name, min=low, max=high), quoted, at)


def _bound(text: str, which: str, request: str, at: str, name: str) -> int | None:
    text = text.strip()
    if not text:
        return None
    try:
        value = int(text)
    except ValueError:
        raise _refused(request, f"the {which} {text!r} is not an integer",
                       f"{at}{name}:1:4096 (leave a bound empty for none: {name}::4096)") from None
    if value < 0:
        raise _refused(request, f"the {which} {value} is negative (sizes are >= 0)",
                       f"leave the bound empty for none, e.g. {at}{name}::4096")
    return value


def _checked(build: Any, request: str, at: str) -> AxisPolicy:
    try:
        return build()
    except SpecError as exc:  # Dim's own checks, said about the text
        raise _refused(request, exc.reason, exc.hint or f"{at}batch") from None


def one_line(exc: ExportError) -> str:
    """``reason; fix: hint``: an ExportError (most often a SpecError) as the one line argparse and
    IPython's UsageError show."""
    hint = " ".join((exc.hint or "").split())
    return exc.reason + (f"; fix: {hint}" if hint else "")


def axis_request_argument(text: str) -> AxisRequest:
    """:func:`parse_axis_request` as argparse's ``type=``: argparse shows an
    ``ArgumentTypeError``'s message as it is (a ``ValueError``'s it replaces with its own)."""
    try:
        return parse_axis_request(text)
    except SpecError as exc:
        raise argparse.ArgumentTypeError(one_line(exc)) from None


def check_unique(requests: Iterable[AxisRequest]) -> None:
    """A SpecError when two requests name the same axis as written (``x.0=batch`` and
    ``x.0=static``): the later one would silently win."""
    seen: dict[tuple[str, int], AxisRequest] = {}
    for request in requests:
        key = (request.path, request.axis)
        if key in seen:
            raise _duplicate(f"{request.path}.{request.axis}", seen[key], request)
        seen[key] = request


def _duplicate(axis_text: str, first: AxisRequest, second: AxisRequest) -> SpecError:
    said = [r.text or r.target for r in (first, second)]
    return SpecError(
        f"{axis_text} is given twice: {said[0]!r} and {said[1]!r}",
        input=first.path,
        axis=first.axis,
        hint=f"give each axis once: keep {said[0]!r} or {said[1]!r}",
    )


class AxisRequestsAction(argparse.Action):
    """``--dynamic`` for argparse (the CLI and the magic): collects :class:`AxisRequest` s,
    one or many per flag, and refuses an axis given twice with argparse's error (exit 2 on the
    command line, a ``UsageError`` in IPython)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        collected = list(getattr(namespace, self.dest, None) or [])  # never the shared default list
        collected.extend(values if isinstance(values, list) else [values])
        try:
            check_unique(collected)
        except SpecError as exc:
            raise argparse.ArgumentError(self, one_line(exc)) from None
        setattr(namespace, self.dest, collected)


def spec_from_requests(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], base: Any, requests: Sequence[AxisRequest]) -> Any:
    """The spec ``base`` (a factory's ``dynamic_shapes``, or None) with each request set on top,
    as ``{leaf path: {axis: policy}}`` for ``ExportOptions(dynamic_shapes=...)``; None when there
    are neither. Each request is checked against the example inputs: an unknown input, an axis
    out of range, or one axis given twice (``x.-1`` and ``x.2`` of a rank-3 ``x``) is a
    SpecError quoting the request."""
    if not requests:
        return base
    bound = bind_inputs(model, args, kwargs)
    spec: dict[str, dict[int, Any]] = {}
    if base is not None:
        for entry in DimSpec.parse(base, bound):
            spec.setdefault(entry.path, {})[entry.axis] = entry.policy
    tree = Tree(bound)
    seen: dict[tuple[str, int], AxisRequest] = {}
    for request in requests:
        try:
            leaf = find_leaf(bound, request.path, axis=request.axis, tree=tree)
            axis = check_axis(leaf, request.axis)
        except SpecError as exc:
            raise SpecError(f"{request.text or request.target!r}: {exc.reason}", input=exc.input, axis=exc.axis,
                            hint=exc.hint) from None
        key = (leaf.path, axis)
        if key in seen:
            raise _duplicate(f"{leaf.path}.{axis}", seen[key], request)
        seen[key] = request
        spec.setdefault(leaf.path, {})[axis] = request.policy
    return spec
