"""Importing the packages (and loading the IPython extension) must not import torch & co."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("torch", "onnx", "onnxscript", "onnxruntime", "onnx_ir")


def _modules_after(code: str) -> set[str]:
    script = f"{code}\nimport sys\nprint(' '.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


def test_importing_exporter_loads_no_heavy_library():
    loaded = _modules_after("import exporter")
    assert not loaded & set(HEAVY)


def test_importing_workbench_and_loading_the_extension_loads_no_heavy_library():
    loaded = _modules_after(
        "from IPython.testing.globalipapp import get_ipython\n"
        "ip = get_ipython()\n"
        "ip.run_line_magic('load_ext', 'workbench')"
    )
    assert "workbench" in loaded
    assert not loaded & set(HEAVY)
