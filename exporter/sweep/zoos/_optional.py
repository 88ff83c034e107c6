"""Whether an optional library imports here, and if not, the reason a skipped entry gives."""

from __future__ import annotations

import importlib
import importlib.util

__all__ = ["import_problem"]


def import_problem(module: str, install: str) -> str | None:
    """None when ``module`` imports, else why not (its error's first line and what to do)."""
    if importlib.util.find_spec(module) is None:
        return f"{module} is not installed ({install})"
    try:
        importlib.import_module(module)
    except Exception as exc:  # noqa: BLE001 - any import failure means the zoo cannot run here
        line = next((ln.strip() for ln in str(exc).splitlines() if ln.strip()), "")
        return f"{module} does not import here ({type(exc).__name__}: {line})"
    return None
