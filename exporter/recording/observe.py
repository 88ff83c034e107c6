"""Hooks that observe a module's ``forward`` calls, and take them off again."""

from __future__ import annotations

from typing import Any

from .calls import RecordedCall, _version, keep, kept_outputs

__all__ = ["CallObserver"]


class CallObserver:
    """Keeps every completed ``forward`` call of ``module`` between :meth:`attach` and
    :meth:`detach` (a call that raised is not kept). Only the user's own calls: a job's twin of
    the module (:func:`exporter.model_twin.twin_of`) leaves these hooks out."""

    observes_user_calls_only = True

    def __init__(self, module: Any) -> None:
        self.module = module
        self.calls: list[RecordedCall] = []
        self.raised = 0  # calls that started and never returned
        self._pending: list[tuple[tuple[Any, ...], dict[str, Any], int]] = []
        self._handles: list[Any] = []

    def attach(self) -> None:
        from ..compat import prepare_kv_cache_pytree

        prepare_kv_cache_pytree(self.module, (), {})  # a DynamicCache flattens by layer, as export does
        self._handles = [
            self.module.register_forward_pre_hook(self._before, with_kwargs=True),
            self.module.register_forward_hook(self._after, with_kwargs=True),
        ]

    def detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.raised += len(self._pending)
        self._pending = []

    def _before(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        cloned = 0
        kept_args = []
        for value in args:
            kept, copies = keep(value)
            kept_args.append(kept)
            cloned += copies
        kept_kwargs = {}
        for name, value in kwargs.items():
            kept_kwargs[name], copies = keep(value)
            cloned += copies
        self._pending.append((tuple(kept_args), kept_kwargs, cloned))

    def _after(self, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        kept_args, kept_kwargs, cloned = self._pending.pop()
        outputs = kept_outputs(output)
        versions = tuple(_version(v) for v in kept_args) + tuple(_version(v) for v in kept_kwargs.values())
        self.calls.append(RecordedCall(
            len(self.calls), kept_args, kept_kwargs, versions, outputs, tuple(_version(v) for v in outputs), cloned
        ))
