"""Reading what the torch exporter writes on ONNX nodes and FX nodes: the FX node an ONNX
node came from and its ``nn.Module`` path (the user's source line of a stack trace:
:func:`exporter.frames.source_of_stack`).

The ONNX keys (``pkg.torch.onnx.fx_node``, ``name_scopes``, ``stack_trace``) are written by
``torch.onnx``'s translator on every node it emits; the optimizer keeps them on the nodes it
keeps. ``verify`` (first divergent node), ``bench`` (profile by module) and ``graphs`` (the
FX↔ONNX mapping) all read them through here; it sits below them all (it imports only
:mod:`exporter.compat.formats`).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from .compat.formats import FX_NODE_KEY, NAME_SCOPES_KEY, STACK_TRACE_KEY, fx_node_name, parse_name_scopes

__all__ = [
    "FX_NODE_KEY",
    "NAME_SCOPES_KEY",
    "STACK_TRACE_KEY",
    "fx_name_of",
    "module_path_of",
    "normalize_module_path",
]


def fx_name_of(node: Any) -> str | None:
    """The name of the FX node an ONNX node was translated from (``None`` if not recorded)."""
    return fx_node_name(node.metadata_props.get(FX_NODE_KEY))


def module_path_of(name_scopes: Any) -> str | None:
    """``['', 'attn', 'attn.qkv', 'linear']`` → ``attn.qkv`` (the last entry is the FX node)."""
    if isinstance(name_scopes, str):
        return _module_path_of_text(name_scopes)
    return _module_path(parse_name_scopes(name_scopes))


@functools.lru_cache(maxsize=4096)
def _module_path_of_text(text: str) -> str | None:
    """:func:`module_path_of` of the text torch writes, parsed once per text (the nodes of one
    module call share it; parsing is an ``ast.literal_eval``)."""
    return _module_path(parse_name_scopes(text))


def _module_path(name_scopes: list[str] | None) -> str | None:
    if not name_scopes:
        return None
    scopes = [s for s in name_scopes[:-1] if s and not s.startswith("_empty_nn_module_stack")]
    return normalize_module_path(scopes[-1]) if scopes else ""


_STRICT_ROOT = re.compile(r"^L\[['\"]self['\"]\]\.?")
_INDEX = re.compile(r"\[['\"]?([^\]'\"]+)['\"]?\]")


@functools.lru_cache(maxsize=4096)
def normalize_module_path(path: str) -> str:
    """A module path in ``named_modules()`` form: ``encoder.layer.0.attention``.

    Strict capture can write paths such as ``L['self'].encoder.layer[0]``; they become the
    dotted form ``model.named_modules()`` uses."""
    path = _STRICT_ROOT.sub("", path)
    path = _INDEX.sub(r".\1", path)
    return path.strip(".")


def onnx_node_name(node: Any, index: int) -> str:
    """An ONNX node's name, or ``<op_type>_<index>`` (its position in the graph) for a node without one."""
    return node.name or f"{node.op_type}_{index}"
