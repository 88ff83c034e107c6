"""Failure buckets: an error's first line with the parts that vary from model to model taken
out, so that fifty models failing for one reason land in one bucket."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .record import UnitRecord

__all__ = ["failure_class", "failure_buckets"]

MAX_CLASS_CHARS = 140

# Applied in order: each pattern and what it becomes.
_RULES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?:[A-Za-z]:)?(?:[\w.\-]*/)+[\w.\-]+\.py(?::\d+)?"), "<file>"),   # paths
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "0x…"),                                       # addresses
    (re.compile(r"\b(?:lifted_tensor|arg|p|b|c|l)_[\w.]+"), "<name>"),                # FX names
    (re.compile(r"\b[su]\d+\b"), "s?"),                                               # symbols s12
    (re.compile(r"\b(?:node|val|_val)_\w+"), "<node>"),                               # ONNX names
    (re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?"), "N"),                                # numbers
    (re.compile(r"\[(?:\s*-?N\s*,?)+\]"), "[…]"),                                     # shapes
    (re.compile(r"\((?:\s*-?N\s*,?)+\)"), "(…)"),
    (re.compile(r"torch\.Size\(\[…\]\)"), "torch.Size([…])"),
    (re.compile(r"\s+"), " "),
)


def failure_class(error: str | None) -> str | None:
    """The bucket of an error's first line: the exception type and message with file paths,
    sizes, numbers, symbols (``s12``) and generated node names replaced by placeholders.

    >>> failure_class("RuntimeError: shape '[2, 16, 4, 8]' is invalid for input of size 1024")
    "RuntimeError: shape '[…]' is invalid for input of size N"
    """
    if not error:
        return None
    text = error.strip()
    for pattern, replacement in _RULES:
        text = pattern.sub(replacement, text)
    return text[:MAX_CLASS_CHARS].rstrip()


def failure_buckets(records: Iterable[UnitRecord]) -> Any:
    """A ``pandas.DataFrame`` of the failures, one row per (stage, status, failure class), most
    models first: ``count`` and the ``models`` that fall in it."""
    import pandas

    rows: dict[tuple[str, str, str], list[str]] = {}
    for record in records:
        if not record.failed:
            continue
        key = (record.failed_stage or "?", record.status, record.failure_class or record.status)
        rows.setdefault(key, []).append(record.model if record.spec == "dynamic" else f"{record.model} ({record.spec})")
    frame = pandas.DataFrame(
        [{"stage": s, "status": st, "failure_class": c, "count": len(m), "models": ", ".join(sorted(m))}
         for (s, st, c), m in rows.items()],
        columns=["stage", "status", "failure_class", "count", "models"],
    )
    return frame.sort_values(["count", "stage"], ascending=[False, True], kind="stable").reset_index(drop=True)
