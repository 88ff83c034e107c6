"""``record(model)``: observe a model's calls in a ``with`` block, then export from them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

from ..errors import ExportError
from ..presentation import Presentable
from ..verify.tolerance import Tolerance
from .calls import RecordedCall
from .groups import CallGroup, group_calls
from .observe import CallObserver
from .replay import RecordedExport, export_group

__all__ = ["Recorder", "Recording", "RecordingError", "record"]


class RecordingError(ExportError):
    """Nothing usable was recorded, or a recording was used before its block ended."""

    stage = "record"


@dataclass(frozen=True, repr=False)
class Recording(Presentable):
    """The calls a model received inside a ``record`` block, grouped by signature.

    Attributes:
        model_name: the model's class name.
        calls: every completed call, in order.
        groups: the calls grouped by signature (``prefill``, ``decode``; ``forward`` when all
            calls share one), each with its axes' observed sizes and proposed dims.
        notes: groups split apart and why; calls that raised.
    """

    model_name: str
    calls: tuple[RecordedCall, ...]
    groups: tuple[CallGroup, ...]
    notes: tuple[str, ...] = ()
    model: Any = field(default=None, compare=False)

    def group(self, name: str | None = None) -> CallGroup:
        """The group called ``name``; with no name, the only group."""
        if name is None and len(self.groups) == 1:
            return self.groups[0]
        for group in self.groups:
            if group.name == name:
                return group
        names = ", ".join(repr(g.name) for g in self.groups)
        raise RecordingError(
            f"no group {name!r} in the recording of {self.model_name} (groups: {names})"
            if name is not None else f"the recording of {self.model_name} has {len(self.groups)} groups ({names})",
            hint=f"name one: rec.export(group={self.groups[-1].name!r})",
        )

    def export(
        self,
        group: str | None = None,
        *,
        sweep: bool = True,
        tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
        **options: Any,
    ) -> RecordedExport:
        """Export the model with ``group``'s proposed spec and example call (``options`` are
        :class:`~exporter.ExportOptions` fields), then verify the ONNX model on the group's
        recorded calls and, when ``sweep``, over ``session.verify()``'s sizes."""
        return export_group(self.model, self.group(group), sweep=sweep, tolerances=tolerances, **options)


class Recorder(Presentable):
    """The context manager :func:`record` returns. Inside the block it observes; after the
    block, :attr:`recording` (and the shortcuts :attr:`groups`, :meth:`group`,
    :meth:`export`) hold what was observed. It shows as its recording (``summary()``, ``repr``,
    HTML), or, before the block ends or when its calls cannot be used, as one line saying so."""

    def __init__(self, model: Any) -> None:
        if not callable(getattr(model, "register_forward_pre_hook", None)):
            raise RecordingError(
                f"record() needs a torch.nn.Module, not {type(model).__name__}",
                hint="record the module whose forward you want to export: with exporter.record(model): ...",
            )
        self.model = model
        self._observer: CallObserver | None = None
        self._recording: Recording | None = None
        self._calls: tuple[RecordedCall, ...] = ()
        self._raised = 0
        self._state = "new"
        self._problem = ""  # why the recording cannot be used, in one line (refused, failed to group)

    def __enter__(self) -> Recorder:
        if self._state != "new":
            raise RecordingError("a recorder records one block", hint="call exporter.record(model) again")
        self._observer = CallObserver(self.model)
        self._observer.attach()
        self._state = "recording"
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        observer = self._observer
        assert observer is not None
        observer.detach()
        self._observer = None
        if exc_type is not None:
            self._state = "raised"
            return  # the block's exception propagates unchanged; nothing is kept
        name = type(self.model).__name__
        if not observer.calls:
            self._state = "empty"
            raise RecordingError(
                f"no call of {name}.forward was observed in the record block",
                hint=f"call the model inside the block: with exporter.record(model) as rec: model(x) "
                f"(or model.generate(...)); record the {name} instance that is actually called",
            )
        self._calls = tuple(observer.calls)
        self._raised = observer.raised
        refusal = _cache_refusal(self._calls)
        if refusal is not None:
            self._state = "refused"
            self._problem = f"{len(self._calls)} calls of {name}.forward recorded, not exportable: {refusal}"
            raise RecordingError(self._problem + "; " + _CACHE_ALTERNATIVES)
        self._state = "done"

    @property
    def recording(self) -> Recording:
        """What the block observed, grouped (the grouping runs on first use, not inside the
        block, so it adds nothing to the recorded code's time)."""
        if self._recording is None:
            if self._state != "done":
                raise RecordingError(
                    {"new": "the record block has not run yet", "recording": "the record block has not ended yet",
                     "raised": "the record block raised: nothing was kept",
                     "empty": "no call was observed in the record block",
                     "refused": self._problem}.get(self._state, "nothing was recorded"),
                    hint="use the recording after the with block: with exporter.record(model) as rec: ...; rec.export()",
                )
            groups, notes = group_calls(self.model, self._calls)
            if self._raised:
                notes += (f"{self._raised} call(s) raised and were not kept",)
            self._recording = Recording(type(self.model).__name__, self._calls, groups, notes, self.model)
        return self._recording

    @property
    def groups(self) -> tuple[CallGroup, ...]:
        return self.recording.groups

    def group(self, name: str | None = None) -> CallGroup:
        return self.recording.group(name)

    def export(
        self,
        group: str | None = None,
        *,
        sweep: bool = True,
        tolerances: Mapping[str, Tolerance] | Tolerance | None = None,
        **options: Any,
    ) -> RecordedExport:
        """See :meth:`Recording.export`."""
        return self.recording.export(group, sweep=sweep, tolerances=tolerances, **options)

    def outcome(self) -> Recording | str:
        """The recording, or why there is none in a few words (``new``, ``recording``,
        ``done: SpecError: ...`` when the calls could not be grouped); never raises."""
        try:
            if self._state == "done":
                return self.recording
        except Exception as exc:  # noqa: BLE001 - the problem is the answer
            self._problem = _one_line(exc)
        return self._state + (f": {self._problem}" if self._problem else "")


_CACHE_ALTERNATIVES = (
    "record generate(..., cache=DynamicCache()) instead (past_key_values= before transformers 5; plain "
    "layers, the model still masks its window), or prompts plus new tokens shorter than the window"
)


def _cache_refusal(calls: tuple[RecordedCall, ...]) -> str | None:
    """Why a call's KV cache cannot be exported (a sliding window that filled up, a layer type
    that keeps state besides its tensors), in one phrase naming the first such call, or None."""
    from ..compat.kv_cache import kv_cache_refusal

    for call in calls:
        for value in (*call.args, *call.kwargs.values()):
            reason = kv_cache_refusal(value)
            if reason is not None:
                return f"call {call.index}'s cache holds {reason}"
    return None


def _one_line(exc: BaseException) -> str:
    text = str(getattr(exc, "reason", "") or exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"


def record(model: Any) -> Recorder:
    """Observe every ``forward`` call of ``model`` inside a ``with`` block::

        with record(model) as rec:
            model.generate(input_ids, max_new_tokens=8)
        rec.groups                      # prefill, decode: observed sizes, proposed dims
        result = rec.export("decode")   # exported, verified on the recorded calls + sweep

    Only ``model``'s own ``forward`` is observed (a forward pre-hook and a forward hook with
    kwargs), not its submodules'. Hooks are removed when the block ends, also when it raises
    (the exception propagates unchanged and nothing is kept); the model's parameters, buffers
    and training flag are not touched. Tensors are kept by reference; only tensors of caches
    that write in place are copied (see :mod:`exporter.recording.calls`). A transformers
    model's ``DynamicCache`` is flattened by layer from then on, as :func:`exporter.export`
    does. Raises :class:`RecordingError` when no call was observed."""
    return Recorder(model)
