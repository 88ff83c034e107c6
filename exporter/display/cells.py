"""How a value reads in a table or a sentence: numbers at 3 significant digits (0 is ``0``),
missing values blank, booleans as yes/no."""

from __future__ import annotations

import math
import re
from typing import Any

from ..errors import Status

__all__ = ["cell", "is_missing", "is_number", "numeric_text", "number"]

_NUMBER = re.compile(r"[-+]?(\d[\d,]*\.?\d*|\.\d+)([eE][-+]?\d+)?\s*(x|%|ms|s|MB)?")


def is_missing(value: Any) -> bool:
    """None, NaN, or one of pandas' missing values."""
    if value is None or type(value).__name__ in ("NAType", "NaTType"):
        return True
    try:
        return isinstance(value, float) and math.isnan(value)
    except TypeError:  # pragma: no cover
        return False


def is_number(value: Any) -> bool:
    """An int or float (Python's or numpy's); not a bool."""
    if isinstance(value, bool):
        return False
    if isinstance(value, (int, float)):
        return True
    return type(value).__module__ == "numpy" and hasattr(value, "dtype") and value.dtype.kind in "iuf"


def numeric_text(text: str) -> bool:
    """Text that reads as a number (``1,234``, ``2.5x``, ``12 ms``, ``inf``)."""
    return bool(_NUMBER.fullmatch(text.strip())) or text.strip() in ("inf", "-inf")


def number(value: float) -> str:
    """A number as a person reads it: 3 significant digits without trailing zeros, ``0`` for
    zero, whole numbers whole, scientific notation only below 0.001 or from a million
    (``1.5e-08``)."""
    if value == 0:
        return "0"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    size = abs(value)
    if 1e-3 <= size < 1e6:
        digits = max(0, 2 - math.floor(math.log10(size)))
        text = f"{value:.{digits}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text
    return f"{value:.3g}"


def cell(value: Any) -> str:
    """How a value shows in a table cell: '' for None/NaN, 3 significant digits for floats
    (:func:`number`), yes/no for booleans, comma-joined sequences, ``str`` otherwise."""
    if is_missing(value):
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return number(value)
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if hasattr(value, "item") and callable(value.item) and type(value).__module__ == "numpy":
        return cell(value.item())
    if isinstance(value, Status):
        return value.value
    return str(value)
