"""A class attribute replaced while at least one user is inside, across threads: the first
to enter installs the replacement, the last to leave puts the original back."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["shared_patch"]

_lock = threading.Lock()
_users: dict[tuple[int, str], list[Any]] = {}  # (id(owner), name) -> [count, original]


@contextmanager
def shared_patch(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[Any]:
    """Within: ``owner.name`` is ``replacement(original)``; yields the original. Nested and
    overlapping uses (another thread's capture) share one installation."""
    key = (id(owner), name)
    with _lock:
        entry = _users.get(key)
        if entry is None:
            original = getattr(owner, name)
            entry = _users[key] = [0, original]
            setattr(owner, name, replacement(original))
        entry[0] += 1
    try:
        yield entry[1]
    finally:
        with _lock:
            entry[0] -= 1
            if entry[0] == 0:
                setattr(owner, name, entry[1])
                del _users[key]
