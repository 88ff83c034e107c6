"""Cost of collecting shape guards with provenance, relative to a bare ``torch.export.export``.

Run: ``python benchmarks/guard_overhead.py [--repeats N]``

For each model and strategy (non-strict, strict), in this one process and alternating:

* bare: ``torch.export.export(model, args, kwargs, dynamic_shapes=..., strict=...)`` under the
  same ``backed_size_oblivious`` setting the exporter's capture uses;
* with guards: the same call inside ``compat.record_shape_guards()``, plus turning the
  events into :class:`exporter.guards.Guard` records (sources → input axes, user lines).

Every input axis is AUTO so torch adds guards (equalities between the block's inputs, a
branch on a size). Both are warmed up first. Per case the ratio is the with-guards median over
the bare median; the headline is their geometric mean; target <= 1.10. The time spent in the
exporter's own guard code is also timed directly ("own ms"), apart from the export's noise. For contrast, the
structured-trace route (setting ``GET_DTRACE_STRUCTURED``, which also logs every symbolic
expression) is timed once.
"""

from __future__ import annotations

import argparse
import functools
import gc
import logging
import statistics
import sys
import time
import warnings
from typing import Any

TARGET = 1.10


def silence() -> None:
    import torch  # noqa: F401  (torch sets its loggers' levels on import)

    warnings.filterwarnings("ignore")
    for name in ("torch", "torch.export", "torch._dynamo", "torch.fx"):
        logging.getLogger(name).setLevel(logging.ERROR)


def cases() -> list[tuple[str, Any, tuple, dict, Any]]:
    """(name, model, args, kwargs, BoundInputs) with every axis AUTO."""
    import torch

    from exporter.examples import demo_block
    from exporter.inputs import bind_inputs

    class Branchy(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1 = torch.nn.Linear(16, 32)
            self.l2 = torch.nn.Linear(32, 16)

        def forward(self, x, mask):
            if x.shape[1] > 2:
                x = x * 2
            h = torch.relu(self.l1(x))
            att = torch.softmax(h @ h.transpose(-1, -2), -1) * mask[:, None, :]
            return self.l2(att @ h).reshape(x.shape[0], -1)

    block, args, kwargs, _ = demo_block()
    out = [
        ("branchy MLP-attention", Branchy().eval(), (torch.randn(2, 8, 16), torch.ones(2, 8)), {}),
        ("transformer block", block, args, kwargs),
    ]
    return [(name, model, a, k, bind_inputs(model, a, k)) for name, model, a, k in out]


def auto_shapes(bound: Any) -> Any:
    from exporter.dims import AUTO, DimSpec

    raw = {leaf.path: {axis: AUTO for axis in range(leaf.rank)} for leaf in bound.leaves}
    return DimSpec.parse(raw, bound).to_torch(bound)


def bare(model: Any, args: tuple, kwargs: dict, shapes: Any, strict: bool) -> Any:
    import torch

    from exporter.compat import size_oblivious_capture

    with size_oblivious_capture():
        return torch.export.export(model, args, kwargs, dynamic_shapes=shapes, strict=strict)


OWN_SECONDS: list[float] = []  # time spent in the exporter's own guard code, per export


def count_own_time() -> None:
    """Time the collector's per-guard work (``compat.guards._guard_event``) so its own cost
    can be printed apart from run-to-run noise in the export itself."""
    from exporter.compat import guards

    original = guards._guard_event

    def timed(*args: Any) -> Any:
        start = time.perf_counter()
        try:
            return original(*args)
        finally:
            OWN_SECONDS[-1] += time.perf_counter() - start

    guards._guard_event = timed


def with_guards(model: Any, args: tuple, kwargs: dict, shapes: Any, strict: bool, bound: Any) -> Any:
    from exporter.compat import record_shape_guards
    from exporter.guards import guards_from_events

    OWN_SECONDS.append(0.0)
    with record_shape_guards() as events:
        bare(model, args, kwargs, shapes, strict)
    start = time.perf_counter()
    guards = guards_from_events(events, bound, "strict" if strict else "nonstrict")
    OWN_SECONDS[-1] += time.perf_counter() - start
    return guards


def dtrace_once(model: Any, args: tuple, kwargs: dict, shapes: Any, strict: bool) -> float:
    """One export with torch's structured trace of every dtrace event (the FIELD-NOTES route)."""
    import torch._logging._internal as internal

    class Sink(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            pass

    logger, sink = logging.getLogger("torch.__trace"), Sink()
    logger.addHandler(sink)
    previous, internal.GET_DTRACE_STRUCTURED = internal.GET_DTRACE_STRUCTURED, True
    try:
        start = time.perf_counter()
        bare(model, args, kwargs, shapes, strict)
        return time.perf_counter() - start
    finally:
        internal.GET_DTRACE_STRUCTURED = previous
        logger.removeHandler(sink)


def timed(fn: Any) -> float:
    gc.collect()
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=11)
    options = parser.parse_args(argv)
    silence()
    count_own_time()

    rows = []
    for name, model, args, kwargs, bound in cases():
        shapes = auto_shapes(bound)
        for strict in (False, True):
            mode = "strict" if strict else "nonstrict"
            guards = with_guards(model, args, kwargs, shapes, strict, bound)  # warm up both
            bare(model, args, kwargs, shapes, strict)
            plain, collected = [], []
            OWN_SECONDS.clear()
            for i in range(options.repeats):
                order = [(plain, functools.partial(bare, model, args, kwargs, shapes, strict)),
                         (collected, functools.partial(with_guards, model, args, kwargs, shapes, strict, bound))]
                for samples, fn in order if i % 2 == 0 else order[::-1]:
                    samples.append(timed(fn))
            own = statistics.median(OWN_SECONDS)
            dtrace = dtrace_once(model, args, kwargs, shapes, strict)
            b, c = statistics.median(plain), statistics.median(collected)
            rows.append((name, mode, len(guards), b, c, c / b, own, dtrace / b))

    print(f"{'model':<24} {'strategy':<10} {'guards':>6} {'bare ms':>9} {'guards ms':>10} {'ratio':>7} "
          f"{'own ms':>7} {'dtrace':>7}")
    for name, mode, count, b, c, ratio, own, dtrace in rows:
        print(f"{name:<24} {mode:<10} {count:>6} {b * 1e3:>9.1f} {c * 1e3:>10.1f} {ratio:>6.3f}x "
              f"{own * 1e3:>7.2f} {dtrace:>6.1f}x")
    worst = max(row[5] for row in rows)
    overall = statistics.geometric_mean(row[5] for row in rows)
    verdict = "met" if overall <= TARGET else "NOT met"
    print(f"\nguard collection / bare torch.export.export: {overall:.3f}x (geometric mean over the "
          f"cases; worst case {worst:.3f}x) -- target <= {TARGET:.2f}x: {verdict}")
    own = statistics.geometric_mean(row[6] / row[3] for row in rows)
    print(f"own ms: the exporter's guard code alone per export (recording + records), "
          f"{own * 100:.2f}% of a bare export on average: the rest of any gap is run-to-run noise")
    print("dtrace: one export with GET_DTRACE_STRUCTURED on, for contrast (guards are not collected this way)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
