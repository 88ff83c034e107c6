"""A mixture-of-experts loop over the experts some token was routed to, run over every expert.

Mixture-of-experts layers that predate transformers' experts interface (SwitchTransformers,
and the eager fallback of Mixtral-style layers) loop over the experts hit::

    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for expert_idx in expert_hit:
        ... torch.where(expert_mask[expert_idx]) ...

``nonzero()`` has a data-dependent length, so ``torch.export`` cannot iterate over it
("Could not guard on data-dependent expression Eq(u0, 0)") and neither exporter captures the
model. The replacement iterates over every expert, each as the one-element index ``[e]`` the
rows of ``nonzero()`` are: an expert no token was routed to selects no rows and adds nothing,
so the layer computes the same sum.
"""

from __future__ import annotations

import ast
from typing import Any

from .base import Patch, PatchTarget, method_targets
from .rewrite import edited_when_reading

__all__ = ["EveryExpert"]

METHOD = "forward"


def _experts_hit(statement: ast.stmt) -> tuple[str, ast.expr] | None:
    """``<name> = <1-D mask>.nonzero()``: the name and the mask; None for any other statement."""
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
            and isinstance(statement.targets[0], ast.Name) and isinstance(statement.value, ast.Call)):
        return None
    call = statement.value
    if isinstance(call.func, ast.Attribute) and call.func.attr == "nonzero" and not call.args and not call.keywords:
        return statement.targets[0].id, call.func.value
    return None


def _loops_over(body: list[ast.stmt], name: str) -> bool:
    return any(isinstance(s, ast.For) and isinstance(s.iter, ast.Name) and s.iter.id == name for s in body)


def _edit(lines: list[str], definition: ast.FunctionDef) -> list[str | None] | None:
    for statement in definition.body:
        found = _experts_hit(statement)
        if found is None or not _loops_over(definition.body, found[0]):
            continue
        if statement.end_lineno != statement.lineno:
            return None
        name, mask = found
        indent = lines[statement.lineno - 1][: statement.col_offset]
        out: list[str | None] = list(lines)
        out[statement.lineno - 1] = f"{indent}{name} = [[e] for e in range(({ast.unparse(mask)}).shape[0])]  # every expert"
        return out
    return None


_rewrite = edited_when_reading(frozenset({"nonzero"}), _edit)


class EveryExpert(Patch):
    name = "every_expert"
    idiom = ("a mixture-of-experts loop over the experts some token was routed to "
             "(`expert_hit = (...).nonzero()`, `for expert_idx in expert_hit:`, SwitchTransformers, ...)")
    symptom = "the number of experts hit depends on the values: the capture fails on a data-dependent guard"

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        return method_targets(model, METHOD, _rewrite)
