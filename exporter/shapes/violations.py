"""torch's text for a violated dim constraint, said in the user's terms.

torch writes "You marked L['x'].size()[0] as dynamic but your code specialized it to be a
constant (4). If you're using mark_dynamic, either remove it or use maybe_mark_dynamic. ...":
it names a torch source, and advice about ``mark_dynamic`` the user never called. The same
violation reads here "x.shape[0] was asked to be dynamic, but the model's code makes it the
constant 4", plus the likely cause when another input has a STATIC axis of that size.
"""

from __future__ import annotations

from typing import Any

from .. import _torch_formats as formats

__all__ = ["plain_violation"]


def plain_violation(line: str, bound: Any = None, spec: Any = None) -> str:
    """One violation line of a rejected spec (``formats.violation_lines``), rewritten when it
    is torch's "marked ... as dynamic but your code specialized it"; other lines as they are."""
    if bound is None:
        return line
    from ..guards import axis_of_source

    for source, constant in formats.marked_static(line):
        axis = axis_of_source(source, bound)
        if axis is None:
            continue
        text = f"{axis.label} was asked to be dynamic, but the model's code makes it the constant {constant}"
        partners = _static_axes_of_size(constant, bound, spec, besides=axis)
        if partners:
            text += (f" (it likely has to equal {', '.join(a.label for a in partners[:3])}, kept static "
                     f"with the same size: make both dynamic with one name, or this one static)")
        return text
    return line


def _static_axes_of_size(size: int, bound: Any, spec: Any, besides: Any) -> list[Any]:
    from ..axis import Axis
    from ..dims import STATIC

    if spec is None:
        return []
    out = []
    for leaf in bound.leaves:
        for index, example in enumerate(leaf.shape):
            key = Axis(leaf.path, index)
            if key != besides and example == size and spec.policy(leaf.path, index) is STATIC:
                out.append(key)
    return out
