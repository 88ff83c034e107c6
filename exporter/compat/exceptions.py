"""The exception types torch raises for a rejected dim spec or a data-dependent guard
(:mod:`exporter.compat.formats` reads their text when the type does not tell)."""

from __future__ import annotations

import sys

__all__ = ["is_constraint_violation_error", "is_data_dependent_error"]

def is_constraint_violation_error(exc: BaseException) -> bool:
    """Whether torch raised ``exc`` for a dim spec its code contradicts:
    ``torch._dynamo.exc.UserError`` of type ``UserErrorType.CONSTRAINT_VIOLATION`` (what
    ``torch.export`` raises) or ``symbolic_shapes.ConstraintViolationError`` (under it)."""
    if "torch" not in sys.modules:  # nothing torch raised can exist yet
        return False
    from torch._dynamo.exc import UserError, UserErrorType
    from torch.fx.experimental.symbolic_shapes import ConstraintViolationError

    if isinstance(exc, ConstraintViolationError):
        return True
    return isinstance(exc, UserError) and exc.error_type == UserErrorType.CONSTRAINT_VIOLATION


def is_data_dependent_error(exc: BaseException) -> bool:
    """Whether ``exc`` is torch's ``GuardOnDataDependentSymNode``: a branch or size on a value
    that depends on tensor data."""
    if "torch" not in sys.modules:
        return False
    from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode

    return isinstance(exc, GuardOnDataDependentSymNode)
