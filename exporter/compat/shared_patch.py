"""A class or module attribute replaced *for the job that asked*, across threads.

The model patches (:mod:`exporter.patches`) and the capture's own patches of torch
(``Module.to``, ``DimConstraints.solve``) must replace a class attribute or a module function,
which is process-wide. So the attribute becomes a *switch* while at least one job is inside: it
runs the replacement in the context (:mod:`contextvars`) of a job that entered
:func:`shared_patch`, and the original everywhere else — other threads, the user's own code, and
another job without that patch. The first to enter installs the switch, the last to leave puts
the original back, unless the attribute was replaced meanwhile (the user's own monkeypatch):
that one is left as it is. TorchDynamo (strict capture) traces through a switch: it cannot trace
``ContextVar.get``, and a ``torch.compiler.assume_constant_result`` answer that is not a tensor
fails under ``torch.export`` ("torch.* op returned non-Tensor"), so while it traces a job
(:func:`choices_for_dynamo`, around the strict capture) the switch reads that job's choices from
a plain dict, which TorchDynamo reads and guards on.

A thread does not inherit the context of the thread that started it: a job handed to another
thread runs in a copy of the submitter's context (:func:`exporter.worker.submit_work` does this).
"""

from __future__ import annotations

import contextvars
import functools
import itertools
import threading
import types
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

__all__ = [
    "answers_dynamo_compiling", "choices_for_dynamo", "compile_flags_in_this_job", "dynamo_compiling", "replaced_by",
    "shared_original", "shared_patch",
]

_lock = threading.Lock()
_switches: dict[tuple[int, str], _Switch] = {}  # (id(owner), name) -> the switch installed there now
_keys = itertools.count(1)  # a switch's key: never reused, unlike an id()
# In a job's context: a switch's key -> the index of its replacement in the switch's choices.
_chosen: contextvars.ContextVar[Mapping[int, int]] = contextvars.ContextVar(
    "exporter_shared_patches", default=types.MappingProxyType({}))
# While TorchDynamo traces a job (:func:`choices_for_dynamo`): that job's choices.
_traced: dict[int, int] = {}


class _Switch:
    """What ``owner.name`` is while patched: choices[0] is what contexts outside every block
    run (the original), the others the replacements of the jobs inside (None once a job left)."""

    def __init__(self, owner: Any, name: str, original: Any) -> None:
        self.owner, self.name, self.original = owner, name, original
        self.key = next(_keys)
        self.choices: list[Any] = [original]
        self.users = 0
        self.installed: Any = None  # the object set on the owner

    def install(self) -> None:
        me = self.key
        choices = self.choices
        if isinstance(self.owner, type):
            self.installed = _SwitchDescriptor(me, choices, self.original)
        else:
            def switched(*args: Any, **kwargs: Any) -> Any:
                return _pick(choices, me)(*args, **kwargs)

            try:
                functools.update_wrapper(switched, self.original, updated=())
            except (AttributeError, TypeError):  # pragma: no cover - an original without a name
                pass
            switched.__dict__["__shared_original__"] = self.original
            self.installed = switched
        setattr(self.owner, self.name, self.installed)

    def is_installed(self) -> bool:
        return vars(self.owner).get(self.name) is self.installed


class _SwitchDescriptor:
    """A class attribute that binds like the chosen object (a function, a staticmethod...)."""

    def __init__(self, key: int, choices: list[Any], original: Any) -> None:
        self._key, self._choices = key, choices
        self.__shared_original__ = original
        self.__wrapped__ = getattr(original, "__func__", original)
        self.__doc__ = getattr(original, "__doc__", None)

    def __get__(self, instance: Any, owner: Any = None) -> Any:
        chosen = _pick(self._choices, self._key)
        return chosen.__get__(instance, owner) if hasattr(chosen, "__get__") else chosen


def _not_tracing() -> bool:
    return False


_dynamo_compiling: Callable[[], bool] = _not_tracing  # torch.compiler.is_dynamo_compiling, once torch is in


def dynamo_compiling() -> bool:
    """``torch.compiler.is_dynamo_compiling()`` once a patch was entered (False before: no
    trace of ours can run then), without importing torch: TorchDynamo folds it to True."""
    return _dynamo_compiling()


def _pick(choices: list[Any], key: int) -> Any:
    """This context's choice among ``choices``: the original (choices[0]) when its block has
    left (a context copied inside a job, an asyncio task, can outlive the block)."""
    chosen = choices[_choice(key)]
    return choices[0] if chosen is None else chosen


def _choice(key: int) -> int:
    """The index of this context's choice for the switch ``key`` (0: the original); while
    TorchDynamo traces, the traced job's (:func:`choices_for_dynamo`)."""
    if dynamo_compiling():
        return _traced.get(key, 0)
    return _chosen.get().get(key, 0)


def _know_dynamo() -> None:
    global _dynamo_compiling
    if _dynamo_compiling is _not_tracing:  # lazily: importing this module must not import torch
        import torch.compiler

        _fill_dynamo_tables()
        _dynamo_compiling = torch.compiler.is_dynamo_compiling


def _fill_dynamo_tables() -> None:
    """Make TorchDynamo build its cached tables of torch functions (``torch.compiler.is_compiling``
    folds to True...) now, before any switch is installed: built while a switch stands in for
    ``torch.compiler.is_compiling``, they would key the switch, and every later strict capture
    of a model asking it fails ("Attempted to call function marked as skipped")."""
    from torch._dynamo import trace_rules
    from torch._dynamo.variables import torch as torch_variables

    getattr(trace_rules, "get_torch_obj_rule_map", lambda: None)()
    getattr(torch_variables, "tracing_state_functions", lambda: None)()


@contextmanager
def choices_for_dynamo() -> Iterator[None]:
    """Within (around a TorchDynamo trace of this job: the strict capture): the switches answer
    the traced code with this context's choices. Captures run one at a time (TorchDynamo is not
    thread-safe), so one dict serves; a user's own ``torch.compile`` in another thread at that
    very moment would read them too."""
    _know_dynamo()
    saved = dict(_traced)
    _traced.clear()
    _traced.update(_chosen.get())
    try:
        yield
    finally:
        _traced.clear()
        _traced.update(saved)


@contextmanager
def shared_patch(owner: Any, name: str, replacement: Callable[[Any], Any],
                 elsewhere: Callable[[Any], Any] | None = None) -> Iterator[Any]:
    """Within, for this context only: ``owner.name`` (an attribute of its own: a class's
    ``__dict__`` entry, a module's global) acts as ``replacement(original)``; yields the
    original. Other threads and contexts see the original meanwhile, or ``elsewhere(original)``
    when given (by the first block to enter: a process-wide state the job sets must not show
    elsewhere, see :func:`compile_flags_in_this_job`)."""
    key = (id(owner), name)
    _know_dynamo()
    with _lock:
        switch = _switches.get(key)
        if switch is None or not switch.is_installed():  # none yet, or replaced by the user meanwhile
            switch = _switches[key] = _Switch(owner, name, vars(owner)[name])
            if elsewhere is not None:
                switch.choices[0] = elsewhere(switch.original)
            switch.install()
        switch.users += 1
        switch.choices.append(replacement(switch.original))
        index = len(switch.choices) - 1
    token = _chosen.set({**_chosen.get(), switch.key: index})
    try:
        yield switch.original
    finally:
        _chosen.reset(token)
        with _lock:
            switch.choices[index] = None
            switch.users -= 1
            if switch.users == 0:
                if _switches.get(key) is switch:
                    del _switches[key]
                if switch.is_installed():  # the user's own replacement, made meanwhile, stays
                    setattr(owner, name, switch.original)


def shared_original(owner: Any, name: str) -> Any:
    """``vars(owner)[name]`` as it is outside every :func:`shared_patch` (the original while
    one has replaced it), or None when ``owner`` has no such attribute of its own."""
    value = vars(owner).get(name)
    while _is_switch(value):
        value = value.__shared_original__
    return value


def _is_switch(value: Any) -> bool:
    return type(value) is _SwitchDescriptor or (
        isinstance(value, types.FunctionType) and "__shared_original__" in value.__dict__)


def replaced_by(value: Any) -> Callable[[Any], Any]:
    """A ``replacement`` for :func:`shared_patch` that ignores the original: ``value`` itself."""
    return functools.partial(_constant, value)


def _constant(value: Any, _original: Any) -> Any:
    return value


def answers_dynamo_compiling(_original: Any) -> Any:
    """An ``elsewhere`` for torch's compile flags: ``torch.compiler.is_dynamo_compiling``
    (False in eager code, True while TorchDynamo traces that thread's own code)."""
    import torch.compiler

    return torch.compiler.is_dynamo_compiling


@contextmanager
def compile_flags_in_this_job() -> Iterator[None]:
    """Within: ``torch.compiler.is_compiling()`` and ``is_exporting()`` answer torch's flags
    in this context only. ``torch.export`` sets those flags for the whole process while it
    traces, so code in another thread (the user's ``generate()``) would take its compile path
    meanwhile: transformers' and ``kernels``' ``CompileableContextVar`` then set a global and
    reset a context variable, and raise ``TypeError: expected an instance of Token``. Elsewhere
    they answer ``torch.compiler.is_dynamo_compiling()``: False in eager code, True while
    TorchDynamo traces that thread's own code."""
    import torch.compiler as compiler

    def keep(original: Any) -> Any:
        return original

    with shared_patch(compiler, "is_compiling", keep, answers_dynamo_compiling), \
            shared_patch(compiler, "is_exporting", keep, answers_dynamo_compiling):
        yield
