"""Small pure helpers a unit's stages share: how an exception reads as a record, the verdict
ranks that compare our export with ``torch.onnx.export``, the versions of the packages."""

from __future__ import annotations

import importlib.metadata
import re
import sys
from typing import Any

from ..errors import first_line

__all__ = ["OOM_MARKERS", "error_line", "is_out_of_memory", "library_versions", "package_versions", "rank", "versus"]

#: Pieces of an error message that say an allocation failed (PyTorch's allocator, onnxruntime,
#: numpy, the C++ runtime).
OOM_MARKERS = ("can't allocate memory", "cannot allocate memory", "bad_alloc", "out of memory",
               "unable to allocate", "failed to allocate")

PACKAGES = ("torch", "onnx", "onnxscript", "onnxruntime", "onnx-ir", "transformers", "timm", "torchvision",
            "onnx-export-workbench")


def is_out_of_memory(exc: BaseException | str) -> bool:
    """Whether an exception (or its text) is an allocation failure."""
    if isinstance(exc, MemoryError):
        return True
    text = str(exc).lower()
    return any(marker in text for marker in OOM_MARKERS)


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# Errors whose message is a headline ("step 1/3 of exporting ...") over the cause that says why.
_WRAPPERS = ("CaptureError", "DecomposeError", "TranslateError", "OptimizeError", "TorchExportError",
             "ConversionError", "OnnxExporterError")


def error_line(exc: BaseException) -> str:
    """The line a record keeps of an exception: its type and the first line of its message,
    or of its cause's when the exception only wraps it (a stage's headline, torch.onnx's
    "step 1/3"); terminal colour codes removed."""
    while exc.__cause__ is not None and type(exc).__name__.endswith(_WRAPPERS):
        exc = exc.__cause__
    return _ANSI.sub("", first_line(exc))


def package_versions() -> dict[str, str]:
    """The installed versions of the packages an export depends on (absent ones left out)."""
    found = {}
    for name in PACKAGES:
        try:
            found[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return found


def library_versions(model: Any) -> dict[str, str]:
    """The versions of the packages the model's classes come from (the top-level package of
    each submodule's class: ``diffusers``, ``timm``), by package name: its installed
    distribution's version, else its ``__version__``; a class defined in the zoo's own file
    adds nothing. (Looked up by name: ``packages_distributions()`` reads every installed
    distribution, 1.5 s here.)"""
    modules = model.modules() if callable(getattr(model, "modules", None)) else (model,)
    found: dict[str, str] = {}
    for package in dict.fromkeys(type(module).__module__.partition(".")[0] for module in modules):
        if package in ("__main__", "builtins") or package.startswith("_"):
            continue
        try:
            found[package] = importlib.metadata.version(package)
        except (importlib.metadata.PackageNotFoundError, ValueError):
            version = getattr(sys.modules.get(package), "__version__", None)
            if isinstance(version, str):
                found[package] = version
    return found


# How good an outcome is: what "better / same / worse" compares. A model that exports and is
# wrong without any error is worse than an export that fails and says why; one that is right
# wherever onnxruntime runs it, and refused with an error elsewhere, is better than no model.
_RANKS = {"verify_failed": 0, "export_failed": 1, "example_only": 2, "not_verified": 2, "exported": 2, "passed": 3}
REFUSES_ONLY_RANK = 1.5


def rank(status: str | None, refuses_only: bool = False) -> float | None:
    """0 wrong numbers somewhere (no error), 1 export failed, 1.5 right at the example and
    wherever onnxruntime ran it, which raised at some size (``refuses_only``, with a
    ``verify_failed`` status), 2 right where compared but not compared at another size, 3
    right at the example and at other sizes; None when there is nothing to compare."""
    if status is None:
        return None
    return REFUSES_ONLY_RANK if status == "verify_failed" and refuses_only else _RANKS.get(status)


def versus(ours: str, baseline: str | None, *, ours_refuses_only: bool = False,
           baseline_refuses_only: bool = False) -> str | None:
    """``better``, ``same`` or ``worse``: our status against ``torch.onnx.export``'s (each
    ``refuses_only`` as for :func:`rank`)."""
    a, b = rank(ours, ours_refuses_only), rank(baseline, baseline_refuses_only)
    if a is None or b is None:
        return None
    return "better" if a > b else "worse" if a < b else "same"


def short(value: Any, limit: int = 300) -> str:
    """``value`` as text without terminal colour codes, cut to ``limit`` characters."""
    text = _ANSI.sub("", str(value))
    return text if len(text) <= limit else text[: limit - 1] + "…"
