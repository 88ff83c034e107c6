"""Export time of ``exporter.export()`` relative to a bare ``torch.onnx.export(dynamo=True)``.

Run: ``python benchmarks/export_overhead.py [--repeats N] [--models all]``

Both contenders run in this one process, alternating, on the built-in MLP and demo block (and,
with ``--models``, a ``nn.MultiheadAttention`` block, BERT and GPT-2 from tiny configs):

(a) first export of a model: a fresh model instance and a fresh Session every repeat, against
    ``torch.onnx.export(model, args, kwargs=..., dynamic_shapes=..., dynamo=True, optimize=True)``
    with the same dim spec (``DimSpec.to_torch``);
(b) a second export of that model with a changed dim spec (``session.with_axis(...).run()``),
    against a bare ``torch.onnx.export`` with the changed spec.

torch, onnxscript and both exporters are warmed up once on an unrelated tiny model first, so
(a) measures an export and not one-time imports. Ratios are exporter / torch medians; targets
(issue 38): (a) <= 0.5, (b) <= 0.35.

(d) with ``--stack N``: a stack of N small blocks (LayerNorm, Linear, GELU, residual: about 6
ONNX nodes each), a fresh model each repeat, ``export()`` against a bare
``torch.onnx.export``, alternating; the exporter's stage split is printed. Target <= 0.5.

(c) the live-session machinery (stage-cache locks, the in-flight table, observer dispatch to a
recording observer, cancel checks): a whole ``run()`` through four stages served from the cache
does all of that bookkeeping and nothing else, so its time over a first export's time bounds
what the machinery costs an export; target <= 1%.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import logging
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

TARGETS = {"first": 0.5, "respec": 0.35, "stack": 0.5}
NOISY_LOGGERS = ("torch", "torch.onnx", "torch.export", "onnxscript", "onnx_ir")


@dataclass(frozen=True)
class Case:
    """One benchmarked model: a factory from :mod:`exporter.examples` and the spec change for (b)."""

    name: str
    factory: Callable[[], tuple]
    changed_spec: Callable[[], dict]


@dataclass
class Timings:
    exporter_first: list[float] = field(default_factory=list)
    torch_first: list[float] = field(default_factory=list)
    exporter_respec: list[float] = field(default_factory=list)
    torch_respec: list[float] = field(default_factory=list)
    respec_stages: list[dict[str, float]] = field(default_factory=list)
    machinery: list[float] = field(default_factory=list)

    def add(self, seconds: dict[str, float], respec_stages: dict[str, float]) -> None:
        for name, value in seconds.items():
            getattr(self, name).append(value)
        self.respec_stages.append(respec_stages)

    def stage_medians(self) -> dict[str, float]:
        return {name: statistics.median(s[name] for s in self.respec_stages) for name in self.respec_stages[0]}

    def median(self, name: str) -> float:
        return statistics.median(getattr(self, name))

    def ratio(self, kind: str) -> float:
        return self.median(f"exporter_{kind}") / self.median(f"torch_{kind}")


def silence_third_party_noise() -> None:
    """Keep the table readable: torch's registry warnings, deprecations, progress prints.
    torch sets its loggers' levels when imported, so this imports it first."""
    import torch  # noqa: F401

    warnings.filterwarnings("ignore")
    for name in NOISY_LOGGERS:
        logging.getLogger(name).setLevel(logging.ERROR)


@contextlib.contextmanager
def quiet_stdout():
    with contextlib.redirect_stdout(io.StringIO()):
        yield


def timed(work: Callable[[], Any]) -> float:
    gc.collect()
    start = time.perf_counter()
    with quiet_stdout():
        work()
    return time.perf_counter() - start


def bare_torch_export(model: Any, args: tuple, kwargs: dict, torch_dims: Any) -> Any:
    import torch

    return torch.onnx.export(
        model, args, kwargs=kwargs, dynamic_shapes=torch_dims, dynamo=True, optimize=True, verbose=False
    )


def torch_dims_for(model: Any, args: tuple, kwargs: dict, spec: Any) -> Any:
    """``spec`` (any accepted form) as torch ``dynamic_shapes``, via the exporter's DimSpec."""
    from exporter import ExportOptions, Session

    session = Session(model, args, kwargs, ExportOptions(dynamic_shapes=spec))
    return session.spec.to_torch(session.inputs)


def warm_up() -> None:
    """Pay torch's, onnxscript's and both exporters' one-time costs on an unrelated model."""
    import torch

    from exporter import Dim, ExportOptions, export

    class Tiny(torch.nn.Module):
        def forward(self, x):
            return torch.tanh(x) * 2

    x = torch.randn(3, 5)
    spec = {"x": {0: Dim("n")}}
    timed(lambda: export(Tiny(), x, options=ExportOptions(dynamic_shapes=spec)))
    timed(lambda: bare_torch_export(Tiny(), (x,), {}, torch_dims_for(Tiny(), (x,), {}, spec)))


def one_repeat(case: Case, exporter_first: bool) -> tuple[dict[str, float], dict[str, float]]:
    """Both contenders on a fresh model instance: a first export, then a changed spec.
    Returns the seconds of each contender and export, and the exporter's (b) stage seconds."""
    from exporter import ExportOptions, export

    model, args, kwargs, spec = case.factory()
    changed = case.changed_spec()
    first_dims = torch_dims_for(model, args, kwargs, spec)
    changed_dims = torch_dims_for(model, args, kwargs, changed)
    sessions: list[Any] = []

    def exporter_first_export() -> None:
        sessions.append(export(model, *args, options=ExportOptions(dynamic_shapes=spec), **kwargs))

    def exporter_respec() -> None:
        sessions.append(sessions[0].with_dims(changed))
        sessions[1].run()

    def run_exporter() -> dict[str, float]:
        return {"exporter_first": timed(exporter_first_export), "exporter_respec": timed(exporter_respec)}

    def run_torch() -> dict[str, float]:
        return {
            "torch_first": timed(lambda: bare_torch_export(model, args, kwargs, first_dims)),
            "torch_respec": timed(lambda: bare_torch_export(model, args, kwargs, changed_dims)),
        }

    contenders = (run_exporter, run_torch) if exporter_first else (run_torch, run_exporter)
    results: dict[str, float] = {}
    for contender in contenders:
        results.update(contender())
    results["machinery"] = machinery_seconds(sessions[0])
    return results, {stage.name: stage.seconds for stage in sessions[1].stages}


def machinery_seconds(session: Any, runs: int = 200) -> float:
    """Seconds of one ``run()`` whose four stages are all served from the shared cache (a fresh
    derived session each time), with an observer and a cancel token: locks, cache lookups,
    events and cancel checks, without any export work."""
    from exporter.events import CancelToken, Observer

    class Counting(Observer):
        def __init__(self) -> None:
            self.events = 0

        def on_stage_start(self, stage: str) -> None:
            self.events += 1

        def on_stage_end(self, result: Any) -> None:
            self.events += 1

    observer, token = Counting(), CancelToken()
    derived = [session.with_dims(session.spec) for _ in range(runs)]
    start = time.perf_counter()
    for s in derived:
        s.run(observer=observer, cancel=token)
    return (time.perf_counter() - start) / runs


def measure(case: Case, repeats: int) -> Timings:
    timings = Timings()
    for i in range(repeats):
        timings.add(*one_repeat(case, exporter_first=i % 2 == 0))
    return timings


def mha_block() -> tuple:
    """A pre-norm block around ``nn.MultiheadAttention`` (batch-first), dynamic batch and sequence
    named as strings (torch.onnx.export's meaning: its fast path guards both to >= 2)."""
    import torch


    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(64)
            self.attention = torch.nn.MultiheadAttention(64, 4, batch_first=True)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.GELU(), torch.nn.Linear(128, 64))

        def forward(self, x):
            h = self.norm(x)
            x = x + self.attention(h, h, h, need_weights=False)[0]
            return x + self.mlp(x)

    torch.manual_seed(0)
    return Block().eval(), (torch.randn(2, 16, 64),), {}, {"x": {0: "batch", 1: "seq"}}


def _transformers_text_model(kind: str) -> tuple:
    """BERT or GPT-2 from a tiny config (random weights), ``input_ids`` and ``attention_mask``
    with a dynamic batch and sequence."""
    import torch
    import transformers

    torch.manual_seed(0)
    if kind == "bert":
        config = transformers.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                         intermediate_size=128, vocab_size=1000)
        model = transformers.BertModel(config)
    else:
        config = transformers.GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=1000, use_cache=False,
                                         bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2Model(config)
    kwargs = {"input_ids": torch.randint(0, 1000, (2, 16)), "attention_mask": torch.ones(2, 16, dtype=torch.long)}
    names = {0: "batch", 1: "seq"}  # strings, as a torch.onnx.export user names them: guards narrow the ranges
    return model.eval(), (), kwargs, {"input_ids": names, "attention_mask": names}


def cases() -> list[Case]:
    from exporter import AUTO, Dim
    from exporter.examples import demo_block, mlp

    return [
        Case("mlp", mlp, lambda: {"x": {0: AUTO}}),
        Case(
            "demo_block",
            demo_block,
            lambda: {"x": {0: Dim("batch")}, "attention_mask": {0: Dim("batch")}},
        ),
        Case("mha_block", mha_block, lambda: {"x": {0: "batch"}}),  # the sequence made static
        Case("bert", lambda: _transformers_text_model("bert"),
             lambda: {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}}),
        Case("gpt2", lambda: _transformers_text_model("gpt2"),
             lambda: {"input_ids": {0: "batch"}, "attention_mask": {0: "batch"}}),
    ]


DEFAULT_MODELS = ("mlp", "demo_block")


def stack_of_blocks(blocks: int) -> tuple[Any, tuple, dict]:
    """A fresh stack of ``blocks`` small residual blocks, its input and dim spec (dynamic batch)."""
    import torch

    from exporter import Dim

    class Block(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = torch.nn.LayerNorm(16)
            self.linear = torch.nn.Linear(16, 16)

        def forward(self, x):
            return x + torch.nn.functional.gelu(self.linear(self.norm(x)))

    model = torch.nn.Sequential(*(Block() for _ in range(blocks))).eval()
    return model, (torch.randn(2, 16),), {"input": {0: Dim("batch")}}


def measure_stack(blocks: int, repeats: int) -> tuple[list[float], list[float], list[dict[str, float]]]:
    """(exporter seconds, torch seconds, exporter stage seconds) per repeat, contenders alternated."""
    from exporter import ExportOptions, export

    ours: list[float] = []
    bare: list[float] = []
    stages: list[dict[str, float]] = []
    sessions: list[Any] = []

    def run_exporter() -> None:
        model, args, spec = stack_of_blocks(blocks)
        ours.append(timed(lambda: sessions.append(export(model, *args, options=ExportOptions(dynamic_shapes=spec)))))
        stages.append({stage.name: stage.seconds for stage in sessions.pop().stages})

    def run_torch() -> None:
        model, args, spec = stack_of_blocks(blocks)
        dims = torch_dims_for(model, args, {}, spec)
        bare.append(timed(lambda: bare_torch_export(model, args, {}, dims)))

    for index in range(repeats):
        for contender in (run_exporter, run_torch) if index % 2 == 0 else (run_torch, run_exporter):
            contender()
    return ours, bare, stages


def print_stack(blocks: int, ours: list[float], bare: list[float], stages: list[dict[str, float]]) -> None:
    ratio = statistics.median(o / b for o, b in zip(ours, bare))
    split = ", ".join(f"{name} {statistics.median(s[name] for s in stages):.2f}" for name in stages[0])
    print(f"\n(d) stack of {blocks} blocks, fresh model each repeat: exporter {statistics.median(ours):.2f} s, "
          f"torch {statistics.median(bare):.2f} s, ratio {ratio:.2f} (median of per-repeat ratios; target "
          f"<= {TARGETS['stack']}) {'ok' if ratio <= TARGETS['stack'] else 'MISS'}")
    print(f"  exporter stage medians, seconds: {split}")


def print_table(results: dict[str, Timings]) -> None:
    header = f"{'model':<11} {'export':<28} {'exporter s':>10} {'torch s':>9} {'ratio':>6} {'target':>7}"
    print(header)
    print("-" * len(header))
    labels = {"first": "(a) first export", "respec": "(b) changed dim spec"}
    for name, timings in results.items():
        for kind, label in labels.items():
            ratio = timings.ratio(kind)
            verdict = "ok" if ratio <= TARGETS[kind] else "MISS"
            print(
                f"{name:<11} {label:<28} {timings.median(f'exporter_{kind}'):>10.3f} "
                f"{timings.median(f'torch_{kind}'):>9.3f} {ratio:>6.2f} {'<= ' + str(TARGETS[kind]):>7} {verdict}"
            )
    print("\n(c) live-session machinery (a fully cached run) / first export, target <= 1%:")
    for name, timings in results.items():
        share = timings.median("machinery") / timings.median("exporter_first")
        print(f"  {name:<11} {timings.median('machinery') * 1e6:8.1f} us per run = {share:.4%} of an export "
              f"{'ok' if share <= 0.01 else 'MISS'}")
    print("\nexporter (b) stage medians, seconds:")
    for name, timings in results.items():
        stages = ", ".join(f"{stage} {seconds:.3f}" for stage, seconds in timings.stage_medians().items())
        print(f"  {name:<11} {stages}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5, help="repeats per case (medians are reported)")
    parser.add_argument("--stack", type=int, default=0, metavar="N",
                        help="also (d): a stack of N small blocks (the issue's figure is N=400); 0: skip")
    parser.add_argument("--stack-repeats", type=int, default=2, help="repeats of (d)")
    parser.add_argument("--only-stack", action="store_true", help="run (d) only")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="(a)-(c) on these, comma-separated: mlp, demo_block, mha_block, bert, gpt2 "
                             f"(default {','.join(DEFAULT_MODELS)}; 'all' for every one)")
    options = parser.parse_args(argv)
    silence_third_party_noise()
    start = time.perf_counter()
    warm_up()
    print(f"warm-up {time.perf_counter() - start:.1f} s; medians of {options.repeats} repeats, contenders alternated; "
          f"load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    if not options.only_stack:
        wanted = {case.name for case in cases()} if options.models == "all" else set(options.models.split(","))
        results = {case.name: measure(case, options.repeats) for case in cases() if case.name in wanted}
        print_table(results)
    if options.stack:
        print_stack(options.stack, *measure_stack(options.stack, options.stack_repeats))
    print(f"load at the end {os.getloadavg()[0]:.1f}")
    print(f"total {time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
