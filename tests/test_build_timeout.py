"""A JIT build inside an isolated kernel call has its own bound (RunConfig.compile_timeout_s),
so a slow build on a loaded host is not a false "hang": the worker tells the parent when a
case enters and leaves its compile phase (difftest/execute/timing.py's ``on_compile``), and only the
kernel's own time counts against ``timeout_s``. A case killed while building is a "build
timeout"; one killed after its build finished is still a "hang", and says how long each took.

The adapters below build (sleep inside ``timing.phase("compile")``) the first time a
process meets a long Problem (seqlen_k > 16), as a JIT cache does; short Problems are
"cached", so each test first warms the worker on one (its imports are not the kernel's time).
"""

import json
import time

import pytest

from difftest import Problem
from difftest.execute import timing
from difftest.execute.isolation import close_all
from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.judge.triage import Kind, classify, summarize
from difftest.report.write import campaign_record, markdown_summary, summary_table
from difftest.search.campaign import CampaignResult
from tests.kernels_for_tests import RefKernel

CACHED = Problem(batch=1, seqlen_q=5, seqlen_k=8, head_dim_qk=8, head_dim_v=8, seed=1).validate()
NEW_SHAPE = CACHED.replace(seqlen_k=17)
WARM = RunConfig(isolate=True, timeout_s=120)
_BUILT: set = set()  # this process's "JIT cache"


class Builds(RefKernel):
    """Correct; builds ``build_s`` seconds on a new long shape, then runs ``run_s`` seconds."""

    name = "test-builds"
    spec = "tests.test_build_timeout:Builds"
    build_s, run_s = 5.0, 0.0

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.max_seqlen_k > 16:
            key = (self.name, p.to_json())
            if key not in _BUILT:
                with timing.phase("compile"):
                    time.sleep(self.build_s)
                _BUILT.add(key)
            time.sleep(self.run_s)
        return out


class StartsAProcess(Builds):
    """Correct; like the TileOPs adapter, starts a process of its own (spawn + imports:
    ``timing.phase("worker_start")``) the first time it meets a long Problem, then runs."""

    name = "test-starts-a-process"
    spec = "tests.test_build_timeout:StartsAProcess"

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.max_seqlen_k > 16 and self.name not in _BUILT:
            with timing.phase("worker_start"):
                time.sleep(self.build_s)
            _BUILT.add(self.name)
        return out


class BuildsForever(Builds):
    name = "test-builds-forever"
    spec = "tests.test_build_timeout:BuildsForever"
    build_s = 120.0


class HangsAfterBuild(Builds):
    name = "test-hangs-after-build"
    spec = "tests.test_build_timeout:HangsAfterBuild"
    build_s, run_s = 1.0, 120.0


@pytest.fixture(autouse=True, scope="module")
def _workers():
    yield
    close_all()


def _warm(kernel):
    assert run_case(kernel, CACHED, WARM).status == "passed"  # worker started, adapter imported


@pytest.mark.slow
def test_a_build_longer_than_the_timeout_is_not_a_hang():
    """Fails on the code before compile_timeout_s: the 5 s build counted against the 3 s
    timeout and the case was triaged "hang" though the kernel never ran."""
    _warm(Builds())
    r = run_case(Builds(), NEW_SHAPE, RunConfig(isolate=True, timeout_s=3, compile_timeout_s=120))
    assert r.status == "passed" and classify(r) == Kind.PASSED, r.render()


def test_an_adapter_s_own_process_start_is_not_a_hang():
    """Fails on the code before timing.UNTIMED held "worker_start": on the H200 (R9) a
    fresh TileOPs worker's imports ran past a 5 s timeout before its first build and the
    case was triaged "hang"."""
    _warm(StartsAProcess())
    r = run_case(StartsAProcess(), NEW_SHAPE, RunConfig(isolate=True, timeout_s=3, compile_timeout_s=120))
    assert r.status == "passed" and classify(r) == Kind.PASSED, r.render()


@pytest.mark.slow
def test_a_build_past_compile_timeout_is_a_build_timeout_not_a_hang():
    _warm(BuildsForever())
    r = run_case(BuildsForever(), NEW_SHAPE, RunConfig(isolate=True, timeout_s=120, compile_timeout_s=2))
    assert r.status == "error" and r.error_type == "BuildTimeout", r.render()
    assert classify(r) == Kind.BUILD_TIMEOUT
    assert "build did not finish within 2 s" in r.reason and "not a hung kernel" in r.reason
    d = json.loads(json.dumps(r.to_dict()))
    assert d["triage"] == "build timeout" and classify(d) == Kind.BUILD_TIMEOUT  # saved reports re-triage
    assert classify({"status": "error", "reason": r.reason}) == Kind.BUILD_TIMEOUT  # from the text alone
    assert run_case(BuildsForever(), CACHED, WARM).status == "passed"  # a fresh worker serves the next case
    # every report surface names it
    res = CampaignResult("test-builds-forever", "quick", status="failed", cases=[r, CaseResult.from_dict(d)])
    s = summarize(res.cases)
    assert s["kinds"] == {"build timeout": 2} and s["findings"] == 2
    assert campaign_record(res)["triage"]["kinds"] == {"build timeout": 2}
    assert "build timeout 2" in summary_table([res])
    assert "build timeout 2" in markdown_summary([res])
    assert "triage: build timeout" in r.render()


@pytest.mark.slow
def test_a_kernel_stuck_after_its_build_is_a_hang_that_says_both_times():
    _warm(HangsAfterBuild())
    r = run_case(HangsAfterBuild(), NEW_SHAPE, RunConfig(isolate=True, timeout_s=3, compile_timeout_s=120))
    assert r.status == "error" and r.error_type == "KernelTimeout", r.render()
    assert classify(r) == Kind.HANG
    assert "did not return within 3 s" in r.reason
    assert "its build/setup took" in r.reason and "then the kernel ran" in r.reason


def test_the_timer_reports_only_the_outermost_compile_phase():
    told = []
    with timing.collect(timing.PhaseTimer(on_compile=told.append)):
        with timing.phase("kernel"):
            with timing.phase("compile"):
                with timing.phase("compile"):  # a build inside a build: one phase
                    pass
                assert told == [True]
            with timing.phase("compile"):
                pass
    assert told == [True, False, True, False]
    told.clear()
    with timing.collect(timing.PhaseTimer(on_compile=told.append)):
        with timing.phase("worker_start"):  # an adapter's process start, then its first build
            assert told == [True]
            with timing.phase("compile"):
                pass
        with timing.phase("truth"):  # not set-up: nothing told
            pass
    assert told == [True, False]


class _Pipe:
    """A worker's end of the pipe, already holding its messages (the parent reads late)."""

    def __init__(self, messages):
        self.messages, self.polls = list(messages), []

    def poll(self, timeout):
        self.polls.append(timeout)
        return bool(self.messages)

    def recv(self):
        return self.messages.pop(0)


def test_build_notices_read_late_are_timed_by_the_worker_s_clock():
    """The parent computes the references while the worker builds, and reads the notices only
    afterwards: the build's seconds are the worker's timestamps, not the reading times."""
    from difftest.execute.isolation import KernelTimeout, Worker

    t0 = time.perf_counter() - 10.0  # sent 10 s ago; built from 1 s to 9 s after
    w = Worker()
    w.conn = pipe = _Pipe([("compile", True, t0 + 1.0), ("compile", False, t0 + 9.0)])
    with pytest.raises(KernelTimeout, match=r"within 3 s .*its build/setup took 8\.0 s, then the kernel ran 2\.0 s"):
        w.receive(t0, 3.0, compile_timeout_s=60.0)
    assert 0.5 < pipe.polls[-1] <= 1.0  # of the 3 s, 2 were the kernel's: it waited the last one
