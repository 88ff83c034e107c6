"""A size past the chunk a program cuts a dim into, when the usual sizes never reach it.

A chunked model (the delta rule of Qwen3-Next and Kimi-Linear: chunks of 64 tokens) swept at
16, 32 and the sizes near them runs one chunk every time: a program wrong from the second chunk
on would pass. The program's own shapes say where the chunks are (``(seq + 63)//64``,
``Mod(seq, 64)``); a group whose example is less than half a chunk gets one case just past it
(:func:`with_chunk_sizes`), inside the requested and obtained ranges.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

from .groups import DimGroup

__all__ = ["chunk_divisors", "shape_expressions", "with_chunk_sizes"]

_DIVIDING = frozenset({"FloorDiv", "Mod", "PythonMod", "CleanDiv"})
_LARGEST = 4096  # a chunk past this is swept by nobody's example: not worth a case that large
KIND = "past a chunk"


def shape_expressions(program: Any) -> Iterator[Any]:
    """Each distinct symbolic size of the program's values (sympy), once."""
    seen: set[Any] = set()
    for node in program.graph.nodes:
        value = node.meta.get("val")
        for size in getattr(value, "shape", ()) or ():
            expr = getattr(getattr(size, "node", None), "expr", None)
            if expr is not None and not getattr(expr, "is_number", True) and expr not in seen:
                seen.add(expr)
                yield expr


def chunk_divisors(program: Any) -> dict[str, set[int]]:
    """The integer divisors of the floor divisions and remainders in the program's sizes, by
    the symbol divided (``{"s27": {64}}`` for ``(s27 + 63)//64``)."""
    import sympy

    found: dict[str, set[int]] = {}
    for expr in shape_expressions(program):
        for term in sympy.preorder_traversal(expr):
            if type(term).__name__ not in _DIVIDING or len(term.args) != 2:
                continue
            dividend, divisor = term.args
            if getattr(divisor, "is_Integer", False) and 1 < int(divisor) <= _LARGEST:
                for symbol in dividend.free_symbols:
                    found.setdefault(symbol.name, set()).add(int(divisor))
    return found


def _past_chunk(group: DimGroup, divisors: dict[str, set[int]]) -> tuple[str, int, str] | None:
    if group.specialized or group.derived is not None or not group.symbols:
        return None
    chunks = sorted({d for symbol in group.symbols for d in divisors.get(symbol, ())})
    chunk = next((d for d in chunks if d > 2 * group.example and group.in_both_ranges(d + 1)), None)
    return None if chunk is None else (f"{KIND} of {chunk}", chunk + 1, f"the program cuts {group.label} into chunks of {chunk}")


def with_chunk_sizes(groups: Sequence[DimGroup], program: Any) -> list[DimGroup]:
    """``groups`` with a ``past a chunk of N`` size added to :attr:`DimGroup.guard_sizes` where
    the program divides a group's size by N and its example is under half of N."""
    try:
        divisors = chunk_divisors(program)
    except Exception:  # noqa: BLE001 - extra cases, never a failure
        return list(groups)
    out = []
    for group in groups:
        found = _past_chunk(group, divisors)
        out.append(replace(group, guard_sizes=(*group.guard_sizes, found)) if found else group)
    return out
