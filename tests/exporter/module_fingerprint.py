"""vars() of every module of a tree, by value, for tests that a run left a model as it was:
tensors by identity, requires_grad and contents; modules by identity; containers, mappings
(a FrozenDict config with its attributes) and config objects by type and contents; any other
object by identity."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import torch


def fingerprint(value: Any, depth: int = 0) -> Any:
    if depth > 6:
        return ("deep", id(value))
    if isinstance(value, torch.Tensor):
        return ("tensor", id(value), value.requires_grad, tuple(value.shape), tuple(value.detach().flatten().tolist()))
    if isinstance(value, torch.nn.Module):
        return ("module", id(value))
    if isinstance(value, Mapping):
        items = tuple((key, fingerprint(item, depth + 1)) for key, item in value.items())
        own = fingerprint(dict(vars(value)), depth + 1) if hasattr(value, "__dict__") else None
        return (type(value), items, own)
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(fingerprint(item, depth + 1) for item in value))
    if isinstance(value, (set, frozenset)):
        return (type(value), frozenset(value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return (type(value), fingerprint(dict(vars(value)), depth + 1))
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value), value)
    return ("object", id(value))


def modules_state(modules: list[Any]) -> list[Any]:
    """The fingerprint of ``vars()`` of each module."""
    return [fingerprint(dict(vars(module))) for module in modules]
