"""The campaign time split: phases are exclusive (an inner phase's time is not
charged to the outer one), the parts add up to the wall time with "search" as the rest,
framework overhead is everything but compiles and the kernel's own calls, and the
compile-reuse fraction counts cases whose configuration an earlier case already built."""

from types import SimpleNamespace

import pytest

from difftest.execute import timing
from difftest.model.capability import Capability
from difftest.model.problem import Problem
from difftest.strategies.compile import compile_reuse


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock(monkeypatch):
    c = FakeClock()
    monkeypatch.setattr(timing, "_clock", c)
    return c


def test_nested_phases_are_exclusive_and_add_up_to_the_wall_time(clock):
    with timing.collect() as t:
        with timing.phase("kernel"):
            clock.now += 2.0
            with timing.phase("compile"):  # a JIT build inside the kernel call
                clock.now += 5.0
            clock.now += 1.0
        with timing.phase("truth"):
            clock.now += 3.0
        clock.now += 4.0  # outside every phase: Hypothesis, logging
    assert t.seconds == {"kernel": 3.0, "compile": 5.0, "truth": 3.0}
    split = t.finish(wall=clock.now)
    assert split["phases_s"]["search"] == 4.0
    assert sum(split["phases_s"].values()) == pytest.approx(clock.now)
    assert split["kernel_s"] == 8.0  # compile + kernel
    assert split["overhead_s"] == 7.0 and split["overhead_share"] == pytest.approx(7.0 / 15.0, abs=1e-4)
    assert "framework overhead" in timing.render(split)


def test_worker_seconds_are_added_and_no_timer_means_no_cost(clock):
    with timing.phase("kernel"):  # no timer installed: nothing recorded anywhere
        clock.now += 1.0
    assert timing.current() is None
    t = timing.PhaseTimer()
    t.add({"kernel": 0.5, "transfer": 0.25, "not-a-phase": 9.0})
    assert t.seconds == {"kernel": 0.5, "transfer": 0.25}
    with pytest.raises(ValueError, match="phase='bogus'"):
        with timing.collect(t), timing.phase("bogus"):
            pass


def test_isolated_worker_reports_its_phases():
    from difftest.execute.isolation import Worker

    w = Worker()
    p = Problem(seqlen_q=8, seqlen_k=8, heads_q=2, heads_kv=2, head_dim_qk=8, head_dim_v=8)
    try:
        with timing.collect() as t:
            outs = w.run("torch-blockwise", p, "cpu", True, 2, 600.0)
    finally:
        w.close()
    assert len(outs) == 2 and outs[0].dq.shape == (8, 2, 8)
    for phase in ("worker_start", "inputs", "kernel", "determinism", "transfer"):
        assert t.seconds.get(phase, 0.0) > 0.0, (phase, t.seconds)


def test_compile_reuse_counts_cases_after_the_first_of_each_configuration():
    cap = Capability(compile_key=("dtype", "head_dim_qk"))
    base = Problem(seqlen_q=8, seqlen_k=8, head_dim_qk=16, head_dim_v=16)
    probs = [
        base,
        base.replace(seqlen_q=9),
        base.replace(head_dim_qk=32),
        base.replace(seqlen_k=5),
        base.replace(dtype="float16"),
    ]
    cases = [SimpleNamespace(problem=p, status="passed") for p in probs]
    cases.append(SimpleNamespace(problem=base.replace(dtype="bfloat16"), status="skipped"))
    r = compile_reuse(cases, cap)
    assert r == {"cases": 5, "reusing": 2, "configurations": 3, "fraction": 0.4}
    assert compile_reuse(cases, Capability()) is None


@pytest.mark.parametrize("isolate", [False, True])
def test_a_campaign_reports_its_time_split(isolate, tmp_path):
    from difftest.judge.runner import RunConfig
    from difftest.report.write import campaign_record
    from difftest.search.campaign import run_campaign

    res = run_campaign(
        "torch-blockwise",
        "quick",
        max_examples=3,
        edge_cases=False,
        database=None,
        config=RunConfig(isolate=isolate),
        out_dir=tmp_path,
    )
    assert res.status == "passed" and res.cases
    split = campaign_record(res)["timing"]
    phases = split["phases_s"]
    for name in ("inputs", "kernel", "truth", "yardsticks", "gates", "search"):
        assert phases[name] > 0, (name, phases)
    assert (phases["transfer"] > 0) == isolate
    assert sum(phases.values()) == pytest.approx(split["wall_s"], rel=1e-3, abs=1e-3)
    assert 0 < split["overhead_share"] < 1
    assert campaign_record(res)["compile_reuse"] is None  # torch-blockwise compiles nothing
