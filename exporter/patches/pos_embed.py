"""Position-embedding interpolation that returns the stored table at the size it was trained at.

ViT-family embeddings in transformers (DINOv2, DINOv2 with registers, ViT, DeiT, BEiT, CLIP,
SigLIP, Swin... 43 files in transformers 5) interpolate their position table to the image
size, except at the training size::

    if not torch.jit.is_tracing() and num_patches == num_positions and height == width:
        return self.position_embeddings

``torch.export`` does not count as tracing there, so an export whose example has the training
size takes the early return: the table, with the training number of patches, is baked into
the graph while height and width stay dynamic, and onnxruntime fails at the next size that
changes the number of patches (``Add``: "Attempting to broadcast an axis by a dimension other
than 1"). Some (TIPSv2) also give ``interpolate`` ``size=(torch_int(height), torch_int(width))``
and check the result unless tracing (``if not torch.jit.is_tracing(): if int(height) != ...:
raise``): ``torch_int`` is ``int()`` outside ``torch.jit.trace``, and ``int()`` of an exported
size makes it a constant. The patch removes the early return and the check, which is what
transformers does under ``torch.jit.trace`` ("always interpolate when tracing to ensure the
exported model works for dynamic input shapes"), and passes ``height`` itself where it was
floor-divided in the function (an ``int`` in eager: ``torch_int`` of it is itself). At the
training size the interpolation is the identity.
"""

from __future__ import annotations

import ast
from typing import Any

from .base import Patch, PatchTarget, method_targets
from .rewrite import edited

__all__ = ["PositionEmbeddingInterpolation"]

METHOD = "interpolate_pos_encoding"


def _is_jit_tracing_call(node: ast.AST) -> bool:
    """``torch.jit.is_tracing()``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "is_tracing"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "jit")


def _only_raises(statements: list[ast.stmt]) -> bool:
    """Checks and nothing else: ``raise``, or ``if ...: raise`` (no else), at any depth."""
    return all(isinstance(s, ast.Raise) or (isinstance(s, ast.If) and not s.orelse and _only_raises(s.body))
               for s in statements)


def _skipped_when_tracing(statement: ast.stmt) -> bool:
    """``if not torch.jit.is_tracing() and ...: return <the table>``, or a size check that
    runs only when not tracing (``if not torch.jit.is_tracing(): if ...: raise``); no else."""
    return (isinstance(statement, ast.If) and not statement.orelse
            and any(_is_jit_tracing_call(node) for node in ast.walk(statement.test))
            and ((len(statement.body) == 1 and isinstance(statement.body[0], ast.Return))
                 or _only_raises(statement.body)))


class PositionEmbeddingInterpolation(Patch):
    name = "pos_embed_interpolation"
    idiom = ("position-embedding interpolation that returns the stored table unchanged at the training "
             "size (`if not torch.jit.is_tracing() and num_patches == num_positions ...: return`), or "
             "resizes to `torch_int(height)` (an `int()` of the size)")
    symptom = ("the training number of patches is baked into the graph: onnxruntime fails (Add/Concat "
               "broadcast) at any other image size")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, _rewrite)


def _floor_divided(definition: ast.FunctionDef) -> set[str]:
    """Names the function assigns a floor division to (``height = height // patch_size``)."""
    return {target.id for node in ast.walk(definition) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.BinOp) and isinstance(node.value.op, ast.FloorDiv)
            for target in node.targets if isinstance(target, ast.Name)}


def _as_traced(lines: list[str], definition: ast.FunctionDef) -> list[str | None] | None:
    """The lines with the statements skipped under tracing left out and ``torch_int(height)``
    (of a floor-divided name, on one line) made ``height``; None when there is neither."""
    new: list[str | None] = list(lines)
    dropped = [node for node in ast.walk(definition)
               if isinstance(node, ast.stmt) and node is not definition and _skipped_when_tracing(node)]
    for node in dropped:
        for number in range(node.lineno, (node.end_lineno or node.lineno) + 1):
            new[number - 1] = None
    sizes = _floor_divided(definition)
    casts = sorted(((node.lineno, node.col_offset, node.end_col_offset or 0, node.args[0].id)
                    for node in ast.walk(definition)
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "torch_int"
                    and len(node.args) == 1 and not node.keywords and isinstance(node.args[0], ast.Name)
                    and node.args[0].id in sizes and node.lineno == node.end_lineno), reverse=True)
    for lineno, start, end, name in casts:  # right to left: earlier offsets on the line stay valid
        line = new[lineno - 1]
        if line is not None:
            new[lineno - 1] = line[:start] + name + line[end:]
    return new if dropped or casts else None


def _rewrite(method: Any) -> tuple[Any, str, str] | None:
    rewritten = edited(method, _as_traced)
    return None if rewritten is None else (rewritten.function, rewritten.original_source, rewritten.source)
