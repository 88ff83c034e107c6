"""A user rewrite rule whose output matches its own pattern ends: the optimizer stops it
after a budget of rewrites of its own output and the optimize stage warns, naming the rule.
Before, onnxscript's rule set rewrote the Gelu it had just inserted forever (367,234 rewrites
in 150 s); each export runs in a subprocess so that a regression fails on time, not hangs."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

SCRIPT = textwrap.dedent("""
    import json, sys, time
    import torch
    from onnxscript.rewriter import pattern
    import exporter
    from exporter import ExportOptions

    class GeluMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.nn.Linear(4, 4)

        def forward(self, x):
            return torch.nn.functional.gelu(self.linear(x))

    def gelu(op, x):
        return op.Gelu(x)

    def gelu_of_gelu(op, x):
        return op.Gelu(op.Gelu(x))

    replacement = {"same": gelu, "growing": gelu_of_gelu}[sys.argv[1]]
    rule = pattern.RewriteRule(gelu, replacement, name="GeluAgain")
    started = time.perf_counter()
    session = exporter.export(GeluMLP().eval(), torch.randn(2, 4), options=ExportOptions(extra_rewrite_rules=(rule,)))
    optimize = next(stage for stage in session.stages if stage.name == "optimize")
    print(json.dumps({"seconds": time.perf_counter() - started, "status": optimize.status.value,
                      "warnings": list(optimize.warnings), "gelus": sum(n.op_type == "Gelu" for n in session.onnx_model.graph)}))
""")


@pytest.mark.parametrize("replacement", ["same", "growing"])
def test_a_rule_rewriting_its_own_output_is_stopped_and_named_in_the_optimize_warnings(replacement):
    run = subprocess.run([sys.executable, "-c", SCRIPT, replacement], capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["status"] == "warning"
    (warning,) = result["warnings"]
    assert warning.startswith("the rewrite rule extra_rewrite_rules[0] ('GeluAgain', on Gelu) kept matching its own "
                              "output: stopped after 65 rewrites")
    assert result["gelus"] == (1 if replacement == "same" else 66)  # the budget: 64 rewrites of its own output


def test_a_rule_that_never_matches_its_own_output_rewrites_past_the_budget_without_a_warning():
    import onnx_ir as ir
    from onnx import TensorProto, helper
    from onnxscript.rewriter import pattern

    from exporter.pipeline.optimize import run_passes

    def neg_neg(op, x):
        return op.Neg(op.Neg(x))

    def identity(op, x):
        return op.Identity(x)

    nodes = [helper.make_node("Neg", [f"v{i}"], [f"v{i + 1}"]) for i in range(200)]  # 100 Neg pairs in a chain
    graph = helper.make_graph(nodes, "negs", [helper.make_tensor_value_info("v0", TensorProto.FLOAT, [2])],
                              [helper.make_tensor_value_info("v200", TensorProto.FLOAT, [2])])
    model = ir.from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]))
    said: list[str] = []
    optimized, _ = run_passes(model, extra_rewrite_rules=(pattern.RewriteRule(neg_neg, identity),), warnings=said)
    assert said == [] and not any(n.op_type == "Neg" for n in optimized.graph)  # 100 rewrites, none of its own output
