"""The symbolic dims torch writes on ONNX values, read as expressions: ``(height//14)``,
``((h//4))*((w//4)) + 1``, ``Min(16, seq)``.

The torch exporter gives every value it translates from an FX node the shape FX recorded,
each dim an int or the text of torch's sympy expression over the input dim names (the
``dim_param`` s of the graph inputs). :func:`parse_dim` reads such a text into a
:class:`DimExpr` that can be evaluated at given sizes without sympy: a whitelisted Python
expression (``+ - * // % /``, ``**``, ``Min``, ``Max``, ``Mod``, ``floor``, ``ceiling``,
``sqrt`` and torch's ``FloorToInt``-style functions); anything else is not a ``DimExpr``
(``None``), and a caller treats the dim as unknown.
"""

from __future__ import annotations

import ast
import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["DimExpr", "parse_dim"]


def _pymod(a: Any, b: Any) -> Any:
    return a % b


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "Min": min, "Max": max, "Mod": _pymod, "PythonMod": _pymod, "FloorDiv": lambda a, b: a // b,
    "floor": math.floor, "FloorToInt": math.floor, "ceiling": math.ceil, "CeilToInt": math.ceil,
    "TruncToInt": math.trunc, "Abs": abs, "ToFloat": float, "IntTrueDiv": lambda a, b: a / b,
    "FloatTrueDiv": lambda a, b: a / b, "sqrt": math.sqrt, "OpaqueUnaryFn_sqrt": math.sqrt,
    "Pow": lambda a, b: a ** b, "PowByNatural": lambda a, b: a ** b, "CleanDiv": lambda a, b: a // b,
}
_OPERATORS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b, ast.Mod: _pymod, ast.Div: lambda a, b: a / b,
    ast.Pow: lambda a, b: a ** b,
}


@dataclass(frozen=True)
class DimExpr:
    """One symbolic dim: its text as torch wrote it and the input dim names it reads."""

    text: str
    symbols: frozenset[str]
    _tree: Any = None

    def value(self, sizes: Mapping[str, int]) -> int | None:
        """The dim at ``sizes`` (by dim name), or None when a name is missing or the
        expression does not give a whole number there (a division by zero, a negative size)."""
        if not self.symbols <= sizes.keys():
            return None
        try:
            out = _evaluate(self._tree, sizes)
        except (ArithmeticError, ValueError, TypeError, OverflowError):
            return None
        if isinstance(out, float):
            if not out.is_integer():
                return None
            out = int(out)
        return out if isinstance(out, int) and out >= 0 else None

    def parts(self) -> tuple[DimExpr, ...]:
        """This expression and each sub-expression that reads a dim name, outermost first:
        ``((h//4))*((w//4))`` → itself, ``h//4``, ``h``, ``w//4``, ``w``."""
        found: list[DimExpr] = []
        for node in ast.walk(self._tree):
            if isinstance(node, (ast.BinOp, ast.Call, ast.Name, ast.UnaryOp)):
                names = frozenset(n.id for n in ast.walk(node) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS)
                if names:
                    found.append(DimExpr(ast.unparse(node), names, ast.Expression(node)))
        return tuple(dict.fromkeys(found))

    def renamed(self, names: Mapping[str, str]) -> str:
        """The text with dim names replaced (``pixel_values_dim2`` → ``pixel_values.shape[2]``)."""
        tree = ast.parse(ast.unparse(self._tree), mode="eval")
        for node in ast.walk(tree):
            if isinstance(node, ast.Name) and node.id in names:
                node.id = names[node.id]
        return ast.unparse(tree)

    def __hash__(self) -> int:
        return hash(self.text)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DimExpr) and self.text == other.text

    def __str__(self) -> str:
        return self.text


def _evaluate(node: Any, sizes: Mapping[str, int]) -> Any:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body, sizes)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return sizes[node.id]
    if isinstance(node, ast.BinOp):
        return _OPERATORS[type(node.op)](_evaluate(node.left, sizes), _evaluate(node.right, sizes))
    if isinstance(node, ast.UnaryOp):
        value = _evaluate(node.operand, sizes)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        return _FUNCTIONS[node.func.id](*(_evaluate(arg, sizes) for arg in node.args))
    raise TypeError(f"not a dim expression: {ast.dump(node)}")


def _allowed(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
                return False
        elif isinstance(node, ast.BinOp):
            if type(node.op) not in _OPERATORS:
                return False
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                return False
        elif isinstance(node, ast.Constant):
            if not isinstance(node.value, (int, float)) or isinstance(node.value, bool):
                return False
        elif not isinstance(node, (ast.Expression, ast.Name, ast.Load, ast.operator, ast.unaryop)):
            return False
    return True


@functools.lru_cache(maxsize=4096)
def parse_dim(text: str) -> DimExpr | None:
    """``"((h//4))*((w//4))"`` → a :class:`DimExpr`; None for a text that is not a dim
    expression this module can evaluate (or reads no dim name: a plain number)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None
    if not _allowed(tree):
        return None
    names = frozenset(n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and n.id not in _FUNCTIONS)
    return DimExpr(ast.unparse(tree), names, tree) if names else None
