"""The decompose stage (exporter/pipeline/decompose.py): which decompositions run, in which
order, and what a re-export of the same program needs."""

from __future__ import annotations

import pytest
import torch

from exporter import compat
from exporter.pipeline.decompose import decompose
from exporter.pipeline.translations import onnx_registry
from test_torch_compat import Linear, item_in_scan_program


@pytest.fixture(scope="module")
def program():
    return torch.export.export(Linear().eval(), (torch.randn(3, 4),), dynamic_shapes={"x": {0: torch.export.Dim("n")}})


def test_decompose_gives_the_graph_run_decompositions_gives(program):
    registry = onnx_registry(compat.default_opset())
    table = compat.onnx_decomposition_table(registry)
    with compat.size_oblivious_capture():
        reference = program.run_decompositions(dict(table))
    ours = decompose(program, compat.default_opset())
    assert isinstance(ours, torch.export.ExportedProgram) and ours is not program

    def targets(ep):
        return [str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "assert" not in str(n.target)]

    assert [t for t in targets(ours) if "prims.convert_element_type" not in t] == targets(reference)
    assert "aten.gelu.default" in targets(ours)  # has an ONNX implementation, so it is kept whole
    assert compat.onnx_decomposition_tables(registry) is compat.onnx_decomposition_tables(
        onnx_registry(compat.default_opset())
    )


def test_decompose_keeps_grouped_mm_whole_for_our_translation():
    class GroupedMatmul(torch.nn.Module):
        def forward(self, a, b, offs):
            return torch._grouped_mm(a, b, offs=offs)

    args = (torch.randn(6, 8, dtype=torch.bfloat16), torch.randn(2, 8, 8, dtype=torch.bfloat16),
            torch.tensor([2, 6], dtype=torch.int32))
    program = torch.export.export(GroupedMatmul(), args)  # the pinned torch (2.13) captures it on CPU
    targets = {n.target for n in decompose(program, 18).graph.nodes if n.op == "call_function"}
    assert torch.ops.aten._grouped_mm.default in targets


def test_decompose_decomposes_a_scan_over_item_twice_leaving_nothing_pending():
    program = item_in_scan_program()
    for _ in range(2):
        decomposed = decompose(program, 18)
        assert compat.program_shape_env(program).pending_fresh_unbacked_symbols == []
    assert any("scan" in str(node.target) for node in decomposed.graph.nodes)
