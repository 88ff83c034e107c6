"""Importing the packages (and loading the IPython extension) must not import torch & co."""

from __future__ import annotations

import os
import subprocess
import sys

HEAVY = ("torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir")


def _run(script: str, warmup: str) -> str:
    env = {**os.environ, "ONNX_WORKBENCH_WARMUP": warmup}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, env=env)
    return out.stdout


def _modules_after(code: str, warmup: str = "0") -> set[str]:
    return set(_run(f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))", warmup).split())


LOAD_EXT = (
    "from IPython.testing.globalipapp import get_ipython\n"
    "ip = get_ipython()\n"
    "ip.run_line_magic('load_ext', 'workbench')"
)


def test_importing_exporter_loads_no_heavy_library():
    loaded = _modules_after("import exporter")
    assert not loaded & set(HEAVY)


def test_importing_exporter_runs_no_import_of_its_own_modules_until_a_name_is_used():
    loaded = {m for m in _modules_after("import exporter") if m.startswith("exporter")}
    assert loaded == {"exporter", "exporter._lazy"}
    after_use = _modules_after("import exporter\nexporter.Dim")
    assert "exporter.dims" in after_use and "exporter.session" not in after_use


def test_every_public_name_of_a_lazy_package_resolves_and_is_listed():
    import importlib

    for package in ("exporter", "exporter.graphs", "exporter.verify.intermediates"):
        module = importlib.import_module(package)
        assert set(module.__all__) == set(module._EXPORTS), package
        for name in module.__all__:
            assert getattr(module, name) is not None, (package, name)
            assert name in dir(module)


def test_a_result_imported_from_its_own_module_still_shows_itself():
    # Builders register in exporter.display.sections; a script that never imports it (nor the
    # package's public names) still gets the summary, not "could not be shown".
    out = _run("from exporter.guards import Guards\nprint(repr(Guards(())))", "0")
    assert "could not be shown" not in out and out.strip()


def test_importing_workbench_and_loading_the_extension_loads_no_heavy_library_nor_the_core():
    loaded = _modules_after(LOAD_EXT)
    assert "workbench" in loaded
    assert not loaded & set(HEAVY)
    assert "exporter" not in loaded  # the magic imports it on its first call


# Records the thread of every import of a heavy top-level package, then waits for the warm-up.
THREAD_OF_IMPORTS = """
import sys, threading
HEAVY = {heavy!r}
threads = {{}}

class Recorder:
    def find_spec(self, name, path=None, target=None):
        if name in HEAVY:
            threads.setdefault(name, threading.current_thread().name)
        return None

sys.meta_path.insert(0, Recorder())
{load_ext}
returned = sorted(set(HEAVY) & set(sys.modules))
from workbench import warmup
thread = warmup.warmup_thread()
if thread is not None:
    thread.join()
print(repr((returned, threads, thread is not None)))
"""


def test_the_extension_warm_up_imports_the_heavy_libraries_on_its_own_thread_only():
    import ast

    from workbench.warmup import WARMUP_THREAD_NAME
    from exporter.worker import WORKER_THREAD_NAME

    script = THREAD_OF_IMPORTS.format(heavy=HEAVY, load_ext=LOAD_EXT)
    returned, threads, started = ast.literal_eval(_run(script, "1").strip().splitlines()[-1])
    assert started
    assert set(threads) >= {"torch", "onnxscript", "onnxruntime"}
    assert all(name == WARMUP_THREAD_NAME or name.startswith(WORKER_THREAD_NAME) for name in threads.values()), threads
    assert "MainThread" not in threads.values()
    # what load_ext's thread saw when it returned can only be the warm-up's doing (checked above)
    assert set(returned) <= set(threads)


def test_the_warm_up_is_skipped_with_the_environment_variable():
    import ast

    script = THREAD_OF_IMPORTS.format(heavy=HEAVY, load_ext=LOAD_EXT)
    returned, threads, started = ast.literal_eval(_run(script, "0").strip().splitlines()[-1])
    assert (returned, threads, started) == ([], {}, False)
