"""Triage is a function of the case result: each kind comes from a kernel that really
behaves that way, and campaigns report the counts in JSON, markdown and the table."""

import json

from difftest import Problem
from difftest.execute.isolation import KernelCrashed, KernelTimeout
from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.judge.triage import Kind, classify, overflow_limited, summarize
from difftest.report.write import campaign_record, markdown_summary, summary_table
from difftest.search.campaign import CampaignResult
from tests.kernels_for_tests import CrashOnLongQ, Flaky, InfAtLargestDq, RaisesOnCausal, RefKernel, WrongDkForLongGqa

SMALL = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=8, head_dim_v=8, dtype="float16")
OVERFLOW = Problem(
    seqlen_q=16,
    seqlen_k=16,
    head_dim_qk=16,
    head_dim_v=16,
    dtype="float16",
    values="mixed_do",
    value_scale=4.4,
    softmax_scale=10.236,
    seed=1,
    input_version=1,
)  # max |dQ| 65459.9 with version 1's values (test_dtype_limits)


class RaisesAs(RefKernel):
    """Raises the exception the isolation worker raises for a dead or stuck process."""

    def __init__(self, exc):
        self.exc = exc

    def corrupt(self, inputs, out):
        raise self.exc


def test_each_kind_from_a_kernel_that_behaves_that_way():
    cases = {
        Kind.PASSED: run_case(RefKernel(), SMALL),
        Kind.WRONG_RESULT: run_case(WrongDkForLongGqa(), SMALL.replace(seqlen_k=40, heads_q=2)),
        Kind.CONTRACT_VIOLATION: run_case(RaisesOnCausal(), SMALL.replace(causal=True)),
        Kind.CRASH: run_case(RaisesAs(KernelCrashed("kernel process died (exit code -11)")), SMALL),
        Kind.HANG: run_case(RaisesAs(KernelTimeout("kernel did not return within 5 s (worker killed)")), SMALL),
        Kind.NONDETERMINISM: run_case(Flaky(), SMALL.replace(dtype="float32"), RunConfig(determinism_runs=3)),
        Kind.OVERFLOW_LIMITED: run_case(InfAtLargestDq(), OVERFLOW),
        Kind.SKIPPED: run_case(RefKernel(), SMALL.replace(head_dim_qk=64, head_dim_v=64)),
    }
    for kind, case in cases.items():
        assert classify(case) == kind, (kind, case.render())
        d = json.loads(json.dumps(case.to_dict()))
        assert d["triage"] == kind and classify(d) == kind  # saved reports re-triage the same
    assert overflow_limited(cases[Kind.OVERFLOW_LIMITED]) == {"dq": 1}
    assert "triage: contract violation" in cases[Kind.CONTRACT_VIOLATION].render()


def test_a_real_worker_crash_is_a_crash():
    case = run_case(CrashOnLongQ(), SMALL.replace(seqlen_q=24, dtype="float32"), RunConfig(isolate=True, timeout_s=120))
    assert case.status == "error" and classify(case) == Kind.CRASH, case.render()


def test_internal_error_is_difftest_s_own():
    case = CaseResult("k", SMALL, "error", "internal: the reference failed (RuntimeError: out of memory)")
    assert classify(case) == Kind.INTERNAL
    # a value failure together with a determinism failure is a wrong result first
    from difftest.judge.gates import Verdict

    both = CaseResult(
        "k", SMALL, "failed", verdicts=[Verdict("dq", "determinism", False), Verdict("dq", "budget", False)]
    )
    assert classify(both) == Kind.WRONG_RESULT


def test_campaign_reports_carry_the_triage():
    res = CampaignResult(
        "test-mix",
        "quick",
        status="failed",
        cases=[
            run_case(RefKernel(), SMALL),
            run_case(RaisesOnCausal(), SMALL.replace(causal=True)),
            run_case(InfAtLargestDq(), OVERFLOW),
            run_case(InfAtLargestDq(), OVERFLOW.replace(softmax_scale=6.0)),
        ],
    )
    s = summarize(res.cases)
    assert s["kinds"] == {"passed": 1, "overflow-limited": 1, "wrong result": 1, "contract violation": 1}
    assert s["findings"] == 2 and s["overflow_limited"] == {"dq": 1} and s["overflow_limited_cases"] == 1
    assert campaign_record(res)["triage"] == s
    table = summary_table([res])
    assert "triage" in table.splitlines()[0]
    assert "wrong result 1, contract violation 1, overflow-limited 1 (dq 1 elems)" in table
    assert "overflow-limited 1 elems" in table  # the dq row
    md = markdown_summary([res])
    assert "| triage |" in md and "contract violation 1" in md
