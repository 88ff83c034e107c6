"""Helpers for the browser tests: start and stop a JupyterLab server, write a notebook, open
it, Run All, wait for the kernel and for a widget. The fixtures are in ``conftest.py``."""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("WB_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
SERVER_START_TIMEOUT = 60.0

HERE = Path(__file__).resolve().parent


def unavailable(reason: str) -> None:
    """Skip, or in CI (``$CI`` set) fail: CI installs everything these tests need."""
    if os.environ.get("CI"):
        pytest.fail(f"browser test prerequisites missing in CI: {reason}", pytrace=False)
    pytest.skip(reason)


def require_prerequisites() -> None:
    if not (os.path.isfile(CHROMIUM) and os.access(CHROMIUM, os.X_OK)):
        unavailable(f"chromium not found at {CHROMIUM} (Debian: apt-get install chromium)")
    for module, package in (("playwright", "playwright"), ("jupyterlab", "jupyterlab"),
                            ("ipywidgets", "ipywidgets"), ("nbformat", "nbformat")):
        try:
            __import__(module)
        except ImportError:
            unavailable(f"{module} is not installed (pip install {package})")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class Lab:
    """A running JupyterLab server: its URL, token, root directory and process."""

    url: str
    token: str
    root: Path
    process: subprocess.Popen
    log: Path

    def wait_ready(self) -> Lab:
        _wait_for_server(self.url, self.token, self.process, self.log)
        return self

    def notebook_url(self, name: str) -> str:
        # ?reset: a fresh workspace with this notebook alone, not the tabs an earlier test of the
        # same server left open (their hidden cells would match the selectors of this one).
        return f"{self.url}/lab/tree/{name}?reset&token={self.token}"

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


def _wait_for_server(url: str, token: str, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with {process.returncode}:\n{log.read_text(errors='replace')[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"jupyter lab did not answer within {SERVER_START_TIMEOUT:.0f} s:\n{log.read_text(errors='replace')[-3000:]}")


def start_lab(base: Path) -> Lab:
    """Start ``jupyter lab`` on a free 127.0.0.1 port, everything it writes kept under ``base``;
    call :meth:`Lab.wait_ready` before using it (the browser starts meanwhile)."""
    root, config, runtime = base / "root", base / "config", base / "runtime"
    settings, workspaces = base / "settings", base / "workspaces"
    for directory in (root, config / "labconfig", runtime, settings, workspaces):
        directory.mkdir(parents=True, exist_ok=True)
    (config / "labconfig" / "page_config.json").write_text(
        json.dumps({"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}})
    )
    # Server extensions the tests do not use: fewer imports at start-up.
    (config / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"jupyter_lsp": False, "jupyter_server_terminals": False}}})
    )
    token, port = secrets.token_hex(16), _free_port()
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(config),
        "JUPYTER_RUNTIME_DIR": str(runtime),
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(workspaces),
        "JUPYTER_PLATFORM_DIRS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE.parents[1]), os.environ.get("PYTHONPATH")])),
        "HF_HUB_OFFLINE": "1",
    }
    log = base / "jupyter.log"
    command = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--ip=127.0.0.1", f"--port={port}",
        f"--ServerApp.root_dir={root}", f"--IdentityProvider.token={token}",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT)
    return Lab(f"http://127.0.0.1:{port}", token, root, process, log)


def stop_lab(process: subprocess.Popen) -> None:
    """SIGTERM to the server's own PID (it shuts its kernels down), SIGKILL if it hangs."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=5)



@contextmanager
def new_page(browser, lab: Lab, *, width: int, height: int, timeout: float, clipboard: bool = False) -> Iterator:
    """A page in a fresh browser context once the server answers; console and page errors are
    collected in ``page.console_errors`` (read by :func:`wait_for_widget`)."""
    lab.wait_ready()
    context = browser.new_context(viewport={"width": width, "height": height}, device_scale_factor=1)
    if clipboard:
        context.grant_permissions(["clipboard-read", "clipboard-write"], origin=lab.url)
    page = context.new_page()
    page.set_default_timeout(timeout)
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.console_errors = errors
    try:
        yield page
    finally:
        context.close()


def ensure_file_browser_open(page) -> None:
    """Open JupyterLab's file browser in the left sidebar (a notebook pane ~570 px wide at 1000 px)."""
    if not page.locator("#jp-left-stack .jp-FileBrowser").first.is_visible():
        page.locator(".jp-SideBar.jp-mod-left .lm-TabBar-tab").first.click()
    page.locator("#jp-left-stack .jp-FileBrowser").first.wait_for(state="visible")


def write_notebook(root: Path, name: str, cells: list[str]) -> Path:
    """A notebook of code cells with the python3 kernel, written to ``root / name``."""
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook.cells = [nbformat.v4.new_code_cell(source) for source in cells]
    path = root / name
    nbformat.write(notebook, path)
    return path


def open_notebook(page, lab: Lab, name: str) -> None:
    """Open a notebook and wait until its kernel is idle."""
    page.goto(lab.notebook_url(name))
    page.locator(".jp-Notebook").first.wait_for(state="visible", timeout=60_000)
    wait_idle(page, timeout=60_000)


def run_workbench_notebook(page, lab: Lab, name: str, cells: list[str]) -> None:
    """Write ``cells`` as notebook ``name``, open it beside the file browser (the width a
    person's notebook has), run every cell and wait for the workbench widget: the steps every
    workbench test starts with. A cell that raised fails the test."""
    write_notebook(lab.root, name, cells)
    open_notebook(page, lab, name)
    page.wait_for_timeout(500)
    ensure_file_browser_open(page)
    run_all(page, timeout=180_000)
    assert cell_errors(page) == []
    wait_for_widget(page, ".wb-workbench")


def wait_idle(page, timeout: float = 60_000) -> None:
    """Wait for the status bar's kernel status to read ``| Idle``."""
    page.get_by_text("| Idle").first.wait_for(state="visible", timeout=timeout)


def run_all(page, timeout: float = 90_000) -> None:
    """Run menu → Run All Cells (JupyterLab 4 has no default shortcut), then wait until every
    code cell has an execution count and the kernel is idle."""
    page.locator(".lm-MenuBar-item", has_text="Run").first.click()
    page.locator(".lm-Menu-item", has_text="Run All Cells").first.click()
    page.wait_for_function(
        """() => {
            const prompts = [...document.querySelectorAll('.jp-CodeCell .jp-InputArea-prompt')];
            return prompts.length > 0 && prompts.every(p => /\\[\\d+\\]/.test(p.textContent));
        }""",
        timeout=timeout,
    )
    wait_idle(page, timeout=timeout)


def cell_errors(page) -> list[str]:
    """The text of every error output in the notebook."""
    return page.locator(".jp-Cell-outputArea .jp-RenderedText[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()



def wait_for_widget(page, selector: str, timeout: float = 60_000) -> None:
    """Wait until a widget matching ``selector`` is shown in an output area; fail at once, with
    the browser console's errors, if the widget manager shows a JavaScript error instead."""
    page.wait_for_function(
        """(selector) => document.querySelector(selector) !== null ||
            [...document.querySelectorAll('.jp-Cell-outputArea')].some(
                area => area.innerText.includes('javascript error'))""",
        arg=f".jp-Cell-outputArea {selector}",
        timeout=timeout,
    )
    broken = page.locator(".jp-Cell-outputArea", has_text="javascript error")
    if broken.count() or page.locator(f".jp-Cell-outputArea {selector}").count() == 0:
        errors = "\n".join(getattr(page, "console_errors", [])) or "(no console error recorded)"
        pytest.fail(f"the widget did not render; the browser console says:\n{errors}", pytrace=False)
    page.locator(f".jp-Cell-outputArea {selector}").first.wait_for(state="visible", timeout=timeout)


def tiny_bert_cells(workbench: str) -> list[str]:
    """A notebook that builds a 2-layer BERT from a tiny config (random weights, string dim
    names as a torch.onnx.export user writes them) and ends with ``workbench``, the cell that
    shows the widget (``session`` is its Session, not run)."""
    return [
        "%load_ext workbench",
        "import os\n"
        "os.environ['HF_HUB_OFFLINE'] = '1'\n"
        "import torch, transformers\n"
        "from exporter import ExportOptions, Session\n"
        "from workbench import Workbench\n"
        "\n"
        "torch.manual_seed(0)\n"
        "config = transformers.BertConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,\n"
        "                                 intermediate_size=128, vocab_size=1000)\n"
        "bert = transformers.BertModel(config).eval()\n"
        "inputs = {'input_ids': torch.randint(0, 1000, (2, 16)), 'attention_mask': torch.ones(2, 16, dtype=torch.long)}\n"
        "names = {'input_ids': {0: 'batch', 1: 'seq'}, 'attention_mask': {0: 'batch', 1: 'seq'}}\n"
        "session = Session(bert, (), inputs, options=ExportOptions(dynamic_shapes=names))\n"
        + workbench,
    ]


def wait_for_job_done(page, timeout: float = 300_000) -> None:
    """Wait until the first workbench's job bar says its job is done (or failed, or idle)."""
    page.wait_for_function(
        """() => { const w = document.querySelector('.jp-Cell-outputArea .wb-workbench');
                   const s = w && w.querySelector('.wb-job-status');
                   return s && /^(done|.* failed|idle)/.test(s.innerText.trim()); }""", timeout=timeout)


def screenshot_whole(page, widget, path: Path) -> None:
    """A picture of the whole widget at the page's width: a tab taller than the window is taken
    in a taller window (same width), which is put back after."""
    viewport = page.viewport_size
    height = widget.bounding_box()["height"]
    if height > viewport["height"] - 150:
        page.set_viewport_size({"width": viewport["width"], "height": int(height) + 300})
        page.wait_for_timeout(300)
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(path))
    page.set_viewport_size(viewport)
