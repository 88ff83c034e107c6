"""The background warm-up (what it does: exporter.warmup; its thread: workbench.warmup): once
per process, off the caller's thread, never raising, skippable, and an export racing it gives
the model it gives without it."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from exporter import warmup
from workbench import warmup as warmup_thread


def _run(code: str, **env: str) -> str:
    import os

    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_disabled_by_the_environment_variable_starts_no_thread(monkeypatch):
    for value in ("0", "false", "off", " NO "):
        monkeypatch.setenv(warmup_thread.WARMUP_ENV_VAR, value)
        assert not warmup_thread.warmup_enabled()
        assert warmup_thread.start_warmup() is None
    monkeypatch.setenv(warmup_thread.WARMUP_ENV_VAR, "1")
    assert warmup_thread.warmup_enabled()


def test_a_failing_warm_up_is_logged_at_debug_level_and_never_raises(monkeypatch, caplog):
    def broken(*_: object) -> None:
        raise RuntimeError("no torch here")

    monkeypatch.setattr(warmup, "warm_up", broken)
    with caplog.at_level(logging.DEBUG, logger="exporter.warmup"):
        warmup.warm_up_quietly()
    [record] = [r for r in caplog.records if r.name == "exporter.warmup"]
    assert record.levelno == logging.DEBUG
    assert "no torch here" in record.exc_text


def test_the_warm_up_thread_finishes_and_fills_the_per_process_caches():
    out = _run("""
        import sys, threading
        from workbench import warmup
        assert "exporter" not in sys.modules and "torch" not in sys.modules
        thread = warmup.start_warmup()
        assert thread is not None and thread.daemon and thread.name == warmup.WARMUP_THREAD_NAME
        assert warmup.start_warmup() is thread  # once per process
        thread.join()
        assert not thread.is_alive()
        from exporter import compat
        from exporter.compat.decompositions import _decomposition_tables
        from exporter.pipeline.translations import project_translations
        for module in ("torch", "onnxscript", "onnxruntime"):
            assert module in sys.modules, module
        print(compat.onnx_registry.cache_info().currsize, compat.onnx_registry_with.cache_info().currsize,
              _decomposition_tables.cache_info().currsize, project_translations.cache_info().currsize)
    """, ONNX_WORKBENCH_WARMUP="1")
    registries, with_translations, tables, translations = map(int, out.split())
    assert registries >= 1 and with_translations >= 1 and tables >= 1 and translations == 1


def test_what_the_libraries_print_or_log_on_the_warm_up_thread_never_reaches_the_users_output(
        monkeypatch, capsys, caplog):
    # torch logs "torchvision is not installed. Skipping torchvision::nms" when it builds its
    # registry: in a notebook that would land in the cell the user is running.
    def chatty(*_: object) -> None:
        logging.getLogger("torch.onnx._internal.exporter._registration").warning("torchvision is not installed")

    monkeypatch.setattr(warmup, "warm_up", chatty)
    handler = logging.StreamHandler(sys.stderr)  # as torch's own handler on the "torch" logger
    logging.getLogger("torch").addHandler(handler)
    try:
        with caplog.at_level(logging.DEBUG, logger="exporter.warmup"):
            warmup.warm_up_quietly()
    finally:
        logging.getLogger("torch").removeHandler(handler)
    assert capsys.readouterr().err == ""
    [record] = [r for r in caplog.records if r.name == "exporter.warmup"]
    assert "torchvision is not installed" in record.getMessage()


@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_an_export_started_while_the_warm_up_runs_gives_the_same_model(delay):
    # The user's cell imports torch and exports right after %load_ext (delay 0: the warm-up
    # is importing torch; 0.5 s: it is further on), then the same export once it is done.
    out = _run(f"""
        import time
        from workbench import warmup
        thread = warmup.start_warmup()
        time.sleep({delay})
        import torch
        from exporter import Dim, ExportOptions, export
        from exporter.examples import mlp

        def exported():
            model, args, kwargs, spec = mlp()
            session = export(model, *args, options=ExportOptions(dynamic_shapes=spec), **kwargs)
            return session.model_proto.SerializeToString()

        during = exported()
        racing = thread.is_alive()
        thread.join()
        print(during == exported(), racing)
    """, ONNX_WORKBENCH_WARMUP="1")
    same, _racing = out.split()
    assert same == "True"


FIRST_CELL = """\
%load_ext workbench
import numpy
import torch

model, x = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval(), torch.randn(4, 8)
"""


def test_a_fresh_kernel_imports_torch_in_the_cell_of_load_ext_while_the_warm_up_imports_it():
    # The user's imports race the warm-up's (same libraries, same moment): neither fails nor
    # hangs, and the export after it answers.
    import os

    from jupyter_client.manager import KernelManager

    manager = KernelManager(kernel_name="python3")
    manager.start_kernel(cwd=os.getcwd(), env={**os.environ, warmup_thread.WARMUP_ENV_VAR: "1"})
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=120)
        for code in (FIRST_CELL, "%onnx_export --no-widget --no-verify --dynamic input.0=batch model(x)",
                     "from workbench import warmup\nwarmup.warmup_thread().join(120)\n"
                     "assert not warmup.warmup_thread().is_alive()"):
            errors: list[str] = []

            def keep(message: dict, errors: list[str] = errors) -> None:
                if message["msg_type"] == "error":
                    errors.append("\n".join(message["content"]["traceback"]))

            reply = client.execute_interactive(code, timeout=180, output_hook=keep)
            assert reply["content"]["status"] == "ok", (code, errors)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)
