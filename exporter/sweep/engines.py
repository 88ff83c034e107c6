"""Engines: where the units run. Each worker calls the same
:func:`~exporter.sweep.isolation.run_isolated` (a fresh process per unit, with its deadline and
memory cap), so the engines differ only in how they hand out units.

``local`` (the default) needs nothing: ``workers`` threads, each starting one unit process at
a time and killing it at its deadline. The fresh process per unit is the unit's own, so the
supervisors need not be processes: a pool of spawned processes
(``ProcessPoolExecutor(max_tasks_per_child=1)``) would add a second interpreter per unit and
re-import the caller's ``__main__``, which breaks a script without an ``if __name__ ==
"__main__":`` guard. ``ray`` runs the same function as Ray tasks (``@ray.remote(max_calls=1)``)
on a cluster (``address="ray://…"`` or ``"auto"``) or on a local one it starts
(``ray.init(num_cpus=workers)``)."""

from __future__ import annotations

import concurrent.futures
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar

from .isolation import Limits, harness_failure, run_isolated
from .record import UnitRecord
from .unit import Unit

__all__ = ["ENGINES", "Engine", "LocalEngine", "RayEngine", "connect_ray", "get_engine"]


class Engine(ABC):
    """Runs units and yields their records as they finish (in any order). Leaving the
    iteration early, or an interrupt, cancels the units not started and kills those running."""

    name: ClassVar[str]

    def __init__(self, workers: int = 2) -> None:
        self.workers = max(1, int(workers))

    @abstractmethod
    def run(self, units: Sequence[Unit], limits: Limits) -> Iterator[UnitRecord]:
        """The record of each unit, as each finishes."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} workers={self.workers}>"


class LocalEngine(Engine):
    """Units on this machine, ``workers`` at a time: no dependency, no set-up."""

    name = "local"

    def run(self, units: Sequence[Unit], limits: Limits) -> Iterator[UnitRecord]:
        if not units:
            return
        cancel = threading.Event()
        executor = concurrent.futures.ThreadPoolExecutor(max_workers=min(self.workers, len(units)),
                                                         thread_name_prefix="sweep-unit")
        futures = {executor.submit(run_isolated, unit, limits, cancel): unit for unit in units}
        try:
            for future in concurrent.futures.as_completed(futures):
                try:
                    record = future.result()
                except Exception as exc:  # noqa: BLE001 - a worker that fails is a record; the sweep goes on
                    record = harness_failure(futures[future], exc)
                yield record
        finally:
            cancel.set()  # the running units' processes are killed, the pending ones never start
            for future in futures:
                future.cancel()
            executor.shutdown(wait=True, cancel_futures=True)


class RayEngine(Engine):
    """Ray tasks, one fresh worker process per unit (``max_calls=1``), each asking the
    scheduler for ``limits.memory`` bytes. ``address``: an existing cluster (``"auto"``,
    ``"ray://head:10001"``); None starts a local one with ``workers`` CPUs, or joins the one
    already started in this process. The engine leaves Ray running when it is done (call
    ``ray.shutdown()`` to stop a local cluster)."""

    name = "ray"

    def __init__(self, workers: int = 2, address: str | None = None, **init_options: Any) -> None:
        super().__init__(workers)
        self.address = address
        self.init_options = init_options

    def _connect(self) -> Any:
        return connect_ray(self.address, self.workers, **self.init_options)

    def run(self, units: Sequence[Unit], limits: Limits) -> Iterator[UnitRecord]:
        if not units:
            return
        ray = self._connect()
        options: dict[str, Any] = {"max_calls": 1, "num_cpus": 1, "max_retries": 0}
        if limits.memory:
            options["memory"] = limits.memory  # the scheduler places no more units on a node than fit
        task = ray.remote(**options)(run_isolated)
        pending = {task.remote(unit, limits): unit for unit in units}
        try:
            while pending:
                done, _ = ray.wait(list(pending), num_returns=1)
                for ref in done:
                    unit = pending.pop(ref)
                    try:
                        record = ray.get(ref)
                    except Exception as exc:  # noqa: BLE001 - a lost worker is a record; the sweep goes on
                        record = harness_failure(unit, exc)
                    yield record
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)


LOCAL_START_ATTEMPTS = 3


def connect_ray(address: str | None = None, num_cpus: int = 2, **init_options: Any) -> Any:
    """The ``ray`` module, connected: to the cluster at ``address``, else to the one this
    process already started, else to a new local one with ``num_cpus`` CPUs. Ray gives a
    local node 30 s to register, which a loaded machine can miss ("The current node timed out
    during startup"): the start is tried up to :data:`LOCAL_START_ATTEMPTS` times."""
    try:
        import ray
    except ImportError as exc:
        raise RuntimeError("engine='ray' needs Ray: pip install 'onnx-export-workbench[sweep]'") from exc
    if ray.is_initialized():
        return ray
    if address:
        ray.init(address=address, **init_options)
        return ray
    options = {"include_dashboard": False, "log_to_driver": False, **init_options}
    for attempt in range(1, LOCAL_START_ATTEMPTS + 1):
        try:
            ray.init(num_cpus=num_cpus, **options)
            return ray
        except Exception as exc:
            if "timed out during startup" not in str(exc) or attempt == LOCAL_START_ATTEMPTS:
                raise
            ray.shutdown()
    return ray


#: The engines by name, the default first.
ENGINES: dict[str, type[Engine]] = {"local": LocalEngine, "ray": RayEngine}


def get_engine(engine: str | Engine, workers: int = 2, **options: Any) -> Engine:
    """An engine from its name (:data:`ENGINES`) or as given."""
    if isinstance(engine, Engine):
        return engine
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choices: {', '.join(ENGINES)}")
    return ENGINES[engine](workers, **options)
