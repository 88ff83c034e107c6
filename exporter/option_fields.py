"""Options declared once: a dataclass field carries its command-line flag (:class:`Flag`: the
option strings, parser, help, choices, metavar) in its metadata, and every front end generates
its ``argparse`` arguments from the fields, as transformers' ``HfArgumentParser`` does.

::

    @dataclass(frozen=True)
    class Options:
        opset_version: int | None = flag_field(None, Flag(("--opset",), "ONNX opset", parse=int))

    for names, settings in arguments_of(Options):
        parser.add_argument(*names, **settings)  # dest="opset_version", default=None, ...
    Options(**field_values(parser.parse_args(argv), Options))

The parsed value of a field is stored under the field's name (or ``Flag.dest``).
"""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["Flag", "arguments_of", "field_values", "flag_field", "flag_of", "flagged_fields"]

_FLAG = "flag"


@dataclass(frozen=True)
class Flag:
    """How one option is written on a command line.

    Attributes:
        names: the option strings, e.g. ``("--opset",)``.
        help: the help text, the same on every front end.
        parse: reads one value from its text, as argparse's ``type=`` (an
            ``argparse.ArgumentTypeError`` says what is wrong); None reads a string.
        choices: the values accepted, shown in the usage line.
        metavar: the value's name in the usage line.
        action: an argparse action (``"store_true"``, ``"store_false"``, ``"append"``, or an
            ``argparse.Action`` class); None stores the value.
        nargs: ``"+"`` when one flag may take several values where the front end allows it.
        dest: the namespace attribute, when the parsed value is not yet the field's value
            (``--dynamic`` collects axis requests, made a spec against the model later);
            default: the field's name.
    """

    names: tuple[str, ...]
    help: str
    parse: Callable[[str], Any] | None = None
    choices: tuple[str, ...] | None = None
    metavar: str | None = None
    action: str | type[argparse.Action] | None = None
    nargs: str | None = None
    dest: str | None = None


def flag_field(default: Any, flag: Flag) -> Any:
    """A dataclass field with ``default`` whose command-line flag is ``flag``."""
    return dataclasses.field(default=default, metadata={_FLAG: flag})


def flag_of(field: dataclasses.Field[Any]) -> Flag | None:
    """The flag a field declares, None for a field with no command-line form."""
    flag = field.metadata.get(_FLAG)
    return flag if isinstance(flag, Flag) else None


def flagged_fields(cls: type) -> Iterator[tuple[dataclasses.Field[Any], Flag]]:
    """Each field of the dataclass ``cls`` that has a flag, with it, in declaration order."""
    for field in dataclasses.fields(cls):
        flag = flag_of(field)
        if flag is not None:
            yield field, flag


def arguments_of(
    cls: type, *, several_values: bool = True, wrap_type: Callable[[Callable[[str], Any]], Callable[[str], Any]] | None = None,
) -> Iterator[tuple[tuple[str, ...], dict[str, Any]]]:
    """``(option strings, add_argument keywords)`` for each flagged field of ``cls``.

    ``several_values=False`` for a front end where a value list cannot end before what follows
    (the magic's call): each flag then takes one value and is repeated. ``wrap_type`` adapts
    every value parser (the magic unquotes the words it splits with their quotes kept)."""
    for field, flag in flagged_fields(cls):
        settings: dict[str, Any] = {"dest": flag.dest or field.name, "help": flag.help}
        default = None if field.default is dataclasses.MISSING else field.default
        # An "append" collects into a list (argparse copies the default before appending).
        settings["default"] = list(default or ()) if flag.action == "append" else default
        if flag.action is not None:
            settings["action"] = flag.action
        takes_value = flag.action not in ("store_true", "store_false")
        if takes_value:
            parse = flag.parse if flag.parse is not None else str
            settings["type"] = wrap_type(parse) if wrap_type is not None else parse
        if flag.choices is not None:
            settings["choices"] = flag.choices
        if flag.metavar is not None:
            settings["metavar"] = flag.metavar
        if flag.nargs is not None and several_values:
            settings["nargs"] = flag.nargs
        yield flag.names, settings


def field_values(namespace: argparse.Namespace, cls: type) -> dict[str, Any]:
    """The parsed value of each flagged field of ``cls``, by field name (a ``Flag.dest`` read
    from its own attribute, as parsed)."""
    return {field.name: getattr(namespace, flag.dest or field.name) for field, flag in flagged_fields(cls)}
