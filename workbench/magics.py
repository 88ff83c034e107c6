"""``%onnx_export`` and ``%%onnx_export``: export a model from a notebook and show the workbench.

Thin by design: the options are parsed with IPython's ``magic_arguments``; the export options
are generated from ``ExportOptions``' field declarations, as the ``onnx-workbench export``
command's are (same flags, help and parsers; ``--dynamic`` is the core's grammar,
``exporter.dims.grammar``); the call is evaluated
in the user's namespace, and the exporter core does the rest. Importing this module imports no
torch, onnxscript, onnxruntime or ipywidgets (the widget loads on first use).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import dataclasses
import functools
import keyword
import re
import sys
from pathlib import PurePath
from textwrap import dedent
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import argument, magic_arguments

from exporter.dims.grammar import one_line
from exporter.display import render
from exporter.errors import ExportError, Failure, SpecError
from exporter.events import CancelToken, ProgressBarObserver
from exporter.option_fields import arguments_of
from exporter.options import ExportOptions, options_from_arguments
from exporter.ports import ports_section
from exporter.recording import CallGroup, RecordingError, record
from exporter.serializers import SAVE_FORMATS, check_destination
from exporter.session import Session

if TYPE_CHECKING:
    from IPython.core.interactiveshell import InteractiveShell

__all__ = ["ExportMagics", "parse_call", "report_as_text", "shows_widgets", "split_trailing_options"]

_ARGUMENTS = "__onnx_export_arguments__"


# -- option types (argparse reports their ArgumentTypeError as a one-line UsageError) ----------
def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]  # options are split without removing quotes, to keep the call intact
    return text


def _unquoted(parse: Callable[[str], Any]) -> Callable[[str], Any]:
    """``parse`` reading the word without the quotes the magic's split keeps."""

    @functools.wraps(parse)  # argparse names the parser in "invalid <name> value"
    def parse_unquoted(text: str) -> Any:
        return parse(_unquote(text))

    return parse_unquoted


def _identifier(text: str) -> str:
    if not text.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not a Python name to store the session in")
    if keyword.iskeyword(text):
        raise argparse.ArgumentTypeError(f"{text!r} is a Python keyword, not a variable name: choose another, "
                                         f"e.g. {text}_session")
    return text


def _path(text: str) -> str:
    return _unquote(text)


def _save_path(text: str) -> str:
    """``--save``: a path ending in ``.onnx`` (the ONNX model) or ``.pt2`` (the ExportedProgram),
    as the command line's ``-o`` takes."""
    path = _unquote(text)
    suffix = PurePath(path).suffix
    if suffix not in SAVE_FORMATS:
        known = " or ".join(f"{ending} ({what})" for ending, what in SAVE_FORMATS.items())
        raise argparse.ArgumentTypeError(f"{path!r}: unknown extension {suffix or '(none)'!r}; the file written must "
                                         f"end in {known}")
    return path


@contextlib.contextmanager
def _usage_errors() -> Iterator[None]:
    """A problem with the call or the spec (``SpecError``, a bad destination) as IPython's
    one-line ``UsageError``, with its fix: never a traceback."""
    try:
        yield
    except SpecError as exc:
        raise UsageError(one_line(exc)) from None
    except ExportError as exc:
        hint = (exc.hint or "").splitlines()
        raise UsageError(exc.reason + (f" ({hint[0]})" if hint else "")) from None


def names_read_by(call: str) -> set[str]:
    """The variables a call expression reads: ``model(x, mask=m)`` → ``{"model", "x", "m"}``."""
    try:
        tree = ast.parse(call.strip(), mode="eval")
    except SyntaxError:
        return set()
    return {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}


# -- the call -----------------------------------------------------------------------------------
def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def parse_call(source: str, namespace: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """``model(x, attention_mask=m)`` → ``(model, (x,), {"attention_mask": m})``, evaluated in
    ``namespace`` without calling the model. A malformed or failing expression is a ``UsageError``."""
    source = source.strip()
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as exc:
        raise UsageError(f"{source!r} is not a Python call: {exc.msg}") from None
    call = tree.body
    if not isinstance(call, ast.Call):
        raise UsageError(f"{source!r} is not a call: write the model call to export, e.g. model(x, attention_mask=m)")
    collect = ast.Call(func=ast.Name(_ARGUMENTS, ast.Load()), args=call.args, keywords=call.keywords)
    try:
        # The user's own expression, evaluated in their namespace: what the magic is for.
        model = eval(compile(ast.Expression(call.func), "<onnx_export>", "eval"), namespace)  # noqa: S307
        args, kwargs = eval(  # noqa: S307
            compile(ast.fix_missing_locations(ast.Expression(collect)), "<onnx_export>", "eval"),
            namespace, {_ARGUMENTS: lambda *a, **k: (a, k)},
        )
    except Exception as exc:  # noqa: BLE001 - the user's expression: one line, no traceback
        raise UsageError(f"evaluating {source!r} failed: {_one_line(exc)}") from None
    if not callable(model):
        raise UsageError(f"{ast.unparse(call.func)!r} is not callable (it is a {type(model).__name__})")
    return model, tuple(args), dict(kwargs)


def _rest_of_line(line: str, argv: list[str], first: int) -> str:
    """``line`` from where token ``argv[first]`` starts (tokens of a non-POSIX split are
    substrings of the line, in order)."""
    if first >= len(argv):
        return ""
    position = 0
    for token in argv[:first]:
        position = line.index(token, position) + len(token)
    return line[line.index(argv[first], position):]


_OPTION_START = re.compile(r"\s(?=--?[A-Za-z])")  # " --save", " -o": where trailing options may begin


def _is_call(text: str) -> bool:
    try:
        return isinstance(ast.parse(text.strip(), mode="eval").body, ast.Call)
    except SyntaxError:
        return False


def split_trailing_options(call: str) -> tuple[str, str]:
    """``model(x) --no-widget -o s`` → ``("model(x)", "--no-widget -o s")``: options written
    after the call, as people do. The call is the shortest head that is a Python call and is
    followed by an option; a text that is a call as it is stays whole (``model(x, -y)``,
    ``model(x - 1)``). ``model(x) --no-widget`` is a valid Python expression
    (``model(x) - (-no) - widget``), so being an expression is not enough: it must be a call."""
    if _is_call(call):
        return call, ""
    for match in _OPTION_START.finditer(call):
        head = call[: match.start()]
        if _is_call(head):
            return head, call[match.end():]
    return call, ""


def shows_widgets(shell: InteractiveShell) -> bool:
    """Whether the shell has a Jupyter front end that can show widgets (a kernel), rather
    than a terminal IPython."""
    return getattr(shell, "kernel", None) is not None


def report_as_text(session: Session, *, verify: bool = True, benchmark: bool = False, save: str | None = None,
                   stream: TextIO | None = None) -> bool:
    """Export, save, verify and benchmark ``session`` in the foreground and print what happened
    (``--no-widget`` and terminal IPython). A failure is printed as its message, source line and
    fix, never a traceback; Ctrl-C cancels at the next step. Returns whether the export worked."""
    def say(text: str) -> None:
        print(text, file=stream)

    def show(result: object) -> None:  # anything exporter.display renders
        say(render(result).to_text())

    token = CancelToken()
    try:
        result = session.submit("optimize", observer=ProgressBarObserver(), cancel=token).result()
        show(session)  # the stages; a failure as its sentence, source line and fix
        if result.status == "cancelled":
            return False
        failed = session.failed_stage
        if failed is not None:
            if failed.name == "capture":
                show(session.dims)
                if session.suggested_fixes:
                    show(session.suggested_fixes)
                    say("(session.apply_suggested_fixes() re-exports with them)")
            return False
        show(ports_section(session.stage_output("optimize")))
        if session.dims.differing:
            show(session.dims)
        if save is not None:
            say(f"saved {session.save(save)}")
        if verify:
            show(session.submit("verify", cancel=token).result())
        if benchmark:
            show(session.submit("benchmark", cancel=token).result())
        return True
    except KeyboardInterrupt:
        token.cancel()
        say("cancelled: the export stops at its next step")
        return False
    except Exception as exc:  # noqa: BLE001 - shown as text; the kernel stays alive
        show(Failure.from_exception(exc, "export"))
        return False


def _rebinder(namespace: dict[str, Any], name: str, first: Session) -> Callable[[Session], None]:
    """The widget's ``bind``: ``namespace[name]`` follows the session the widget shows, as long
    as it still holds the session the widget last put there (a name the user has reassigned
    is left alone). A plain Session, not a proxy: ``isinstance``, pickling and every API work."""
    bound = [first]

    def bind(session: Session) -> None:
        if namespace.get(name) is bound[0]:
            namespace[name] = session
            bound[0] = session

    return bind


_Magic = TypeVar("_Magic", bound=Callable[..., Any])


def _export_option_arguments(magic: _Magic) -> _Magic:
    """The export options' ``@argument`` s, generated from ``ExportOptions``' fields as the
    command line's are. One value per flag (``--dynamic`` is repeated), since the call follows."""
    for names, settings in reversed(list(arguments_of(ExportOptions, several_values=False, wrap_type=_unquoted))):
        magic = argument(*names, **settings)(magic)
    return magic


@magics_class
class ExportMagics(Magics):
    """The ``%onnx_export`` line and cell magic."""

    @property
    def _shell(self) -> InteractiveShell:
        """The shell IPython registered these magics with (``Magics.shell`` may be None only
        before registration)."""
        if self.shell is None:
            raise UsageError("%onnx_export runs in an IPython shell: %load_ext workbench")
        return self.shell

    @magic_arguments()
    @_export_option_arguments
    @argument("--save", type=_save_path, metavar="PATH", help="write the model (.onnx, or .pt2 for the ExportedProgram)")
    @argument("--no-verify", action="store_true", help="do not compare onnxruntime with PyTorch after exporting")
    @argument("--bench", action="store_true", help="time onnxruntime against PyTorch after exporting")
    @argument("--no-widget", action="store_true", help="print text instead of showing the workbench widget")
    @argument("-o", dest="name", type=_identifier, metavar="NAME",
              help="store the Session in this variable; the widget rebinds it to the session it shows after "
              "every change (dim toggle, Apply suggested fixes, Cancel) unless you have assigned NAME yourself")
    @argument("--record", type=_identifier, metavar="MODEL",
              help="cell form: run the whole cell with exporter.record(MODEL) around it (e.g. a cell that calls "
              "MODEL.generate(...)) and export the recorded calls with the dims they propose")
    @argument("--group", type=_identifier, metavar="NAME",
              help="with --record: the group of recorded calls to export (prefill, decode); default: the only one")
    @argument("call", nargs=argparse.REMAINDER, help="the call to export, e.g. model(x, attention_mask=m)")
    @line_cell_magic
    def onnx_export(self, line: str, cell: str | None = None) -> None:
        """Export a PyTorch model to ONNX and show the workbench.

        Line form: ``%onnx_export [options] model(x, attention_mask=m)``. Cell form: options on
        the first line, set-up code in the body, the call to export as its last line. Recording
        form: ``%%onnx_export --record model [--group decode]``, then code that calls the model
        (``model.generate(ids, max_new_tokens=8)``): the calls are recorded
        (:func:`exporter.record`), grouped, and the group is exported with the dims it proposes
        and checked on the recorded calls.
        """
        from IPython.utils.process import arg_split

        # Split like %timeit (quotes kept); the call is the rest of the line from its first
        # token on, so it reaches Python exactly as written.
        argv = arg_split(line, posix=False)
        options = self.onnx_export.parser.parse_args(argv)
        first = len(argv) - len(options.call)
        call, trailing = split_trailing_options(_rest_of_line(line, argv, first))
        if trailing:
            options = self.onnx_export.parser.parse_args(argv[:first] + arg_split(trailing, posix=False))
            if options.call:  # words after the options that are neither an option nor its value
                raise UsageError(f"{' '.join(options.call)!r} after the options is not an option; "
                                 "write the call once, before or after the options")
        recording = None  # with --record: the group of recorded calls, for the Dims tab
        if options.record or options.group:
            session, recording = self._recorded_session(call, cell, options)
            read = {options.record}
        else:
            model, args, kwargs = self._call(call, cell)
            session = self._session(model, args, kwargs, options)
            read = names_read_by(self._call_source(call, cell))
        if options.name:
            if options.name in read:
                print(f"note: -o {options.name} replaces the variable {options.name!r} that the call reads: it now "
                      f"holds the session (use another name, e.g. -o {options.name}_session, to keep both)",
                      file=sys.stderr)
            self._shell.user_ns[options.name] = session
        if options.no_widget or not shows_widgets(self._shell):
            report_as_text(session, verify=not options.no_verify, benchmark=options.bench, save=options.save)
            return
        from IPython.display import display

        from .app import Workbench  # imports ipywidgets

        bind = _rebinder(self._shell.user_ns, options.name, session) if options.name else None
        display(Workbench(session, verify=not options.no_verify, benchmark=options.bench, save=options.save,
                          bind=bind, recording=recording))

    def _call_source(self, line_call: str, cell: str | None) -> str:
        """The text of the call to export: the line's, or the cell's last statement."""
        if cell is None:
            return line_call
        try:
            body = ast.parse(self._shell.transform_cell(dedent(cell))).body
        except SyntaxError:
            return ""
        return ast.unparse(body[-1]) if body else ""

    def _call(self, line_call: str, cell: str | None) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        namespace = self._shell.user_ns
        if cell is None:
            if not line_call.strip():
                raise UsageError("give the call to export: %onnx_export [options] model(x, attention_mask=m)")
            return parse_call(line_call, namespace)
        if line_call.strip():
            raise UsageError("in %%onnx_export the call to export is the cell's last line, not on the first line")
        source = self._shell.transform_cell(dedent(cell))
        try:
            body = ast.parse(source).body
        except SyntaxError as exc:
            raise UsageError(f"the cell is not valid Python: {exc.msg} (line {exc.lineno})") from None
        if not body or not (isinstance(body[-1], ast.Expr) and isinstance(body[-1].value, ast.Call)):
            raise UsageError("end the %%onnx_export cell with the call to export, e.g. model(x)")
        setup = ast.Module(body=body[:-1], type_ignores=[])
        filename = self._shell.compile.cache(source)  # so tracebacks and guard sources show the cell's lines
        exec(compile(setup, filename, "exec"), namespace)  # noqa: S102 - the user's cell: its errors are theirs
        return parse_call(ast.get_source_segment(source, body[-1].value) or ast.unparse(body[-1].value), namespace)

    def _recorded_session(self, line_call: str, cell: str | None,
                          options: argparse.Namespace) -> tuple[Session, CallGroup]:
        """``%%onnx_export --record model``: the whole cell runs with ``exporter.record(model)``
        around it; the group asked for (or the only one) is exported with its proposed dims and
        checked on its recorded calls. Returns the session and the group (the widget's Dims tab
        shows the group's sizes against the session's ranges). An exception of the cell's own code reaches the user
        unchanged, as it would without the magic."""
        if not options.record:
            raise UsageError("--group chooses among recorded calls: add --record MODEL")
        if cell is None:
            raise UsageError("--record runs a cell: %%onnx_export --record model, then the code that calls the model")
        if line_call.strip():
            raise UsageError("with --record the cell's code calls the model; write no call on the first line")
        namespace = self._shell.user_ns
        if options.record not in namespace:
            raise UsageError(f"--record {options.record}: no variable named {options.record!r} in the notebook "
                            "(create the model in an earlier cell: its calls are observed from the cell's first line)")
        source = self._shell.transform_cell(dedent(cell))
        filename = self._shell.compile.cache(source)
        try:
            recorder = record(namespace[options.record])
        except RecordingError as exc:
            raise UsageError(one_line(exc)) from None
        try:
            with recorder:
                exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the user's cell: its errors are theirs
            group = recorder.group(options.group)
        except RecordingError as exc:
            raise UsageError(one_line(exc)) from None
        self._display(recorder.recording)
        model = namespace[options.record]
        args, kwargs = group.example.inputs()
        # --dynamic requests apply on top of the dims the recording proposes.
        export_options = self._options(model, args, kwargs, options, dynamic_shapes=group.dynamic_shapes)
        fields = {f.name: getattr(export_options, f.name) for f in dataclasses.fields(ExportOptions) if f.init}
        try:
            recorded = recorder.export(options.group, sweep=False, **fields)
        except SpecError as exc:
            raise UsageError(one_line(exc)) from None
        except ExportError:  # the widget shows the failed stage, with its source line and fix
            with _usage_errors():
                return Session(model, args, kwargs, export_options), group
        self._display(recorded.recorded)
        return recorded.session, group

    def _display(self, result: object) -> None:
        if shows_widgets(self._shell):
            from IPython.display import display

            display(result)
        else:
            print(render(result).to_text())

    @staticmethod
    def _session(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: argparse.Namespace) -> Session:
        export_options = ExportMagics._options(model, args, kwargs, options)
        with _usage_errors():  # the call's inputs against forward's signature, the spec against them
            return Session(model, args, kwargs, export_options)

    @staticmethod
    def _options(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], options: argparse.Namespace, *,
                 dynamic_shapes: Any = None) -> ExportOptions:
        with _usage_errors():
            if options.save is not None:
                check_destination(options.save)
            return options_from_arguments(options, model, args, kwargs, dynamic_shapes=dynamic_shapes)
