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
than 1"). The patch removes that early return, which is what transformers does under
``torch.jit.trace`` ("always interpolate when tracing to ensure the exported model works for
dynamic input shapes"): at the training size the interpolation is the identity.
"""

from __future__ import annotations

import ast
from typing import Any

from .base import Patch, PatchTarget, method_targets
from .rewrite import without_statements

__all__ = ["PositionEmbeddingInterpolation"]

METHOD = "interpolate_pos_encoding"


def _is_jit_tracing_call(node: ast.AST) -> bool:
    """``torch.jit.is_tracing()``."""
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "is_tracing"
            and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "jit")


def _early_return_unless_tracing(statement: ast.stmt) -> bool:
    """``if not torch.jit.is_tracing() and ...: return <the table>`` (no else)."""
    return (isinstance(statement, ast.If) and not statement.orelse
            and len(statement.body) == 1 and isinstance(statement.body[0], ast.Return)
            and any(_is_jit_tracing_call(node) for node in ast.walk(statement.test)))


class PositionEmbeddingInterpolation(Patch):
    name = "pos_embed_interpolation"
    idiom = ("position-embedding interpolation that returns the stored table unchanged at the training "
             "size (`if not torch.jit.is_tracing() and num_patches == num_positions ...: return`)")
    symptom = ("the training number of patches is baked into the graph: onnxruntime fails (Add/Concat "
               "broadcast) at any other image size")

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, _rewrite)


def _rewrite(method: Any) -> tuple[Any, str, str] | None:
    rewritten = without_statements(method, _early_return_unless_tracing)
    return None if rewritten is None else (rewritten.function, rewritten.original_source, rewritten.source)
