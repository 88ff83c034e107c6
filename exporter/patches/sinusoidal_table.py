"""A sinusoidal position table that grows in eager PyTorch and is baked at its size in an export.

The fairseq-style sinusoidal embeddings in transformers (M2M100, NLLB-MoE, FSMT, XGLM,
Speech2Text, SpeechT5, SeamlessM4T, Kosmos-2) keep a table of ``max_position_embeddings`` rows
and make it larger when a sequence needs more::

    max_pos = self.padding_idx + 1 + seq_len + cache_length
    if ... max_pos > self.weights.size(0):
        self.make_weights(max_pos + self.offset, self.embedding_dim, self.padding_idx)
    return self.weights.index_select(0, position_ids.view(-1)) ...

``torch.export`` keeps the branch the example took and guards ``seq_len <= rows - 2``: the ONNX
model holds the table at its example size, and onnxruntime fails in a ``Gather`` ("indices
element out of data bounds, idx=130") at a sequence eager PyTorch runs by growing the table.
The replacement computes the table for the sequence at hand with the class's own
``get_embedding`` (row ``i`` is the same at any number of rows), a symbolic number of rows,
and never writes the module.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from .base import Patch, PatchTarget, method_targets
from .rewrite import edited_when_reading

__all__ = ["SinusoidalTable"]

METHOD = "forward"
# fsmt's table is an nn.Embedding subclass's own weight, looked up with super().forward
_EMBEDDING_LOOKUP = re.compile(r"super\(\)\.forward\((?P<ids>\w+)\)")


def _grows_table(statement: ast.stmt) -> tuple[str, ast.Call, ast.expr] | None:
    """``if ... max_pos > self.<table>.size(0): self.make_<table>(...)``: the table's
    attribute, the make call and the compared size; None for any other statement."""
    if not isinstance(statement, ast.If) or statement.orelse or len(statement.body) != 1:
        return None
    body = statement.body[0]
    call = body.value if isinstance(body, ast.Expr) else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in ("make_weights", "make_weight")):
        return None
    table = "weights" if call.func.attr == "make_weights" else "weight"
    for node in ast.walk(statement.test):
        if (isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.Gt)
                and ast.unparse(node.comparators[0]) == f"self.{table}.size(0)"):
            return table, call, node.left
    return None


def _edit(lines: list[str], definition: ast.FunctionDef) -> list[str | None] | None:
    found = next(((s, g) for s in ast.walk(definition) if isinstance(s, ast.stmt) and (g := _grows_table(s))), None)
    if found is None:
        return None
    statement, (table, call, size) = found
    args = ", ".join(ast.unparse(a) for a in call.args)
    indent = lines[statement.lineno - 1][: statement.col_offset]
    out: list[str | None] = list(lines)
    # A compileable cache makes the size a tensor: the original keeps its table then, and so does this.
    out[statement.lineno - 1] = (f"{indent}{table} = self.{table} if torch.is_tensor({ast.unparse(size)}) "
                                 f"else self.get_embedding({args}).to(self.{table})")
    for number in range(statement.lineno, (statement.end_lineno or statement.lineno)):
        out[number] = None
    attribute = re.compile(rf"\bself\.{table}\b")
    for number in range((statement.end_lineno or statement.lineno), len(lines)):
        line = attribute.sub(table, lines[number])
        out[number] = _EMBEDDING_LOOKUP.sub(
            rf"torch.nn.functional.embedding(\g<ids>, {table}, self.padding_idx, self.max_norm, self.norm_type, "
            r"self.scale_grad_by_freq, self.sparse)", line)
    return out


_rewrite = edited_when_reading(frozenset({"make_weights", "make_weight"}), _edit)


class SinusoidalTable(Patch):
    name = "sinusoidal_positions"
    idiom = ("a sinusoidal position table that eager PyTorch grows when a sequence needs more rows "
             "(`if max_pos > self.weights.size(0): self.make_weights(...)`, M2M100, NLLB, FSMT, XGLM, ...)")
    symptom = ("the table is baked at its size: onnxruntime fails in a Gather (indices out of bounds) at a "
               "longer sequence, which eager PyTorch runs")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return tuple(t for t in method_targets(model, METHOD, _rewrite) if hasattr(t.owner, "get_embedding"))
