"""A function rebuilt from its own source with some lines edited or left out (:func:`edited`).

The rebuilt function is compiled under the original's file name with the left-out lines
blanked, so every remaining line keeps its number: a graph node's stack trace still points at
the user's (the library's) file and line. It runs in the original's module globals, so the
names it reads are the original's. Functions with free variables (a closure, ``super()``'s
``__class__``) or decorators are not rebuilt: the copy could not be the same function
(:func:`edited` takes ``torch.no_grad()`` and an edit that removes ``super()``).
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["Rewritten", "edited", "edited_when_reading"]

# Decorators a rebuilt function may carry: evaluated again in the module's globals, they wrap
# the copy as they wrap the original (a registering decorator would not make the same function).
_REAPPLIED = frozenset({"torch.no_grad()", "torch.inference_mode()"})

#: An edit: the dedented source lines of a function and its parsed definition, to the same
#: number of lines, None for a line left out; or None when the function has nothing to edit.
Edit = Callable[[list[str], ast.FunctionDef], "list[str | None] | None"]


@dataclass(frozen=True)
class Rewritten:
    """``function`` is the rebuilt function; ``original_source`` and ``source`` the dedented
    texts before and after (the left-out statements removed, for a diff)."""

    function: Any
    original_source: str
    source: str


def edited(function: Any, edit: Edit) -> Rewritten | None:
    """``function`` rebuilt from the lines ``edit`` gives for its source, each line at its
    number in the file; None when ``edit`` finds nothing to change or the result cannot be
    the same function (a closure, a decorator other than ``torch.no_grad()``, ``super()`` left
    in a copy that has no class cell)."""
    return _edited(function, edit)


def edited_when_reading(names: frozenset[str], edit: Edit) -> Callable[[Any], tuple[Any, str, str] | None]:
    """A rewrite for :func:`~.base.method_targets`: a method whose code reads one of ``names``
    (a cheap test: most forwards do not) rebuilt with ``edit``, as ``(function, original
    source, source)``; None for any other, or when ``edit`` finds nothing."""
    def rewrite(method: Any) -> tuple[Any, str, str] | None:
        code = getattr(inspect.unwrap(method), "__code__", None)
        if code is None or not names & set(code.co_names):
            return None
        rewritten = edited(method, edit)
        return None if rewritten is None else (rewritten.function, rewritten.original_source, rewritten.source)

    return rewrite


@functools.lru_cache(maxsize=256)
def _edited(function: Any, edit: Edit) -> Rewritten | None:
    function = inspect.unwrap(function)
    parsed = _parsed(function, allow_class_cell=True)
    if parsed is None or any(ast.unparse(d) not in _REAPPLIED for d in parsed[1].decorator_list):
        return None
    text, definition = parsed
    lines = text.splitlines()
    new = edit(list(lines), definition)
    if new is None or len(new) != len(lines) or any("super()" in line for line in new if line is not None):
        return None
    return _rebuilt(function, text, definition, new)


def _parsed(function: Any, allow_class_cell: bool = False) -> tuple[str, ast.FunctionDef] | None:
    """The dedented source of ``function`` and its definition, or None when it has none or
    closes over names (a class cell, for ``super()``, only when ``allow_class_cell``)."""
    code = getattr(function, "__code__", None)
    if code is None or set(code.co_freevars) - ({"__class__"} if allow_class_cell else set()):
        return None
    try:
        text = textwrap.dedent(inspect.getsource(function))
        tree = ast.parse(text)
    except (OSError, TypeError, SyntaxError):
        return None
    definition = tree.body[0] if tree.body else None
    return (text, definition) if isinstance(definition, ast.FunctionDef) else None


def _rebuilt(function: Any, text: str, definition: ast.FunctionDef, lines: list[str | None]) -> Rewritten | None:
    """``lines`` (None for a line left out) compiled under the original's file name, each at
    its line number, and run in the original's module globals."""
    code = function.__code__
    compiled = ["" if line is None else line for line in lines]
    shown = [line for line in lines if line is not None]
    # Blank lines before the definition put every line at its number in the file.
    padded = "\n" * (code.co_firstlineno - 1) + "\n".join(compiled) + "\n"
    namespace: dict[str, Any] = {}
    try:
        exec(compile(padded, code.co_filename, "exec"), function.__globals__, namespace)  # noqa: S102
    except SyntaxError:  # a block left empty
        return None
    rebuilt = namespace[definition.name]
    rebuilt.__qualname__ = function.__qualname__
    rebuilt.__module__ = function.__module__
    return Rewritten(rebuilt, text, "\n".join(shown) + "\n")
