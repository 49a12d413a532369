"""The campaign end to end on small adapters: a correct kernel passes; a broken one fails,
is shrunk to the smallest failing Problem, and the written reproducer reproduces the
failure as a standalone script and through `difftest repro`; a crashing kernel costs one
case, not the campaign; saved failures are replayed first from the example database."""

import json
import subprocess
import sys

import pytest
from hypothesis import strategies as st

from difftest import Problem
from difftest.commands import cli
from difftest.execute.isolation import close_all
from difftest.judge.runner import RunConfig
from difftest.search import first_failure
from difftest.search.campaign import run_campaign
from difftest.search.case_log import read_case_log
from tests.kernels_for_tests import CrashOnLongQ, RefKernel, WrongDkForLongGqa


@st.composite
def small(draw):
    hkv = draw(st.integers(1, 2))
    return Problem(
        batch=draw(st.integers(1, 2)),
        seqlen_q=draw(st.integers(1, 40)),
        seqlen_k=draw(st.integers(1, 48)),
        heads_q=hkv * draw(st.integers(1, 2)),
        heads_kv=hkv,
        head_dim_qk=draw(st.sampled_from([8, 16])),
        head_dim_v=8,
        causal=draw(st.booleans()),
        seed=draw(st.integers(0, 99)),
    ).validate()


def test_correct_kernel_campaign_passes(tmp_path):
    r = run_campaign(RefKernel(), "quick", strategy=small(), edge_cases=False, database=None, out_dir=tmp_path)
    assert r.status == "passed" and r.failure is None
    assert len(r.cases) == 12 and all(c.status == "passed" for c in r.cases)
    assert len(read_case_log(tmp_path / "test-ref32.cases.jsonl")) == 12
    assert r.settings["edge_cases"] == 0  # drawn = cases - edge_cases, as the reports count them


def test_broken_kernel_fails_shrinks_and_reproduces(tmp_path, capsys):
    r = run_campaign(
        WrongDkForLongGqa(), "ci", max_examples=60, strategy=small(), edge_cases=False, database=None, out_dir=tmp_path
    )
    assert r.status == "failed" and r.failure is not None
    p = r.failure.problem
    # the fault needs seqlen_k > 32 and a GQA group > 1: shrunk to exactly that edge
    assert (p.batch, p.seqlen_k, p.heads_q, p.heads_kv, p.causal) == (1, 33, 2, 1, False)
    assert p.seqlen_q == 1 and p.head_dim_qk == 8
    assert r.failure.failed_gates == ["dk:budget"]
    assert r.examples_to_fail >= 1 and r.seconds_to_fail is not None
    assert r.first_failure.problem.size() >= p.size()
    # the standalone script reproduces it without Hypothesis
    script = r.reproducer["py"]
    run = subprocess.run(
        [sys.executable, script],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": "."},
    )
    assert run.returncode == 1, run.stderr
    assert "dk: budget FAILED" in run.stdout
    # so does `difftest repro` on the .json (the kernel is a module:attr spec: the user must
    # trust the file with --allow-import), and against a fixed kernel it passes
    rr = subprocess.run(
        [sys.executable, "-m", "difftest", "repro", r.reproducer["json"], "--allow-import"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rr.returncode == 1 and "[FAILED]" in rr.stdout, rr.stderr
    capsys.readouterr()
    for f, why in ((r.reproducer["json"], "--allow-import"), (script, "replays only the .json")):
        rc = cli.main(["repro", f])  # refused before anything runs: no interpreter of its own needed
        err = capsys.readouterr().err
        assert rc == 2 and why in err, err
    # against the fixed kernel, in this process (test_cli replays `repro --kernel` in a fresh one)
    assert cli.main(["repro", r.reproducer["json"], "--kernel", "tests.kernels_for_tests:RefKernel"]) == 0
    assert "[PASSED]" in capsys.readouterr().out
    rec = json.loads(open(r.reproducer["json"]).read())
    assert Problem.from_dict(rec["problem"]) == p and rec["failed_gates"] == ["dk:budget"]


def test_crashing_kernel_does_not_stop_the_campaign(tmp_path, monkeypatch):
    # each crash costs the next case a worker restart (an interpreter importing torch): a 1 s
    # shrink budget, and 1 s instead of 5 for the simplify walk and the signature after it
    monkeypatch.setattr(first_failure, "FINISH_FLOOR_S", 1.0)
    try:
        r = run_campaign(
            CrashOnLongQ(),
            "quick",
            max_examples=15,
            strategy=small(),
            edge_cases=False,
            database=None,
            out_dir=tmp_path,
            config=RunConfig(isolate=True, timeout_s=120),
            shrink_budget=1,
        )
    finally:
        close_all()
    assert r.status == "failed" and r.failure.status == "error" and "died" in r.failure.reason
    # the reported case still crashes (seqlen_q > 20) and is no larger than the first crash
    # found; how far shrinking gets depends on time, since each crash costs a worker restart
    f = r.failure.problem
    assert f.seqlen_q > 20 and f.size() <= r.first_failure.problem.size()
    statuses = {c.status for c in r.cases}
    assert "passed" in statuses and "error" in statuses


def test_time_budget_stops_the_search(tmp_path):
    r = run_campaign(
        RefKernel(),
        "ci",
        max_examples=10_000,
        time_budget=3.0,
        strategy=small(),
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
    )
    assert r.status == "passed" and 0 < len(r.cases) < 10_000


def test_failure_database_replays_the_saved_failure_first(tmp_path):
    """A failure found once runs first next time, seeded (the ci default) or not: the
    failure store keeps the shrunk Problem (Hypothesis's own database ignores seeded runs)."""
    from difftest.search.failure_store import load_failures

    db = str(tmp_path / "db")
    first = run_campaign(
        WrongDkForLongGqa(),
        "ci",
        max_examples=60,
        strategy=small(),
        edge_cases=False,
        database=db,
        out_dir=tmp_path,
        seed=2,
    )  # finds the fault at example 11
    assert first.failed
    assert load_failures(db, WrongDkForLongGqa.spec)[0] == first.failure.problem
    for seed in (0, None):
        again = run_campaign(
            WrongDkForLongGqa(),
            "ci",
            max_examples=60,
            strategy=small(),
            edge_cases=False,
            database=db,
            out_dir=tmp_path,
            seed=seed,
        )
        assert again.failed and again.examples_to_fail == 1 and again.settings["replayed_failures"] >= 1
        assert again.cases[0].problem == first.failure.problem
    fixed = run_campaign(
        RefKernel(), "ci", max_examples=5, strategy=small(), edge_cases=False, database=db, out_dir=tmp_path, seed=0
    )
    assert fixed.status == "passed"  # another kernel's store is its own
    assert load_failures(None, WrongDkForLongGqa.spec) == []


@pytest.mark.slow
def test_error_type_is_recorded_where_the_exception_is_caught():
    """In process, the exception's class; through the worker, the class of the exception the
    worker caught (the reason still reads 'RuntimeError: MLIRError: ...' as it always did);
    an adapter that re-raises a worker's error names the original (TileOPs)."""
    from difftest.judge.runner import run_case
    from tests.kernels_for_tests import TwoKindsOfError

    mlir = Problem(heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=8, seqlen_q=4, seqlen_k=4)
    cuda = Problem(heads_q=4, heads_kv=4, head_dim_qk=8, head_dim_v=8, seqlen_q=4, seqlen_k=4)
    assert run_case(TwoKindsOfError(), mlir).error_type == "MLIRError"
    assert run_case(TwoKindsOfError(), cuda).error_type == "AcceleratorError"
    assert run_case(RefKernel(), mlir).error_type == ""

    class Wrapping(RefKernel):
        def corrupt(self, inputs, out):
            e = RuntimeError("TileOPs: OpNotAvailableError: no implementation")
            e.error_type = "OpNotAvailableError"
            raise e

    c = run_case(Wrapping(), mlir)
    assert c.status == "error" and c.error_type == "OpNotAvailableError"
    assert c.reason.startswith("RuntimeError: TileOPs: OpNotAvailableError")
    try:
        c = run_case(TwoKindsOfError(), mlir, RunConfig(isolate=True, timeout_s=120))
    finally:
        close_all()
    assert c.error_type == "MLIRError" and c.reason.startswith("RuntimeError: MLIRError: Operation creation failed")
    assert type(c).from_dict(json.loads(json.dumps(c.to_dict()))).error_type == "MLIRError"


def test_shrinking_stays_with_the_first_kind_of_error(tmp_path):
    """Found on the H200: an FA4 build error (MLIRError) 'shrank' into an unrelated illegal
    memory access because every error counted as the same failure."""
    from tests.kernels_for_tests import TwoKindsOfError

    for seed in (0, 1, 2):
        r = run_campaign(
            TwoKindsOfError(),
            "quick",
            database=None,
            out_dir=tmp_path / str(seed),
            seed=seed,
            shrink_budget=20,
            config=RunConfig(isolate=False),
        )
        assert r.status == "failed"
        kinds = {c.error_type for c in r.cases if c.status == "error"}
        first, final = r.first_failure.error_type, r.failure.error_type
        assert final == first, (seed, first, final, kinds)
        if first == "MLIRError":
            assert r.failure.problem.head_dim_qk == 16 and r.failure.problem.heads_q < 3
        else:
            assert 3 <= r.failure.problem.heads_q <= 4  # MHA 3/3 or the smallest GQA, 4/2


class _CountingWrongDk(RefKernel):
    """dK 5% off past 16 keys; records every Problem it is called on."""

    name = "test-counting-wrong-dk"

    def __init__(self):
        super().__init__()
        self.calls = []

    def corrupt(self, inputs, out):
        self.calls.append(inputs.problem)
        if inputs.problem.max_seqlen_k > 16:
            out.dk = out.dk * 1.05
        return out


def test_a_failing_campaign_never_runs_a_problem_twice(tmp_path):
    """Search, shrink, signature and the declaration diagnosis share the campaign's finished
    cases: no Problem reaches the kernel twice (the diagnosis used to run the simplest one again,
    which a resumed run then counted as a finished case run twice)."""
    k = _CountingWrongDk()
    r = run_campaign(
        k,
        "quick",
        max_examples=25,
        strategy=small(),
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        config=RunConfig(isolate=False),
    )
    assert r.status == "failed" and r.failure.problem.seqlen_k == 17
    assert len(k.calls) == len(set(k.calls)) >= len(r.cases)  # the diagnosis may add Problems of its own


def test_the_finish_floor_bounds_what_runs_after_a_spent_shrink_budget(tmp_path, monkeypatch):
    """shrink_budget=0 stops Hypothesis's shrink at once; the simplify walk and the signature's
    variations still get first_failure.FINISH_FLOOR_S seconds each (5: a finding is simplified and
    says what it needs even when the budget is spent). Tests of costly kernels (each crash is a
    worker restart) lower it; at 0 nothing runs after the first failure."""

    def run(out):
        r = run_campaign(
            _CountingWrongDk(),
            "quick",
            max_examples=25,
            strategy=small(),
            edge_cases=False,
            database=None,
            out_dir=tmp_path / out,
            config=RunConfig(isolate=False),
            shrink_budget=0,
        )
        assert r.status == "failed" and r.findings
        return r, next(i for i, c in enumerate(r.cases) if c.failed)

    r, first = run("floor")
    assert first_failure.FINISH_FLOOR_S == 5.0
    assert len(r.cases) > first + 1 and r.findings[0].signature.tried > 0
    monkeypatch.setattr(first_failure, "FINISH_FLOOR_S", 0.0)
    r, first = run("none")
    assert len(r.cases) == first + 1 and r.failure.problem == r.cases[first].problem
    assert r.findings[0].signature.tried == 0


def test_a_hunt_that_met_no_failure_keeps_a_small_reserve():
    """On the H100 (2026-12-07) fa3, tilelang and flex stopped drawing at 75% of a 330 s budget
    with nothing to shrink. A hunt keeps the quarter back only once it has met a failure;
    first-failure mode always keeps it (its failure is shrunk after the search). Fails on b4ab194."""
    from types import SimpleNamespace

    from difftest.search.state import SearchState

    def end(hunting, failed_at, shrink=600.0, budget=400.0):
        st = SearchState(
            settings=SimpleNamespace(shrink_budget=shrink), result=None, run_id="r", findings=None, bar=None
        )
        st.time_budget, st.failed_at, st.mode = budget, failed_at, SimpleNamespace(hunting=hunting)
        return st.search_end

    assert end(True, None) == 380.0  # a twentieth back
    assert end(True, 12.0) == 300.0  # a failure to shrink and sign: the quarter
    assert end(False, None) == end(False, 12.0) == 300.0
    assert end(True, None, shrink=10.0) == 390.0 and end(True, 3.0, shrink=10.0) == 390.0  # at most a shrink budget


def test_the_time_budget_pays_for_the_prebuild_it_waited_for():
    """``--time-budget`` bounds the whole campaign, its builds included: a TileLang campaign on
    the H100 (2026-12-07) waited 140 s for its prebuild and then took its whole 440 s besides,
    past the call's limit. The wait is charged once per kernel, and a campaign keeps at least
    PREBUILD_FLOOR of its budget."""
    from difftest.run.plan import PREBUILD_FLOOR, RunOptions, RunPlan

    k = type("K", (), {"name": "k"})()
    plan = RunPlan(RunOptions(kernels=("k",), profile="gpu", time_budget=440.0))
    plan.prebuilt = {"k": {"built": 3, "waited_s": 140.0}}
    assert plan.budget_after_prebuild(k) == 300.0
    assert plan.budget_after_prebuild(k) == 440.0  # charged once: a second campaign of k waited for nothing
    plan = RunPlan(RunOptions(kernels=("k",), profile="gpu", time_budget=100.0))
    plan.prebuilt = {"k": {"built": 3, "waited_s": 500.0}}
    assert plan.budget_after_prebuild(k) == 100.0 * PREBUILD_FLOOR
    plan = RunPlan(RunOptions(kernels=("k",), profile="ci"))  # a profile's own budget is not charged:
    plan.prebuilt = {"k": {"built": 3, "waited_s": 30.0}}  # on a loaded box the README's CPU job lost
    assert plan.budget_after_prebuild(k) is None  # tilelang-det's cases to the wait (160 -> 48)
    plan = RunPlan(RunOptions(kernels=("k",), profile="ci", time_budget=50.0))
    plan.prebuilt = {"k": None}  # nothing to prepare (a kernel without prepare)
    assert plan.budget_after_prebuild(k) == 50.0
