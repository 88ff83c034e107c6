"""A failure as a person reads it: one sentence in the user's terms (``x.shape[1]``, not
``L['x'].size()[1]``), the user's source line, the fix; torch's own text and the traceback
folded."""

from __future__ import annotations

import re

from ..errors import Failure, _export_error_names
from .blocks import Block, Code, Details, KeyValues, Note, Pre

__all__ = ["failure_blocks", "failure_sentence", "first_line", "user_terms"]

_TORCH_SIZE = re.compile(r"L\['([^']+)'\]((?:\[[^\]]+\])*)\.size\(\)\[(\d+)\]")
_TORCH_INPUT = re.compile(r"L\['([^']+)'\]")


def user_terms(text: str) -> str:
    """torch's names for inputs as the user writes them: ``L['x'].size()[1]`` → ``x.shape[1]``,
    ``L['x']`` → ``x``."""
    text = _TORCH_SIZE.sub(lambda m: f"{m.group(1)}{m.group(2)}.shape[{m.group(3)}]", text)
    return _TORCH_INPUT.sub(lambda m: m.group(1), text)


def first_line(text: str) -> str:
    """The first line of ``text`` that is not blank, stripped."""
    return next((ln.strip() for ln in text.splitlines() if ln.strip()), "")


def failure_sentence(failure: Failure | str) -> str:
    """A :class:`~exporter.errors.Failure` (or an error's text) in one sentence, in the user's terms."""
    if isinstance(failure, str):
        return user_terms(first_line(failure))
    line = first_line(failure.message)
    if failure.type not in _export_error_names():
        line = f"{failure.type}: {line}" if line else failure.type
    return user_terms(line)


def failure_blocks(failure: Failure | str | None, fallback: str | None = None) -> list[Block]:
    """A failure as a person reads it: one sentence in the user's terms, the user's source
    line, the fix; torch's own text ("torch said") and the traceback folded. With no failure,
    ``fallback`` (an error's text) as the sentence, or nothing."""
    if failure is None:
        return [Note(user_terms(fallback), "fail")] if fallback else []
    if isinstance(failure, str):
        blocks: list[Block] = [Note(failure_sentence(failure), "fail")]
        rest = failure.strip()
        if rest != first_line(rest):
            blocks.append(Details("torch said", (Pre(rest),), in_text=False))
        return blocks
    blocks = [Note(failure_sentence(failure), "fail")]
    if failure.source:
        blocks.append(KeyValues((("at", failure.source),)))
    if failure.hint:
        hint = failure.hint.strip()
        if "\n" in hint:
            head, _, code = hint.partition("\n")
            blocks.append(KeyValues((("fix", head),)))
            blocks.append(Code(code))
        else:
            blocks.append(KeyValues((("fix", hint),)))
    message = failure.message.strip()
    said = failure.library_text or (message if message != first_line(message) else "")
    if said:
        blocks.append(Details("torch said", (Pre(said),), in_text=False))
    if failure.traceback:
        blocks.append(Details("traceback", (Pre(failure.traceback),), in_text=False))
    return blocks
