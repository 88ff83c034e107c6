"""Zoo entries that attack the sweep's own machinery (the user zoo ``harness``): outputs no
pytree can read, a model whose class comes from an installed package, helpers left running,
a worker that dies. Imported by the sweep's workers from its path."""

from __future__ import annotations

import os
import subprocess
import sys

import torch
import torch.utils._pytree as pytree

from exporter.sweep import SweepCase, zoo_entry

#: Where ``spawns_helpers`` writes the ids of the helpers it leaves running, one a line.
HELPER_PIDS_VARIABLE = "SWEEP_TEST_HELPER_PIDS"
#: The directory holding the package ``wb_fake_models`` (``from_a_package``).
FAKE_PACKAGE_VARIABLE = "SWEEP_TEST_FAKE_PACKAGE"
#: The exit status of the worker whose model ends it (``exits``).
EXIT_STATUS = 7


class Opaque:
    """An output type registered as a pytree node whose flatten raises (with or without keys)."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


def _refuse(_: Opaque) -> None:
    raise RuntimeError("Opaque outputs cannot be flattened")


if Opaque not in pytree.SUPPORTED_NODES:
    pytree.register_pytree_node(Opaque, _refuse, lambda children, context: Opaque(*children),
                                flatten_with_keys_fn=_refuse)


class ReturnsOpaque(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Opaque:
        return Opaque(x * 2)


class Exits(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.stdout.flush()
        os._exit(EXIT_STATUS)


def _mlp() -> SweepCase:
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    return SweepCase(model, (torch.randn(2, 8),), dynamic_shapes=({0: "batch"},))


@zoo_entry("harness")
def unflattenable() -> SweepCase:
    return SweepCase(ReturnsOpaque(), (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},))


@zoo_entry("harness")
def exits() -> SweepCase:
    """Its forward ends the worker process: a unit that crashes."""
    return SweepCase(Exits(), (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},))


@zoo_entry("harness")
def spawns_helpers() -> SweepCase:
    """Starts two helpers and returns: ``sleep 300`` in the unit's process group, and one in a
    session of its own whose parent exits at once (an orphan, as a daemon starts)."""
    plain = subprocess.Popen(["sleep", "300"])
    starter = ("import subprocess\n"
               "print(subprocess.Popen(['sleep', '300'], start_new_session=True, stdout=subprocess.DEVNULL,\n"
               "                       stderr=subprocess.DEVNULL).pid)")
    detached = int(subprocess.run([sys.executable, "-c", starter], capture_output=True, text=True, check=True).stdout)
    pid_file = os.environ.get(HELPER_PIDS_VARIABLE)
    if pid_file:
        with open(pid_file, "w") as out:
            out.write(f"{plain.pid}\n{detached}\n")
    return _mlp()


@zoo_entry("harness")
def from_a_package() -> SweepCase:
    """A model whose class comes from the installed package ``wb_fake_models`` (its directory
    in :data:`FAKE_PACKAGE_VARIABLE`)."""
    if os.environ[FAKE_PACKAGE_VARIABLE] not in sys.path:
        sys.path.insert(0, os.environ[FAKE_PACKAGE_VARIABLE])
    from wb_fake_models import Doubler  # type: ignore[import-not-found]

    return SweepCase(Doubler(), (torch.randn(2, 3),), dynamic_shapes=({0: "batch"},))
