"""Netron served on 127.0.0.1 for a real exported model, fetched over HTTP, then stopped."""

from __future__ import annotations

import urllib.request

import netron  # noqa: F401 - the workbench extra installs it: missing, this fails instead of skipping
import pytest
import torch
from torch import nn

from exporter import export
from workbench import netron as wb_netron


@pytest.fixture(scope="module")
def session():
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    session = export(model, torch.randn(3, 4))
    session.run()
    return session.raise_for_status()


def fetch(url):
    with urllib.request.urlopen(url, timeout=10) as response:
        return response.status, response.read()


@pytest.mark.parametrize("which", ["onnx", "pt2"])
def test_serve_binds_localhost_serves_netron_and_stops(session, which):
    viewer = wb_netron.serve(session, which=which, proxy=False)
    try:
        assert viewer.address[0] == "127.0.0.1" and viewer.url == viewer.local_url
        status, page = fetch(viewer.url)
        assert status == 200 and b"netron" in page.lower()
        assert f'src="{viewer.url}"' in viewer._repr_html_()
    finally:
        viewer.stop()
    assert not viewer.running
    with pytest.raises(OSError):  # refused or reset: nothing serves there any more
        fetch(viewer.local_url)
    viewer.stop()  # twice is harmless


def test_behind_jupyterhub_the_url_goes_through_jupyter_server_proxy(session, monkeypatch):
    monkeypatch.setenv("JUPYTERHUB_SERVICE_PREFIX", "/user/ada/")
    with wb_netron.serve(session) as viewer:
        assert viewer.url == f"/user/ada/proxy/{viewer.address[1]}/"
        assert fetch(viewer.local_url)[0] == 200
    assert not viewer.running


def test_unknown_model_kind_is_refused(session):
    with pytest.raises(ValueError, match="onnx, pt2"):
        wb_netron.serve(session, which="tflite")
