"""A GPU whose memory runs out (other campaigns side by side, 2026-12-07 on the H100) costs the
case, never the campaign, and is never a finding: the case is retried once with this process's
cached blocks released, then skipped with a reason that says so (judge/device_memory.py). An
allocation larger than the whole device stays the kernel's error."""

import pytest
import torch

from difftest import Problem
from difftest.judge import runner
from difftest.judge.runner import run_case
from difftest.model import counter_rng
from difftest.report.write import campaign_notes, memory_skipped
from difftest.vocab import DEVICE_MEMORY_SKIP
from tests.kernels_for_tests import RefKernel

P = Problem(batch=1, seqlen_q=8, seqlen_k=12, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8, seed=1).validate()
SHARED = (
    "CUDA out of memory. Tried to allocate 350.00 MiB. GPU 0 has a total capacity of 79.18 GiB of which "
    "125.44 MiB is free. Process 8592 has 850.00 MiB memory in use."
)
HUGE = (
    "CUDA out of memory. Tried to allocate 200.00 GiB. GPU 0 has a total capacity of 79.18 GiB of which "
    "70.00 GiB is free."
)


class OomKernel(RefKernel):
    """Raises the CUDA allocator's error in its first ``fails`` calls, then computes right."""

    name = "test-oom"

    def __init__(self, fails: int, message: str = SHARED):
        self.fails, self.message, self.calls = fails, message, 0

    def corrupt(self, inputs, out):
        self.calls += 1
        if self.calls <= self.fails:
            raise torch.OutOfMemoryError(self.message)
        return out


def test_a_kernel_that_meets_a_full_gpu_once_is_judged_on_the_retry():
    k = OomKernel(fails=1)
    r = run_case(k, P)
    assert r.status == "passed" and k.calls == 2


def test_a_kernel_that_meets_a_full_gpu_twice_is_skipped_not_a_finding():
    r = run_case(OomKernel(fails=5), P)
    assert r.status == "skipped" and not r.failed and r.verdicts == []
    assert r.reason.startswith(DEVICE_MEMORY_SKIP) and "the kernel" in r.reason and "350.00 MiB" in r.reason


def test_an_allocation_beyond_the_whole_device_stays_the_kernels_error():
    k = OomKernel(fails=5, message=HUGE)
    r = run_case(k, P)
    assert r.status == "error" and r.error_type == "OutOfMemoryError" and k.calls == 1  # no retry: none would serve it


def test_difftests_own_tensors_running_out_cost_the_case_not_the_campaign(monkeypatch):
    """Before: make_inputs' OutOfMemoryError left run_case, Hypothesis and the campaign (seven
    campaigns died so on the H100)."""
    real, calls = runner.make_inputs, []

    def full(problem, device):
        calls.append(problem)
        raise torch.OutOfMemoryError(SHARED)

    monkeypatch.setattr(runner, "make_inputs", full)
    r = run_case(RefKernel(), P)
    assert r.status == "skipped" and "difftest's own tensors" in r.reason and len(calls) == 2
    monkeypatch.setattr(runner, "make_inputs", real)
    assert run_case(RefKernel(), P).status == "passed"


def test_a_gate_running_out_is_retried_then_skipped(monkeypatch):
    def full(*a, **kw):
        raise torch.OutOfMemoryError(SHARED)

    monkeypatch.setattr(runner, "check_outputs", full)
    r = run_case(RefKernel(), P)
    assert r.status == "skipped" and r.reason.startswith(DEVICE_MEMORY_SKIP)


def test_the_campaign_block_counts_the_cases_memory_could_not_hold():
    cases = [run_case(OomKernel(fails=5), P), run_case(RefKernel(), P)]
    assert memory_skipped(cases) == 1
    notes = campaign_notes("ci", {}, (), 0, cases)
    assert any(n.startswith("1 cases not judged: the device's memory ran out twice") for n in notes)
    assert not any("memory" in n for n in campaign_notes("ci", {}, (), 0, cases[1:]))


def test_a_full_gpu_does_not_switch_the_triton_draw_off(monkeypatch):
    """An OutOfMemoryError in the Triton draw is the device's state, not a broken build: it
    propagates (run_case turns it into a retry) and the Triton draw stays on."""

    class Full:
        MAX_STREAMS = 64

        @staticmethod
        def fill_normals(*a):
            raise torch.OutOfMemoryError(SHARED)

    monkeypatch.setattr(counter_rng, "_triton_module", lambda device: Full)
    monkeypatch.setitem(counter_rng._TRITON, "failed", False)
    with pytest.raises(torch.OutOfMemoryError):
        counter_rng._fill_normals_triton([(1, 2)], [16], "cpu")
    assert counter_rng._TRITON["failed"] is False


class OomAlways(RefKernel):
    """The CUDA allocator's error on every call, raised in the isolation worker."""

    name = "test-oom-always"
    spec = "tests.test_device_memory:OomAlways"

    def corrupt(self, inputs, out):
        raise torch.OutOfMemoryError(SHARED)


@pytest.mark.slow
def test_a_kernel_running_out_in_its_isolation_worker_is_skipped_too():
    from difftest.execute.isolation import close_all
    from difftest.judge.runner import RunConfig

    try:
        r = run_case(OomAlways(), P, RunConfig(isolate=True, timeout_s=120))
    finally:
        close_all()
    assert r.status == "skipped" and "the kernel" in r.reason and "350.00 MiB" in r.reason, r.reason


def test_a_variation_the_device_could_not_hold_is_no_pass_for_a_signature():
    """A signature's variation skipped for device memory says nothing: before, it counted as a
    pass and made a need of what it varied (here: causal)."""
    from difftest.judge.runner import CaseResult
    from difftest.search.signature import derive
    from difftest.vocab import Status

    p = P.replace(causal=True)
    bad = CaseResult("k", p, Status.ERROR, "RuntimeError: boom", error_type="RuntimeError")

    def run(q):
        if not q.causal:
            return CaseResult("k", q, Status.SKIPPED, f"{DEVICE_MEMORY_SKIP} (the kernel), twice: ...")
        return bad

    assert "causal" not in dict(derive(bad, run).needs)
