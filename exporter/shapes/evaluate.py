"""Torch's size expressions evaluated in Python ints (:func:`evaluate`).

sympy's own evaluation (``expr.xreplace({s: 2640})``) rebuilds every node and asks its
assumptions system about each: about 4 ms for one of SEW's guards, two minutes for the 27,000
evaluations the range solver makes on that model. The expressions torch writes are built from a
few heads (``FloorDiv``, ``Mod``, ``Min``, relations), which Python's integers compute directly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["evaluate"]


def _name(node: Any) -> str:
    return getattr(getattr(node, "func", None), "__name__", "")


def evaluate(expr: Any, values: Mapping[str, int]) -> int | bool | None:
    """``expr`` (a sympy integer expression or relation over torch's size symbols) at
    ``values`` (by symbol name), in Python ints; None when it holds something this does not
    read (then the caller skips the expression)."""
    try:
        return _eval(expr, values)
    except (KeyError, TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError):
        return None


_OPS: dict[str, Callable[[list[Any]], Any]] = {
    "Add": sum,
    "Mul": math.prod,
    "Pow": lambda a: a[0] ** a[1] if a[1] >= 0 else _unread(),
    "FloorDiv": lambda a: a[0] // a[1],
    "CleanDiv": lambda a: a[0] // a[1],
    "floor": lambda a: a[0],  # of an integer (a Rational inside is not read)
    "ceiling": lambda a: a[0],
    "Mod": lambda a: a[0] % a[1],
    "PythonMod": lambda a: a[0] % a[1],
    "Min": min,
    "Max": max,
    "Equality": lambda a: a[0] == a[1],
    "Unequality": lambda a: a[0] != a[1],
    "StrictLessThan": lambda a: a[0] < a[1],
    "LessThan": lambda a: a[0] <= a[1],
    "StrictGreaterThan": lambda a: a[0] > a[1],
    "GreaterThan": lambda a: a[0] >= a[1],
    "And": all,
    "Or": any,
    "Not": lambda a: not a[0],
}


def _unread() -> Any:
    raise ValueError("not an integer")


def _eval(node: Any, values: Mapping[str, int]) -> Any:
    if isinstance(node, bool):
        return node
    if getattr(node, "is_Integer", False):
        return int(node)
    if getattr(node, "is_Symbol", False):
        return values[node.name]
    if getattr(node, "is_Boolean", False) and getattr(node, "is_Atom", False):  # sympy.true / false
        return bool(node)
    operation = _OPS.get(_name(node))
    if operation is None:
        raise ValueError(_name(node))
    return operation([_eval(a, values) for a in node.args])
