"""Reading what the torch exporter writes on ONNX nodes and FX nodes: the FX node an ONNX
node came from, its ``nn.Module`` path, and the user's source line.

The ONNX keys (``pkg.torch.onnx.fx_node``, ``name_scopes``, ``stack_trace``) are written by
``torch.onnx``'s translator on every node it emits; the optimizer keeps them on the nodes it
keeps. ``verify`` (first divergent node), ``bench`` (profile by module) and ``graphs`` (the
FX↔ONNX mapping) all read them through here.
"""

from __future__ import annotations

import ast
import re
from typing import Any

__all__ = [
    "FX_NODE_KEY",
    "NAME_SCOPES_KEY",
    "STACK_TRACE_KEY",
    "fx_name_of",
    "module_path_of",
    "normalize_module_path",
    "source_of_stack",
]

FX_NODE_KEY = "pkg.torch.onnx.fx_node"
NAME_SCOPES_KEY = "pkg.torch.onnx.name_scopes"
STACK_TRACE_KEY = "pkg.torch.onnx.stack_trace"

_FX_NODE = re.compile(r"^%([\w.]+)\s*:")


def fx_name_of(node: Any) -> str | None:
    """The name of the FX node an ONNX node was translated from (``None`` if not recorded)."""
    text = node.metadata_props.get(FX_NODE_KEY, "")
    match = _FX_NODE.match(text)
    return match.group(1) if match else None


def module_path_of(name_scopes: Any) -> str | None:
    """``['', 'attn', 'attn.qkv', 'linear']`` → ``attn.qkv`` (the last entry is the FX node)."""
    if isinstance(name_scopes, str):
        try:
            name_scopes = ast.literal_eval(name_scopes)
        except (ValueError, SyntaxError):
            return None
    if not isinstance(name_scopes, (list, tuple)) or not name_scopes:
        return None
    scopes = [s for s in name_scopes[:-1] if s and not s.startswith("_empty_nn_module_stack")]
    return normalize_module_path(scopes[-1]) if scopes else ""


_STRICT_ROOT = re.compile(r"^L\[['\"]self['\"]\]\.?")
_INDEX = re.compile(r"\[['\"]?([^\]'\"]+)['\"]?\]")


def normalize_module_path(path: str) -> str:
    """A module path in ``named_modules()`` form: ``encoder.layer.0.attention``.

    Strict capture can write paths such as ``L['self'].encoder.layer[0]``; they become the
    dotted form ``model.named_modules()`` uses."""
    path = _STRICT_ROOT.sub("", path)
    path = _INDEX.sub(r".\1", path)
    return path.strip(".")


def source_of_stack(stack_trace: str | None) -> str | None:
    """The innermost user frame of an FX ``stack_trace`` as ``file:line in func: code``."""
    from ..errors import _is_library_file

    if not stack_trace:
        return None
    frames = re.findall(r'File "([^"]+)", line (\d+), in (\S+)\n\s*(.*)', stack_trace)
    if not frames:
        return None
    user = [f for f in frames if not _is_library_file(f[0])]
    filename, line, func, code = (user or frames)[-1]
    return f"{filename}:{line} in {func}: {code.strip()}"
