"""``binder/`` gives mybinder what the tutorials need, pinned as CI pins it: the CPU torch wheel
at ``.ci/run``'s version (installed first, from the CPU index), the project with its Jupyter
front end, Graphviz, jupyter-server-proxy for Netron, and a README link that opens JupyterLab on
the quickstart. Reads files only: nothing is installed or downloaded."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BINDER = REPO / "binder"
CPU_INDEX = "https://download.pytorch.org/whl/cpu"
PIN = re.compile(r"(?<![\w.-])([A-Za-z0-9][A-Za-z0-9._-]*)==([0-9][^\s'\"]*)")


def pins(text: str) -> dict[str, str]:
    """``{package: version}`` of every ``package==version`` in ``text`` (comments dropped)."""
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return {name.lower(): version for line in lines for name, version in PIN.findall(line)}


def binder_text() -> str:
    return "\n".join(p.read_text() for p in sorted(BINDER.iterdir()) if p.is_file())


def test_binder_pins_every_version_ci_pins():
    ci = pins((REPO / ".ci" / "run").read_text())
    assert "torch" in ci, "expected .ci/run to pin torch"
    binder = pins(binder_text())
    assert {name: binder.get(name) for name in ci} == ci


def test_binder_installs_cpu_torch_first_from_the_cpu_index():
    requirements = (BINDER / "requirements.txt").read_text()
    lines = [line.strip() for line in requirements.splitlines() if line.strip() and not line.startswith("#")]
    assert f"--extra-index-url {CPU_INDEX}" in lines or f"--index-url {CPU_INDEX}" in lines
    assert "torch==" + pins(requirements)["torch"] in lines
    # repo2docker installs requirements.txt before running postBuild, which installs the project
    post_build = (BINDER / "postBuild").read_text()
    assert "torch" not in pins(post_build)
    assert re.search(r"pip install .*-e '\.\[tutorials\]'", post_build)
    assert os.access(BINDER / "postBuild", os.X_OK) and post_build.startswith("#!")


def test_binder_has_graphviz_the_netron_proxy_and_a_python_torch_supports():
    assert "graphviz" in (BINDER / "apt.txt").read_text().split()
    assert "jupyter-server-proxy" in (BINDER / "requirements.txt").read_text()
    runtime = (BINDER / "runtime.txt").read_text().strip()
    assert re.fullmatch(r"python-3\.(1[0-9])", runtime), runtime
    if sys.version_info >= (3, 11):
        import tomllib

        project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
        extras = project["optional-dependencies"]
        workbench = " ".join(extras["workbench"])
        assert "netron" in workbench and "graphviz" in workbench and "ipywidgets" in workbench
        assert "onnx-export-workbench[workbench]" in extras["tutorials"]
        assert any(r.startswith("transformers") for r in extras["tutorials"])  # notebook 05
    start = BINDER / "start"
    assert os.access(start, os.X_OK) and 'exec "$@"' in start.read_text()


def test_readme_binder_link_opens_jupyterlab_on_the_quickstart():
    readme = (REPO / "README.md").read_text()
    links = re.findall(r"https://mybinder\.org/v2/gh/[^)\s]+", readme)
    assert links, "no Binder link in the README"
    for link in links:
        match = re.search(r"urlpath=lab/tree/([^&)\s]+)", link)
        assert match, link
        assert (REPO / match.group(1)).is_file(), match.group(1)
        assert match.group(1) == "notebooks/01_quickstart.ipynb"
