"""A class or module attribute replaced while at least one user is inside, across threads: the
first to enter installs the replacement, the last to leave puts the original back. The model
patches (:mod:`exporter.patches`) and the capture's own patches of torch share this registry."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["shared_original", "shared_patch"]

_lock = threading.Lock()
_users: dict[tuple[int, str], list[Any]] = {}  # (id(owner), name) -> [count, original]


@contextmanager
def shared_patch(owner: Any, name: str, replacement: Callable[[Any], Any]) -> Iterator[Any]:
    """Within: ``owner.name`` (an attribute of its own: a class's ``__dict__`` entry, a
    module's global) is ``replacement(original)``; yields the original. Nested and
    overlapping uses (another thread's capture) share one installation: the first one's."""
    key = (id(owner), name)
    with _lock:
        entry = _users.get(key)
        if entry is None:
            original = vars(owner)[name]  # the raw attribute, put back as it was
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


def shared_original(owner: Any, name: str) -> Any:
    """``vars(owner)[name]`` as it is outside every :func:`shared_patch` (the original while
    one has replaced it), or None when ``owner`` has no such attribute of its own."""
    with _lock:
        entry = _users.get((id(owner), name))
        if entry is not None:
            return entry[1]
    return vars(owner).get(name)
