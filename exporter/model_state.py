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
- plain attributes in the module's ``__dict__`` (not torch's own bookkeeping): scalars, strings,
  dtypes, tuples/lists/dicts of them by value; tensors like buffers; any other object by
  identity. Attributes a run added are removed, removed ones put back.
- the submodules themselves (a run that replaces or adds a child is undone).
"""

from __future__ import annotations

import contextlib
import enum
import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .compat import trace_tensor_kind

__all__ = ["StateChange", "StateReport", "preserved"]

# nn.Module.__init__'s own entries: hooks, the containers walked separately, the flag sets.
_MODULE_INTERNALS = frozenset({
    "_parameters", "_buffers", "_modules", "_non_persistent_buffers_set",
    "_backward_pre_hooks", "_backward_hooks", "_is_full_backward_hook",
    "_forward_hooks", "_forward_hooks_with_kwargs", "_forward_hooks_always_called",
    "_forward_pre_hooks", "_forward_pre_hooks_with_kwargs",
    "_state_dict_hooks", "_state_dict_pre_hooks", "_load_state_dict_pre_hooks", "_load_state_dict_post_hooks",
})
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

    def __str__(self) -> str:
        text = f"`{self.path}` {self.before} → {self.after}"
        if not self.restored:
            text += " (not restored)"
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
    try:
        import torch
    except ImportError:  # pragma: no cover - no torch, no module to change
        yield report
        return
    if not isinstance(model, torch.nn.Module):
        yield report
        return
    states: dict[int, _TensorState] = {}  # shared: a tied weight is saved and checked once
    snapshots = [_ModuleSnapshot(path, module, states) for path, module in model.named_modules(remove_duplicate=True)]
    if set_aside_trace_leftovers:
        for snapshot in snapshots:
            report._set_aside.extend(snapshot.set_aside_trace_leftovers())
    try:
        yield report
    finally:
        checked: set[int] = set()
        with torch.no_grad():
            for snapshot in snapshots:
                report._found.extend(snapshot.restore(checked))


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
    if isinstance(value, (list, tuple, dict, set)) and not _is_plain(value):
        return f"{type(value).__name__} of {len(value)}"
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_plain(value: Any) -> bool:
    """A value compared and restored by equality: scalars, strings, dtypes and containers of them."""
    import torch

    if value is None or isinstance(value, (bool, int, float, complex, str, bytes, torch.dtype, torch.device,
                                            torch.Size, enum.Enum)):
        return True
    if isinstance(value, (tuple, list, frozenset, set)):
        return all(_is_plain(item) for item in value)
    if isinstance(value, dict):
        return all(_is_plain(key) and _is_plain(item) for key, item in value.items())
    return False


def _copy_plain(value: Any) -> Any:
    if isinstance(value, list):
        return [_copy_plain(item) for item in value]
    if isinstance(value, dict):
        return {key: _copy_plain(item) for key, item in value.items()}
    if isinstance(value, set):
        return {_copy_plain(item) for item in value}
    return value


def _equal(a: Any, b: Any) -> bool:
    try:
        return bool(a == b) and type(a) is type(b)
    except Exception:  # noqa: BLE001 - an odd __eq__: treat as changed
        return False


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
        """Put the tensor back in place; None when untouched, else (restored, ..., text after)."""
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
        after = _describe(t)
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
    def __init__(self, path: str, module: Any, tensors: dict[int, _TensorState]) -> None:
        import torch

        self.path = path
        self.module = module
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
        self.attributes: dict[str, tuple[Any, Any]] = {}  # name -> (object, plain copy or _MISSING)
        for name, value in vars(module).items():
            if name in _MODULE_INTERNALS:
                continue
            if isinstance(value, torch.Tensor):
                if id(value) not in self.tensors:
                    self.tensors[id(value)] = _TensorState(value, copy=True)
                self.attributes[name] = (value, _MISSING)
            elif _is_plain(value) or isinstance(value, (list, tuple, dict, set)):
                # containers of other objects (LSTM's _flat_weights) are copied shallowly
                self.attributes[name] = (value, _copy_plain(value))
            else:
                self.attributes[name] = (value, _MISSING)

    def set_aside_trace_leftovers(self) -> list[str]:
        """Remove the plain attributes holding tracing tensors; restore() puts them back."""
        now = vars(self.module)
        for name, (value, _) in self.attributes.items():
            kind = _trace_kind(value)
            if kind is not None and now.get(name) is value:
                del now[name]
                self.hidden.add(name)
        return [f"{_join(self.path, name)} ({_trace_kind(self.attributes[name][0])})" for name in sorted(self.hidden)]

    def restore(self, checked: set[int]) -> list[StateChange]:
        found: list[StateChange] = []
        for kind, saved, now in (
            ("parameter", self.parameters, self.module._parameters),
            ("buffer", self.buffers, self.module._buffers),
            ("submodule", self.modules, self.module._modules),
        ):
            found.extend(self._restore_entries(kind, saved, now))
        found.extend(self._restore_attributes())
        # In place writes last: a replaced entry was put back above, its own tensor is checked here.
        for name, kind, tensor in self._tensor_names():
            state = self.tensors.get(id(tensor))
            if state is None or state.tensor is not tensor or id(tensor) in checked:
                continue
            checked.add(id(tensor))
            before = _describe(state.value) if state.value is not None else _describe(state.alias)
            outcome = state.restore()
            if outcome is not None:
                restored, _, after = outcome
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
        for name, (value, _) in self.attributes.items():
            if isinstance(value, torch.Tensor):
                yield name, "attribute", value

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
        return found

    def _restore_attributes(self) -> list[StateChange]:
        found = []
        now = vars(self.module)
        for name in [name for name in now if name not in _MODULE_INTERNALS and name not in self.attributes]:
            value = now.pop(name)
            found.append(StateChange(_join(self.path, name), "attribute", "(absent)", _describe(value),
                                     trace_leftover=_trace_kind(value)))
        for name, (value, copy) in self.attributes.items():
            current = now.get(name, _MISSING)
            reference = value if copy is _MISSING else copy
            if name in self.hidden:  # set aside for the run: back as it was, whatever the run did
                now[name] = value
                continue
            if current is value:
                if copy is not _MISSING and not _same(value, copy):  # a list or dict changed in place
                    after = _describe(value)
                    _refill(value, copy)
                    found.append(StateChange(_join(self.path, name), "attribute", _describe(copy), after))
                continue
            now[name] = value  # rebound or deleted: the user's own object goes back
            if copy is not _MISSING and isinstance(value, (list, dict, set)) and not _same(value, copy):
                _refill(value, copy)
            if current is not _MISSING and _same(current, reference):
                continue  # rebound to an equal value (a dict of the same functions rebuilt)
            found.append(StateChange(_join(self.path, name), "attribute", _describe(reference), _describe(current),
                                     trace_leftover=_trace_kind(current)))
        return found


def _same(a: Any, b: Any) -> bool:
    """Equal for the purpose of "did the run change it": plain values by value, containers
    element by element, weak references by referent, anything else by identity."""
    if a is b:
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, weakref.ref):
        return a() is b()
    return _is_plain(a) and _equal(a, b)


def _refill(container: Any, saved: Any) -> None:
    """Put a mutable container's saved contents back into the same object."""
    container.clear()
    if isinstance(container, list):
        container.extend(_copy_plain(saved))
    else:
        container.update(_copy_plain(saved))
