"""Analyses run on a session are kept with the exported model they ran on: ``session.analyses``
and ``session.last_verify`` find them, also through a derived session that exported the same
model, and ``summary()`` names them."""

from __future__ import annotations

import torch

from exporter import ExportOptions, Session


class Double(torch.nn.Module):
    def forward(self, x):
        return x * 2


def test_verify_is_kept_on_the_session_and_a_derived_session_with_the_same_model_finds_it():
    session = Session(Double(), (torch.randn(3, 4),), {}, ExportOptions(dynamic_shapes={"x": {0: "batch"}}))
    assert session.analyses == {} and session.last_verify is None  # nothing run yet
    result = session.verify()
    assert session.last_verify is result and session.analyses == {"verify": result}
    assert "verify" in session.summary() and result.verdict in session.summary()

    same = session.with_axis("x", 0, "batch")  # another session object, the same export
    same.run()
    assert same.last_verify is result

    other = session.with_axis("x", 0, "STATIC")  # another model: its own record
    other.run()
    assert other.analyses == {}


def test_a_failed_export_keeps_no_analysis():
    class Branchy(torch.nn.Module):
        def forward(self, x):
            return x + 1 if x.shape[0] > 4 else x - 1

    from exporter import Dim

    session = Session(Branchy(), (torch.randn(6, 2),), {},
                      ExportOptions(dynamic_shapes={"x": {0: Dim("n", min=1, max=64)}}))
    result = session.verify()
    assert result.status == "error"
    assert session.analyses == {}
