"""A campaign never runs against a kernel worker started in another environment: a
``monkeypatch.setenv`` that switches a kernel's behaviour between two campaigns of one
process reaches the kernel (the worker is restarted), and switching it back does too.
Without this, a pytest session's second campaign ran in the first one's worker and a
planted bug switched on by the environment was never seen."""

import os
from pathlib import Path

import pytest

from difftest.execute import isolation
from difftest.judge.runner import RunConfig, run_case
from difftest.model.problem import Problem
from tests.kernels_for_tests import EnvSwitchedDk

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "myattn"


@pytest.mark.slow
def test_a_changed_environment_restarts_the_worker_and_reaches_the_kernel(monkeypatch):
    monkeypatch.delenv(EnvSwitchedDk.ENV, raising=False)
    cfg = RunConfig(isolate=True, timeout_s=120)
    p = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=8, head_dim_v=8, dtype="float32")
    isolation.close_all()
    try:
        assert run_case(EnvSwitchedDk(), p, cfg).status == "passed"
        first = isolation.shared_worker()
        assert isolation.shared_worker() is first  # same environment: the same worker
        monkeypatch.setenv(EnvSwitchedDk.ENV, "dk")
        bad = run_case(EnvSwitchedDk(), p, cfg)
        assert bad.status == "failed" and {"dk:budget", "dv:budget"} <= set(bad.failed_gates), bad.render()
        assert isolation.shared_worker() is not first
        monkeypatch.delenv(EnvSwitchedDk.ENV)
        assert run_case(EnvSwitchedDk(), p, cfg).status == "passed"  # and back
    finally:
        isolation.close_all()


def test_a_library_setting_its_variables_on_import_does_not_restart_the_worker(monkeypatch):
    """The worker imports the adapter too: a variable the import sets in both processes
    is not a difference (the prestarted worker is kept)."""
    w = isolation.Worker()
    w.launch_env = dict(os.environ)
    monkeypatch.setenv("DIFFTEST_TEST_SET_BY_AN_IMPORT", "1")
    w.proc, w.ready = object(), True  # a ready worker, as far as the check is concerned
    w.worker_env = {**w.launch_env, "DIFFTEST_TEST_SET_BY_AN_IMPORT": "1"}
    assert not w.environment_differs()
    w.worker_env = dict(w.launch_env)  # its imports did not set it: the kernel would not see it
    assert w.environment_differs()
    w.launch_env = w.worker_env = dict(os.environ)
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another test (call)")  # pytest's, between tests
    assert not w.environment_differs()
    w.proc = None


@pytest.fixture
def sub(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), str(EXAMPLE)]))
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.syspath_prepend(str(ROOT))
    return pytester


@pytest.mark.slow
def test_fixture_campaigns_see_the_environment_each_test_sets(sub):
    """One pytest session: a clean campaign, then the same kernel with its bug switched on
    by monkeypatch.setenv (must be found), then clean again (must pass). The worked
    example's two planted bugs (examples/myattn) are found the same way."""
    sub.makepyfile(
        test_env="""
        import pytest

        ENVK = "tests.kernels_for_tests:EnvSwitchedDk"
        MYATTN = "myattn.difftest_adapter:MyAttn"
        KW = dict(max_examples=6, time_budget=600, edge_cases=False, database=None, profile="quick")

        def test_1_clean(difftest_campaign):
            assert difftest_campaign(ENVK, **KW).status == "passed"

        def test_2_switched_on(difftest_campaign, monkeypatch):
            monkeypatch.setenv("DIFFTEST_TEST_PLANTED_BUG", "dk")
            r = difftest_campaign(ENVK, expect_failure=True, **KW)
            assert r.failed and {"dk:budget", "dv:budget"} & set(r.failure.failed_gates)

        def test_3_clean_again(difftest_campaign):
            assert difftest_campaign(ENVK, **KW).status == "passed"

        def test_4_myattn_clean(difftest_campaign):
            assert difftest_campaign(MYATTN, max_examples=10, database=None, profile="quick").status == "passed"

        @pytest.mark.parametrize("bug", ["gqa-head-map", "causal-offset"])
        def test_5_myattn_planted_bug_is_found(difftest_campaign, monkeypatch, bug):
            monkeypatch.setenv("MYATTN_BUG", bug)
            r = difftest_campaign(MYATTN, max_examples=40, time_budget=600, database=None, profile="quick",
                                  expect_failure=True)
            assert r.failed, bug
            p = r.failure.problem
            assert (p.heads_q > p.heads_kv) if bug == "gqa-head-map" else p.causal
    """
    )
    res = sub.runpytest_subprocess("-p", "no:cacheprovider", "--difftest-out", str(sub.path / "out"), timeout=900)
    res.assert_outcomes(passed=6)


@pytest.mark.slow
def test_a_fresh_worker_is_started_only_where_the_last_one_ran_a_case():
    """A hunt's fresh-process checks end one hunt with a fresh worker and begin the next check with
    one: a worker that has run no case is kept (each restart imports torch, and builds on a JIT
    kernel); one that ran a case is replaced."""
    spec = "tests.kernels_for_tests:RefKernel"
    try:
        isolation.fresh_worker(spec)
        w = isolation.shared_worker()
        first = w.proc.pid
        isolation.fresh_worker(spec)
        assert w.proc.pid == first  # nothing ran in it: kept
        w.run(spec, Problem(seqlen_q=3, seqlen_k=4, head_dim_qk=8, head_dim_v=8), "cpu", False, 1, 120)
        isolation.fresh_worker(spec)
        assert w.proc.pid != first and w.served == 0
    finally:
        isolation.close_all()
