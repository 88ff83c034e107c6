"""verify compares one size past the chunk a program cuts a dim into, when the example is less
than half a chunk: a chunked model (the delta rule of Qwen3-Next, Kimi-Linear: chunks of 64
tokens) exported at 16 tokens was otherwise compared at one chunk only (1, 2, 3, 16, 32)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from exporter import ExportOptions, Session
from exporter.cases import dim_groups

SEQ = {"x": {0: "batch", 1: "seq"}}


def _chunks(x: torch.Tensor) -> torch.Tensor:
    """``x`` padded to a multiple of 64 tokens, as ``[batch, chunks, 64]``."""
    return F.pad(x, (0, (64 - x.shape[1] % 64) % 64)).view(x.shape[0], -1, 64)


class ChunkedCumsum(torch.nn.Module):
    """A running sum within each chunk of 64, then a scan over the chunks' totals."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = _chunks(x).cumsum(-1)
        carried = chunks[:, :, -1:].cumsum(1) - chunks[:, :, -1:]
        return (chunks + carried).flatten(1)[:, : x.shape[1]]


class FirstChunkOnlyWhenExporting(ChunkedCumsum):
    """What a translation wrong from the second chunk on gives: zeros past the first chunk."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        chunks = _chunks(x)
        if torch.compiler.is_exporting():
            chunks = chunks * (torch.arange(chunks.shape[1]) == 0)[None, :, None]
        return chunks.cumsum(-1).flatten(1)[:, : x.shape[1]]


def _session(model: torch.nn.Module) -> Session:
    torch.manual_seed(0)
    session = Session(model, (torch.randn(2, 16),), {}, ExportOptions(dynamic_shapes=SEQ))
    assert session.run().ok
    return session


def test_a_chunked_model_is_compared_past_its_first_chunk_and_passes_there():
    session = _session(ChunkedCumsum())
    [seq] = [g for g in dim_groups(session) if g.label == "seq"]
    assert ("past a chunk of 64", 65, "the program cuts seq into chunks of 64") in seq.guard_sizes
    result = session.verify(edge_values=False)
    assert result.status == "passed", result.verdict
    assert any(c.name == "seq=65 past a chunk of 64" and c.status == "pass" for c in result.cases)


def test_a_program_wrong_from_the_second_chunk_on_fails_verify_at_the_size_past_the_first():
    result = _session(FirstChunkOnlyWhenExporting()).verify(edge_values=False)
    assert result.status == "failed"
    failed = {c.name for c in result.failed_cases}
    assert "seq=65 past a chunk of 64" in failed
    assert all(c.status == "pass" for c in result.cases if dict(c.sizes)["seq"] <= 64)


def test_a_chunk_no_larger_than_twice_the_example_adds_no_case():
    class Pairs(torch.nn.Module):
        def forward(self, x):
            return F.pad(x, (0, x.shape[1] % 2)).view(x.shape[0], -1, 2).sum(-1)

    [seq] = [g for g in dim_groups(_session(Pairs())) if g.label == "seq"]
    assert not [kind for kind, _, _ in seq.guard_sizes if kind.startswith("past a chunk")]
