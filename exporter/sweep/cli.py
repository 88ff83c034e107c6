"""``onnx-workbench sweep``: the zoo sweep from the command line.

::

    onnx-workbench sweep [--zoo transformers|timm|torchvision|models.py ...] [--model PATTERN ...]
                         [--spec dynamic|static ...] [--engine local|ray] [--address ADDR] [--workers N]
                         [-o DIR] [--timeout S] [--memory-gb G] [--opset N] [--strategy S] [--no-optimize]
                         [--no-verify] [--benchmark] [--no-baseline] [--limit N]
                         [--dashboard PATH] [--coverage PATH] [--diff PREVIOUS_DIR]

Records go to ``DIR/records.jsonl`` as units finish (a rerun skips the units already
there); the summary goes to stdout. Exit status: 0, 1 when ``--diff`` finds regressions, 130
when interrupted (the finished units are kept). ``exporter/cli.py`` adds it with
:func:`add_sweep_parser` and dispatches to :func:`run_sweep_command`; building the parser
imports nothing heavy.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

__all__ = ["add_sweep_parser", "run_sweep_command"]


def add_sweep_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Add the ``sweep`` subcommand to an ``add_subparsers()`` object and return its parser."""
    parser = subparsers.add_parser(
        "sweep", help="export every model of a zoo, each in a fresh process, and report what works",
        description="Export every model of a zoo in a fresh process, verify it, compare with torch.onnx.export.")
    parser.add_argument("--zoo", action="append", metavar="ZOO", help="transformers (default), timm, torchvision, "
                        "a user zoo's name or a .py file declaring @exporter.sweep.zoo_entry factories (repeatable)")
    parser.add_argument("--model", action="append", metavar="PATTERN", help="only models matching this shell pattern (repeatable)")
    parser.add_argument("--spec", action="append", choices=("dynamic", "static"), help="dim spec(s) to export with (default: dynamic)")
    parser.add_argument("--engine", choices=("local", "ray"), default="local", help="where units run (default: local)")
    parser.add_argument("--address", help="Ray cluster address (--engine ray); a local cluster by default")
    parser.add_argument("--workers", type=int, default=2, help="units at once (default: 2)")
    parser.add_argument("-o", "--output", default="sweep-results", metavar="DIR", help="output directory (default: sweep-results)")
    parser.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds per unit (default: 900)")
    parser.add_argument("--memory-gb", type=float, default=6.0, metavar="G", help="resident memory cap per unit, 0 for none (default: 6)")
    parser.add_argument("--threads", type=int, default=1, help="PyTorch/onnxruntime threads per unit (default: 1)")
    parser.add_argument("--opset", type=int, metavar="N", help="ONNX opset (default: torch.onnx's)")
    parser.add_argument("--strategy", default="auto", help="capture strategy (default: auto)")
    parser.add_argument("--no-optimize", dest="optimize", action="store_false", help="skip the ONNX optimizer")
    parser.add_argument("--no-verify", dest="verify", action="store_false", help="do not verify against eager PyTorch")
    parser.add_argument("--benchmark", action="store_true", help="also time onnxruntime against eager PyTorch")
    parser.add_argument("--no-baseline", dest="baseline", action="store_false", help="do not run torch.onnx.export for comparison")
    parser.add_argument("--limit", type=int, metavar="N", help="only the first N models of each zoo")
    parser.add_argument("--dashboard", metavar="PATH", help="write the HTML dashboard here")
    parser.add_argument("--coverage", metavar="PATH", help="write the coverage page (Markdown) here")
    parser.add_argument("--diff", metavar="DIR", help="compare with a previous sweep's output directory")
    parser.add_argument("--no-progress", dest="progress", action="store_false", help="no progress bar")
    parser.set_defaults(command="sweep")
    return parser


def run_sweep_command(args: argparse.Namespace) -> int:
    """Run what ``onnx-workbench sweep`` parsed; the exit status."""
    from .run import sweep

    results = sweep(
        args.zoo or ["transformers"], models=args.model, specs=tuple(args.spec or ("dynamic",)), engine=args.engine,
        workers=args.workers, address=args.address, output_dir=args.output, timeout=args.timeout,
        memory_gb=args.memory_gb or None, threads=args.threads, opset=args.opset, strategy=args.strategy,
        optimize=args.optimize, verify=args.verify, benchmark=args.benchmark, baseline=args.baseline,
        limit=args.limit, progress=args.progress,
    )
    print(results.summary())
    print(f"records: {results.directory}")
    if args.dashboard:
        results.dashboard(args.dashboard)
        print(f"dashboard: {args.dashboard}")
    if args.coverage:
        from pathlib import Path

        Path(args.coverage).write_text(results.coverage_markdown(
            output_dir=args.output, path=args.coverage, workers=args.workers, run=_run_settings(args)))
        print(f"coverage: {args.coverage}")
    status = 130 if results.interrupted else 0
    if args.diff:
        diff = results.diff(args.diff)
        print(diff.summary())
        if diff.regressions and not status:
            status = 1
    return status


def _run_settings(args: argparse.Namespace) -> list[str]:
    """The run's own settings that are not the subcommand's defaults, as arguments (the records
    do not keep them)."""
    defaults = add_sweep_parser(argparse.ArgumentParser().add_subparsers())
    settings = []
    for flag, name in (("--timeout", "timeout"), ("--memory-gb", "memory_gb"), ("--threads", "threads")):
        value = getattr(args, name)
        if value != defaults.get_default(name):
            settings += [flag, f"{value:g}" if isinstance(value, float) else str(value)]
    return settings


def main(argv: list[str] | None = None) -> int:
    """``python -m exporter.sweep.cli``: the subcommand on its own."""
    parser = argparse.ArgumentParser(prog="onnx-workbench")
    add_sweep_parser(parser.add_subparsers(dest="command", required=True))
    return run_sweep_command(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
