"""Why a dim's range is what it is, in the user's terms: the bounds the guards put on it
(``Eq(s, Min(512, s))`` → "at most 512", ``Ne(s, 1)`` / ``s > 1`` → "at least 2"), what in the
model asked for each bound, and the line, named as a person reads it
(``transformers/models/bert/modeling_bert.py:95``, not the absolute site-packages path).

The bounds are solved from the guards' sympy expressions (:func:`.solve.solve_size`), never
read from their text. torch's own text (the expressions, ``Min(…)``, ``x.shape[1]``) stays
on the :class:`~exporter.guards.Guard` records, for a folded detail.

Also here: how a set of input axes is said in one line (``cache.*.key/value.2``), for the
grouped Dims rows.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ..axis import Axis
from ..frames import short_path, short_source, source_label
from ..guards import GUARD, RUNTIME_ASSERT, Guard
from .solve import solve_size

__all__ = ["DimBound", "axes_text", "axis_family", "bounds_text", "dim_bounds", "guard_where", "short_path", "short_source"]

# What in a model asks for a bound, by the words of the line that added it (an upper bound
# from a table sized by the config: position embeddings and the buffers sized like them).
_WHAT_AT_MOST = ((re.compile(r"position|token_type"), "position embeddings"),)
_COMPARISON = re.compile(r"[A-Za-z_][\w.]*(?:\[[^\]]*\])?\s*(?:[<>]=?|[!=]=)\s*-?\d+")


def guard_where(guard: Guard) -> str | None:
    """The line that added ``guard``: ``transformers/models/bert/modeling_bert.py:95``, a
    notebook cell as IPython names it (``Cell In[3], line 4``), None when torch added it."""
    if guard.file is None:
        return None
    label = source_label(guard.file, guard.line)
    if label.startswith(guard.file):  # a file, not a cell
        return f"{short_path(guard.file)}:{guard.line}"
    return label


def _short(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _what(guard: Guard, upper: bool) -> str:
    """What asked for the bound, in a few words: a known idiom, else the comparison on the
    user's line (``q_length > 1``), else the line itself, shortened."""
    code = guard.code or ""
    if upper:
        for pattern, words in _WHAT_AT_MOST:
            if pattern.search(code):
                return words
    found = _COMPARISON.search(code)
    if found is not None:
        return found.group(0)
    return _short(code, 48) if code else "torch's own code"


@dataclass(frozen=True)
class DimBound:
    """One bound on a dim, in words: ``at most 512`` (``text``), asked by ``what`` (``position
    embeddings``, or the comparison on the line), at ``where`` (the short line), from
    ``guards`` (torch's, for the folded detail)."""

    text: str
    what: str
    where: str | None = None
    guards: tuple[Guard, ...] = ()

    def __str__(self) -> str:
        """``at most 512: position embeddings, transformers/models/bert/modeling_bert.py:95``."""
        return f"{self.text}: {self.what}" + (f", {self.where}" if self.where else "")


def bounds_text(bounds: Iterable[DimBound]) -> str:
    """Bounds in one line, each number once: ``at least 2: q_length == 1 (…/sdpa_attention.py:122),
    q_length > 1 (…:149); at most 512: position embeddings, …/modeling_bert.py:95``; a bound
    asked at one place reads as :meth:`DimBound.__str__`."""
    by_text: dict[str, list[DimBound]] = {}
    for bound in bounds:
        if bound.text:
            by_text.setdefault(bound.text, []).append(bound)
    parts = []
    for text, same in by_text.items():
        if len(same) == 1:
            parts.append(str(same[0]))
        else:
            parts.append(f"{text}: " + ", ".join(b.what + (f" ({b.where})" if b.where else "") for b in same))
    return "; ".join(parts)


def dim_bounds(guards: Iterable[Guard], example: int, low: int = 0, high: int | None = None) -> tuple[DimBound, ...]:
    """The bounds ``guards`` put on a dim whose example size is ``example``, beyond the
    requested ``[low, high]`` (a lower bound of 0 or 1 is no bound: ranges print from 1): per
    guard on one symbol, the widest range around the example in which it holds, said as
    "at least N" / "at most N". Guards with the same words and line merge; guards on several
    symbols (equalities, products) give none."""
    found: dict[tuple[str, str, str | None], list[Guard]] = {}
    floor = max(low, 1)
    for guard in guards:
        if guard.kind not in (GUARD, RUNTIME_ASSERT) or guard.expr is None:
            continue
        free: set[Any] = getattr(guard.expr, "free_symbols", set())
        if len(free) != 1:
            continue
        solved = solve_size(guard.expr, next(iter(free)), example)
        if solved is None:
            continue
        lo, hi = solved
        where = guard_where(guard)
        if lo > floor:
            found.setdefault((f"at least {lo}", _what(guard, False), where), []).append(guard)
        if hi is not None and (high is None or hi < high):
            found.setdefault((f"at most {hi}", _what(guard, True), where), []).append(guard)
    bounds = [DimBound(text, what, where, tuple(cited)) for (text, what, where), cited in found.items()]
    # The tightest of each kind first: "at least" before "at most", then by the number.
    return tuple(sorted(bounds, key=lambda b: (b.text.startswith("at most"), _number(b.text))))


def _number(text: str) -> int:
    return int(text.rsplit(" ", 1)[-1])


def axis_family(path: str, index: int) -> tuple[str, int]:
    """The family an axis belongs to in a container: ``cache.0.key`` and ``cache.1.value``, axis 2,
    are both ``("cache.*", 2)``; an axis outside a container is its own (``("x", 0)``)."""
    parts = path.split(".")
    starred = ["*" if p.isdigit() else p for p in parts]
    if len(parts) > 1 and any(p.isdigit() for p in parts[:-1]) and not parts[-1].isdigit():
        return ".".join(starred[:-1]), index
    return ".".join(starred), index


def axes_text(axes: Sequence[Axis | tuple[str, int]]) -> str:
    """Input axes in one line: ``input_ids.0 = attention_mask.0``; the leaves of a container
    that differ only by an index or by their last name merge (``cache.0.key``, ``cache.1.value``
    axis 2 → ``cache.*.key/value.2``)."""
    buckets: dict[tuple[str, int], list[str]] = {}
    for item in axes:
        path, index = item
        key = axis_family(path, index)
        last = path.rsplit(".", 1)[-1] if key[0].count(".") < path.count(".") else ""  # merged by name
        names = buckets.setdefault(key, [])
        if last and last not in names:
            names.append(last)
    return " = ".join(
        f"{parent}.{'/'.join(names) + '.' if names else ''}{index}" for (parent, index), names in buckets.items()
    )
