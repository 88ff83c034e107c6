"""The first ``%onnx_export`` of a fresh kernel works in every cell order, warm-up on.

The warm-up thread that ``%load_ext workbench`` starts imports the exporter core while the
kernel's first magic imports it too; an import cycle through a package ``__init__`` once made
that magic fail with "cannot import name … from partially initialized module". Each order runs
in fresh processes, several times, with the cells sent back to back as "Run All" sends them.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jupyter_client.manager
import pytest

MODEL = textwrap.dedent("""
    import torch

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(8, 4)

        def forward(self, x):
            return self.linear(x).relu()

    model, x = Net().eval(), torch.randn(3, 8)
""")
LOAD = "%load_ext workbench"
MAGIC = "%onnx_export --dynamic x.0=batch --no-widget -o session model(x)"
CHECK = "print('stages:', [s.status.value for s in session.stages])"

ORDERS = {
    "load_ext_first": [LOAD, MODEL, MAGIC, CHECK],
    "model_then_load_ext_then_magic": [MODEL, LOAD, MAGIC, CHECK],
    "load_ext_and_magic_in_one_cell": [MODEL, LOAD + "\n" + MAGIC, CHECK],
}
RUNS = int(os.environ.get("WB_CELL_ORDER_RUNS", "2"))
ENV = {"ONNX_WORKBENCH_WARMUP": "1", "HF_HUB_OFFLINE": "1"}


def run_all(cells: list[str]) -> list[tuple[str, str]]:
    """Send every cell at once to a fresh kernel (as Run All does); (status, output) per cell."""
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3", env={**os.environ, **ENV})
    try:
        ids = [client.execute(cell) for cell in cells]
        outputs: dict[str, list[str]] = {i: [] for i in ids}
        statuses: dict[str, str] = {}
        while len(statuses) < len(ids):
            reply = client.get_shell_msg(timeout=300)
            if reply["parent_header"].get("msg_id") in outputs:  # not a late kernel_info reply
                statuses[reply["parent_header"]["msg_id"]] = reply["content"]["status"]
        while True:  # drain what the cells printed
            try:
                msg = client.get_iopub_msg(timeout=1)
            except Exception:  # noqa: BLE001 - queue.Empty: nothing more
                break
            parent = msg["parent_header"].get("msg_id")
            content = msg["content"]
            text = content.get("text") or "".join(content.get("traceback", [])) or str(content.get("data", {}).get("text/plain", ""))
            if parent in outputs and text:
                outputs[parent].append(text)
        return [(statuses[i], "".join(outputs[i])) for i in ids]
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("run", range(RUNS))
@pytest.mark.parametrize("order", sorted(ORDERS))
def test_the_first_magic_of_a_fresh_kernel_exports_in_every_cell_order(order, run):
    results = run_all(ORDERS[order])
    assert all(status == "ok" for status, _ in results), results
    text = "".join(out for _, out in results)
    assert "partially initialized" not in text and "Traceback" not in text, text
    assert "stages: ['ok', 'ok', 'ok', 'ok']" in results[-1][1], results


TERMINAL = textwrap.dedent("""
    from IPython.terminal.interactiveshell import TerminalInteractiveShell
    shell = TerminalInteractiveShell.instance()
    for cell in {cells!r}:
        result = shell.run_cell(cell, store_history=True)
        if not result.success:
            raise SystemExit("cell failed: " + repr(cell))
""")


@pytest.mark.parametrize("run", range(RUNS))
def test_the_first_magic_in_a_terminal_ipython_right_after_load_ext_exports(run):
    script = TERMINAL.format(cells=ORDERS["model_then_load_ext_then_magic"])
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, **ENV})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "stages: ['ok', 'ok', 'ok', 'ok']" in done.stdout, done.stdout + done.stderr
