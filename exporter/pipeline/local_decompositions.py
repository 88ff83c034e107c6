"""Decompositions this project carries where torch's own gives a graph that cannot be exported.

- ``aten.rsub.Scalar`` (``1.0 - attention_mask`` on an integer mask: XLNet, ProphetNet):
  torch's reference decomposition writes ``aten.sub.Tensor(1.0, mask.float())``, a scalar in
  the tensor slot, which its own type-promotion pass then cannot run ("Cannot find a
  compatible OpOverload for aten.sub"), so torch.onnx.export fails there too. For a tensor
  that is not floating, written as ``add(neg(self), other)`` (``add(mul(self, -alpha),
  other)``): the same value bit for bit (negation is exact, addition commutes) and the same
  dtype promotion. A floating tensor keeps torch's decomposition (and its ONNX graph).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["decomposition_tables", "local_decompositions", "rsub_scalar"]


def rsub_scalar(self: Any, other: Any, alpha: Any = 1) -> Any:
    """``other - alpha * self`` for a tensor ``self`` that is not floating and a number
    ``other``, as ``add(neg(self), other)``."""
    import torch

    aten = torch.ops.aten
    scaled = aten.neg.default(self) if alpha == 1 else aten.mul.Tensor(self, -alpha)
    return aten.add.Tensor(scaled, other)


def _unless_floating(local: Callable[..., Any], torchs: Callable[..., Any] | None) -> Callable[..., Any]:
    """``local`` for a tensor that is not floating, torch's own decomposition otherwise."""

    def decomposition(self: Any, *args: Any, **kwargs: Any) -> Any:
        if torchs is not None and (self.is_floating_point() or self.is_complex()):
            return torchs(self, *args, **kwargs)
        return local(self, *args, **kwargs)

    return decomposition


def local_decompositions(torchs: dict[Any, Any]) -> dict[Any, Callable[..., Any]]:
    """The ops this project decomposes its own way, each to the function that does it;
    ``torchs`` is torch's python decomposition table, used where the local one does not apply."""
    import torch

    rsub = torch.ops.aten.rsub.Scalar
    return {rsub: _unless_floating(rsub_scalar, torchs.get(rsub))}


_LAST: list[tuple[Any, tuple[dict[Any, Any], dict[Any, Any]]]] = []  # (torch.onnx's tables, ours from them)


def decomposition_tables(registry: Any) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """torch.onnx's ``(composite-implicit, python)`` decomposition tables for ``registry``
    with :func:`local_decompositions` in the python table, in place of torch's entries for
    the same ops. Built again only when those tables are (another registry, or ops a
    library registered since)."""
    from .. import compat

    tables = compat.onnx_decomposition_tables(registry)
    for source, built in _LAST:
        if source is tables:
            return built
    composite, python = tables
    local = local_decompositions(python)
    built = ({op: fn for op, fn in composite.items() if op not in local}, {**python, **local})
    _LAST[:] = [*_LAST[-3:], (tables, built)]
    return built
