"""Talking to a widget without a front end: a comm that records what the widget sends, and what
the page would send back."""

from __future__ import annotations


class DummyComm:
    """Records what a widget sends to the page (ipywidgets' tests/utils.py pattern)."""

    comm_id = "a-b-c-d"
    kernel = "Truthy"

    def __init__(self, *args, **kwargs):
        self.messages: list[dict] = []

    def open(self, *args, **kwargs):
        pass

    def on_msg(self, *args, **kwargs):
        pass

    def send(self, data=None, *args, **kwargs):
        self.messages.append(data)

    def close(self, *args, **kwargs):
        pass


def page_sends(widget, content):
    """What the front end does with ``model.send(content)``."""
    widget._handle_msg({"content": {"data": {"method": "custom", "content": content}}, "buffers": []})


def sent_state(widget) -> dict:
    """Every trait value sent to the page since the last call, merged."""
    out: dict = {}
    for message in widget.comm.messages:
        if message and message.get("method") == "update":
            out.update(message["state"])
    widget.comm.messages.clear()
    return out
