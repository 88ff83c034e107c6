"""A value held by a module, remembered by value with its type, and put back without harm.

:func:`snapshot` walks what a module attribute holds: scalars and strings by value; lists,
tuples, sets and every mapping (``dict`` and its subclasses such as diffusers' ``FrozenDict``
and ``OrderedDict`` subclasses, ``types.MappingProxyType``) entry by entry, with their type;
configuration objects (transformers' and diffusers' configs, dataclass instances) attribute by
attribute; anything else (tensors, modules, functions) by identity. :meth:`Snapshot.restore`
makes the value hold what it held when snapshotted, changing only what differs:

- a container whose mutating methods are the builtin's own (``list``, ``dict``, ``set``,
  ``OrderedDict`` and subclasses that do not override them) is refilled in place;
- a read-only one (``FrozenDict`` overrides ``update`` to raise, a ``MappingProxyType`` has no
  mutator) is never mutated: an equal one of the same type is built and put in its slot;
- a configuration object gets its changed attributes set back through its own ``setattr``.

When neither works the value is reported as not restored; nothing is cleared first, so no
data is lost either way. Restores are computed once per object for a whole pass (a
transformers config is shared by every layer).
"""

from __future__ import annotations

import copy
import dataclasses
import enum
import types
import weakref
from collections import OrderedDict, defaultdict
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["RestorePass", "Snapshot", "is_plain", "snapshot"]

_MAX_DEPTH = 8  # deeper values are kept by identity
_MAX_ITEMS = 10_000  # a container this large is kept by identity (and its length)
_MISSING = object()
_SCALARS = frozenset({bool, int, float, complex, str, bytes})  # compared by equality (is_plain's)
_EMPTY_MAPS = frozenset({dict, OrderedDict})  # snapshotted without the general walk when empty


def is_plain(value: Any) -> bool:
    """A value compared by equality: scalars, strings, dtypes and immutable containers of them."""
    import torch

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                            torch.Size, enum.Enum, range, slice)):
        return True
    if isinstance(value, (tuple, frozenset, list, set)):
        return all(is_plain(item) for item in value)
    if isinstance(value, (dict, types.MappingProxyType)):
        return all(is_plain(key) and is_plain(item) for key, item in value.items())
    return False


def _config_like(value: Any) -> bool:
    """An object whose attributes are its value: a library config or a dataclass instance."""
    if isinstance(value, type) or not hasattr(value, "__dict__"):
        return False
    import torch

    if isinstance(value, (torch.nn.Module, torch.Tensor)):
        return False
    if dataclasses.is_dataclass(value):
        return True
    cls = type(value)
    return callable(getattr(cls, "to_dict", None)) or callable(getattr(cls, "to_json_string", None))


def _equal_leaf(a: Any, b: Any) -> bool:
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, weakref.ref):
        return a() is b()
    if not is_plain(a):
        return False
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - an odd __eq__: treat as changed
        return False


# builtin bases whose methods a refill calls, and those methods
_REFILL_METHODS: tuple[tuple[type, tuple[str, ...]], ...] = (
    (defaultdict, ("__setitem__", "__delitem__", "clear", "update")),
    (OrderedDict, ("__setitem__", "__delitem__", "clear", "update")),
    (dict, ("__setitem__", "__delitem__", "clear", "update")),
    (list, ("__setitem__",)),
    (set, ("clear", "update")),
)


def _refillable(value: Any) -> bool:
    """Whether ``value`` can be refilled in place with its builtin base's own methods: a
    subclass that overrides one of them (``FrozenDict``) is read-only to us, and so is one whose
    instance attributes are set through an overridden ``__setattr__``."""
    cls = type(value)
    for base, methods in _REFILL_METHODS:
        if isinstance(value, base):
            if any(getattr(cls, name) is not getattr(base, name) for name in methods):
                return False
            return not hasattr(value, "__dict__") or (cls.__setattr__ is object.__setattr__
                                                      and cls.__delattr__ is object.__delattr__)
    return False


class Snapshot:
    """What one value held; see the module docstring. Built by :func:`snapshot`."""

    __slots__ = ("attrs", "items", "kind", "obj", "size")

    def __init__(self, obj: Any, kind: str) -> None:
        self.obj = obj
        self.kind = kind  # "leaf" (identity), "value" (equality), "seq", "map", "set", "object"
        self.items: Any = None  # seq: tuple of Snapshot; map: tuple of (key, Snapshot); set: frozenset
        self.attrs: dict[str, Snapshot] | None = None  # instance attributes of a container or config
        self.size = -1  # a container kept by identity: its length then, to see a change in place

    # -- comparing -------------------------------------------------------------------------
    def unchanged(self, now: Any, done: RestorePass) -> bool:
        """Whether ``now`` is the snapshotted object still holding what it held (a plain value:
        an equal value of the same type)."""
        if self.kind == "value":
            return _equal_leaf(self.obj, now)
        if now is not self.obj:
            return False
        if self.kind == "leaf":
            return self.size < 0 or _length(now) == self.size
        return done.unchanged(self)

    def unchanged_at_a_glance(self, now: Any) -> bool:
        """A quick yes for what most attributes are after most runs: the same immutable value,
        the same object kept by identity, the same plain empty dict or set still empty (a
        module's hook dicts, its set of non-persistent buffers). False means "compare with
        :meth:`unchanged`", not "changed"."""
        if now is not self.obj:
            return False
        if self.kind == "value" or (self.kind == "leaf" and self.size < 0):
            return True
        if self.kind == "set":
            return type(now) is set and not now and not self.items
        return (self.kind == "map" and type(now) in _EMPTY_MAPS and not now and not self.items
                and not getattr(now, "__dict__", None))

    def _contents_unchanged(self, done: RestorePass) -> bool:
        return self._contents_match(self.obj, lambda snapshot, value: snapshot.unchanged(value, done))

    def _contents_match(self, obj: Any, matches: Callable[[Snapshot, Any], bool]) -> bool:
        """Whether ``obj``'s attributes and items match, one by one, what was snapshotted."""
        if self.attrs is not None:
            now = vars(obj)
            if now.keys() != self.attrs.keys() or not all(matches(s, now[k]) for k, s in self.attrs.items()):
                return False
        if self.kind == "seq":
            return len(obj) == len(self.items) and all(matches(s, v) for s, v in zip(self.items, obj))
        if self.kind == "map":
            now_items = list(obj.items())
            return len(now_items) == len(self.items) and all(
                k == key and matches(s, v) for (key, s), (k, v) in zip(self.items, now_items)
            )
        if self.kind == "set":
            return frozenset(obj) == self.items
        return True  # "object": its attributes were compared above

    def equal_to(self, other: Any, done: RestorePass) -> bool:
        """Whether ``other`` (another object) holds the snapshotted value, with the same type:
        a dict of the same functions rebuilt by a trace is equal, a plain dict in place of a
        ``FrozenDict`` is not."""
        if self.unchanged(other, done):
            return True
        if type(other) is not type(self.obj) or self.kind in ("leaf", "value"):
            return False
        try:
            return self._contents_match(other, lambda snapshot, value: snapshot.equal_to(value, done))
        except Exception:  # noqa: BLE001 - an odd container: not equal
            return False

    # -- restoring -------------------------------------------------------------------------
    def restore(self, done: RestorePass) -> tuple[Any, bool]:
        """Make the value hold what it held. Returns the object that now does (the snapshotted
        one, or an equal one built when that one is read-only) and whether it could be done."""
        if self.kind in ("leaf", "value"):
            return self.obj, self.unchanged(self.obj, done) or self.kind == "value"
        return done.restore(self)

    def _restore_contents(self, done: RestorePass) -> tuple[Any, bool]:
        # The entries first (a nested list refilled, a nested FrozenDict rebuilt), then this level.
        ok = True
        attrs: dict[str, Any] | None = None
        if self.attrs is not None:
            attrs = {}
            for name, snap in self.attrs.items():
                attrs[name], fine = snap.restore(done)
                ok &= fine
        entries: Any = None
        if self.kind == "seq":
            entries = []
            for snap in self.items:
                value, fine = snap.restore(done)
                entries.append(value)
                ok &= fine
        elif self.kind == "map":
            entries = []
            for key, snap in self.items:
                value, fine = snap.restore(done)
                entries.append((key, value))
                ok &= fine
        elif self.kind == "set":
            entries = self.items
        if self._holds(entries, attrs):
            return self.obj, ok
        if self.kind != "object" and _refillable(self.obj):
            self._refill(entries, attrs)
            return self.obj, ok
        if self.kind == "object" and self._set_attributes(attrs):
            return self.obj, ok
        rebuilt = self._rebuilt(entries, attrs)
        if rebuilt is _MISSING:
            return self.obj, False
        return rebuilt, ok

    def _holds(self, entries: Any, attrs: dict[str, Any] | None) -> bool:
        """Whether the object holds exactly ``entries`` and ``attrs`` (by identity)."""
        obj = self.obj
        if attrs is not None and not _same_entries(list(vars(obj).items()), list(attrs.items()), ordered=False):
            return False
        if self.kind == "seq":
            return len(obj) == len(entries) and all(a is b for a, b in zip(obj, entries))
        if self.kind == "map":
            return _same_entries(list(obj.items()), entries, ordered=True)
        if self.kind == "set":
            return frozenset(obj) == entries
        return True

    def _refill(self, entries: Any, attrs: dict[str, Any] | None) -> None:
        obj = self.obj
        if isinstance(obj, list):
            obj[:] = entries
        elif isinstance(obj, dict):
            wanted = dict(entries)
            if [key for key in obj if key in wanted] == list(wanted):  # no key removed, none reordered
                for key in [key for key in obj if key not in wanted]:
                    del obj[key]  # added by the run
                for key, value in entries:
                    if dict.__getitem__(obj, key) is not value:
                        obj[key] = value
            else:  # the order of the keys is part of the value
                obj.clear()
                obj.update(entries)
        elif isinstance(obj, set):
            obj.clear()
            obj.update(entries)
        if attrs is not None:
            _set_vars(obj, attrs)

    def _set_attributes(self, attrs: dict[str, Any] | None) -> bool:
        """A config object's changed attributes set back (added ones deleted) through its own
        ``setattr``; False when one is refused (the rest stays as set)."""
        if attrs is None:
            return True
        now = vars(self.obj)
        try:
            for name in [name for name in now if name not in attrs]:
                delattr(self.obj, name)
            for name, value in attrs.items():
                if now.get(name, _MISSING) is not value:
                    setattr(self.obj, name, value)
        except Exception:  # noqa: BLE001 - a read-only object: built anew instead
            return False
        return _same_entries(list(vars(self.obj).items()), list(attrs.items()), ordered=False)

    def _rebuilt(self, entries: Any, attrs: dict[str, Any] | None) -> Any:
        """A new object of the same type holding ``entries`` and ``attrs``; _MISSING if the type
        cannot be built so."""
        obj, cls = self.obj, type(self.obj)
        try:
            if self.kind == "object":
                rebuilt = copy.copy(obj)
            elif isinstance(obj, types.MappingProxyType):
                rebuilt = types.MappingProxyType(dict(entries))
            elif self.kind == "map":
                rebuilt = cls(entries)
            elif isinstance(obj, tuple) and hasattr(cls, "_make"):  # a namedtuple
                rebuilt = cls._make(entries)
            else:
                rebuilt = cls(entries)
            if attrs is not None and not _same_entries(list(vars(rebuilt).items()), list(attrs.items()), ordered=False):
                _set_vars(rebuilt, attrs)  # a new object: nobody else holds it
        except Exception:  # noqa: BLE001 - a type that cannot be built from its contents
            return _MISSING
        twin = Snapshot(rebuilt, self.kind)
        twin.items, twin.attrs = self.items, self.attrs
        return rebuilt if twin._holds(entries, attrs) else _MISSING

    # -- describing ------------------------------------------------------------------------
    def saved(self) -> Any:
        """The snapshotted value as builtin containers (for describing it)."""
        if self.kind == "seq":
            values = [s.saved() for s in self.items]
            return tuple(values) if isinstance(self.obj, tuple) else values
        if self.kind == "map":
            return {key: s.saved() for key, s in self.items}
        if self.kind == "set":
            return set(self.items)
        return self.obj


def _length(value: Any) -> int:
    try:
        return len(value)
    except Exception:  # noqa: BLE001
        return -1


def _same_entries(now: list[tuple[Any, Any]], wanted: list[tuple[Any, Any]], *, ordered: bool) -> bool:
    if len(now) != len(wanted):
        return False
    if ordered:
        return all(k1 == k2 and v1 is v2 for (k1, v1), (k2, v2) in zip(now, wanted))
    table = dict(wanted)
    return all(key in table and table[key] is value for key, value in now)


def _set_vars(obj: Any, attrs: dict[str, Any]) -> None:
    namespace = vars(obj)
    for name in [name for name in namespace if name not in attrs]:
        del namespace[name]
    for name, value in attrs.items():
        if namespace.get(name, _MISSING) is not value:
            namespace[name] = value


class RestorePass:
    """One restore of many snapshots: each object is compared and restored once."""

    def __init__(self) -> None:
        self._unchanged: dict[int, bool] = {}
        self._restored: dict[int, tuple[Any, bool]] = {}
        self.described: dict[int, str] = {}  # what a changed object read as before its restore, by id

    def unchanged(self, snap: Snapshot) -> bool:
        key = id(snap)
        if key not in self._unchanged:
            self._unchanged[key] = True  # a cycle back to this value reads as unchanged
            try:
                self._unchanged[key] = snap._contents_unchanged(self)
            except Exception:  # noqa: BLE001 - a container that cannot be read: changed
                self._unchanged[key] = False
        return self._unchanged[key]

    def restore(self, snap: Snapshot) -> tuple[Any, bool]:
        key = id(snap)
        if key not in self._restored:
            self._restored[key] = (snap.obj, True)  # a cycle back to this value: left as it is
            if self.unchanged(snap):
                self._restored[key] = (snap.obj, True)
            else:
                try:
                    self._restored[key] = snap._restore_contents(self)
                except Exception:  # noqa: BLE001 - never raise out of a restore
                    self._restored[key] = (snap.obj, False)
        return self._restored[key]


def snapshot(value: Any, memo: dict[int, Snapshot] | None = None, _depth: int = 0,
             _open: set[int] | None = None) -> Snapshot:
    """Remember what ``value`` holds. ``memo`` shares the snapshots of one object seen twice."""
    if type(value) in _SCALARS or (type(value) is tuple and all(type(item) in _SCALARS for item in value)):
        return Snapshot(value, "value")  # most of a module's __dict__ (training, names, kernel sizes): the fast path
    if type(value) in _EMPTY_MAPS and not value and not getattr(value, "__dict__", None):  # a module's hook dicts
        snap = Snapshot(value, "map")
        snap.items = ()
        snap.attrs = {} if hasattr(value, "__dict__") else None
        return snap
    import torch

    memo = {} if memo is None else memo
    _open = set() if _open is None else _open
    if isinstance(value, (torch.Tensor, torch.nn.Module)) or value is None:
        return Snapshot(value, "leaf")
    found = memo.get(id(value))
    if found is not None and found.obj is value:
        return found
    if id(value) in _open or _depth >= _MAX_DEPTH:
        return _by_identity(value)
    if isinstance(value, (list, tuple, set, frozenset, Mapping)):
        if _length(value) > _MAX_ITEMS:
            return _by_identity(value)
    elif not _config_like(value):
        return Snapshot(value, "value") if is_plain(value) else Snapshot(value, "leaf")
    _open.add(id(value))
    try:
        snap = _container(value, memo, _depth, _open)
    except Exception:  # noqa: BLE001 - a container that cannot be read: by identity
        snap = _by_identity(value)
    finally:
        _open.discard(id(value))
    memo[id(value)] = snap
    return snap


def _by_identity(value: Any) -> Snapshot:
    snap = Snapshot(value, "leaf")
    if isinstance(value, (list, set, Mapping)):
        snap.size = _length(value)
    return snap


def _container(value: Any, memo: dict[int, Snapshot], depth: int, open_: set[int]) -> Snapshot:
    def inner(item: Any) -> Snapshot:
        return snapshot(item, memo, depth + 1, open_)

    if isinstance(value, Mapping):
        snap = Snapshot(value, "map")
        snap.items = tuple((key, inner(item)) for key, item in list(value.items()))
    elif isinstance(value, (list, tuple)):
        snap = Snapshot(value, "seq")
        snap.items = tuple(inner(item) for item in list(value))
    elif isinstance(value, frozenset) and type(value) is frozenset:
        return Snapshot(value, "value" if is_plain(value) else "leaf")  # immutable
    elif isinstance(value, (set, frozenset)):
        snap = Snapshot(value, "set")
        snap.items = frozenset(value)
    else:
        snap = Snapshot(value, "object")
    if hasattr(value, "__dict__") and not isinstance(value, type):
        snap.attrs = {name: inner(item) for name, item in list(vars(value).items())}
    elif snap.kind == "object":
        return Snapshot(value, "leaf")
    if type(value) is tuple and all(s.kind == "value" for s in snap.items):
        return Snapshot(value, "value")  # immutable, of plain values: compared by equality
    return snap
