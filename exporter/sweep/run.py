"""``sweep()``: run units on an engine, keep each record as it finishes, resume, stop cleanly."""

from __future__ import annotations

import os
import sys
import tempfile
from collections import Counter
from collections.abc import Generator, Iterable, Sequence
from typing import Any

from .engines import Engine, get_engine
from .isolation import GIB, Limits
from .plan import ZooSpec, plan_units
from .results import SweepResults
from .store import RecordStore
from .unit import Unit

__all__ = ["run_units", "sweep"]


def sweep(
    zoos: ZooSpec = "transformers",
    *,
    models: Iterable[str] | None = None,
    specs: Sequence[str] = ("dynamic",),
    engine: str | Engine = "local",
    workers: int = 2,
    address: str | None = None,
    output_dir: str | os.PathLike[str] | None = None,
    timeout: float = 900.0,
    memory_gb: float | None = 6.0,
    threads: int = 1,
    opset: int | None = None,
    strategy: str = "auto",
    optimize: bool = True,
    verify: bool = True,
    benchmark: bool = False,
    baseline: bool = True,
    limit: int | None = None,
    progress: bool = True,
) -> SweepResults:
    """Export every model of ``zoos`` in a fresh process each, verify it, and compare with
    ``torch.onnx.export`` on the same call.

    Args:
        zoos: ``"transformers"``, ``"timm"``, ``"torchvision"``, a user zoo's name, the path of
            a ``.py`` file declaring factories with :func:`~exporter.sweep.zoo_entry`, or a list.
        models: shell patterns of the model names to run (``["bert", "gpt*"]``); all by default.
        specs: ``"dynamic"`` (the factory's dim names) and/or ``"static"``.
        engine: ``"local"`` (worker processes here) or ``"ray"`` (``address=`` a cluster, or
            a local one with ``workers`` CPUs); the only argument that changes between them.
        workers: units run at once.
        output_dir: where ``records.jsonl`` grows as units finish; units already recorded
            there are not run again (delete it to start over). A new temporary directory by
            default.
        timeout: seconds a unit may take before it is killed (recorded as ``timeout``).
        memory_gb: resident-memory cap of a unit (killed and recorded as ``oom`` past it); None for none.
        threads: PyTorch / onnxruntime threads per unit.
        opset, strategy, optimize: the export options (:class:`~exporter.ExportOptions`).
        verify, benchmark, baseline: the checks after the export.
        limit: run only the first ``limit`` models of each zoo.
        progress: show a progress bar (terminal or notebook).

    Ctrl-C (or interrupting the kernel) cancels the units not started, kills those running
    and returns the results so far with ``interrupted=True``; they are on disk already.
    """
    units = plan_units(zoos, models=models, specs=specs, opset=opset, strategy=strategy, optimize=optimize,
                       verify=verify, benchmark=benchmark, baseline=baseline, limit=limit)
    limits = Limits(timeout=timeout, memory=int(memory_gb * GIB) if memory_gb else None, threads=threads)
    options: dict[str, Any] = {"address": address} if address else {}
    return run_units(units, engine=get_engine(engine, workers, **options), limits=limits, output_dir=output_dir,
                     progress=progress)


def run_units(units: Sequence[Unit], *, engine: Engine, limits: Limits,
              output_dir: str | os.PathLike[str] | None = None, progress: bool = True) -> SweepResults:
    """Run the units not yet recorded in ``output_dir`` on ``engine``; the results of all."""
    directory = output_dir if output_dir is not None else tempfile.mkdtemp(prefix="sweep-")
    store = RecordStore(directory)
    known = {record.unit_id: record for record in store.load()}
    planned = {unit.unit_id: unit for unit in units}  # a unit listed twice runs once
    todo = [unit for unit_id, unit in planned.items() if unit_id not in known]
    executed: list[str] = []
    interrupted = False
    bar = _progress_bar(len(planned), len(planned) - len(todo), progress)
    counts = Counter(known[i].status for i in planned if i in known)
    records = engine.run(todo, limits)
    assert isinstance(records, Generator), "Engine.run must be a generator (it stops its units when closed)"
    try:
        for record in records:
            store.append(record)
            known[record.unit_id] = record
            executed.append(record.unit_id)
            counts[record.status] += 1
            if bar is not None:
                bar.set_postfix_str(", ".join(f"{n} {s}" for s, n in counts.most_common()), refresh=False)
                bar.update(1)
    except KeyboardInterrupt:
        interrupted = True
        print(f"sweep interrupted: {len(executed)} unit(s) finished, kept in {store.path}", file=sys.stderr)
    finally:
        records.close()  # cancels what is pending and kills what runs
        if bar is not None:
            bar.close()
    ordered = tuple(known[unit_id] for unit_id in planned if unit_id in known)
    store.write_parquet(ordered)
    return SweepResults(ordered, directory=str(directory), executed=tuple(executed), interrupted=interrupted,
                        torn_lines=store.torn_lines)


def _progress_bar(total: int, done: int, enabled: bool) -> Any:
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=done, desc="sweep", unit="unit")


