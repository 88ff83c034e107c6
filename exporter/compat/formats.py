"""Every undocumented *text* format of torch and onnxruntime the exporter reads, in one place.

The sibling of :mod:`exporter.compat` (private APIs): the wording of torch.export's
errors, torch's source names for inputs (``L['x'].size()[0]``), the tracebacks torch writes
into messages and FX ``stack_trace``s, the ``pkg.torch.onnx.*`` metadata the ONNX translator
writes on nodes, and onnxruntime's error text. Where torch raises a dedicated exception type,
the type is checked first (:mod:`exporter.compat.exceptions`) and the text only as a fallback.

``tests/exporter/test_torch_formats.py`` produces each format with real torch / onnxruntime
calls and checks the parse, so a change of wording fails there, loudly and in one place.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from typing import Any

from .exceptions import is_constraint_violation_error, is_data_dependent_error

# -- torch.export errors --------------------------------------------------------------------

CONSTRAINTS_VIOLATED = "Constraints violated"
SUGGESTED_FIXES = "Suggested fixes:"

_FIX_LINE = re.compile(r"^\s*([A-Za-z_]\w*\s*=\s*.+)$")
_MARKED_STATIC = re.compile(r"You marked (\S+) as dynamic but your code specialized it to be a constant \((-?\d+)\)")
_ZERO_ONE = re.compile(r"0/1 specialized due to hint of (\d+) for dimension (\S+?)\.?$")
_NOT_ALL_VALUES = re.compile(r"Not all values of (\S+) = .* satisfy the generated guard (.*)$")
_LOWER_BOUND = re.compile(r"(?:^|\s)(\d+) <= ")
_UPPER_BOUND = re.compile(r" <= (\d+)(?:\s|$)")
_DIM_CALL = re.compile(
    r"^Dim\(\s*['\"](\w+)['\"]\s*(?:,\s*min\s*=\s*(\d+))?\s*(?:,\s*max\s*=\s*(\d+|oo|int_oo|inf))?\s*\)$"
)
_SIZE_MISMATCH = "must match the size of tensor"


def _line_matches(pattern: re.Pattern[str], exc: BaseException | str) -> list[re.Match[str]]:
    """The match of ``pattern`` in each line of a message that has one, in order."""
    return [match for line in str(exc).splitlines() if (match := pattern.search(line.strip()))]


def is_constraint_violation(exc: BaseException) -> bool:
    """torch rejected the dim spec itself: a ``UserError`` of type ``CONSTRAINT_VIOLATION`` (or
    the ``ConstraintViolationError`` under it); for other types, its wording."""
    if is_constraint_violation_error(exc):
        return True
    text = str(exc)
    return CONSTRAINTS_VIOLATED in text or SUGGESTED_FIXES in text


def is_data_dependent(exc: BaseException) -> bool:
    """A guard on a value that depends on tensor data (``if x.sum() > 0``):
    ``GuardOnDataDependentSymNode``, or a message that says so."""
    if is_data_dependent_error(exc):
        return True
    text = type(exc).__name__ + " " + str(exc)
    return "data-dependent" in text or "GuardOnDataDependent" in text


_DATA_DEPENDENT_EXPRESSION = re.compile(r"data-dependent expression (?P<expr>.+?) \((?:unhinted: (?P<unhinted>.+?)\))?")
_BACKED_SYMBOL = re.compile(r"\bs\d+\b")


def data_dependent_symbols(exc: BaseException | str) -> tuple[str, ...]:
    """The input-size symbols (``s70``) of the expression a data-dependent guard could not
    decide: ``Could not guard on data-dependent expression 4*u1 < 16 (unhinted: 4*u1 < s70)``
    gives ``("s70",)``; the unbacked ``u1`` is a value read from a tensor, not an input's size."""
    match = _DATA_DEPENDENT_EXPRESSION.search(str(exc))
    if match is None:
        return ()
    expression = match["unhinted"] or match["expr"]
    return tuple(dict.fromkeys(_BACKED_SYMBOL.findall(expression)))


def suggested_fix_lines(exc: BaseException | str) -> tuple[str, ...]:
    """The lines under ``Suggested fixes:`` of a constraint violation (``b = Dim('b', min=3)``,
    ``dy = dx``), in order."""
    text = str(exc)
    if SUGGESTED_FIXES not in text:
        return ()
    fixes: list[str] = []
    for line in text.split(SUGGESTED_FIXES, 1)[1].splitlines():
        if not line.strip():
            if fixes:
                break
            continue
        match = _FIX_LINE.match(line)
        if not match:
            break
        fixes.append(match.group(1).strip())
    return tuple(fixes)


def violation_lines(exc: BaseException | str) -> list[str]:
    """The ``- ...`` bullet lines of a violation message (one per violated constraint), without
    the bullet."""
    return [line.strip()[2:] for line in str(exc).splitlines() if line.strip().startswith("- ")]


def marked_static(exc: BaseException | str) -> list[tuple[str, int]]:
    """``(source, constant)`` for each "You marked <source> as dynamic but your code specialized
    it to be a constant (<constant>)"."""
    return [(source, int(value)) for source, value in _MARKED_STATIC.findall(str(exc))]


def zero_one_specializations(exc: BaseException | str) -> list[tuple[str, int]]:
    """``(source, hint)`` for each "0/1 specialized due to hint of <hint> for dimension
    <source>" (a size-0/1 example asked dynamic, captured without size-oblivious mode)."""
    return [(match.group(2), int(match.group(1))) for match in _line_matches(_ZERO_ONE, exc)]


def range_violations(exc: BaseException | str) -> list[tuple[str, str]]:
    """``(name, guard)`` for each "Not all values of <name> = ... satisfy the generated guard
    <guard>" (``name`` is a Dim name or an input source)."""
    return [(match.group(1), match.group(2)) for match in _line_matches(_NOT_ALL_VALUES, exc)]


def guard_bounds(guard: str) -> tuple[list[int], list[int]]:
    """The integer lower and upper bounds in a guard's text (``3 <= s0 and s0 <= 6`` →
    ``([3], [6])``; ``IntInfinity()`` is no bound)."""
    return [int(v) for v in _LOWER_BOUND.findall(guard)], [int(v) for v in _UPPER_BOUND.findall(guard)]


def dim_call(text: str) -> tuple[str, int | None, int | None] | None:
    """``Dim('dx', min=3, max=6)`` as torch writes it in a suggested fix → ``("dx", 3, 6)``."""
    match = _DIM_CALL.match(text.strip())
    if match is None:
        return None
    lo, hi = match.group(2), match.group(3)
    return match.group(1), int(lo) if lo else None, int(hi) if hi and hi.isdigit() else None  # max=oo: none


_LIFTED_CONSTANT = re.compile(r"Constant tensor (\w+) is not in the constants dictionary")
_TREE_NAME = "Must provide a tree_name when there might be a mismatch"
_UNKNOWN_PYTREE = re.compile(r"Found <class '([\w.]+)'> in (output|input), which is not a known type")


def lifted_constant(exc: BaseException | str) -> str | None:
    """``lifted_tensor_0`` from "Constant tensor lifted_tensor_0 is not in the constants
    dictionary" (torch's ``SpecViolationError`` for a tensor created in ``forward`` that a
    pass lost)."""
    match = _LIFTED_CONSTANT.search(str(exc))
    return match.group(1) if match else None


def is_tree_name_mismatch(exc: BaseException | str) -> bool:
    """torch.export's "Must provide a tree_name when there might be a mismatch": the
    ``dynamic_shapes`` do not follow ``forward``'s parameters (a ``**kwargs`` forward)."""
    return _TREE_NAME in str(exc)


def unknown_pytree_type(exc: BaseException | str) -> tuple[str, str] | None:
    """``(class, "input" | "output")`` from "Found <class 'X'> in output, which is not a known
    type": a container torch has no pytree for (a transformers ``DynamicCache``)."""
    match = _UNKNOWN_PYTREE.search(str(exc))
    return (match.group(1), match.group(2)) if match else None


def unflattenable_text(exc: BaseException | str) -> str | None:
    """:func:`unknown_pytree_type` in words: ``the model returns a EncoderDecoderCache
    (transformers.cache_utils), which torch cannot flatten into tensors``; None for another error."""
    found = unknown_pytree_type(exc)
    if found is None:
        return None
    qualified, where = found
    module, _, name = qualified.rpartition(".")
    verb = "returns" if where == "output" else "takes"
    return f"the model {verb} a {name}" + (f" ({module})" if module else "") + ", which torch cannot flatten into tensors"


def derived_fix(rhs: str) -> tuple[str, int, int] | None:
    """The right side of a derived suggested fix, ``a + 1`` / ``2*a`` / ``2*a - 1``, as
    ``(root name, scale, offset)``; None unless it is ``scale * name + offset`` with
    ``scale >= 1`` (read with sympy)."""
    import sympy

    try:
        expr = sympy.sympify(rhs)
    except (sympy.SympifyError, SyntaxError, TypeError):
        return None
    if len(getattr(expr, "free_symbols", ())) != 1:
        return None
    (symbol,) = expr.free_symbols
    try:
        poly = sympy.Poly(expr, symbol)
    except sympy.PolynomialError:
        return None
    if poly.degree() != 1 or not all(c.is_integer for c in poly.all_coeffs()):
        return None
    scale, offset = (int(c) for c in poly.all_coeffs())
    return (str(symbol), scale, offset) if scale >= 1 else None


def is_size_mismatch(exc: BaseException | str) -> bool:
    """"The size of tensor a (n) must match the size of tensor b (m)": two sizes that must be
    equal (or broadcast) are not."""
    return _SIZE_MISMATCH in str(exc)


# -- input sources: how torch names an input's size ------------------------------------------

_SIZE = re.compile(r"\.(?:size\(\)|shape)\[(\d+)\]")
_SIZE_AT_END = re.compile(_SIZE.pattern + "$")


def parameter_sources(parameter: str, keys: str) -> tuple[str, str]:
    """How torch names a (nested) tensor of ``forward``'s ``parameter`` at pytree key string
    ``keys`` (``[0]['key']``, ``.b``): in guards and non-strict errors ``L['cache'][0]['key']``,
    in dynamic_shapes messages ``inputs['cache'][0]['key']``."""
    return f"L[{parameter!r}]{keys}", f"inputs[{parameter!r}]{keys}"


def flat_arg_source(index: int) -> str:
    """How strict mode names the ``index``-th pytree leaf of the inputs: ``L['flat_args'][0]``."""
    return f"L['flat_args'][{index}]"


def size_source(base: str, axis: int) -> str:
    """``L['x'].size()[0]``: a size in torch's guard text."""
    return f"{base}.size()[{axis}]"


def split_size_source(source: str) -> tuple[str, int] | None:
    """``L['x'].size()[1]`` or ``inputs['x'].shape[1]`` → ``("L['x']", 1)``; None for
    anything else (strides, unbacked values)."""
    source = source.strip()
    match = _SIZE_AT_END.search(source)
    return (source[: match.start()], int(match.group(1))) if match else None


def size_sources_in(text: str, bases: Iterable[str]) -> Iterator[tuple[str, int]]:
    """``(base, axis)`` for every size of one of ``bases`` a message mentions, in order."""
    bases = sorted(bases, key=len, reverse=True)
    if not bases:
        return
    prefixes = "|".join(re.escape(b) for b in bases)
    for match in re.finditer(rf"(?<![\w\].])({prefixes}){_SIZE.pattern}", text):
        yield match.group(1), int(match.group(2))


# -- tracebacks torch writes into messages and stack_trace metadata ------------------------

_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)')


def traceback_frames(text: str | None) -> list[tuple[str, int, str, str]]:
    """``(file, line, function, code)`` of every ``File "f.py", line 12, in forward`` frame in
    a message or an FX ``stack_trace``, outermost first."""
    return [(f, int(n), fn, code.strip()) for f, n, fn, code in _FRAME.findall(text or "")]


# -- ONNX node metadata written by torch.onnx's translator ---------------------------------

FX_NODE_KEY = "pkg.torch.onnx.fx_node"
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"
CLASS_HIERARCHY_KEY = "pkg.torch.onnx.class_hierarchy"

_FX_NODE = re.compile(r"^%([\w.]+)\s*:")


def _metadata(node: Any, key: str) -> str | None:
    return getattr(node, "metadata_props", {}).get(key) or None


def fx_node_text(node: Any) -> str | None:
    """The FX node an ONNX node came from, as torch wrote it (``%view : [num_users=1] = ...``)."""
    return _metadata(node, FX_NODE_KEY)


def fx_node_name(text: str | None) -> str | None:
    """``%view : [num_users=1] = call_function[...]`` → ``view``."""
    match = _FX_NODE.match(text or "")
    return match.group(1) if match else None


def name_scopes_text(node: Any) -> str | None:
    """The module scopes of an ONNX node as torch wrote them (``"['', 'attn', 'linear']"``)."""
    return _metadata(node, NAME_SCOPES_KEY)


def parse_name_scopes(value: Any) -> list[str] | None:
    """``"['', 'attn', 'linear']"`` (or the list itself) → ``['', 'attn', 'linear']``; None when
    unreadable."""
    if isinstance(value, str):
        value = parse_string_list(value)
    return [str(s) for s in value] if isinstance(value, (list, tuple)) else None


_PLAIN_STRING = "'[^'\\\\\\n]*'|\"[^\"\\\\\\n]*\""  # a quoted string without escapes
_PLAIN_STRING_LIST = re.compile(rf"\[\s*(?:(?:{_PLAIN_STRING})\s*(?:,\s*(?:{_PLAIN_STRING})\s*)*,?\s*)?\]")
_PLAIN_STRING_ITEM = re.compile(_PLAIN_STRING)


def parse_string_list(text: str) -> Any:
    """A Python literal as torch writes its node metadata (``"['', 'attn', 'linear']"``): a list
    of plain quoted strings is read directly (``ast.literal_eval`` costs ~50 µs a text, and a
    model has one text per FX node); anything else goes through ``ast.literal_eval``. None when
    the text is no literal."""
    if _PLAIN_STRING_LIST.fullmatch(text):
        return [item[1:-1] for item in _PLAIN_STRING_ITEM.findall(text)]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def stack_trace_text(node: Any) -> str | None:
    """The Python stack an ONNX node was traced at, as torch wrote it."""
    return _metadata(node, STACK_TRACE_KEY)


# -- onnxruntime errors ----------------------------------------------------------------------

_ORT_PREFIX = re.compile(r"^\[ONNXRuntimeError\] : \d+ : \w+ : ")
_ORT_CHECK = re.compile(r"Status Message: \S+:\d+ .*? was false\. ")
_ORT_NODE = re.compile(r"Name:'([^']+)'")


def ort_error_message(exc: BaseException) -> str:
    """onnxruntime's message, first line, without the ``[ONNXRuntimeError] : 1 : FAIL :``
    prefix nor the C++ check that failed."""
    text = str(exc).strip()
    line = text.splitlines()[0] if text else type(exc).__name__
    return _ORT_CHECK.sub("Status Message: ", _ORT_PREFIX.sub("", line))


_ORT_NO_KERNEL = re.compile(r"Could not find an implementation for (\w+\(\d+\)) node")


def ort_missing_kernel(exc: BaseException) -> str | None:
    """``Mul(14)`` from onnxruntime's NOT_IMPLEMENTED "Could not find an implementation for
    Mul(14) node with name 'node_mul'" (no kernel for the node's types, e.g. bfloat16 Mul)."""
    match = _ORT_NO_KERNEL.search(str(exc))
    return match.group(1) if match else None


def ort_error_node(exc: BaseException) -> str | None:
    """The name of the ONNX node onnxruntime was running when it failed (``Name:'node_view'``)."""
    match = _ORT_NODE.search(str(exc))
    return match.group(1) if match else None
