"""The model patches in order, found by name, offered for a model, and applied together."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

from ..errors import SpecError
from .base import Patch, SuggestedPatch
from .delta_rule_scan import DeltaRuleChunkScan
from .every_expert import EveryExpert
from .maybe_pad import PadToPatchMultiple
from .packed_images import PackedImages
from .pad_when_shorter import PadWhenShorter
from .pos_embed import PositionEmbeddingInterpolation
from .range_tensor import RangeListTensor
from .recurrence_scan import LinearRnnScan, RwkvAttentionScan
from .selective_scan import SelectiveScanLoop
from .sinusoidal_table import SinusoidalTable
from .tf_padding import TfSamePadding
from .unfold_resize import UnfoldResize

__all__ = ["PATCHES", "PATCH_NAMES", "applied", "check_patch_names", "patch_named", "suggested_patches"]

#: Every patch, in the order they are offered and entered.
PATCHES: tuple[Patch, ...] = (PositionEmbeddingInterpolation(), TfSamePadding(), PadToPatchMultiple(), SelectiveScanLoop(),
                              UnfoldResize(), RwkvAttentionScan(), LinearRnnScan(), RangeListTensor(), SinusoidalTable(),
                              DeltaRuleChunkScan(), EveryExpert(), PadWhenShorter(), PackedImages())
PATCH_NAMES: tuple[str, ...] = tuple(patch.name for patch in PATCHES)


def check_patch_names(names: str | Iterable[str]) -> tuple[str, ...]:
    """``names`` as a tuple of known patch names, each once (one string is one name); an
    unknown name is a :class:`~exporter.errors.SpecError` listing the patches."""
    found = tuple(dict.fromkeys((names,) if isinstance(names, str) else tuple(names)))
    unknown = [n for n in found if n not in PATCH_NAMES]
    if unknown:
        import difflib

        close = [c for n in unknown for c in difflib.get_close_matches(str(n), PATCH_NAMES, n=1)]
        raise SpecError(
            f"unknown model patch name(s) in patches: {', '.join(map(repr, unknown))}",
            hint=(f"did you mean {close[0]!r}? " if close else "") + "the patches are: " + ", ".join(PATCH_NAMES),
        )
    return found


def patch_named(name: str) -> Patch:
    """The patch called ``name``; a SpecError listing the patches for any other name."""
    check_patch_names(name)
    return next(patch for patch in PATCHES if patch.name == name)


def suggested_patches(model: Any, exclude: Iterable[str] = (),
                      at: Iterable[tuple[str, int]] | None = None) -> tuple[SuggestedPatch, ...]:
    """The patches that apply to ``model`` (its classes carry their idiom), as fixes with their
    diffs, in registry order, leaving out those named in ``exclude`` (already applied). ``at``:
    the ``(file, line)`` places a failure was raised at (and the lines of the guards that made a
    dim static); then only the patches that replace a function holding one of them (a
    patch elsewhere in the model cannot change that failure)."""
    skip = set(exclude)
    places = None if at is None else tuple(at)
    wanted = (p for p in PATCHES if p.name not in skip and (places is None or any(_covers(p, model, place) for place in places)))
    found = (patch.suggestion(model) for patch in wanted)
    return tuple(s for s in found if s is not None)


def _covers(patch: Patch, model: Any, at: tuple[str, int]) -> bool:
    try:
        return patch.covers(model, *at)
    except OSError:  # the file is gone: nothing to compare
        return False


@contextlib.contextmanager
def applied(model: Any, names: Iterable[str]) -> Iterator[None]:
    """While the block runs, the patches called ``names`` replace their idioms on ``model``'s
    classes and modules (in registry order); everything is put back on exit. The model object
    itself is not changed. No names: nothing is done."""
    wanted = set(check_patch_names(tuple(names)))
    with contextlib.ExitStack() as stack:
        for patch in PATCHES:
            if patch.name in wanted:
                stack.enter_context(patch.patched(model))
        yield
