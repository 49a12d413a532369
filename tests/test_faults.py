"""Faults a production kernel makes, injected through adapters (tests/faulty_kernels.py),
each costing one case, never the campaign: the case says what happened (the signal,
the exit code, the timeout, the error), and the next case runs in a working process."""

import pytest

from difftest import Problem
from difftest.execute.isolation import close_all, describe_exit
from difftest.judge.runner import RunConfig, run_case
from tests import faulty_kernels as fk

OK = Problem(batch=1, seqlen_q=5, seqlen_k=8, head_dim_qk=8, head_dim_v=8, seed=1).validate()
BAD = OK.replace(seqlen_k=17)
ISOLATED = RunConfig(isolate=True, timeout_s=60)


@pytest.fixture(autouse=True, scope="module")
def _workers():
    yield
    close_all()


def test_exit_status_in_words():
    assert describe_exit(-11) == "killed by signal SIGSEGV (Segmentation fault)"
    assert describe_exit(-9).startswith("killed by signal SIGKILL")
    assert describe_exit(3).startswith("exited with code 3")
    assert "no exit status" in describe_exit(None)


@pytest.mark.parametrize(
    "kernel,expected",
    [
        (fk.Segfaults(), "kernel process died: killed by signal SIGSEGV"),
        (fk.ExitsProcess(), "kernel process died: exited with code 3"),
        (fk.CudaLikeError(), "CUDA error: an illegal memory access was encountered"),
        (fk.AllocatesWithoutBound(), "alloc"),
    ],
    ids=["segfault", "os._exit", "cuda-like-error", "unbounded-allocation"],
)
@pytest.mark.slow
def test_isolated_fault_costs_one_case_and_is_named(kernel, expected):
    r = run_case(kernel, BAD, ISOLATED)
    assert r.status == "error" and expected in r.reason, r.reason
    assert "exit code None" not in r.reason
    after = run_case(kernel, OK, ISOLATED)  # a working worker serves the next case
    assert after.status == "passed", after.reason


@pytest.mark.slow
def test_cuda_like_error_restarts_the_worker():
    from difftest.execute.isolation import shared_worker

    run_case(fk.CudaLikeError(), OK, ISOLATED)
    pid = shared_worker().proc.pid
    r = run_case(fk.CudaLikeError(), BAD, ISOLATED)
    assert "worker restarted" in r.reason
    assert run_case(fk.CudaLikeError(), OK, ISOLATED).status == "passed"
    assert shared_worker().proc.pid != pid


@pytest.mark.slow
def test_isolated_hang_times_out_and_names_the_limit():
    cfg = RunConfig(isolate=True, timeout_s=2)  # fk.Hangs sleeps an hour: any timeout ends it
    run_case(fk.Hangs(), OK, ISOLATED)  # a warm worker first, so the 2 s are the kernel's
    r = run_case(fk.Hangs(), BAD, cfg)
    assert r.status == "error" and "did not return within 2 s" in r.reason
    assert run_case(fk.Hangs(), OK, ISOLATED).status == "passed"


def test_unbounded_allocation_in_process_is_an_error_case():
    """Without isolation an allocation failure is still a case (the test caps memory)."""
    r = run_case(fk.AllocatesWithoutBound(), BAD, RunConfig(isolate=False))
    assert r.status == "error" and "alloc" in r.reason.lower(), r.reason
    assert run_case(fk.AllocatesWithoutBound(), OK, RunConfig(isolate=False)).status == "passed"


@pytest.mark.parametrize("when", ["ready unread", "ready read", "mid-case"])
def test_a_worker_whose_parent_closes_the_pipe_ends_quietly(when):
    """A campaign process killed from outside closes its end of the pipe: sometimes with the
    worker's "ready" still unread, which the worker's socket reads as a reset, not an end of
    file; sometimes while a case runs, so the worker's reply meets a closed pipe. Each way the
    worker ends with exit code 0, not a traceback on the run's terminal."""
    from difftest.execute.isolation import Worker

    w = Worker(env={"DIFFTEST_TEST_SLEEP": "1"})
    w.launch()
    assert w.conn.poll(120), "the worker never said ready"
    if when != "ready unread":
        msg = w.conn.recv()
        assert msg[0] == "ready" and isinstance(msg[1], dict)  # the worker's environment once ready
        w.ready = True
    if when == "mid-case":
        w.send(fk.SlowRef.spec, OK, "cpu", poison=False, runs=1)  # sleeps 1 s, then replies
    w.conn.close()
    w.proc.join(60)
    assert w.proc.exitcode == 0
