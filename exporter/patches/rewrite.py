"""A function rebuilt from its own source with some statements left out.

The rebuilt function is compiled under the original's file name with the left-out lines
blanked, so every remaining line keeps its number: a graph node's stack trace still points at
the user's (the library's) file and line. It runs in the original's module globals, so the
names it reads are the original's. Functions with free variables (a closure, ``super()``'s
``__class__``) or decorators are not rebuilt: the copy could not be the same function.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Rewritten", "without_statements"]


@dataclass(frozen=True)
class Rewritten:
    """``function`` is the rebuilt function; ``original_source`` and ``source`` the dedented
    texts before and after (the left-out statements removed, for a diff)."""

    function: Any
    original_source: str
    source: str


def without_statements(function: Any, drop: Callable[[ast.stmt], bool]) -> Rewritten | None:
    """``function`` rebuilt without the statements ``drop`` selects (at any depth), or None
    when none is selected or it cannot be rebuilt as the same function."""
    return _rewrite(function, drop)


@functools.lru_cache(maxsize=256)
def _rewrite(function: Any, drop: Callable[[ast.stmt], bool]) -> Rewritten | None:
    code = getattr(function, "__code__", None)
    if code is None or code.co_freevars:
        return None
    try:
        raw = inspect.getsource(function)
    except (OSError, TypeError):
        return None
    text = textwrap.dedent(raw)
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    definition = tree.body[0] if tree.body else None
    if not isinstance(definition, (ast.FunctionDef, ast.AsyncFunctionDef)) or definition.decorator_list:
        return None
    spans = [(node.lineno, node.end_lineno or node.lineno) for node in ast.walk(definition)
             if isinstance(node, ast.stmt) and node is not definition and drop(node)]
    if not spans:
        return None
    lines = text.splitlines()
    removed = {line for start, end in spans for line in range(start, end + 1)}
    blanked = ["" if i + 1 in removed else line for i, line in enumerate(lines)]
    shown = [line for i, line in enumerate(lines) if i + 1 not in removed]
    # Blank lines before the definition put every line at its number in the file.
    padded = "\n" * (code.co_firstlineno - 1) + "\n".join(blanked) + "\n"
    namespace: dict[str, Any] = {}
    try:
        exec(compile(padded, code.co_filename, "exec"), function.__globals__, namespace)  # noqa: S102
    except SyntaxError:  # a block left empty
        return None
    rebuilt = namespace[definition.name]
    rebuilt.__qualname__ = function.__qualname__
    rebuilt.__module__ = function.__module__
    return Rewritten(rebuilt, text, "\n".join(shown) + "\n")
