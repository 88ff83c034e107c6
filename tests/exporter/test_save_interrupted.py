"""A save killed at any step leaves the old model or the new one, whole: never a mix.

A helper process imports the serializer once and forks one child per save; the child SIGKILLs
itself at the N-th step of the save (``exporter.atomic_save._step_hook``), for every N. The parent
then loads what is at the target in onnxruntime and checks it computes exactly the old model's
outputs or the new one's, and that the next save leaves no leftover beside the target.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from exporter.atomic_save import remove_leftovers
from exporter.ort_model import OrtModel
from exporter.serializers import STALE_SECONDS, OnnxSerializer, Pt2Serializer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="kills forked saves (POSIX)")

X = np.arange(12, dtype=np.float32).reshape(4, 3)

HELPER = textwrap.dedent(
    """
    import json, os, signal, sys, tempfile, traceback
    from dataclasses import dataclass
    from pathlib import Path
    from typing import Any

    import onnx_ir as ir
    import exporter.atomic_save as atomic_save
    import exporter.serialize as serialize
    import exporter.serializers as serializers
    from exporter.ort_model import OrtModel

    @dataclass(frozen=True)
    class Saved:
        ort_model: Any = None
        exported_program: Any = None

    def save(job):
        steps = []

        def hook(name):
            steps.append(name)
            if len(steps) == job["kill_at"]:
                os.kill(os.getpid(), signal.SIGKILL)

        atomic_save._step_hook = hook
        tempfile.tempdir = job["tmp"]
        if job["kind"] == "pt2":
            serializers.Pt2Serializer().serialize(Saved(exported_program=programs[job["source"]]), job["target"])
        else:
            ort_model = OrtModel(ir.load(job["source"]))
            if job["kind"] == "reuse":  # the session's own external-data copy is written first, then reused
                serialize.PROTOBUF_LIMIT = 1024
                assert Path(ort_model.source).is_file() and ort_model.external_path is not None
            serializers.OnnxSerializer(external_data=job["kind"] != "plain").serialize(Saved(ort_model), job["target"])
        Path(job["steps"]).write_text(json.dumps(steps))

    programs = {}
    for line in sys.stdin:
        job = json.loads(line)
        if job["kind"] == "pt2" and job["source"] not in programs:
            import torch  # once, here: not in every forked child

            programs[job["source"]] = torch.export.load(job["source"])

        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                save(job)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stderr.flush()
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        killed = os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        print(json.dumps({"killed": killed, "code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}), flush=True)
    """
)


@dataclass(frozen=True)
class Saved:
    """What a serializer reads of a session: its OrtModel, its ExportedProgram."""

    ort_model: Any = None
    exported_program: Any = None


def affine(seed: int) -> onnx.ModelProto:
    """``x @ W + b`` with 768 bytes of weights (above ir.save's 256-byte inline threshold)."""
    rng = np.random.default_rng(seed)
    weight = numpy_helper.from_array(rng.standard_normal((3, 64)).astype(np.float32), "W")
    bias = numpy_helper.from_array(rng.standard_normal(64).astype(np.float32), "b")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["y"])],
        "affine",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 64])],
        initializer=[weight, bias],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def outputs_of(source: str | bytes) -> np.ndarray:
    return ort.InferenceSession(source, providers=["CPUExecutionProvider"]).run(None, {"x": X})[0]


@dataclass(frozen=True)
class Models:
    old: Path
    new: Path
    expected: dict[str, np.ndarray]  # "old" / "new" → the outputs at X

    def which(self, target: Path) -> str:
        """'old', 'new' or 'missing': what onnxruntime computes from the model at ``target``
        (fails the test if it loads nothing consistent)."""
        if not target.exists():
            return "missing"
        got = outputs_of(str(target))
        matches = [name for name, want in self.expected.items() if np.array_equal(got, want)]
        assert len(matches) == 1, f"{target} computes neither the old nor the new model's outputs"
        return matches[0]


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> Models:
    directory = tmp_path_factory.mktemp("sources")
    old, new = directory / "old.onnx", directory / "new.onnx"
    onnx.save(affine(0), old)
    onnx.save(affine(1), new)
    expected = {"old": outputs_of(str(old)), "new": outputs_of(str(new))}
    assert not np.array_equal(expected["old"], expected["new"])
    return Models(old, new, expected)


class Helper:
    def __init__(self) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", HELPER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        text=True)

    def save(self, kind: str, source: Path, target: Path, kill_at: int | None = None) -> list[str] | None:
        """Save ``source`` at ``target`` in a forked child (``kind``: external, reuse, plain, pt2),
        killed at step ``kill_at``; the steps of a save run to its end, None for a killed one."""
        scratch = target.parent.parent / f"{target.parent.name}-scratch"
        scratch.mkdir(exist_ok=True)
        job = {"kind": kind, "source": str(source), "target": str(target), "kill_at": kill_at,
               "tmp": str(scratch), "steps": str(scratch / "steps.json")}
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps(job) + "\n")
        self.process.stdin.flush()
        result = json.loads(self.process.stdout.readline())
        if kill_at is None:
            assert result["code"] == 0, "the save failed (see the captured stderr)"
            return json.loads((scratch / "steps.json").read_text())
        assert result["killed"], f"the save was not killed at step {kill_at}: {result}"
        return None

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def forked() -> Any:
    helper_process = Helper()
    yield helper_process
    helper_process.close()


def dry_run(forked: Helper, kind: str, source: Path, target: Path) -> list[str]:
    """The steps of a save of ``kind`` run to its end, in ``<target's directory>/dry``."""
    (target.parent / "dry").mkdir()
    steps = forked.save(kind, source, target.parent / "dry" / target.name)
    assert steps and "committed" in steps
    return steps


def save_in_process(kind: str, source: Path, target: Path) -> None:
    OnnxSerializer(external_data=kind != "plain").serialize(Saved(OrtModel(ir.load(source))), target)


def listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


LAYOUT = {"external": ["m.onnx", "m.onnx.data"], "reuse": ["m.onnx", "m.onnx.data"], "plain": ["m.onnx"]}


@pytest.mark.parametrize(("before", "kind"), [
    ("external", "external"),  # the user study's case: new weights beside the old model
    ("external", "reuse"),  # the session's external-data copy, hard-linked
    ("external", "plain"),  # the old .data must go, but only once the new model is in place
    ("plain", "external"),
    (None, "external"),  # nothing there yet: nothing, or the new model
])
def test_a_save_killed_at_every_step_leaves_the_old_or_the_new_model_and_the_next_save_no_leftover(
        models, forked, tmp_path, before, kind):
    steps = dry_run(forked, kind, models.new, tmp_path / "m.onnx")
    states = []
    for kill_at in range(1, len(steps) + 1):
        directory = tmp_path / f"kill-{kill_at}"
        directory.mkdir()
        target = directory / "m.onnx"
        if before is not None:
            save_in_process(before, models.old, target)
        forked.save(kind, models.new, target, kill_at=kill_at)
        states.append(models.which(target))
        save_in_process(kind if kind != "reuse" else "external", models.new, target)
        assert listing(directory) == LAYOUT[kind], f"killed at {steps[kill_at - 1]!r}"
        assert models.which(target) == "new"
    first = "old" if before is not None else "missing"
    committed = steps.index("committed")  # killed at the hook after the commit: the new model is there
    assert states == [first] * committed + ["new"] * (len(steps) - committed), list(zip(steps, states, strict=True))


def test_a_pt2_save_killed_at_every_step_leaves_the_old_or_the_new_program_and_the_next_save_no_leftover(
        forked, tmp_path):
    torch = pytest.importorskip("torch")
    programs = {}
    for name, scale in (("old", 1.0), ("new", 2.0)):
        module = torch.nn.Linear(3, 2)
        with torch.no_grad():
            module.weight.fill_(scale)
            module.bias.fill_(0.0)
        path = tmp_path / f"{name}.pt2"
        torch.export.save(torch.export.export(module, (torch.ones(1, 3),)), path)
        programs[name] = path
    x = torch.ones(1, 3)

    def which(target: Path) -> str:
        value = torch.export.load(target).module()(x)[0, 0].item()
        return {3.0: "old", 6.0: "new"}[value]

    steps = dry_run(forked, "pt2", programs["new"], tmp_path / "p.pt2")
    states = []
    for kill_at in range(1, len(steps) + 1):
        directory = tmp_path / f"kill-{kill_at}"
        directory.mkdir()
        target = directory / "p.pt2"
        target.write_bytes(programs["old"].read_bytes())
        forked.save("pt2", programs["new"], target, kill_at=kill_at)
        states.append(which(target))
        Pt2Serializer().serialize(Saved(exported_program=torch.export.load(programs["new"])), target)
        assert listing(directory) == ["p.pt2"] and which(target) == "new"
    committed = steps.index("committed")
    assert states == ["old"] * committed + ["new"] * (len(steps) - committed)


def test_the_next_save_removes_only_abandoned_leftovers_of_its_own_target(models, forked, tmp_path):
    steps = dry_run(forked, "external", models.new, tmp_path / "m.onnx")
    target = tmp_path / "m.onnx"
    save_in_process("external", models.old, target)
    forked.save("external", models.new, target, kill_at=steps.index("data moved beside the target") + 1)
    killed = set(listing(tmp_path)) - {"m.onnx", "m.onnx.data", "dry", "dry-scratch"}
    assert sorted(n.rsplit(".", 1)[1] for n in killed) == ["data", "tmp"]  # named for the dead pid
    host = next(iter(killed)).split(".")[3].split("-")[0]
    alive = f".m.onnx.{host}-{os.getpid()}-0123abcd.tmp"  # a save in progress in this very process
    other_target = f".other.onnx.{host}-999999999-0123abcd.data"
    for name in (alive, other_target):
        (tmp_path / name).write_bytes(b"x")
    # the release before named its leftovers without a pid: removed once untouched for STALE_SECONDS
    legacy_staging, legacy_probe, legacy_fresh = ".m.onnx-abcd_123", ".m.onnx-probe-zz99yy88", ".m.onnx-probe-fresh123"
    (tmp_path / legacy_staging).mkdir()
    (tmp_path / legacy_staging / "m.onnx.data").write_bytes(b"weights")
    (tmp_path / legacy_probe).touch()
    (tmp_path / legacy_fresh).touch()
    users_own = ".m.onnx-original"  # named like a legacy staging directory, but a user's file
    (tmp_path / users_own).write_bytes(b"keep me")
    long_ago = time.time() - STALE_SECONDS - 60
    for name in (f"{legacy_staging}/m.onnx.data", legacy_staging, legacy_probe, users_own):
        os.utime(tmp_path / name, (long_ago, long_ago))

    save_in_process("external", models.new, target)

    assert set(listing(tmp_path)) == {"m.onnx", "m.onnx.data", "dry", "dry-scratch", alive, other_target, legacy_fresh,
                                      users_own}
    assert models.which(target) == "new"


def test_a_model_killed_between_its_two_commits_reads_its_per_save_data_and_a_plain_save_removes_both_data_files(
        models, forked, tmp_path):
    steps = dry_run(forked, "external", models.new, tmp_path / "m.onnx")
    target = tmp_path / "m.onnx"
    save_in_process("external", models.old, target)
    forked.save("external", models.new, target, kill_at=steps.index("committed") + 1)
    (per_save,) = {n for n in listing(tmp_path) if n.startswith(".m.onnx.") and n.endswith(".data")}
    locations = {e.value for i in onnx.load(target, load_external_data=False).graph.initializer for e in i.external_data
                 if e.key == "location"}
    assert locations == {per_save} and models.which(target) == "new"

    save_in_process("plain", models.old, target)

    assert set(listing(tmp_path)) == {"m.onnx", "dry", "dry-scratch"} and models.which(target) == "old"


@pytest.mark.parametrize("kind", ["external", "reuse", "plain"])
def test_the_save_after_one_killed_between_its_two_commits_never_removes_the_data_that_committed_model_reads(
        models, forked, tmp_path, kind):
    """Issue 52: the next save took the per-save data file the committed model reads for an
    abandoned leftover; killed before its own commit, it left a target that no longer loads.
    The journal of a save killed before its commit lists that file too: the clean-up after it
    must keep it."""
    between = dry_run(forked, "external", models.new, tmp_path / "m.onnx").index("committed") + 1

    def killed_between_its_commits(directory: Path) -> Path:
        directory.mkdir()
        target = directory / "m.onnx"
        save_in_process("external", models.old, target)
        forked.save("external", models.new, target, kill_at=between)
        assert models.which(target) == "new"  # reading its per-save data file
        return target

    steps = forked.save(kind, models.old, killed_between_its_commits(tmp_path / "steps"))
    assert steps is not None
    for kill_at in range(1, steps.index("committed") + 1):  # every step before the next save's commit
        target = killed_between_its_commits(tmp_path / f"kill-{kill_at}")
        forked.save(kind, models.old, target, kill_at=kill_at)
        assert models.which(target) == "new", f"killed at {steps[kill_at - 1]!r}: {listing(target.parent)}"
        remove_leftovers(target)  # what a third save does first: it may be killed right after
        assert models.which(target) == "new", f"after {steps[kill_at - 1]!r} and a clean-up: {listing(target.parent)}"
        save_in_process(kind if kind != "reuse" else "external", models.old, target)
        assert listing(target.parent) == LAYOUT[kind] and models.which(target) == "old"
