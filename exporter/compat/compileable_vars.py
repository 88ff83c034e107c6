"""transformers' and ``kernels``' ``CompileableContextVar``, private to the tracing job.

Both libraries keep a module-level ``CompileableContextVar`` (transformers' output capturing,
``kernels``' active hub functions): a ``ContextVar`` that, once ``set`` is called while torch
compiles or exports, switches *the shared object* to a plain global for everyone ("not
thread-safe when compilation is triggered", says its docstring). A capture in the export worker
then makes the user's ``generate()`` in the kernel's thread read the job's value, or reset a
context variable with the job's global (``TypeError: expected an instance of Token``), and the
user's calls break the job's trace (``'Token' object has no attribute 'get'``).

:func:`private_compileable_vars` switches their ``get``/``set``/``reset`` in the job's context
only (:func:`~exporter.compat.shared_patch.shared_patch`) to ones that keep the value in an
attribute of the job's own (named by a TorchDynamo constant, so a strict capture traces it
too) and never touch the shared state; the user's code runs the originals meanwhile.
"""

from __future__ import annotations

import contextlib
import contextvars
import itertools
import sys
from collections.abc import Iterator
from typing import Any

from .shared_patch import dynamo_compiling, replaced_by, shared_patch

__all__ = ["private_compileable_vars"]

# Modules that define a CompileableContextVar class (looked up only once imported).
_MODULES = ("transformers.utils.output_capturing", "kernels._internals.layer.layer")


def _get(self: Any) -> Any:
    return getattr(self, current_job_slot(), None)


def _set(self: Any, value: Any) -> Any:
    slot = current_job_slot()
    previous = getattr(self, slot, None)
    setattr(self, slot, value)
    return previous  # the token: what reset puts back


def _reset(self: Any, token: Any) -> None:
    setattr(self, current_job_slot(), token)


_METHODS = {"get": _get, "set": _set, "reset": _reset}
_slot: contextvars.ContextVar[str] = contextvars.ContextVar("exporter_compileable_slot", default="_exporter_job")
_numbers = itertools.count()


_traced_slot = ["_exporter_job"]  # while TorchDynamo traces a job (slot_for_dynamo): that job's slot


def current_job_slot() -> str:
    """The attribute this job keeps its values in (while TorchDynamo traces: the traced job's,
    read from a plain list TorchDynamo can trace, as ``shared_patch.choices_for_dynamo`` does)."""
    if dynamo_compiling():
        return _traced_slot[0]
    return _slot.get()


@contextlib.contextmanager
def slot_for_dynamo() -> Iterator[None]:
    """Within (around the strict capture): traced code reads and writes this context's slot."""
    saved = _traced_slot[0]
    _traced_slot[0] = _slot.get()
    try:
        yield
    finally:
        _traced_slot[0] = saved


def compileable_var_classes() -> tuple[type, ...]:
    """The ``CompileableContextVar`` classes of the libraries imported so far."""
    found = []
    for name in _MODULES:
        module = sys.modules.get(name)
        cls = getattr(module, "CompileableContextVar", None) if module is not None else None
        if isinstance(cls, type) and all(method in vars(cls) for method in _METHODS):
            found.append(cls)
    return tuple(found)


@contextlib.contextmanager
def private_compileable_vars() -> Iterator[None]:
    """Within, in this context only: every ``CompileableContextVar`` keeps its value where
    only this job reads it (see the module docstring)."""
    token = _slot.set(f"_exporter_job_{next(_numbers)}")
    with contextlib.ExitStack() as stack:
        stack.callback(_slot.reset, token)
        for cls in compileable_var_classes():
            for name, method in _METHODS.items():
                stack.enter_context(shared_patch(cls, name, replaced_by(method)))
        yield
