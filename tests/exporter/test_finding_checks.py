"""Verify's declared findings, each on the facts it reads: a check reports only its own case,
and :data:`FINDING_CHECKS` lists them in the order a result shows them. (The findings that
read dim groups and guards are proven on real exports in test_verify*.py.)"""

from __future__ import annotations

import numpy as np

from exporter.verify.contract import ContractCheck, ContractReport
from exporter.verify.findings import (
    FINDING_CHECKS,
    VerifyFacts,
    contract_findings,
    findings_of,
    model_changes_itself,
    refused_by_eager,
    sweep_coverage,
    vacuous,
    wrong_at_example,
)
from exporter.verify.results import CaseResult
from exporter.verify.tolerance import compare


def case(name, status="pass", sizes=(("batch", 2),), value=1.0, **fields):
    expected = np.full((2, 3), value, dtype=np.float32)
    outputs = (compare(name, "output", expected + (1.0 if status == "fail" else 0.0), expected, None),)
    return CaseResult(name, sizes, status, outputs if status in ("pass", "fail") else (), **fields)


def facts(*cases, groups=(), contract=None):
    return VerifyFacts(tuple(cases), groups, contract, session=None)


def kinds(findings):
    return [f.kind for f in findings]


def test_the_checks_are_listed_in_the_order_results_show_them():
    assert [check.__name__ for check in FINDING_CHECKS] == [
        "wrong_at_example", "sweep_coverage", "derived_dims", "auto_static", "static_in_onnx", "wrong_at_sizes",
        "refused_by_eager", "tolerance_notes", "rounding_notes", "vacuous", "not_verified", "model_changes_itself",
        "edge_value_findings", "contract_findings"]


def test_a_wrong_example_is_a_finding_and_a_refused_or_right_one_is_not():
    assert kinds(wrong_at_example(facts(case("example", "fail")))) == ["wrong_at_example"]
    assert wrong_at_example(facts(case("example"))) == []
    assert wrong_at_example(facts(case("example", "eager_error", error="boom"))) == []


def test_nothing_dynamic_is_said_once_and_right_only_at_the_example_is_said():
    assert kinds(sweep_coverage(facts(case("example")))) == ["not_swept"]
    only = facts(case("example"), case("batch=3", "fail", (("batch", 3),), changed=("batch",)), groups=("g",))
    assert kinds(sweep_coverage(only)) == ["example_only"]
    fine = facts(case("example"), case("batch=3", sizes=(("batch", 3),), changed=("batch",)), groups=("g",))
    assert sweep_coverage(fine) == []


def test_sizes_the_module_refuses_are_grouped_by_what_changed():
    refused = facts(case("example"),
                    case("batch=1", "eager_error", (("batch", 1),), error="too small", changed=("batch",)),
                    case("batch=3", "eager_error", (("batch", 3),), error="too small", changed=("batch",)))
    found = refused_by_eager(refused)
    assert kinds(found) == ["eager_error"] and "batch = 1, 3" in found[0].message and "these sizes" in found[0].message


def test_outputs_all_near_zero_verify_nothing():
    assert kinds(vacuous(facts(case("example", value=1e-30)))) == ["vacuous"]
    assert vacuous(facts(case("example", value=1.0))) == []
    assert vacuous(facts(case("example", value=1e-30), case("batch=3", "fail", value=1e-30))) == []  # a failure says more


def test_a_model_that_changes_itself_is_said_once_naming_the_first_case():
    changed = facts(case("example"), case("batch=1", state_changes=("window_size 7 -> 1",)),
                    case("batch=3", state_changes=("window_size 7 -> 3",)))
    found = model_changes_itself(changed)
    assert kinds(found) == ["model_changes_itself"] and "window_size 7 -> 1" in found[0].message
    assert "1 other case(s)" in found[0].message
    assert model_changes_itself(facts(case("example"))) == []


def test_contract_findings_say_unified_dims_once_and_errors_other_than_a_static_dim():
    contract = ContractReport((
        ContractCheck("unified dims", "x.shape[0]", "ok", "torch found x, y equal"),
        ContractCheck("unified dims", "y.shape[0]", "ok", "torch found x, y equal"),
        ContractCheck("dynamic is symbolic", "x.shape[1]", "error", "fixed to 3"),
        ContractCheck("output names", "out", "error", "output name is not unique"),
    ))
    found = contract_findings(facts(case("example"), contract=contract))
    assert [(f.kind, f.message) for f in found] == [("unified_dims", "torch found x, y equal"),
                                                    ("contract", "out: output name is not unique")]


def test_findings_of_asks_every_check_in_order():
    found = findings_of(facts(case("example", "fail")))
    assert kinds(found) == ["wrong_at_example", "not_swept"]


def test_a_cause_quotes_a_short_guard_and_gives_only_the_length_of_a_long_one():
    from exporter.cases.groups import QUOTED_GUARD_CHARACTERS, guard_words

    assert guard_words("x.shape[0] <= 4") == "guard x.shape[0] <= 4"
    swin = "32*pixel_values.shape[0]*(" + "Mod(8 - (Mod(pixel_values.shape[2], 8)), 8)" * 30 + ")"
    assert len(swin) > QUOTED_GUARD_CHARACTERS
    assert guard_words(swin) == f"a guard of {len(swin):,} characters"
