"""The widget in a real Jupyter kernel, spoken to over the Jupyter protocol as JupyterLab does:
updates made on the export worker thread reach the front end as comm messages after the cell
has finished (the kernel stays free), and a control change sent by the front end re-captures."""

from __future__ import annotations

import queue
import time

import jupyter_client.manager  # the test extra installs it: missing, this fails instead of skipping
import pytest

SETUP = """
%load_ext workbench
import torch

class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x)

model, x = Tiny(), torch.randn(4, 8)
"""


class FrontEnd:
    """Reads iopub like a widget manager: comm ids by CSS class, the latest state per comm."""

    def __init__(self, client):
        self.client = client
        self.state: dict[str, dict] = {}
        self.idle_at: dict[str, float] = {}  # parent msg id -> when its cell went idle

    def pump(self, until, timeout=120.0):
        deadline = time.monotonic() + timeout
        while not until():
            try:
                msg = self.client.get_iopub_msg(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AssertionError(f"timed out; values: {self.values()}") from None
            kind, content = msg["msg_type"], msg["content"]
            if kind == "comm_open":
                self.state[content["comm_id"]] = dict(content["data"]["state"])
            elif kind == "comm_msg" and content["data"].get("method") == "update":
                self.state.setdefault(content["comm_id"], {}).update(content["data"]["state"])
            elif kind == "status" and content["execution_state"] == "idle":
                self.idle_at[msg["parent_header"].get("msg_id")] = time.monotonic()
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out; values: {self.values()}")

    @property
    def classes(self):
        """CSS class -> comm id (classes are added after a widget opens, by an update)."""
        return {css: comm for comm, state in self.state.items() for css in state.get("_dom_classes", ())}

    def value(self, css):
        comm = self.classes.get(css)
        return self.state.get(comm, {}).get("value", "") if comm else ""

    def values(self):
        return {css: self.value(css)[:200] for css in self.classes}

    def set_state(self, css, **state):
        msg = self.client.session.msg("comm_msg", {"comm_id": self.classes[css],
                                                   "data": {"method": "update", "state": state, "buffer_paths": []}})
        self.client.shell_channel.send(msg)


@pytest.fixture(scope="module")
def kernel():
    manager, client = jupyter_client.manager.start_new_kernel(kernel_name="python3")
    try:
        reply = client.execute_interactive(SETUP, timeout=120, output_hook=lambda msg: None)
        assert reply["content"]["status"] == "ok", reply["content"]
        yield client
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_worker_thread_updates_reach_the_front_end_and_a_front_end_change_recaptures(kernel):
    front = FrontEnd(kernel)
    msg_id = kernel.execute("%onnx_export --no-verify --dynamic x.0=batch model(x)")
    front.pump(lambda: "dynamic batch" in front.value("wb-dim-result-x-0"))
    assert msg_id in front.idle_at  # the cell had returned: the rows came from the worker thread
    assert front.state[front.classes["wb-workbench"]]["_model_name"] == "VBoxModel"  # the page can build it

    front.set_state("wb-axis-x-0", index=1)  # the user picks STATIC in the page
    front.pump(lambda: "static 4" in front.value("wb-dim-result-x-0"))
    front.pump(lambda: "[4, 8]" in front.value("wb-onnx-ports"))


def _run(kernel, code):
    """Run ``code`` in the kernel; what it printed."""
    printed = []

    def hook(msg):
        if msg["msg_type"] == "stream":
            printed.append(msg["content"]["text"])

    reply = kernel.execute_interactive(code, timeout=120, output_hook=hook)
    assert reply["content"]["status"] == "ok", reply["content"]
    return "".join(printed)


def test_the_o_variable_follows_the_widget_and_its_report_has_the_widgets_verify(kernel, tmp_path):
    front = FrontEnd(kernel)
    kernel.execute("%onnx_export --no-verify --dynamic x.0=batch -o s model(x)")
    front.pump(lambda: "dynamic batch" in front.value("wb-dim-result-x-0"))
    front.pump(lambda: "done" in front.value("wb-job-status"))

    front.set_state("wb-axis-x-0", index=1)  # the user picks STATIC in the page
    front.pump(lambda: "static 4" in front.value("wb-dim-result-x-0"))
    front.pump(lambda: "done" in front.value("wb-job-status"))
    # The widget's session, rebound as `s`: the toggled spec, a plain Session.
    assert _run(kernel, "print(s.spec.describe(), '|', type(s).__name__)").strip() == "all dims static | Session"

    msg = kernel.session.msg("comm_msg", {"comm_id": front.classes["wb-run-verify"],
                                          "data": {"method": "custom", "content": {"event": "click"}}})
    kernel.shell_channel.send(msg)  # the user clicks Run verify
    front.pump(lambda: "PASSED" in front.value("wb-verify-status"))
    front.pump(lambda: "done" in front.value("wb-job-status"))
    report = tmp_path / "r.html"
    printed = _run(kernel, f"print(s.last_verify.verdict); s.report({str(report)!r})")
    assert "Verification PASSED" in printed
    assert "Verification PASSED" in report.read_text() and "not run: pass verify=" not in report.read_text()
