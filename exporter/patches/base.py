"""What a model patch is: a declared object that swaps known export-hostile code for an
equivalent the exporter can keep dynamic, on the model's *classes* and *module functions*, for
the duration of a ``with`` block.

A :class:`Patch` declares its ``name``, the ``idiom`` it replaces and the ``symptom`` that idiom
causes; :meth:`Patch.targets` finds what to replace for one model (walking the classes of its
submodules, never reading or writing the instance's own attributes); :meth:`Patch.applies_to`
says whether there is anything; :meth:`Patch.patched` replaces it and puts the originals back on
exit, also after an exception; :meth:`Patch.diff` shows what is replaced, as a unified diff of
the original source and the replacement. A class attribute or a module function is shared by
the whole process, so the replacement is a switch (:func:`exporter.compat.shared_patch`): it
runs the patched code only in the context of the block that asked (its thread, or the job it
handed work to), and the original in other threads, in the user's code and in another capture
without the patch; a method the user replaces meanwhile is not undone. The shape follows onnx-diagnostic's ``torch_export_patches``, but a
patch here runs only when asked (``ExportOptions(patches=...)``).
"""

from __future__ import annotations

import abc
import contextlib
import difflib
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..compat.shared_patch import shared_original, shared_patch

__all__ = ["Patch", "PatchTarget", "SuggestedPatch", "function_targets", "method_targets", "model_classes",
           "plain_function", "replaced", "replacing_marked", "source_of", "unpatched"]


@dataclass(frozen=True)
class PatchTarget:
    """One attribute to replace: ``owner`` (a class or a module) ``.attribute`` becomes
    ``replacement`` (a plain function). ``original_source`` / ``replacement_source`` are what
    :meth:`Patch.diff` compares."""

    owner: Any = field(compare=False)
    attribute: str
    replacement: Any = field(compare=False, repr=False)
    original_source: str = field(default="", repr=False)
    replacement_source: str = field(default="", repr=False)
    owner_name: str = ""

    @property
    def label(self) -> str:
        """``transformers.models.dinov2.modeling_dinov2.Dinov2Embeddings.interpolate_pos_encoding``."""
        return f"{self.owner_name}.{self.attribute}"

    def diff(self) -> str:
        return "\n".join(difflib.unified_diff(
            self.original_source.splitlines(), self.replacement_source.splitlines(),
            f"{self.label} (original)", f"{self.label} (patched)", lineterm="",
        ))


@dataclass(frozen=True)
class SuggestedPatch:
    """A patch offered as a fix for one model: its name (what ``ExportOptions(patches=...)``
    takes), the idiom it replaces, and the diff of what it replaces in this model."""

    name: str
    idiom: str
    diff: str
    targets: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {"patch": self.name, "idiom": self.idiom, "replaces": ", ".join(self.targets)}


def model_classes(model: Any) -> tuple[type, ...]:
    """Every class in the MRO of the model's submodules' classes (the model's own included),
    each once, in module order: where a patch looks for the code it replaces."""
    modules = model.modules() if hasattr(model, "modules") else (model,)
    seen: dict[type, None] = {}
    for module in modules:
        for cls in type(module).__mro__:
            if cls is not object:
                seen.setdefault(cls, None)
    return tuple(seen)


def method_targets(model: Any, attribute: str,
                   rewrite: Callable[[Any], tuple[Any, str, str] | None]) -> tuple[PatchTarget, ...]:
    """A target per class of ``model`` whose own method ``attribute`` ``rewrite`` rewrites:
    ``rewrite(method)`` gives ``(replacement, original_source, replacement_source)``, or None
    for a method without the idiom."""
    found = []
    for cls in model_classes(model):
        method = unpatched(cls, attribute)
        if not callable(method):
            continue
        rewritten = rewrite(method)
        if rewritten is not None:
            found.append(PatchTarget(cls, attribute, *rewritten, f"{cls.__module__}.{cls.__qualname__}"))
    return tuple(found)


def function_targets(model: Any, attribute: str,
                     rewrite: Callable[[Any], tuple[Any, str, str] | None]) -> tuple[PatchTarget, ...]:
    """A target per module defining a class of ``model`` (each once) whose own function
    ``attribute`` ``rewrite`` rewrites, as :func:`method_targets` does for methods; the
    function is read through transformers' hub-kernel wrapper (:func:`plain_function`)."""
    found = []
    seen: set[str] = set()
    for cls in model_classes(model):
        module = sys.modules.get(cls.__module__)
        if module is None or module.__name__ in seen:
            continue
        seen.add(module.__name__)
        function = plain_function(unpatched(module, attribute))
        rewritten = rewrite(function) if function is not None else None
        if rewritten is not None:
            found.append(PatchTarget(module, attribute, *rewritten, module.__name__))
    return tuple(found)


def plain_function(value: Any) -> types.FunctionType | None:
    """``value`` as the Python function it runs: itself, or the function that transformers'
    hub-kernel wrapper closes over (``@use_kernel_func_from_hub_with_fallback`` turns a module
    function into an ``nn.Module`` whose ``forward`` calls it); None for anything else."""
    if isinstance(value, types.FunctionType):
        return inspect.unwrap(value)
    forward = getattr(type(value), "forward", None)
    for cell in getattr(forward, "__closure__", None) or ():
        try:
            content = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(content, types.FunctionType):
            return inspect.unwrap(content)  # a functools.wraps fallback around the model's function
    return None


def source_of(function: Any) -> str:
    """The source text of ``function`` dedented, or "" when Python has none (a builtin, a REPL)."""
    import textwrap

    try:
        return textwrap.dedent(inspect.getsource(function))
    except (OSError, TypeError):
        return ""


def replacing_marked(*variants: tuple[tuple[str, ...], Any]) -> Callable[[Any], tuple[Any, str, str] | None]:
    """A rewrite for :func:`method_targets` / :func:`function_targets`: each variant is
    ``(marks, replacement)``; the first whose marks (source fragments) all appear in the
    original's source gives its replacement; None when none does."""
    def rewrite(original: Any) -> tuple[Any, str, str] | None:
        source = source_of(original)
        replacement = next((r for marks, r in variants if all(m in source for m in marks)), None)
        return None if replacement is None else (replacement, source, source_of(replacement))

    return rewrite


def unpatched(owner: Any, attribute: str) -> Any:
    """``vars(owner)[attribute]`` as it is outside every patch block (the original while a
    block has replaced it), or None when ``owner`` has no such attribute of its own."""
    return shared_original(owner, attribute)


@contextlib.contextmanager
def replaced(targets: tuple[PatchTarget, ...]) -> Iterator[None]:
    """While the block runs, each target's attribute acts as its replacement in this context
    (other threads and contexts run the original); the originals are put back on exit (also
    after an exception), by the last block out when blocks nest (the registry
    :func:`exporter.compat.shared_patch`, which the capture's patches of torch use too)."""
    with contextlib.ExitStack() as stack:
        for target in targets:
            stack.enter_context(shared_patch(target.owner, target.attribute, _replacement_of(target)))
        yield


def _replacement_of(target: PatchTarget) -> Callable[[Any], Any]:
    def replacement(_original: Any) -> Any:
        return target.replacement

    return replacement


class Patch(abc.ABC):
    """A rewrite of one known idiom, offered as a fix. Subclasses declare ``name``, ``idiom``
    and ``symptom`` and implement :meth:`targets`."""

    name: ClassVar[str]
    idiom: ClassVar[str]  # the code it replaces, in a sentence
    symptom: ClassVar[str]  # what that code does to an export

    @abc.abstractmethod
    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        """What to replace for ``model``: found on its classes and their modules, never on
        the instance. Empty when the model has none of the idiom."""

    def applies_to(self, model: Any) -> bool:
        return bool(self.targets(model))

    def patched(self, model: Any) -> contextlib.AbstractContextManager[None]:
        """A context in which ``model``'s classes and module functions carrying the idiom are
        replaced; restored on exit. The model object itself is not touched."""
        return replaced(self.targets(model))

    def diff(self, model: Any) -> str:
        """A unified diff per replaced function: the original source against the replacement."""
        return "\n".join(target.diff() for target in self.targets(model))

    def covers(self, model: Any, file: str, line: int) -> bool:
        """Whether ``file:line`` lies in a function this patch replaces for ``model``: a
        failure raised there is one the patch can change."""
        for target in self.targets(model):
            original = inspect.unwrap(unpatched(target.owner, target.attribute) or target.replacement)
            original = getattr(original, "__func__", original)  # a staticmethod / classmethod
            original = plain_function(original) or original
            try:
                lines, start = inspect.getsourcelines(original)
                where = inspect.getsourcefile(original)
            except (OSError, TypeError):
                continue
            if where is not None and os.path.samefile(where, file) and start <= line < start + len(lines):
                return True
        return False

    def suggestion(self, model: Any) -> SuggestedPatch | None:
        """This patch as a fix for ``model``, or None when it does not apply."""
        targets = self.targets(model)
        if not targets:
            return None
        return SuggestedPatch(self.name, self.idiom, "\n".join(t.diff() for t in targets),
                              tuple(t.label for t in targets))

    def __repr__(self) -> str:
        return f"<Patch {self.name}: {self.idiom}>"
