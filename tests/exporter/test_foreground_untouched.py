"""The background never touches the foreground (issue 54, DESIGN principle 8): while every kind
of job runs on a model — capture (non-strict and strict), verify with its float64 reference,
compare_intermediates, benchmark, profile, a recording's export and check, a dim toggle, a model
patch — another thread keeps calling the same model and always gets the outputs it got before
(a non-strict trace swaps weights for fake tensors on the module objects it traces, a patch
replaces a class attribute for the whole process: neither may reach the user's calls), and
afterwards the model, every module's ``vars()`` and the patched classes are exactly as before.
Two captures in two threads, one with a patch and one without, each capture what it would alone.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch

from exporter import ExportOptions, Session
from exporter.compat.shared_patch import shared_patch
from exporter.model_twin import twin_of
from exporter.patches import applied, registry
from exporter.patches.base import Patch, PatchTarget, unpatched
from exporter.recording import record
from exporter.verify.rounding import Float64Reference

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class Attention(torch.nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(width, 3 * width)
        self.out = torch.nn.Linear(width, width)
        self.scale = 1 / math.sqrt(width)

    def scores(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        return (q @ k.transpose(-1, -2)) * self.scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        return self.out(self.scores(q, k).softmax(-1) @ v)


class TinyTransformer(torch.nn.Module):
    """Embedding + positions (a buffer) + two pre-norm attention/MLP blocks + a tied head."""

    def __init__(self, vocab: int = 32, width: int = 16) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(vocab, width)
        self.position = torch.nn.Embedding(64, width)
        self.register_buffer("positions", torch.arange(64), persistent=False)
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleDict({"norm": torch.nn.LayerNorm(width), "attention": Attention(width),
                                 "mlp": torch.nn.Sequential(torch.nn.Linear(width, 2 * width), torch.nn.GELU(),
                                                            torch.nn.Linear(2 * width, width))})
            for _ in range(2))
        self.head = torch.nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids) + self.position(self.positions[: ids.shape[1]])
        for block in self.blocks:
            h = block["norm"](x)
            x = x + block["attention"](h) + block["mlp"](h)
        return self.head(x)


def _llama() -> torch.nn.Module:
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(config).eval()


class Doubled(Patch):
    """A test patch that changes what the model computes (a method's output doubled): any
    call of the user's model that ran it would give other outputs."""

    name = "doubled_for_test"
    idiom = "a method whose output the test doubles"
    symptom = "none: it makes a leaked patch visible"

    def __init__(self, owner: type, attribute: str) -> None:
        self.owner, self.attribute = owner, attribute

    def targets(self, model: Any) -> tuple[PatchTarget, ...]:
        if not any(isinstance(m, self.owner) for m in model.modules()):
            return ()
        original = unpatched(self.owner, self.attribute)

        def doubled(self_: Any, *args: Any, **kwargs: Any) -> Any:
            return original(self_, *args, **kwargs) * 2

        return (PatchTarget(self.owner, self.attribute, doubled, owner_name=self.owner.__qualname__),)


@pytest.fixture
def doubled_patch(monkeypatch):
    """Registers :class:`Doubled` (on the class given) as a model patch, as the registry's own are."""

    def register(owner: type, attribute: str) -> str:
        patch = Doubled(owner, attribute)
        monkeypatch.setattr(registry, "PATCHES", (*registry.PATCHES, patch))
        monkeypatch.setattr(registry, "PATCH_NAMES", (*registry.PATCH_NAMES, patch.name))
        return patch.name

    return register


def _snapshot(model: torch.nn.Module) -> dict[str, Any]:
    """Every module's ``vars()`` by identity, plain containers by value, tensors by identity and value."""
    state: dict[str, Any] = {}
    for path, module in model.named_modules(remove_duplicate=False):
        for name, value in vars(module).items():
            if name in ("_parameters", "_buffers", "_modules"):
                for key, item in value.items():
                    state[f"{path}:{name}.{key}"] = (id(item), None if item is None or not isinstance(item, torch.Tensor)
                                                     else item.detach().clone())
            elif isinstance(value, torch.Tensor):
                state[f"{path}:{name}"] = (id(value), value.detach().clone())
            elif isinstance(value, (list, dict, set)):
                state[f"{path}:{name}"] = (id(value), repr(value))
            else:
                state[f"{path}:{name}"] = (id(value), None)
    return state


def _same(before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    changed = [key for key in before.keys() | after.keys() if key not in before or key not in after]
    for key in before.keys() & after.keys():
        (id_a, value_a), (id_b, value_b) = before[key], after[key]
        if id_a != id_b or (isinstance(value_a, torch.Tensor) and not torch.equal(value_a, value_b)) \
                or (isinstance(value_a, str) and value_a != value_b):
            changed.append(key)
    return sorted(changed)


class Caller(threading.Thread):
    """The user's code: calls the model in a loop, each output compared with the one taken
    before any job ran."""

    def __init__(self, call: Callable[[], torch.Tensor]) -> None:
        super().__init__(name="user-calls", daemon=True)
        self.call = call
        self.reference = call()
        self.stop = threading.Event()
        self.calls = 0
        self.mismatches: list[str] = []
        self.errors: list[str] = []

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                out = self.call()
                if out.shape != self.reference.shape or not torch.allclose(out, self.reference, rtol=1e-5, atol=1e-6):
                    self.mismatches.append(f"call {self.calls}: max diff {(out - self.reference).abs().max():.3g}")
            except Exception as exc:  # noqa: BLE001 - counted, the test fails on it
                self.errors.append(f"call {self.calls}: {type(exc).__name__}: {exc}"[:300])
            self.calls += 1
            time.sleep(0.001)


def _jobs(model: torch.nn.Module, args: tuple, kwargs: dict, dims: dict, patch: str, toggle: tuple,
          recorded: Any) -> list[tuple[str, Callable[[], Any]]]:
    options = ExportOptions(dynamic_shapes=dims)

    def capture(strategy: str) -> Callable[[], Any]:
        return lambda: Session(model, args, kwargs, ExportOptions(dynamic_shapes=dims, strategy=strategy)).run("capture")

    session = Session(model, args, kwargs, options)
    return [
        ("capture nonstrict", capture("nonstrict")),
        ("capture strict", capture("strict")),
        ("export", session.run),
        ("verify", lambda: session.verify(edge_values=False)),
        ("float64 reference", lambda: Float64Reference(model).outputs(args, kwargs)),
        ("compare_intermediates", session.compare_intermediates),
        ("benchmark", lambda: session.benchmark(budget=0.05, min_runs=3, warmup=1, threads=1)),
        ("profile", lambda: session.profile(runs=2)),
        ("record export + check_recorded", lambda: recorded.export(sweep=False)),
        ("dim toggle", lambda: session.with_axis(*toggle).run()),
        ("patched capture", lambda: session.with_options(patches=(patch,)).run("capture")),
        ("patch block", lambda: _in_patch_block(model, patch, args, kwargs)),
    ]


def _in_patch_block(model: torch.nn.Module, patch: str, args: tuple, kwargs: dict) -> Any:
    with applied(model, (patch,)), torch.no_grad():  # the job's own calls run the patched code
        return twin_of(model)(*args, **kwargs)


def _stress(model: torch.nn.Module, call: Callable[[], torch.Tensor], jobs: list[tuple[str, Callable[[], Any]]],
            watched: list[tuple[Any, str]]) -> None:
    attributes = {(id(owner), name): vars(owner)[name] for owner, name in watched}
    before = _snapshot(model)
    caller = Caller(call)
    caller.start()
    results = {}
    try:
        for name, job in jobs:
            results[name] = job()
    finally:
        caller.stop.set()
        caller.join(timeout=60)
    assert caller.calls > len(jobs)  # the user's thread really ran meanwhile
    assert caller.errors == [] and caller.mismatches == []
    assert _same(before, _snapshot(model)) == []
    for owner, name in watched:
        assert vars(owner)[name] is attributes[(id(owner), name)], f"{owner.__name__}.{name}"
    assert results["export"].ok and results["verify"].status == "passed", results["verify"]
    assert results["patched capture"].ok and "model patches doubled_for_test" in results["patched capture"].detail
    assert results["record export + check_recorded"].ok


def _watched() -> list[tuple[Any, str]]:
    from torch.fx.experimental.symbolic_shapes import DimConstraints

    return [(torch.nn.Module, "to"), (DimConstraints, "solve")]


def test_every_job_on_a_small_transformer_leaves_a_thread_calling_it_undisturbed(doubled_patch):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    ids = torch.randint(0, 32, (2, 7))
    patch = doubled_patch(Attention, "scores")
    with record(model) as rec:
        model(ids)
        model(torch.randint(0, 32, (3, 5)))

    def call() -> torch.Tensor:
        return model(ids).detach()

    jobs = _jobs(model, (ids,), {}, {"ids": {0: "batch", 1: "seq"}}, patch, ("ids", 1, "static"), rec)
    _stress(model, call, jobs, [*_watched(), (Attention, "scores")])


@pytest.mark.slow
def test_every_job_on_a_tiny_llama_leaves_a_thread_calling_and_generating_with_it_undisturbed(doubled_patch):
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    model = _llama()
    ids = torch.randint(1, 64, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    patch = doubled_patch(LlamaRMSNorm, "forward")
    with record(model) as rec:
        model(ids, attention_mask=mask)
        model(ids[:1, :4], attention_mask=mask[:1, :4])

    def call() -> torch.Tensor:
        logits = model(ids, attention_mask=mask).logits.detach()
        generated = model.generate(ids, attention_mask=mask, max_new_tokens=2, do_sample=False, pad_token_id=0)
        return torch.cat([logits.flatten(), generated.flatten().to(logits.dtype)])

    dims = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    jobs = _jobs(model, (ids,), {"attention_mask": mask}, dims, patch, ("input_ids", 0, "static"), rec)
    _stress(model, call, jobs, [*_watched(), (LlamaRMSNorm, "forward")])


# -- patches in two threads at once ------------------------------------------------------------------------


def test_a_capture_without_the_patch_captures_the_original_while_another_thread_has_it_open(doubled_patch):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    ids = torch.randint(0, 32, (2, 7))
    patch = doubled_patch(Attention, "scores")
    with torch.no_grad():
        plain_out, patched_out = model(ids), None
    opened, release = threading.Event(), threading.Event()

    def holder() -> None:
        nonlocal patched_out
        with applied(model, (patch,)), torch.no_grad():
            patched_out = model(ids)  # this context runs the patched code
            opened.set()
            release.wait(60)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert opened.wait(60)
        with torch.no_grad():
            assert torch.equal(model(ids), plain_out)  # this thread: the original
        session = Session(model, (ids,), {}, ExportOptions(dynamic_shapes={"ids": {0: "batch", 1: "seq"}}))
        assert session.run().ok and "model patches" not in session.result("capture").detail
        program = session.exported_program.module()
        with torch.no_grad():
            assert torch.allclose(program(ids), plain_out, atol=1e-6)  # not the doubled scores
    finally:
        release.set()
        thread.join()
    assert not torch.allclose(patched_out, plain_out)  # the patch does change the model
    assert vars(Attention)["scores"] is unpatched(Attention, "scores")


@pytest.mark.slow
def test_two_threads_capturing_mamba_with_and_without_its_patch_each_get_what_they_get_alone():
    """MambaModel: its selective scan loops over the sequence, so a dynamic seq is refused
    unless the ``selective_scan_loop`` patch is applied (tests/exporter/test_patches.py)."""
    transformers = pytest.importorskip("transformers")
    config = transformers.MambaConfig(vocab_size=64, hidden_size=16, state_size=4, num_hidden_layers=2, expand=2,
                                      conv_kernel=4, use_cache=False)
    torch.manual_seed(0)
    model = transformers.MambaModel(config).eval()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(0))
    dims = {"input_ids": {0: "batch", 1: "seq"}}

    def export(patches: tuple[str, ...]) -> tuple[str, str]:
        session = Session(model, (ids,), {}, ExportOptions(dynamic_shapes=dims, patches=patches, strategy="nonstrict"))
        result = session.run("capture")
        return str(result.status), result.detail if result.ok else type(result.error).__name__

    alone = {patches: export(patches) for patches in ((), ("selective_scan_loop",))}
    assert alone[()][0] == "failed" and alone[("selective_scan_loop",)][0] == "ok"
    together = _each_in_its_thread_at_once(export, list(alone))
    assert together == alone
    assert "model patches selective_scan_loop" in together[("selective_scan_loop",)][1]


def test_two_sessions_in_two_threads_with_and_without_a_patch_capture_what_they_capture_alone(doubled_patch):
    torch.manual_seed(0)
    model = TinyTransformer().eval()
    ids = torch.randint(0, 32, (2, 7))
    patch = doubled_patch(Attention, "scores")

    def export(patches: tuple[str, ...]) -> tuple[str, torch.Tensor]:
        session = Session(model, (ids,), {}, ExportOptions(dynamic_shapes={"ids": {0: "batch"}}, patches=patches))
        detail = session.run("capture").detail
        with torch.no_grad():
            return detail, session.exported_program.module()(ids)

    alone = {patches: export(patches) for patches in ((), (patch,))}
    assert "model patches doubled_for_test" in alone[(patch,)][0] and "model patches" not in alone[()][0]
    assert not torch.allclose(alone[()][1], alone[(patch,)][1])
    together = _each_in_its_thread_at_once(export, list(alone))
    for patches, (detail, output) in alone.items():
        # Equal up to float rounding: a thread other than the main one splits torch's reductions
        # over another OpenMP team, so the last bits may differ; the patch changes the outputs by far more.
        assert together[patches][0] == detail, patches
        torch.testing.assert_close(together[patches][1], output, rtol=1e-5, atol=1e-5)


def test_a_method_the_user_replaces_while_a_patch_is_open_stays_replaced(doubled_patch):
    model = TinyTransformer()
    patch = doubled_patch(Attention, "scores")
    original = vars(Attention)["scores"]

    def mine(self, q, k):
        return q @ k.transpose(-1, -2)

    try:
        with applied(model, (patch,)):
            Attention.scores = mine  # the user's own monkeypatch, made while a job has the patch open
        assert vars(Attention)["scores"] is mine
    finally:
        Attention.scores = original


def test_a_module_function_and_a_class_attribute_switch_only_in_the_context_that_asked():
    import types as pytypes

    namespace = pytypes.ModuleType("user_module")
    namespace.f = lambda x: x + 1

    class Owner:
        def method(self) -> str:
            return "original"

    seen: list[Any] = []
    with shared_patch(namespace, "f", lambda f: lambda x: f(x) * 10), \
            shared_patch(Owner, "method", lambda m: lambda self: "patched"):
        assert namespace.f(1) == 20 and Owner().method() == "patched"
        thread = threading.Thread(target=lambda: seen.extend([namespace.f(1), Owner().method()]))
        thread.start()
        thread.join()
    assert seen == [2, "original"]  # another thread ran the originals meanwhile
    assert namespace.f(1) == 2 and Owner().method() == "original"


def test_a_context_copied_inside_a_patch_runs_the_original_once_the_patch_has_left():
    import contextvars
    import types as pytypes

    namespace = pytypes.ModuleType("user_module")
    namespace.f = lambda x: x + 1
    with shared_patch(namespace, "f", lambda f: lambda x: f(x) * 10):
        copied = contextvars.copy_context()  # an asyncio task, a job submitted from within the patch
        with shared_patch(namespace, "f", lambda f: lambda x: f(x) * 100):  # another job keeps the switch installed
            assert copied.run(namespace.f, 1) == 20
            left = contextvars.copy_context()
        assert left.run(namespace.f, 1) == 2  # the patch it chose has left: the original (was: None called)
    assert copied.run(namespace.f, 1) == 2


def _in_thread(function: Callable[[], Any]) -> Any:
    found: list[Any] = []
    thread = threading.Thread(target=lambda: found.append(function()))
    thread.start()
    thread.join()
    return found[0]


def test_torchs_compiling_flags_set_by_a_job_answer_true_in_that_job_only():
    """torch.export sets ``torch.compiler``'s flags process-wide while it traces; transformers'
    and ``kernels``' ``CompileableContextVar`` in the user's thread then set a global and later
    reset a context variable with it (``TypeError: expected an instance of Token``)."""
    from exporter.compat.shared_patch import compile_flags_in_this_job

    compiler = torch.compiler
    with compile_flags_in_this_job():
        compiler._is_compiling_flag = compiler._is_exporting_flag = True  # what torch.export does
        try:
            assert compiler.is_compiling() and compiler.is_exporting()
            assert _in_thread(lambda: (compiler.is_compiling(), compiler.is_exporting())) == (False, False)
        finally:
            compiler._is_compiling_flag = compiler._is_exporting_flag = False
    assert not compiler.is_compiling() and vars(compiler)["is_compiling"].__module__ == "torch.compiler"


def test_as_if_exporting_answers_true_in_its_own_context_only():
    from exporter import compat

    def model_code() -> bool:
        return torch.compiler.is_exporting()

    with compat.as_if_exporting() as asked:
        assert model_code() is True
        assert _in_thread(model_code) is False  # the user's code in another thread
    assert [line for _, line in asked] == [model_code.__code__.co_firstlineno + 1]


def test_a_capture_does_not_show_its_compiling_flags_to_another_thread():
    """The model asks ``is_compiling()`` while traced; another thread asks meanwhile."""
    seen: list[bool] = []
    asked, answered = threading.Event(), threading.Event()

    class Asks(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if torch.compiler.is_compiling() and not asked.is_set():
                asked.set()
                answered.wait(30)
            return x + 1

    def other() -> None:
        asked.wait(30)
        seen.append(torch.compiler.is_compiling())
        answered.set()

    thread = threading.Thread(target=other)
    thread.start()
    session = Session(Asks(), (torch.randn(2, 3),), {}, ExportOptions(strategy="nonstrict"))
    assert session.run("capture").ok
    thread.join()
    assert seen == [False]


def test_transformers_compileable_context_var_keeps_a_capturing_jobs_value_from_the_users_thread():
    """transformers' output capturing keeps its collector in a ``CompileableContextVar``, which
    turns into one shared global once ``set`` runs while torch compiles: the user's calls then
    read the job's collector (and a Llama capture failed on the user's tokens)."""
    output_capturing = pytest.importorskip("transformers.utils.output_capturing")
    from exporter.compat.compileable_vars import private_compileable_vars
    from exporter.compat.shared_patch import compile_flags_in_this_job

    var = output_capturing._active_collector
    with compile_flags_in_this_job(), private_compileable_vars():
        torch.compiler._is_compiling_flag = True  # what torch.export does while it traces
        try:
            token = var.set({"job": 1})
            seen_by_user = _in_thread(lambda: (var.get(), var.compiling))
            assert var.get() == {"job": 1}
            var.reset(token)
        finally:
            torch.compiler._is_compiling_flag = False
    assert seen_by_user == (None, False)
    assert var.get() is None and not var.compiling


def _each_in_its_thread_at_once(export: Any, keys: list[Any]) -> dict[Any, Any]:
    """``{key: export(key)}``, each call in a thread of its own, all started at the same moment."""
    together: dict[Any, Any] = {}
    start = threading.Barrier(len(keys))

    def run(key: Any) -> None:
        start.wait()
        together[key] = export(key)

    threads = [threading.Thread(target=run, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return together
