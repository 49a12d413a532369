"""Statuses, gate names, failure kinds and mutant outcomes are StrEnums: each member is its
string, so reports written before the enums read back and write out byte-for-byte, plain
string comparisons keep working, and an unknown name read from a report fails loudly."""

import json
import lzma
from pathlib import Path

import pytest
import torch

from difftest import Problem
from difftest.judge.determinism import determinism_verdicts
from difftest.judge.gates import Verdict
from difftest.judge.runner import CaseResult, run_case
from difftest.measure.mutants import MutantRow
from difftest.model.outputs import Outputs
from difftest.search.campaign import CampaignResult
from difftest.vocab import CampaignStatus, FailureKind, Gate, MutantStatus, Status
from tests.kernels_for_tests import RefKernel

ROOT = Path(__file__).resolve().parents[1]
# an H200 FA4 campaign written before the enums: passed, error and determinism cases
OLD_REPORT = ROOT / "tests" / "data" / "h200" / "fa4-report.json.xz"


def _keys_of(old, new):
    """``new`` restricted to the keys ``old`` has, recursively."""
    if isinstance(old, dict) and isinstance(new, dict):
        return {k: _keys_of(old[k], new[k]) for k in old if k in new}
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [_keys_of(a, b) for a, b in zip(old, new)]
    return new


def test_members_are_their_strings():
    assert [str(s) for s in Status] == ["passed", "failed", "error", "skipped"]
    assert [str(s) for s in CampaignStatus] == ["passed", "failed", "unavailable", "interrupted", "nothing checked"]
    assert [str(s) for s in MutantStatus] == ["killed", "survived", "spurious", "error", "unavailable"]
    assert {str(g) for g in Gate} == {
        "budget",
        "elementwise",
        "nonfinite",
        "poison",
        "shape",
        "missing",
        "determinism",
        "determinism_info",
        "second_reference",
    }
    assert [str(k) for k in FailureKind] == ["gate", "error"]
    assert json.dumps([Status.ERROR, Gate.BUDGET, {Status.PASSED: 1}]) == '["error", "budget", {"passed": 1}]'
    assert f"{Status.FAILED:>8s}|{Gate.POISON}" == "  failed|poison" and Status.ERROR == "error"


def test_an_old_report_reads_back_and_writes_out_byte_for_byte():
    doc = json.loads(lzma.open(OLD_REPORT).read())
    cases = [c for camp in doc["campaigns"] for c in camp["cases"]]
    assert {c["status"] for c in cases} >= {"passed", "error"}
    for d in cases:
        c = CaseResult.from_dict(d)
        assert isinstance(c.status, Status) and all(isinstance(v.gate, Gate) for v in c.verdicts)
        # keys added since (e.g. Verdict.reference) aside, the same JSON text
        assert json.dumps(_keys_of(d, c.to_dict()), sort_keys=True) == json.dumps(d, sort_keys=True)


def test_a_fresh_case_serialises_to_plain_strings():
    c = run_case(RefKernel(), Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=8, head_dim_v=8))
    text = json.dumps(c.to_dict())
    assert c.status is Status.PASSED and '"status": "passed"' in text and '"gate": "budget"' in text
    assert json.dumps(CaseResult.from_dict(json.loads(text)).to_dict()) == text


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="'bugdet'"):
        Verdict("dq", "bugdet", True)
    with pytest.raises(ValueError, match="'passd'"):
        CaseResult("k", Problem(), "passd")
    with pytest.raises(ValueError, match="'fail'"):
        CampaignResult("k", "ci", status="fail")
    with pytest.raises(ValueError, match="'dead'"):
        MutantRow("m", "scale", "blockwise", "dead")


def test_failure_kind_follows_the_status():
    p = Problem()
    assert CaseResult("k", p, "error").failure_kind is FailureKind.ERROR
    assert CaseResult("k", p, "failed").failure_kind is FailureKind.GATE
    assert CaseResult("k", p, "passed").failure_kind is None and CaseResult("k", p, "skipped").failure_kind is None


def test_determinism_verdicts_are_built_with_the_kernel_claim():
    p = Problem(seqlen_q=4, seqlen_k=4)
    a = Outputs(**{n: torch.zeros(shape) for n, shape in Outputs.shapes(p).items()})
    b = a.clone()
    b.dq[0, 0, 0] = 1.0
    claimed = {v.output: v for v in determinism_verdicts(p, [a, b], claimed=True)}
    info = {v.output: v for v in determinism_verdicts(p, [a, b], claimed=False)}
    assert claimed["dq"].gate is Gate.DETERMINISM and not claimed["dq"].passed and claimed["dk"].passed
    assert all(v.gate is Gate.DETERMINISM_INFO and v.passed for v in info.values())
    assert info["dq"].numbers == claimed["dq"].numbers and info["dq"].numbers["differing"] == 1
