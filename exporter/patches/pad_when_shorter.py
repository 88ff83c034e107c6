"""Padding a sequence to a length only when it is shorter, done always, by a symbolic amount.

SEW and SEW-D pool their frames by ``squeeze_factor``, run the encoder, upsample, and pad the
result back to the input's frame count when the upsampling came out shorter (an odd count)::

    if hidden_states.shape[1] < n_input_timesteps:
        hidden_states = nn.functional.pad(hidden_states, (0, 0, 0, n_input_timesteps - hidden_states.shape[1]))

The export keeps the branch the example took: exported at an even frame count, the ONNX model
returns one frame fewer than eager PyTorch at an odd one. The replacement pads always, by
``torch.sym_max(n - length, 0)``: 0 when the sequence is not shorter, which is what the
original does then.
"""

from __future__ import annotations

import ast
from typing import Any

from .base import Patch, PatchTarget, method_targets
from .rewrite import edited_when_reading

__all__ = ["PadWhenShorter"]

METHOD = "forward"


def _pads_when_shorter(statement: ast.stmt) -> tuple[ast.stmt, str] | None:
    """``if <x>.shape[d] < <n>: <x> = ...pad(<x>, (..., <n> - <x>.shape[d]))``: the pad
    statement and the amount's text; None for any other statement."""
    if not isinstance(statement, ast.If) or statement.orelse or len(statement.body) != 1:
        return None
    test, body = statement.test, statement.body[0]
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Lt)):
        return None
    length, target = ast.unparse(test.left), ast.unparse(test.comparators[0])
    if ".shape[" not in length and ".size(" not in length:
        return None
    call = body.value if isinstance(body, ast.Assign) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, (ast.Attribute, ast.Name))
            and (call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id) == "pad"):
        return None
    amount = f"{target} - {length}"
    if body.lineno != body.end_lineno or amount not in ast.unparse(call):
        return None
    return body, amount


def _edit(lines: list[str], definition: ast.FunctionDef) -> list[str | None] | None:
    found = next(((s, f) for s in ast.walk(definition) if isinstance(s, ast.stmt) and (f := _pads_when_shorter(s))), None)
    if found is None:
        return None
    statement, (pad, amount) = found
    line = lines[pad.lineno - 1]
    if amount not in line:
        return None
    out: list[str | None] = list(lines)
    out[statement.lineno - 1] = None
    indent = lines[statement.lineno - 1][: statement.col_offset]
    out[pad.lineno - 1] = indent + line.strip().replace(amount, f"torch.sym_max({amount}, 0)")
    return out


_rewrite = edited_when_reading(frozenset({"pad"}), _edit)


class PadWhenShorter(Patch):
    name = "pad_when_shorter"
    idiom = ("a sequence padded to a length only when it is shorter "
             "(`if hidden_states.shape[1] < n_input_timesteps: hidden_states = pad(...)`, SEW, SEW-D)")
    symptom = "the example's branch is kept: one frame fewer than eager PyTorch at an odd frame count"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, _rewrite)
