"""Race stress: a race that fires once in 40 calls passes the campaign's 2-call determinism
gate and is caught by 100 repetitions; a reordering race in a kernel that does not claim
determinism passes (its reruns are right), a lost update fails (a rerun is wrong)."""

import dataclasses

import torch

from difftest.judge.runner import run_case
from difftest.judge.stress import stress_case, stress_problems
from difftest.kernels.blockwise import CAPABILITY, BlockwiseAttention
from difftest.model.problem import Problem

EVERY = 40
P = Problem(batch=1, seqlen_q=70, seqlen_k=70, heads_q=2, heads_kv=2, head_dim_qk=16, head_dim_v=16)


class Racy(BlockwiseAttention):
    """dQ tiles are added in another order on every EVERY-th call (as atomics finishing in
    another order would); ``lose``: that call drops the last tile instead (a lost update)."""

    name = "racy-test-kernel"
    lose = False

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.calls = 0

    def reduce_dq(self, acc, parts):
        self.calls += 1
        if self.calls % EVERY:
            return super().reduce_dq(acc, parts)
        parts = parts[:-1] if self.lose else list(reversed(parts))
        for r0, r1, part in parts:
            acc[:, r0:r1] += part


def _racy(claims: bool, lose: bool = False):
    k = Racy()
    k.lose = lose
    k.capability = dataclasses.replace(CAPABILITY, deterministic=claims)
    return k


def _reorders_bits():
    """The reordered sum changes bits on P (else the test proves nothing)."""
    a, b = _racy(True), _racy(True)
    b.calls = EVERY - 1
    from difftest.model.inputs import make_inputs

    x = make_inputs(P)
    fa, ca = a.forward(x)
    fb, cb = b.forward(x)
    return not torch.equal(a.backward(x, fa, ca).dq, b.backward(x, fb, cb).dq)


def test_the_race_changes_bits():
    assert _reorders_bits()


def test_two_calls_miss_the_race_and_a_hundred_repetitions_catch_it():
    assert run_case(_racy(True), P).status.value == "passed"  # the campaign's 2 calls
    got = stress_case(_racy(True), P, reps=100, load=1, load_size=64)
    assert got.case.status.value == "failed"
    assert got.differing["dq"] > 0 and got.differing["dk"] == 0
    assert [(v.output, v.gate.value) for v in got.case.verdicts if not v.passed] == [("dq", "determinism")]
    assert got.load_ops > 0 and got.reps == 100 and "100 repetitions" in got.line()


def test_a_kernel_without_the_claim_passes_a_harmless_race_and_fails_a_lost_update():
    ok = stress_case(_racy(False), P, reps=100, load=0)
    assert ok.case.status.value == "passed" and ok.differing["dq"] > 0, ok.line()
    bad = stress_case(_racy(False, lose=True), P, reps=100, load=0)
    assert bad.case.status.value == "failed", bad.line()
    assert any("run" in v.message for v in bad.case.verdicts if not v.passed)


def test_a_deterministic_kernel_passes_stress():
    got = stress_case(BlockwiseAttention(), P, reps=100, load=1, load_size=64)
    assert got.case.status.value == "passed" and not any(got.differing.values()), got.line()


def test_stress_problems_are_large_batch_inside_the_capability():
    ps = stress_problems(CAPABILITY)
    assert ps and all(CAPABILITY.excludes(p) is None for p in ps)
    assert {p.batch for p in ps} == {min(60, CAPABILITY.max_batch)} and {p.causal for p in ps} == {False, True}
