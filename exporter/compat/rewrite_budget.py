"""User rewrite rules with a budget: a rule whose replacement matches its own pattern (Gelu
rewritten to a Gelu) is matched again on every node it just inserted, since onnxscript 0.7's
rule set walks the graph as it changes (367,234 rewrites of one Gelu in 150 s, never ending).

Reads onnxscript's ``RewriteRule.try_rewrite`` result (a ``ReplacementSubgraph``: the matched
``match.nodes`` and the ``new_nodes`` put in their place); covered by
``tests/exporter/test_rewrite_rule_budget.py``."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["SELF_MATCH_FLOOR", "bounded_rewrite_rules", "rule_label"]

#: The fewest rewrites of its own output a rule may make in one optimizer run (more on a graph
#: of more nodes: one per node, what collapsing a chain the length of the graph takes).
SELF_MATCH_FLOOR = 64


def rule_label(rule: Any, index: int) -> str:
    """How a message names the ``index``-th user rule: ``extra_rewrite_rules[0] ('MyRule',
    on Gelu)``."""
    pattern = getattr(rule, "_target_pattern", None)
    nodes = getattr(pattern, "output_nodes", None) or ()
    op = nodes[0].op_identifier()[1] if nodes else None
    parts = [repr(rule.name) if getattr(rule, "name", None) else "", f"on {op}" if op else ""]
    inside = ", ".join(p for p in parts if p)
    return f"extra_rewrite_rules[{index}]" + (f" ({inside})" if inside else "")


def bounded_rewrite_rules(rules: Sequence[Any], on_runaway: Callable[[int, int], None]) -> list[Any]:
    """Copies of ``rules`` (the library's rule objects are left as they are), each of which
    stops rewriting once it has rewritten nodes that it inserted itself more often than the
    graph has nodes (at least :data:`SELF_MATCH_FLOOR` times): a rule whose output matches its
    own pattern. ``on_runaway(index, rewrites)`` is called once when the ``index``-th rule is
    stopped. One copy's budget spans every round of the pass it is built into."""
    bounded = []
    for index, rule in enumerate(rules):
        copied = copy.copy(rule)
        copied.try_rewrite = _budgeted(rule.try_rewrite, index, on_runaway)
        bounded.append(copied)
    return bounded


def _budgeted(try_rewrite: Any, index: int, on_runaway: Callable[[int, int], None]) -> Any:
    produced: set[Any] = set()  # the nodes this rule inserted (kept alive, so never reused ids)
    state = {"own": 0, "rewrites": 0, "limit": 0, "stopped": False}

    def budgeted(model: Any, graph_or_function: Any, node: Any, **options: Any) -> Any:
        if state["stopped"]:
            return None
        delta = try_rewrite(model, graph_or_function, node, **options)
        match = getattr(delta, "match", None)
        if delta is None or match is None:
            return delta
        if not state["limit"]:
            state["limit"] = max(SELF_MATCH_FLOOR, sum(1 for _ in graph_or_function))
        if any(matched in produced for matched in match.nodes):
            state["own"] += 1
            if state["own"] > state["limit"]:
                state["stopped"] = True
                on_runaway(index, state["rewrites"])
                return None
        state["rewrites"] += 1
        produced.update(delta.new_nodes)
        return delta

    return budgeted
