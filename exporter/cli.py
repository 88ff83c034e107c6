"""``onnx-workbench``: export PyTorch models to ONNX from the command line.

::

    onnx-workbench demo [-o OUTDIR]
    onnx-workbench export MODULE:FACTORY [--args k=v ...] [--dynamic INPUT.AXIS=NAME ...]
                          [--opset N] [--strategy S] [--no-optimize] [--skip-pass NAME ...]
                          [--runtime-asserts] [--verify] -o out.onnx
    onnx-workbench sweep [--zoo Z ...] [--model PATTERN ...] [--engine local|ray] [-o DIR]   (exporter.sweep.cli)

Options may come before ``MODULE:FACTORY`` too (``export --dynamic x.0=batch models.py:make
-o m.onnx``). ``-o`` ends in ``.onnx`` (the ONNX model) or ``.pt2`` (the ``torch.export`` ExportedProgram:
the export stops after capture). Progress (one line per stage, with timings) goes to stderr;
results go to stdout, the last line an ONNX export's verdict (:attr:`exporter.Session.verdict`):
``not verified`` unless ``--verify`` compared onnxruntime with PyTorch over a sweep of sizes
(then ``passed``, ``failed`` or ``not verified`` and verify's verdict). Exit status: 0 on
success, 1 when the export fails (the message names the stage, the input, the source line and
a fix) or ``--verify`` finds the model wrong (it is written all the same), 2 for a malformed
command line (checked before torch is imported). The destination is checked before the export starts.

Importing this module, ``--help`` and ``--version`` import no torch.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
import logging
import os
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._quiet import quiet_library_warnings
from .api import export
from .display import Code, Section, Table, render
from .display.sections import attempts_table, dims_section, guards_section, stages_table
from .errors import ExportError, first_line, user_source_line
from .option_fields import arguments_of
from .options import ExportOptions, options_from_arguments
from .ports import default_opset, ports_section
from .serializers import check_destination
from .sweep.cli import add_sweep_parser
from .session import Session

if TYPE_CHECKING:
    from .bench import BenchmarkResult
    from .verdict import ExportVerdict
    from .verify import VerifyResult

__all__ = ["main"]

LOGGER_NAME = "onnx_workbench"
THIRD_PARTY_LOGGERS = ("torch.onnx", "torch.export", "onnxscript", "onnx_ir")
DEMO_BENCHMARK_SECONDS = 0.5
DISTRIBUTION = "onnx-export-workbench"
#: What ``export -o`` can write, by file extension.
OUTPUT_FORMATS = {".onnx": "an ONNX model", ".pt2": "a torch.export ExportedProgram"}


# -- command-line syntax -------------------------------------------------------------------


def parse_factory_argument(text: str) -> tuple[str, Any]:
    """``k=v`` with ``v`` read as a Python literal (``3``, ``[1, 2]``, ``'a'``), else a string."""
    key, equals, value = text.partition("=")
    if not equals or not key.isidentifier():
        raise argparse.ArgumentTypeError(f"{text!r} is not KEY=VALUE (e.g. hidden=64)")
    try:
        return key, ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return key, value


def parse_factory_reference(text: str) -> tuple[str, str]:
    """``package.module:make`` or ``path/to/file.py:make`` → (module or path, function name)."""
    module, colon, name = text.rpartition(":")
    if not colon or not module or not name.isidentifier():
        raise argparse.ArgumentTypeError(
            f"{text!r} is not MODULE:FACTORY (e.g. mymodels:make_model or models.py:make_model)"
        )
    return module, name


def parse_output(text: str) -> Path:
    """``-o``: a path ending in ``.onnx`` or ``.pt2``. An existing directory is let through, for
    :func:`~exporter.serializers.check_destination` to say so plainly before the export."""
    path = Path(text)
    if path.suffix not in OUTPUT_FORMATS and not path.is_dir():
        known = " or ".join(f"{suffix} ({what})" for suffix, what in OUTPUT_FORMATS.items())
        raise argparse.ArgumentTypeError(
            f"{text!r}: unknown extension {path.suffix or '(none)'!r}; the file written must end in {known}"
        )
    return path


def _is_factory_reference(text: str) -> bool:
    if text.startswith("-") or "=" in text:  # an option, or a KEY=VALUE / INPUT.AXIS=NAME value
        return False
    try:
        parse_factory_reference(text)
    except argparse.ArgumentTypeError:
        return False
    return True


class FactoryAnywhereParser(argparse.ArgumentParser):
    """``export``'s parser: ``MODULE:FACTORY`` may also come after options that take several
    values (``export --dynamic x.0=batch models.py:make -o m.onnx``), where argparse would
    hand it to ``--dynamic``. The first word that reads as ``MODULE:FACTORY`` (no ``=``, so
    no ``--args`` or ``--dynamic`` value; not the value of a one-value option such as
    ``-o``) is moved to the front before parsing."""

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        args = sys.argv[1:] if args is None else list(args)
        return super().parse_known_args(self.factory_first(args), namespace)

    def factory_first(self, args: list[str]) -> list[str]:
        if not any(action.type is parse_factory_reference for action in self._actions):
            return args  # demo: no MODULE:FACTORY to look for
        one_value = {name for action in self._actions if action.nargs is None for name in action.option_strings}
        for i, word in enumerate(args):
            if word == "--":
                break
            if i and args[i - 1] in one_value:
                continue
            if _is_factory_reference(word):
                return [word, *args[:i], *args[i + 1:]]
        return args


def package_version() -> str:
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - run from a source tree
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    verbose_help = "show torch's and onnxscript's warnings and what they print during each stage"
    # -v after the command too: each command's own -v leaves the namespace alone unless given.
    verbose = FactoryAnywhereParser(add_help=False)  # a parent of the commands: their class
    verbose.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help)
    parser = argparse.ArgumentParser(
        prog="onnx-workbench",
        description="Export PyTorch models to ONNX and see what the export did.",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help=verbose_help)
    parser.add_argument("--version", action="version", version=f"%(prog)s {package_version()}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND",
                                     parser_class=FactoryAnywhereParser)

    demo = commands.add_parser(
        "demo", parents=[verbose],
        help="export the built-in transformer block, check it in onnxruntime, write a summary",
        description="Export exporter.examples.demo_block with dynamic batch and seq, save "
        "OUTDIR/model.onnx and OUTDIR/summary.md, and print the summary.",
    )
    demo.add_argument("-o", "--outdir", default="out", type=Path, help="output directory (default: out)")

    export = commands.add_parser(
        "export", parents=[verbose],
        help="export a model returned by a factory function",
        description="Export the model a factory returns. The factory returns (model, args), "
        "(model, args, kwargs) or (model, args, kwargs, dynamic_shapes).",
        epilog="example: onnx-workbench export mymodels.py:make_model --args hidden=64 "
        "--dynamic x.0=batch x.1=seq:1:4096 -o model.onnx",
    )
    export.add_argument("factory", type=parse_factory_reference, metavar="MODULE:FACTORY",
                        help="a module name or a .py path, and the function in it")
    export.add_argument("--args", dest="factory_args", type=parse_factory_argument, nargs="+",
                        action="extend", default=[], metavar="KEY=VALUE",
                        help="keyword arguments for the factory; values are Python literals or strings")
    for names, settings in arguments_of(ExportOptions):  # declared once, with the magic's
        export.add_argument(*names, **settings)
    export.add_argument("--verify", action="store_true",
                        help="compare onnxruntime with PyTorch over a sweep of sizes after the export "
                        "(exit status 1 when the model is wrong); without it the model is not verified")
    export.add_argument("--benchmark", action="store_true",
                        help="time onnxruntime against eager PyTorch after the export (and after --verify)")
    export.add_argument("-o", "--output", required=True, type=parse_output,
                        help="the file to write: .onnx for the ONNX model, .pt2 for the ExportedProgram "
                        "(stops after capture)")
    add_sweep_parser(commands)
    return parser


# -- process setup -------------------------------------------------------------------------


class _FirstLineFormatter(logging.Formatter):
    """One line per record: a failed stage's full error is printed once, at the end."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.levelno == logging.DEBUG else text.split("\n", 1)[0]


@contextlib.contextmanager
def progress_logger(verbose: bool = False) -> Iterator[logging.Logger]:
    """The ``onnx_workbench`` logger, writing one line per stage to stderr while in use; with
    ``verbose``, also what torch and onnxscript printed during each stage."""
    logger = logging.getLogger(LOGGER_NAME)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_FirstLineFormatter("%(message)s"))
    saved = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.INFO)
    logger.propagate = False
    try:
        yield logger
    finally:
        logger.removeHandler(handler)
        logger.setLevel(saved[0])
        logger.propagate = saved[1]


@contextlib.contextmanager
def quiet_third_party(enabled: bool = True) -> Iterator[None]:
    """Hide torch's and onnxscript's log noise (e.g. "torchvision is not installed") and their
    own deprecation warnings; warnings about the user's code still show."""
    if not enabled:
        yield
        return
    import torch  # noqa: F401  (torch sets its loggers' levels on import)

    loggers = [logging.getLogger(name) for name in THIRD_PARTY_LOGGERS]
    saved = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        with quiet_library_warnings():
            yield
    finally:
        for logger, level in zip(loggers, saved):
            logger.setLevel(level)


# -- loading a user's factory --------------------------------------------------------------


@contextlib.contextmanager
def importable_from(directory: str) -> Iterator[None]:
    """Let the factory's module import its neighbours, as ``python -m`` would."""
    added = directory not in sys.path
    if added:
        sys.path.insert(0, directory)
    try:
        yield
    finally:
        if added and directory in sys.path:
            sys.path.remove(directory)


def factory_error(reason: str, *, hint: str, cause: BaseException | None = None) -> ExportError:
    error = ExportError(
        reason, stage="factory", hint=hint, source=user_source_line(cause) if cause is not None else None
    )
    error.__cause__ = cause
    return error


def load_module(module: str) -> Any:
    """Import ``module``: a dotted module name, or a path to a ``.py`` file."""
    if module.endswith(".py") or os.sep in module or "/" in module:
        return load_module_from_path(Path(module))
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            raise factory_error(
                f"cannot import module {module!r}: {exc}",
                hint="run from the directory that contains it, "
                f"or give a path: {module.replace('.', '/')}.py:FACTORY",
            ) from None
        raise module_failed(f"importing {module!r}", exc) from None
    except Exception as exc:  # noqa: BLE001 - the user's module: any error is a [factory] message
        raise module_failed(f"importing {module!r}", exc) from None


def load_module_from_path(path: Path) -> Any:
    if not path.is_file():
        raise factory_error(f"no such file: {str(path)!r}", hint="check the path before the ':'")
    name = f"_onnx_workbench_{path.stem}"
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - the user's file: any error is a [factory] message
        del sys.modules[name]
        raise module_failed(f"running {str(path)!r}", exc) from None
    return module


def module_failed(action: str, cause: BaseException) -> ExportError:
    return factory_error(f"{action} failed: {first_line(cause)}", hint="fix the error above", cause=cause)


def candidate_factories(module: Any) -> list[str]:
    """Public functions defined in ``module`` itself: what could be a factory (not its
    classes, nor what it imported)."""
    return [
        name for name, value in vars(module).items()
        if inspect.isfunction(value) and not name.startswith("_") and value.__module__ == module.__name__
    ]


def find_factory(module: Any, name: str, where: str | None = None) -> Any:
    """``module.name`` if it is a function; ``where`` is the module as the user named it
    (``models.py``), not the internal name a file is imported under."""
    factory = getattr(module, name, None)
    if inspect.isfunction(factory) or (callable(factory) and not inspect.isclass(factory)):
        return factory
    candidates = candidate_factories(module)
    close = difflib.get_close_matches(name, candidates, n=1)
    suggestion = f"did you mean {close[0]!r}? " if close else ""
    what = f"has a class {name!r}, not a function" if inspect.isclass(factory) else f"has no function {name!r}"
    raise factory_error(
        f"{where or module.__name__!r} {what}",
        hint=suggestion + "functions there: " + (", ".join(candidates) or "(none)")
        + "; a factory returns (model, args) or (model, args, kwargs)",
    )


def call_factory(factory: Any, arguments: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    """Call the factory and normalise what it returns to ``(model, args, kwargs, dynamic_shapes)``."""
    try:
        result = factory(**arguments)
    except Exception as exc:  # noqa: BLE001 - the user's factory: any error is a [factory] message
        raise factory_error(
            f"{factory.__name__}({', '.join(f'{k}={v!r}' for k, v in arguments.items())}) raised {first_line(exc)}",
            hint="check the --args given to the factory" if isinstance(exc, TypeError) else "fix the error above",
            cause=exc,
        ) from None
    if not isinstance(result, tuple) or not 2 <= len(result) <= 4:
        raise factory_error(
            f"{factory.__name__}() returned {type(result).__name__}, not a tuple of 2 to 4 items",
            hint="return (model, args), (model, args, kwargs) or (model, args, kwargs, dynamic_shapes)",
        )
    model, args, kwargs, dims = (tuple(result) + (None, None))[:4]
    if not isinstance(args, (tuple, list)):
        args = (args,)
    if kwargs is not None and not isinstance(kwargs, dict):
        raise factory_error(
            f"{factory.__name__}() returned kwargs of type {type(kwargs).__name__}, not a dict",
            hint="return (model, args, kwargs) with kwargs a dict of keyword inputs",
        )
    return model, tuple(args), dict(kwargs or {}), dims


def load_factory_model(reference: tuple[str, str], arguments: dict[str, Any]) -> tuple[Any, tuple[Any, ...], dict[str, Any], Any]:
    module_name, function = reference
    with importable_from(os.getcwd()):
        module = load_module(module_name)
        return call_factory(find_factory(module, function, module_name), arguments)


# -- describing a session ------------------------------------------------------------------


def _body_text(section: Section) -> str:
    """A section's body as indented text, without its title line."""
    return "\n".join(section.text_lines()[1:])


def print_ports(path: Path, model_proto: Any) -> None:
    size_kb = path.stat().st_size / 1024
    print(f"wrote {path} (opset {default_opset(model_proto)}, {size_kb:.1f} KB)")
    print(_body_text(ports_section(model_proto)))


# -- demo ----------------------------------------------------------------------------------


def demo_summary(session: Session, model_path: Path, verification: VerifyResult, latency: BenchmarkResult) -> str:
    """The Markdown summary ``onnx-workbench demo`` writes and prints: the sections of
    :mod:`exporter.display`, rendered as Markdown."""
    proto = session.stage_output("optimize")
    total = sum(r.seconds for r in session.stages)
    overview = (
        f"Exported `{type(session.model).__name__}` (`exporter.examples.demo_block`) to `{model_path}` "
        f"(opset {default_opset(proto)}, {model_path.stat().st_size / 1024:.1f} KB) in {total:.2f} s "
        f"with the `{session.strategy}` capture strategy."
    )
    sections = (
        Section("Stages", None, (stages_table(session.stages),)),
        Section("Capture attempts", None, (attempts_table(session.attempts),)),
        ports_section(proto),
        Section("Dim spec", None, (Code(session.spec.to_code(session.inputs)),)),
        dims_section(session.dims, "Dims: requested and obtained"),
        guards_section(session.guards, "Shape guards"),
        replace(render(verification), title="onnxruntime vs PyTorch over a sweep of sizes"),
        replace(render(latency), title="Latency"),
    )
    parts = ["# onnx-workbench demo", overview] + [s.to_markdown(2) for s in sections]
    return "\n\n".join(parts) + "\n"


def demo_digest(session: Session, model_path: Path, verification: VerifyResult, latency: BenchmarkResult,
                summary_path: Path) -> str:
    """What ``onnx-workbench demo`` prints: each result once, in a few lines; the full
    Markdown is in ``summary_path``."""
    proto = session.stage_output("optimize")
    ports = ", ".join(f"{value.name} [{', '.join(str(d) for d in value.shape)}]"
                      for value in (*proto.graph.inputs, *proto.graph.outputs))
    compared = sum(1 for case in verification.cases if case.compared)
    return "\n".join((
        f"exported {type(session.model).__name__} to {model_path} "
        f"({model_path.stat().st_size / 1024:.1f} KB, opset {default_opset(proto)}, {session.strategy} capture)",
        f"ONNX inputs and output: {ports}",
        f"verify ({compared} cases compared): {verification.verdict}",
        f"benchmark: {latency.headline}",
        f"full summary (stages, dims, guards, cases, latency): {summary_path}",
    ))


def run_demo(options: argparse.Namespace, logger: logging.Logger) -> int:
    from .examples import demo_block  # imports torch

    model, args, kwargs, dims = demo_block()
    session = export(model, *args, options=ExportOptions(dynamic_shapes=dims, logger=logger), **kwargs)
    model_path = session.save(options.outdir / "model.onnx")
    logger.info("saved %s", model_path)
    verification = session.verify()  # its progress line says "verify passed in …" on stderr
    latency = session.benchmark(budget=DEMO_BENCHMARK_SECONDS)
    summary = demo_summary(session, model_path, verification, latency)
    summary_path = options.outdir / "summary.md"
    try:
        summary_path.write_text(summary, encoding="utf-8")
    except OSError:
        check_destination(summary_path)  # says why in words (a SerializeError), as before the export
        raise
    print(demo_digest(session, model_path, verification, latency, summary_path))
    if not verification.ok:
        raise ExportError(
            "onnxruntime and eager PyTorch disagree: " + "; ".join(f.message for f in verification.findings),
            stage="verify",
            hint=f"see {options.outdir / 'summary.md'}",
        )
    return 0


# -- export --------------------------------------------------------------------------------


def print_program_inputs(path: Path, session: Session) -> None:
    """What ``-o model.pt2`` wrote: the program, and each input's shape (dim names or sizes)."""
    print(f"wrote {path} ({OUTPUT_FORMATS['.pt2']}, not ONNX; {path.stat().st_size / 1024:.1f} KB; "
          "load it with torch.export.load)")
    shapes: dict[str, list[Any]] = {}
    for outcome in session.dims:
        shapes.setdefault(outcome.input, []).append(outcome.dim if outcome.obtained == "dynamic" else outcome.example)
    rows = [("input", leaf.path, leaf.dtype, f"[{', '.join(str(d) for d in shapes.get(leaf.path, list(leaf.shape)))}]")
            for leaf in session.inputs.leaves]
    print(_body_text(Section("", None, (Table.from_rows(("kind", "name", "dtype", "shape"), rows),))))


def run_export(options: argparse.Namespace, logger: logging.Logger) -> int:
    program_only = options.output.suffix == ".pt2"
    model, args, kwargs, factory_dims = load_factory_model(options.factory, dict(options.factory_args))
    export_options = options_from_arguments(options, model, args, kwargs, dynamic_shapes=factory_dims, logger=logger)
    session = Session(model, args, kwargs, export_options)
    session.run("capture" if program_only else "optimize")
    session.raise_for_status()
    path = Path(session.save(options.output))
    logger.info("saved %s", path)
    if program_only:
        print_program_inputs(path, session)
        return 0
    print_ports(path, session.stage_output("optimize"))
    if options.verify:
        session.verify()  # its progress line says "verify passed in …" on stderr
    verdict = session.verdict  # this export's: its own verify, or none
    if options.benchmark:
        latency = session.benchmark()
        print(f"benchmark: {latency.headline}" + ("" if verdict.passed else f" (of a model that is {verdict.word})"))
    print(verdict_line(verdict))
    if verdict.word == "failed":
        raise ExportError(f"onnxruntime and eager PyTorch disagree: {verdict.text}", stage="verify",
                          hint=f"{path} was written all the same; see session.verify() in Python for the cases "
                               "and the first node that differs")
    return 0


def verdict_line(verdict: ExportVerdict) -> str:
    """The last line ``export`` prints: the export's verdict, ``not verified`` saying how to verify."""
    if verdict.verify is None:
        return "not verified: onnxruntime was not compared with PyTorch (add --verify to compare them over a sweep of sizes)"
    return f"{verdict.word}: {verdict.text}"


COMMANDS = {"demo": run_demo, "export": run_export}


def output_paths(options: argparse.Namespace) -> tuple[Path, ...]:
    """The files the command writes."""
    if options.command == "export":
        return (options.output,)
    return (options.outdir / "model.onnx", options.outdir / "summary.md")


def check_output(options: argparse.Namespace) -> None:
    """Fail in a fraction of a second, before torch is imported, if an output cannot be
    written: a directory given as the file, a directory that cannot be created or written.
    Every message about an output path is :func:`~exporter.serializers.check_destination`'s."""
    for target in output_paths(options):
        check_destination(target, create_parents=True)


def main(argv: list[str] | None = None) -> int:
    """Run ``onnx-workbench`` with ``argv`` (default: ``sys.argv[1:]``); return the exit status."""
    parser = build_parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit_request:
        return exit_request.code if isinstance(exit_request.code, int) else 2
    if options.command == "export" and options.output.suffix == ".pt2":
        for flag, does in (("verify", "compares"), ("benchmark", "times")):
            if getattr(options, flag):
                print(f"onnx-workbench export: error: --{flag} {does} an ONNX model: give -o a .onnx path",
                      file=sys.stderr)
                return 2
    if options.command == "sweep":  # its own outputs (a directory of records) and progress
        from .sweep.cli import run_sweep_command

        return run_sweep_command(options)
    try:
        check_output(options)
        with progress_logger(verbose=options.verbose) as logger, quiet_third_party(enabled=not options.verbose):
            return COMMANDS[options.command](options, logger)
    except ExportError as error:
        print(f"onnx-workbench: error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
