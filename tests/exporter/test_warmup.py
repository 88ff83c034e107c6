"""The background warm-up (exporter.warmup): once per process, off the caller's thread, never
raising, skippable, and an export racing it gives the model it gives without it."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

from exporter import warmup


def _run(code: str, **env: str) -> str:
    import os

    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            env={**os.environ, **env}, timeout=300)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_disabled_by_the_environment_variable_starts_no_thread(monkeypatch):
    for value in ("0", "false", "off", " NO "):
        monkeypatch.setenv(warmup.WARMUP_ENV_VAR, value)
        assert not warmup.warmup_enabled()
        assert warmup.start_warmup() is None
    monkeypatch.setenv(warmup.WARMUP_ENV_VAR, "1")
    assert warmup.warmup_enabled()


def test_a_failing_warm_up_is_logged_at_debug_level_and_never_raises(monkeypatch, caplog):
    def broken(*_: object) -> None:
        raise RuntimeError("no torch here")

    monkeypatch.setattr(warmup, "warm_up", broken)
    with caplog.at_level(logging.DEBUG, logger="exporter.warmup"):
        warmup._warm_up_quietly()
    [record] = [r for r in caplog.records if r.name == "exporter.warmup"]
    assert record.levelno == logging.DEBUG
    assert "no torch here" in record.exc_text


def test_the_warm_up_thread_finishes_and_fills_the_per_process_caches():
    out = _run("""
        import sys, threading
        from exporter import compat, warmup
        from exporter.pipeline.translations import project_translations
        assert "torch" not in sys.modules
        thread = warmup.start_warmup()
        assert thread is not None and thread.daemon and thread.name == warmup.WARMUP_THREAD_NAME
        assert warmup.start_warmup() is thread  # once per process
        thread.join()
        assert not thread.is_alive()
        for module in ("torch", "onnxscript", "onnxruntime"):
            assert module in sys.modules, module
        print(compat.onnx_registry.cache_info().currsize, compat.onnx_registry_with.cache_info().currsize,
              compat.onnx_decomposition_tables.cache_info().currsize, project_translations.cache_info().currsize)
    """, ONNX_WORKBENCH_WARMUP="1")
    registries, with_translations, tables, translations = map(int, out.split())
    assert registries >= 1 and with_translations >= 1 and tables >= 1 and translations == 1


@pytest.mark.parametrize("delay", [0.0, 0.5])
def test_an_export_started_while_the_warm_up_runs_gives_the_same_model(delay):
    # The user's cell imports torch and exports right after %load_ext (delay 0: the warm-up
    # is importing torch; 0.5 s: it is further on), then the same export once it is done.
    out = _run(f"""
        import time
        from exporter import warmup
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
