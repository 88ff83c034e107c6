"""Leave the user's module as it was around a capture or an eager run, and say what the run changed.

A forward can change its own module: Swin's ``set_shift_and_window_size`` rebinds
``window_size`` for good after a call at a tiny size, batch norm updates running statistics
in training mode, and transformers' longrope rotary code stores ``long_inv_freq`` on the
module during a trace, where it stays a FakeTensor and breaks the next export. :func:`preserved`
snapshots what a run can change and puts it back on exit (also after an exception); its
:class:`StateReport` lists each change by module path and attribute.

What is snapshotted, per submodule:
- parameters: identity, storage (``data_ptr``, shape, dtype), ``requires_grad`` and the
  ``_version`` counter, without a copy (a model's weights can be most of the memory). A
  replaced parameter or ``.data`` is put back; a write into a parameter in place is reported
  as not restored (nothing but a full copy could undo it).
- buffers: identity and a clone of the value (buffers are small next to the weights), restored
  by copy when the ``_version`` counter or storage moved.
- every other entry of the module's ``__dict__`` (hooks and flag sets included), by value with
  its type (:mod:`exporter.value_snapshot`): scalars and strings by equality, lists, dicts and
  every other mapping (diffusers' ``FrozenDict`` config, ``MappingProxyType``, ``OrderedDict``
  subclasses) and library config objects entry by entry; tensors like buffers; any other
  object by identity. Only what the run changed is put back: a container is refilled in place
  when its mutators are the builtin's, a read-only one (``FrozenDict``) is never mutated but
  replaced by an equal one of its type, and what cannot be restored is reported as such.
  Attributes a run added are removed, removed ones put back.
- the submodules themselves (a run that replaces or adds a child, parameter or buffer anywhere
  in the tree is undone).

The restore never raises: a part that fails is reported as not restored.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from .compat import trace_tensor_kind
from .errors import first_line
from .value_snapshot import RestorePass, Snapshot, is_plain, snapshot

__all__ = ["StateChange", "StateKeeper", "StateReport", "preserved"]

# nn.Module's containers walked entry by entry (parameters, buffers, submodules).
_WALKED = ("_parameters", "_buffers", "_modules")
_MISSING = object()
_SHOWN = 3  # changes named in the one-line message


@dataclass(frozen=True)
class StateChange:
    """One thing a run changed on the module, and whether it was put back."""

    path: str  # "encoder.layers.0.blocks.0.window_size"
    kind: str  # "attribute", "buffer", "parameter", "submodule"
    before: str  # short text of the value: "4", "tensor(float32[64])", "(absent)"
    after: str
    restored: bool = True
    trace_leftover: str | None = None  # "FakeTensor", ... when the run left a tracing tensor
    note: str = ""  # how it was restored when not in place, or why it was not

    def __str__(self) -> str:
        text = f"`{self.path}` {self.before} → {self.after}"
        if not self.restored:
            text += " (not restored" + (f": {self.note}" if self.note else "") + ")"
        elif self.note:
            text += f" ({self.note})"
        return text


@dataclass(frozen=True)
class StateReport:
    """What one :func:`preserved` block saw the run change; filled when the block ends."""

    what: str = ""  # "when called at 1×1", "during capture (nonstrict)"
    _found: list[StateChange] = field(default_factory=list, repr=False, compare=False)
    # Attributes an earlier trace left as FakeTensors, hidden from this run and put back after
    # (``set_aside_trace_leftovers``), by path: "model.rotary_emb.long_inv_freq (FakeTensor)".
    _set_aside: list[str] = field(default_factory=list, repr=False, compare=False)

    @property
    def set_aside(self) -> tuple[str, ...]:
        return tuple(self._set_aside)

    @property
    def changes(self) -> tuple[StateChange, ...]:
        return tuple(self._found)

    @property
    def changed(self) -> bool:
        return bool(self._found)

    @property
    def trace_leftovers(self) -> tuple[StateChange, ...]:
        """Changes that stored a FakeTensor (or another tracing tensor) on the module."""
        return tuple(change for change in self._found if change.trace_leftover)

    @property
    def all_restored(self) -> bool:
        return all(change.restored for change in self._found)

    @property
    def message(self) -> str:
        """One line: ``this model changes itself when called at 1×1: `...window_size` 4 → 1``."""
        if not self._found:
            return ""
        shown = "; ".join(str(change) for change in self._found[:_SHOWN])
        more = f" (and {len(self._found) - _SHOWN} more)" if len(self._found) > _SHOWN else ""
        tail = " (restored)" if self.all_restored else ""
        return f"this model changes itself {self.what or 'when called'}: {shown}{more}{tail}"

    def __str__(self) -> str:
        return self.message or f"the model was left unchanged {self.what}".rstrip()


@contextlib.contextmanager
def preserved(model: Any, *, what: str = "", set_aside_trace_leftovers: bool = False) -> Iterator[StateReport]:
    """Snapshot ``model``'s state, run the block, put the state back and fill the report.

    ``what`` says when the block ran the model, for the report's message ("when called at
    1×1"). ``set_aside_trace_leftovers``: plain attributes an earlier trace left as FakeTensors
    (``torch.onnx.export`` on Phi3 leaves ``long_inv_freq``) are removed for the block, so the
    code that computes them runs again, and put back after it (listed in ``report.set_aside``).
    Anything that is not an ``nn.Module`` is yielded an empty report."""
    report = StateReport(what)
    snapshots = _snapshot_tree(model)
    if snapshots is None:
        yield report
        return
    if set_aside_trace_leftovers:
        for module_snapshot in snapshots:
            report._set_aside.extend(module_snapshot.set_aside_trace_leftovers())
    try:
        yield report
    finally:
        _restore_tree(snapshots, report)


class StateKeeper:
    """One module kept as it was across many runs of one job (verify's cases on its twin):
    :meth:`run` is :func:`preserved`, but the snapshot is taken once and taken again only after
    a run that changed something (a module with a hundred layers is snapshotted in milliseconds,
    and most runs change nothing). Not for two threads at once."""

    def __init__(self, model: Any, *, reuse: bool = True) -> None:
        """``reuse=False``: snapshot before every run (a module the user's code also holds,
        which it may change between runs: a snapshot kept would put their change back)."""
        self.model = model
        self.reuse = reuse
        self._snapshots: list[_ModuleSnapshot] | None = None

    @contextlib.contextmanager
    def run(self, what: str = "") -> Iterator[StateReport]:
        """Run the block, put the module back as it was snapshotted and fill the report."""
        report = StateReport(what)
        if self._snapshots is None:
            self._snapshots = _snapshot_tree(self.model)
        snapshots = self._snapshots
        if snapshots is None:  # not a module
            yield report
            return
        try:
            yield report
        finally:
            _restore_tree(snapshots, report)
            if report.changed or not self.reuse:  # what was put back may be an equal object, not the one snapshotted
                self._snapshots = None


def _snapshot_tree(model: Any) -> list[_ModuleSnapshot] | None:
    """A snapshot of every submodule of ``model``; None for anything that is not a module."""
    try:
        import torch
    except ImportError:  # pragma: no cover - no torch, no module to change
        return None
    if not isinstance(model, torch.nn.Module):
        return None
    states: dict[int, _TensorState] = {}  # shared: a tied weight is saved and checked once
    memo: dict[int, Snapshot] = {}  # shared: a config every layer holds is snapshotted once
    return [_ModuleSnapshot(path, module, states, memo) for path, module in model.named_modules(remove_duplicate=True)]


def _restore_tree(snapshots: list[_ModuleSnapshot], report: StateReport) -> None:
    import torch

    checked: set[int] = set()
    done = RestorePass()
    with torch.no_grad():
        for module_snapshot in snapshots:
            report._found.extend(module_snapshot.restore(checked, done))


# --- snapshots ----------------------------------------------------------------------------


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _trace_kind(value: Any) -> str | None:
    if isinstance(value, (list, tuple)):
        return next((kind for kind in map(_trace_kind, value) if kind), None)
    if isinstance(value, dict):
        return _trace_kind(list(value.values()))
    return trace_tensor_kind(value)


def _describe(value: Any) -> str:
    """A short text for a value in a change's report; never raises (a user ``__repr__`` may)."""
    try:
        return _describe_unguarded(value)
    except Exception:  # noqa: BLE001 - a report line must not stop the restore
        return type(value).__name__


def _describe_unguarded(value: Any) -> str:
    import torch

    if value is _MISSING:
        return "(absent)"
    if isinstance(value, torch.Tensor):
        kind = _trace_kind(value) or "tensor"
        dtype = str(value.dtype).removeprefix("torch.")
        if value.numel() == 1 and not _trace_kind(value):
            return f"tensor({value.item()!r})"
        return f"{kind}({dtype}{list(value.shape)})"
    if isinstance(value, torch.nn.Module):
        return type(value).__name__
    if isinstance(value, (list, tuple, dict, set, Mapping)):
        # plain builtin containers and tuples (torch.Size, a namedtuple) by value; a FrozenDict by size
        by_value = is_plain(value) and (type(value) in (list, dict, set) or isinstance(value, tuple))
        if not by_value:
            return f"{type(value).__name__} of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _describe_saved(snap: Snapshot) -> str:
    """What a snapshotted value held, as :func:`_describe` writes a value; never raises."""
    try:
        return _describe_saved_unguarded(snap)
    except Exception:  # noqa: BLE001 - a report line must not stop the restore
        return type(snap.obj).__name__


def _describe_saved_unguarded(snap: Snapshot) -> str:
    if snap.kind in ("leaf", "value") or (isinstance(snap.obj, tuple) and is_plain(snap.obj)):  # immutable
        return _describe(snap.obj)
    saved = snap.saved()
    if snap.kind == "object":
        return type(snap.obj).__name__
    if type(snap.obj) in (list, tuple, dict, set):
        return _describe(saved)
    return f"{type(snap.obj).__name__} of {len(saved)}"


class _TensorState:
    """A tensor's identity and storage; with ``copy``, also its value (buffers, tensor attributes)."""

    def __init__(self, tensor: Any, copy: bool) -> None:
        self.tensor = tensor
        self.version = tensor._version
        self.storage = _storage(tensor)
        self.requires_grad = tensor.requires_grad
        # An alias of the storage costs nothing: it puts back a replaced ``.data``.
        self.alias = tensor.detach()
        self.value = tensor.detach().clone() if copy and self.storage is not None else None

    def _storage_now(self) -> tuple[Any, ...] | None:
        return _storage(self.tensor)

    def restore(self) -> tuple[bool, bool, str] | None:
        """Put the tensor back in place; None when untouched, else (restored, written, text
        after); a flipped ``requires_grad`` alone reads ``requires_grad=False``."""
        t = self.tensor
        moved = self._storage_now() != self.storage
        flag = t.requires_grad != self.requires_grad
        if self.value is not None and not moved:
            # Compared, not just versioned: a kernel's own write (batch norm's running
            # statistics) does not bump the ``_version`` counter.
            written = not _tensor_equal(t, self.value)
        else:
            written = t._version != self.version
        if not (moved or written or flag):
            return None
        after = _describe(t) if moved or written else f"requires_grad={t.requires_grad}"
        restored = True
        if moved:
            t.data = self.alias
        if written:
            if self.value is not None:
                t.copy_(self.value)
            elif not moved:
                restored = False
        if flag:
            t.requires_grad_(self.requires_grad)
        return restored, written, after


def _storage(tensor: Any) -> tuple[Any, ...] | None:
    """Where a real tensor's values live; None for a FakeTensor or meta tensor (no data)."""
    if _trace_kind(tensor) is not None:
        return None
    try:
        return (tensor.data_ptr(), tuple(tensor.shape), tensor.stride(), tensor.dtype, tensor.device)
    except RuntimeError:  # a subclass without storage
        return None


def _tensor_equal(a: Any, b: Any) -> bool:
    import torch

    try:
        if a.shape != b.shape or a.dtype != b.dtype:
            return False
        if torch.equal(a, b):
            return True
        # a buffer holding NaN (an uninitialised statistic) equals its copy
        return (a.is_floating_point() or a.is_complex()) and bool(torch.allclose(a, b, rtol=0, atol=0, equal_nan=True))
    except Exception:  # noqa: BLE001 - different devices, odd subclasses: changed
        return False


class _ModuleSnapshot:
    def __init__(self, path: str, module: Any, tensors: dict[int, _TensorState], memo: dict[int, Snapshot]) -> None:
        import torch

        self.path = path
        self.module = module
        namespace = vars(module)
        self.walked = {name: namespace.get(name, _MISSING) for name in _WALKED}  # the dicts themselves
        self.parameters = dict(module._parameters)
        self.buffers = dict(module._buffers)
        self.modules = dict(module._modules)
        self.tensors = tensors
        for param in self.parameters.values():
            if param is not None:
                self.tensors[id(param)] = _TensorState(param, copy=False)
        for buffer in self.buffers.values():
            if buffer is not None and id(buffer) not in self.tensors:
                self.tensors[id(buffer)] = _TensorState(buffer, copy=True)
        self.hidden: set[str] = set()  # attributes set aside for the run
        self.order = list(namespace)  # the __dict__'s order, walked containers included
        self.attributes: dict[str, Snapshot] = {}
        for name, value in namespace.items():
            if name in _WALKED:
                continue
            if isinstance(value, torch.Tensor):
                if id(value) not in self.tensors:
                    self.tensors[id(value)] = _TensorState(value, copy=True)
                self.attributes[name] = Snapshot(value, "leaf")
            else:
                self.attributes[name] = snapshot(value, memo)

    def set_aside_trace_leftovers(self) -> list[str]:
        """Remove the plain attributes holding tracing tensors; restore() puts them back."""
        now = vars(self.module)
        for name, snap in self.attributes.items():
            kind = _trace_kind(snap.obj)
            if kind is not None and now.get(name) is snap.obj:
                del now[name]
                self.hidden.add(name)
        return [f"{_join(self.path, name)} ({_trace_kind(self.attributes[name].obj)})" for name in sorted(self.hidden)]

    def restore(self, checked: set[int], done: RestorePass) -> list[StateChange]:
        """Put this module back; never raises (a part that fails is reported as not restored)."""
        found: list[StateChange] = []
        for what, step in (("the module's containers", self._restore_containers),
                           ("attributes", lambda: self._restore_attributes(done)),
                           ("tensors", lambda: self._restore_tensors(checked))):
            try:
                found.extend(step())
            except Exception as exc:  # noqa: BLE001 - a restore must not replace the run's own error
                found.append(StateChange(self.path or "(model)", "module", what, "(unknown)", restored=False,
                                         note=f"restoring failed: {first_line(exc)}"))
        return found

    def _restore_containers(self) -> list[StateChange]:
        found: list[StateChange] = []
        namespace = vars(self.module)
        for name, original in self.walked.items():
            if original is not _MISSING and namespace.get(name) is not original:
                namespace[name] = original  # a run that rebound the dict itself
        for kind, saved, now in (
            ("parameter", self.parameters, self.module._parameters),
            ("buffer", self.buffers, self.module._buffers),
            ("submodule", self.modules, self.module._modules),
        ):
            found.extend(self._restore_entries(kind, saved, now))
        return found

    def _restore_tensors(self, checked: set[int]) -> list[StateChange]:
        # In place writes last: a replaced entry was put back above, its own tensor is checked here.
        found: list[StateChange] = []
        for name, kind, tensor in self._tensor_names():
            state = self.tensors.get(id(tensor))
            if state is None or state.tensor is not tensor or id(tensor) in checked:
                continue
            checked.add(id(tensor))
            outcome = state.restore()
            if outcome is not None:
                restored, _, after = outcome
                if after.startswith("requires_grad="):
                    before = f"requires_grad={state.requires_grad}"
                else:
                    before = _describe(state.value) if state.value is not None else _describe(state.alias)
                found.append(StateChange(_join(self.path, name), kind, before, after, restored))
        return found

    def _tensor_names(self) -> Iterator[tuple[str, str, Any]]:
        import torch

        for name, param in self.parameters.items():
            if param is not None:
                yield name, "parameter", param
        for name, buffer in self.buffers.items():
            if buffer is not None:
                yield name, "buffer", buffer
        for name, snap in self.attributes.items():
            if isinstance(snap.obj, torch.Tensor):
                yield name, "attribute", snap.obj

    def _restore_entries(self, kind: str, saved: dict[str, Any], now: dict[str, Any]) -> list[StateChange]:
        found = []
        for name in list(now):
            if name not in saved:
                value = now.pop(name)
                found.append(StateChange(_join(self.path, name), kind, "(absent)", _describe(value),
                                         trace_leftover=_trace_kind(value)))
        for name, value in saved.items():
            current = now.get(name, _MISSING)
            if current is not value:
                now[name] = value
                found.append(StateChange(_join(self.path, name), kind, _describe(value), _describe(current),
                                         trace_leftover=_trace_kind(current)))
        _reorder(now, list(saved))  # a submodule put back goes back to its place in forward's order
        return found

    def _restore_attributes(self, done: RestorePass) -> list[StateChange]:
        found = []
        now = vars(self.module)
        for name in [name for name in now if name not in _WALKED and name not in self.attributes]:
            value = now.pop(name)
            found.append(StateChange(_join(self.path, name), "attribute", "(absent)", _describe(value),
                                     trace_leftover=_trace_kind(value)))
        for name, snap in self.attributes.items():
            current = now.get(name, _MISSING)
            if snap.unchanged_at_a_glance(current):
                continue
            if name in self.hidden:  # set aside for the run: back as it was, whatever the run did
                now[name] = snap.obj
                continue
            if current is not _MISSING and snap.unchanged(current, done):
                continue
            # rebound to an equal value of the same type (a dict of the same functions rebuilt):
            # the user's own object goes back, and it is no change
            equal = current is not _MISSING and current is not snap.obj and snap.equal_to(current, done)
            before = _describe_saved(snap)
            # a value several modules hold (a shared config) is restored with the first: said as found
            if current is snap.obj and id(current) not in done.described:
                done.described[id(current)] = _describe(current)
            after = done.described[id(current)] if current is snap.obj else _describe(current)
            target, restored = snap.restore(done)
            if now.get(name, _MISSING) is not target:
                now[name] = target  # the module's __dict__ is a plain dict: always writable
            if equal:
                continue
            note = ""
            if target is not snap.obj:
                note = f"an equal {type(target).__name__} put in its place: the {type(target).__name__} is read-only"
            elif not restored:
                note = f"part of it cannot be put back in a {type(snap.obj).__name__}"
            found.append(StateChange(_join(self.path, name), "attribute", before, after, restored,
                                     trace_leftover=_trace_kind(current), note=note))
        _reorder(now, [name for name in self.order if name in now])
        return found


def _reorder(namespace: dict[str, Any], order: list[str]) -> None:
    """Put ``namespace``'s keys back in ``order`` (a key put back was appended at the end), by
    moving each key from the first misplaced one on to the end."""
    wanted = set(order)
    keys = [key for key in namespace if key in wanted]
    if keys == order:
        return
    first = next(index for index, (a, b) in enumerate(zip(keys, order)) if a != b)
    for key in order[first:]:
        namespace[key] = namespace.pop(key)
