"""``difftest run --jobs N``: campaigns side by side (difftest/run/lanes.py) change nothing but
the wall time. Checked on the CLI as a subprocess: the report of ``--jobs 2`` equals the
serial one case for case (same seed), in the order the kernels were named; a signal still
gives a partial report with every campaign under way and ``--resume`` finishes it; a
campaign whose process dies leaves the other campaign's findings and its own logged cases;
bad values are one line and exit 2. No wall-clock assertion: every wait is bounded."""

import gc
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from difftest.run import heap, lanes
from tests.test_kill_resume import _log_lines, _wait_for

ROOT = Path(__file__).resolve().parents[1]
SLOW_REF, WRONG_DK = "tests.faulty_kernels:SlowRef", "tests.faulty_kernels:SlowWrongDk"
SLOW_TOO = "tests.faulty_kernels:SlowRefToo"
KS = ("slow-ref", "slow-ref-too")
# budgets that never bind here: a campaign that hits a wall-clock budget (search or shrink) runs
# fewer cases on a slower machine, serial or not; below them its cases depend on the seed alone
BASE = [
    "run",
    "-p",
    "quick",
    "--max-examples",
    "8",
    "--seed",
    "3",
    "--no-edge-cases",
    "--db",
    "db",
    "-q",
    "--out",
    "out",
    "--shrink-budget",
    "300",
]


def _env(tmp_path, sleep="0"):
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "DIFFTEST_THREADS")}
    # the kernels stop sleeping once tmp_path/wake exists (a test creates it when its signal has landed)
    return {
        **env,
        "PYTHONPATH": str(ROOT),
        "DIFFTEST_TEST_CALLS": str(tmp_path / "calls"),
        "DIFFTEST_TEST_SLEEP": sleep,
        "DIFFTEST_TEST_WAKE": str(tmp_path / "wake"),
    }


def _run(tmp_path, *args, sleep="0"):
    return subprocess.run(
        [sys.executable, "-m", "difftest", *BASE, *args],
        cwd=tmp_path,
        env=_env(tmp_path, sleep),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _start(tmp_path, *args, sleep="0.3"):
    return subprocess.Popen(
        [sys.executable, "-m", "difftest", *BASE, *args],
        cwd=tmp_path,
        env=_env(tmp_path, sleep),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _cases(campaign) -> list:
    """What a verdict is made of, without times."""
    return [
        (
            c["problem"],
            c["status"],
            c.get("input_digest"),
            c.get("error_type"),
            [(v["output"], v["gate"], v["passed"], v.get("max_abs_err"), v.get("limit")) for v in c["verdicts"]],
        )
        for c in campaign["cases"]
    ]


def _children(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def _report(tmp_path) -> dict:
    return json.loads((tmp_path / "out" / "report.json").read_text())


@pytest.mark.slow
def test_two_at_once_report_equals_the_serial_one_case_for_case(tmp_path):
    kernels = ["-k", WRONG_DK, "-k", SLOW_REF, "-k", "torch-blockwise"]
    serial, side = tmp_path / "serial", tmp_path / "side"
    serial.mkdir(), side.mkdir()
    r1 = _run(serial, *kernels, "--jobs", "1")
    r2 = _run(side, *kernels, "--jobs", "2")
    assert r1.returncode == r2.returncode == 1, r2.stdout[-3000:] + r2.stderr[-3000:]
    assert "2 campaigns at once" in r2.stderr and "campaigns at once" not in r1.stderr
    a, b = _report(serial), _report(side)
    assert [c["kernel"] for c in b["campaigns"]] == ["slow-wrong-dk", "slow-ref", "torch-blockwise"]
    for ca, cb in zip(a["campaigns"], b["campaigns"], strict=True):
        assert ca["kernel"] == cb["kernel"] and ca["status"] == cb["status"]
        assert _cases(ca) == _cases(cb) and ca["examples"] == cb["examples"] > 0
        assert ca["counts"] == cb["counts"] and ca["coverage"] == cb["coverage"]
        assert (ca["failure"] or {}).get("problem") == (cb["failure"] or {}).get("problem")
    assert b["campaigns"][0]["failure"]["failed_gates"] == ["dk:budget"]
    assert set(a) == set(b) and set(a["campaigns"][0]) == set(b["campaigns"][0])  # the same schema
    # the summary table keeps the named order too; each campaign's block is printed once
    table = r2.stdout[r2.stdout.index("output  cases") :]
    assert table.index("slow-wrong-dk") < table.index("slow-ref") < table.index("torch-blockwise")
    assert r2.stdout.count("slow-ref: passed (") == 1
    # the next run orders its lanes by these campaigns' times, read from the published run's
    # run.json (folder.latest_records), not from the 8 MB report.json: the same numbers
    side_out = side / "out"
    times = {c["kernel"]: c["elapsed_s"] - c["timing"]["phases_s"]["worker_start"] for c in b["campaigns"]}
    assert lanes.previous_times(side_out) == pytest.approx(times) and len(times) == 3
    (side_out / "report.json").unlink()
    assert lanes.previous_times(side_out) == pytest.approx(times)
    # each run prints its own time split (run/split.py) before its last line: every campaign's interval
    for r in (r1, r2):
        split = r.stdout[r.stdout.index("run time split of") : r.stdout.index("\nreport: ")]
        phases = [ln.split()[0] for ln in split.splitlines()[1:] if not ln.startswith("    ")]
        assert phases == ["start", "campaigns", "reports"], split
        assert all(f"    {k}" in split for k in ("slow-wrong-dk", "slow-ref", "torch-blockwise")), split


@pytest.mark.slow
def test_sigint_with_two_at_once_gives_a_partial_report_of_both_then_resume(tmp_path):
    proc = _start(tmp_path, "-k", SLOW_REF, "-k", SLOW_TOO, "--jobs", "2", "--max-examples", "30")
    # wait until both lanes have logged cases
    _wait_for(proc, tmp_path, lambda cases: min(sum(c["kernel"] == k for c in cases) for k in KS) >= 2)
    proc.send_signal(signal.SIGINT)  # the parent only: it forwards the signal to its lanes
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 130 and "Traceback" not in err, err[-3000:]
    assert "interrupted by SIGINT" in err and "--resume" in err
    (run_dir,) = (tmp_path / "out" / "runs").glob("*")
    partial = json.loads((run_dir / "report.json").read_text())
    assert partial["interrupted"] == "SIGINT"
    assert [c["kernel"] for c in partial["campaigns"]] == list(KS)  # both partial, in the named order
    assert all(c["status"] == "interrupted" and c["cases"] for c in partial["campaigns"])
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not (tmp_path / "out" / "report.json").exists()
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "run", "--resume", "--allow-import", "--out", "out"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert all(c["status"] == "passed" for c in _report(tmp_path)["campaigns"])


@pytest.mark.slow
def test_a_dying_campaign_process_leaves_the_other_campaign_and_its_own_cases(tmp_path):
    """A lane killed from outside (as the OOM killer would) costs its campaign, not the run:
    the other campaign finishes with its failure found, the dead one is a partial result of
    its logged cases, the exit code is 1 and --resume can finish it."""
    proc = _start(tmp_path, "-k", SLOW_REF, "-k", WRONG_DK, "--jobs", "2", "--max-examples", "20", sleep="0.2")
    # both campaigns under way with a logged case (the lane killed below is either one, and its
    # partial result is the cases it logged: killed before its first, it had none to keep)
    _wait_for(
        proc,
        tmp_path,
        lambda cases: (
            sum(c["kernel"] == "slow-ref" for c in cases) >= 2 and any(c["kernel"] == "slow-wrong-dk" for c in cases)
        ),
    )
    lanes_of_run = _children(proc.pid)
    assert len(lanes_of_run) == 2  # one lane per campaign, each with a campaign under way
    # each lane forked its kernel worker from itself (torch imported already): a spawned one would
    # run multiprocessing's spawn_main, not the run's command line
    workers = [w for lane in lanes_of_run for w in _children(lane)]
    run_cmd = Path(f"/proc/{proc.pid}/cmdline").read_bytes()
    assert workers and all(Path(f"/proc/{w}/cmdline").read_bytes() == run_cmd for w in workers), [
        Path(f"/proc/{w}/cmdline").read_bytes()[:200] for w in workers
    ]
    os.kill(lanes_of_run[0], signal.SIGKILL)
    (tmp_path / "wake").touch()  # the kill has landed: the campaign left need not sleep per call
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, out[-2000:] + err[-2000:]
    assert "campaign process" in err and "died" in err and "Traceback" not in err
    (run_dir,) = (tmp_path / "out" / "runs").glob("*")
    camps = {c["kernel"]: c for c in json.loads((run_dir / "report.json").read_text())["campaigns"]}
    assert set(camps) == {"slow-ref", "slow-wrong-dk"}
    dead = [c for c in camps.values() if "died" in c["reason"]]
    assert len(dead) == 1 and dead[0]["cases"], camps
    alive = next(c for c in camps.values() if c is not dead[0])
    assert alive["status"] in ("passed", "failed") and "died" not in alive["reason"]
    if alive["kernel"] == "slow-wrong-dk":
        assert alive["failure"]["failed_gates"] == ["dk:budget"]
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "run", "--resume", "--allow-import", "--out", "out"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]  # slow-wrong-dk fails, by design
    camps = {c["kernel"]: c for c in _report(tmp_path)["campaigns"]}
    assert camps["slow-ref"]["status"] == "passed" and camps["slow-wrong-dk"]["status"] == "failed"


# slow: every crash restarts the kernel worker (a torch import) through the shrink's minimum
# seconds; the parts run in the default suite: a crash in a campaign's worker fails that campaign
# only, shrunk, with its passed cases kept (test_campaign.py's crashing kernel; test_runner.py's
# spawned restart), one lane's failure leaves the other campaign (the dying lane above), every
# lane forks its worker at its start (every test here)
@pytest.mark.slow
def test_a_segfaulting_kernel_beside_another_costs_its_cases_only(tmp_path):
    """The kernel crashes in its lane's worker (forked at the lane's start; the restart after
    the crash is spawned): its campaign fails on the crash and shrinks it, the other passes."""
    r = _run(tmp_path, "-k", "tests.faulty_kernels:Segfaults", "-k", SLOW_TOO, "--jobs", "2", "--shrink-budget", "10")
    assert r.returncode == 1 and "2 campaigns at once" in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    camps = {c["kernel"]: c for c in _report(tmp_path)["campaigns"]}
    seg = camps["faulty-segfault"]
    assert seg["status"] == "failed" and "SIGSEGV" in seg["failure"]["reason"]
    assert seg["failure"]["problem"]["seqlen_k"] > 16 and seg["counts"]["passed"] > 0
    assert camps["slow-ref-too"]["status"] == "passed" and camps["slow-ref-too"]["examples"] > 0


@pytest.mark.slow
def test_sigkill_of_the_run_takes_its_lanes_and_resume_reruns_no_finished_case(tmp_path):
    proc = _start(tmp_path, "-k", SLOW_REF, "-k", SLOW_TOO, "--jobs", "2", "--max-examples", "30")
    _wait_for(proc, tmp_path, lambda cases: min(sum(c["kernel"] == k for c in cases) for k in KS) >= 2)
    lanes_of_run = _children(proc.pid)
    proc.kill()
    proc.communicate(timeout=60)
    t0 = time.monotonic()
    while any(
        Path(f"/proc/{p}").exists() and "Z" not in Path(f"/proc/{p}/stat").read_text().split()[2] for p in lanes_of_run
    ):  # nothing keeps running into the killed run's folder
        assert time.monotonic() - t0 < 60, "a lane outlived its run"
        time.sleep(0.2)
    finished = {f"{c['kernel']} {json.dumps(c['problem'], sort_keys=True)}" for c in _log_lines(tmp_path)}
    calls = tmp_path / "calls"
    before = len(calls.read_text().splitlines())
    assert finished <= set(calls.read_text().splitlines())  # the two name a case alike
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "run", "--resume", "--allow-import", "--out", "out"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0 and "2 campaigns at once" in r.stderr, r.stdout[-2000:] + r.stderr[-2000:]
    after = calls.read_text().splitlines()[before:]
    assert after and finished and set(after) - finished  # the rest ran, named as the log names them
    again = set(after) & finished
    assert not again, f"{len(again)} finished cases ran again after --resume"
    camps = _report(tmp_path)["campaigns"]
    assert len(camps) == 2 and all(c["status"] == "passed" and c["settings"]["resumed_cases"] for c in camps)


@pytest.mark.parametrize(
    "value,why",
    [
        ("0", "allowed an integer in [1, 256]"),
        ("x", "allowed an integer in [1, 256]"),
        ("-3", "allowed an integer in [1, 256]"),
    ],
)
def test_bad_jobs_is_one_line_and_exit_2(tmp_path, value, why):
    r = _run(tmp_path, "-k", SLOW_REF, "--jobs", value)
    assert r.returncode == 2 and f"--jobs {value!r} is invalid: {why}" in r.stderr
    assert len(r.stderr.strip().splitlines()) <= 2  # argparse's usage line and the one error line


def test_jobs_needs_isolation(tmp_path):
    r = _run(tmp_path, "-k", SLOW_REF, "-k", WRONG_DK, "--jobs", "2", "--no-isolate")
    assert r.returncode == 2 and "--jobs 2 needs isolation" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "out" / "runs").exists()  # refused before the first case


def test_auto_is_one_lane_per_campaign_up_to_the_cores_on_the_cpu_only():
    assert lanes.choose(None, 4, 2, True, None) == (2, "auto: 4 campaigns, 2 cores")
    assert lanes.choose(None, 4, 32, True, None)[0] == 4
    assert lanes.choose(None, 1, 32, True, None)[0] == 1
    assert lanes.choose(None, 4, 32, True, "cuda")[0] == 1  # one GPU: one campaign at a time
    assert lanes.choose(None, 4, 32, False, None) == (1, "--no-isolate")
    assert lanes.choose(3, 2, 32, True, None) == (2, "--jobs")  # never more lanes than campaigns
    assert lanes.choose(1, 4, 32, True, None) == (1, "--jobs")


def test_threads_split_between_campaigns_at_once():
    from difftest.run.threads import choose

    assert choose(None, None, env={}, cpus=2, jobs=2) == (1, "--jobs: 2 cores / 2 campaigns at once")
    assert choose(None, None, env={}, cpus=32, jobs=4)[0] == 8
    assert choose(None, (0, 2), env={}, cpus=32, jobs=4)[0] == 4  # shards and lanes share the host
    assert choose(None, None, env={"OMP_NUM_THREADS": "3"}, cpus=32, jobs=4)[0] is None  # the user's kept


def test_longest_previous_campaign_goes_first_unknown_ones_before_all():
    names = ["a", "b", "c", "d"]
    assert lanes.schedule(names, {"a": 2.0, "b": 9.0, "c": 4.0}) == [3, 1, 2, 0]
    assert lanes.schedule(names, {}) == [0, 1, 2, 3]
    # a kernel with JIT builds goes first: its lane builds while the others run campaigns
    assert lanes.schedule(names, {"a": 2.0, "b": 9.0, "c": 4.0}, first=("c",)) == [2, 3, 1, 0]
    assert lanes.schedule(names, {}, first=("d", "b")) == [1, 3, 0, 2]


def test_previous_times_leave_out_the_worker_start(tmp_path):
    f = tmp_path / "report.json"
    f.write_text(
        json.dumps(
            {
                "campaigns": [
                    {"kernel": "a", "elapsed_s": 9.0, "timing": {"phases_s": {"worker_start": 4.0}}},
                    {"kernel": "b", "elapsed_s": 6.0},
                ]
            }
        )
    )
    # no OUT/latest (an OUT of an older difftest): its report.json
    assert lanes.previous_times(tmp_path) == {"a": 5.0, "b": 6.0}
    assert lanes.schedule(["a", "b"], lanes.previous_times(tmp_path)) == [1, 0]
    assert lanes.previous_times(tmp_path / "none") == {}
    f.write_text("{not json")
    assert lanes.previous_times(tmp_path) == {}
    for planted in ("../../etc", "0" * 32):  # not a run id; a run id without its folder: report.json's
        (tmp_path / "latest").write_text(planted + "\n")
        f.write_text(json.dumps({"campaigns": [{"kernel": "a", "elapsed_s": 2.0}]}))
        assert lanes.previous_times(tmp_path) == {"a": 2.0}


def test_fork_hazard_waits_for_an_ending_thread_and_names_a_live_one():
    """In a fresh interpreter: a pytest worker that ran other tests may hold threads of theirs.
    The orphan watchdog every lane starts (isolation.die_with_parent) is not a hazard: counting
    it made every lane wait and spawn its worker instead of forking it."""
    code = (
        "import os, threading\n"
        "from difftest.run import lanes\n"
        "stop = threading.Event()\n"
        "t = threading.Thread(target=stop.wait)\n"
        "t.start()\n"
        "live = lanes.fork_hazard(settle_s=0.2)\n"  # a live second thread: no fork
        "stop.set()\n"
        "t.join()\n"
        "from difftest.execute import isolation\n"
        "isolation.die_with_parent(os.getppid())\n"  # a lane's orphan watchdog: holds no lock
        "print(repr(live), repr(lanes.fork_hazard()), threading.active_count())\n"
    )  # joined: it may linger
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = r.stdout.strip().splitlines()[-1]
    assert out.startswith("'the run has 2 threads'") and out.endswith(" None 2"), out  # the watchdog runs


@pytest.mark.parametrize("omp", [None, "3"])
@pytest.mark.slow
def test_a_cuda_kernel_runs_one_at_a_time_with_the_serial_threads(tmp_path, omp):
    """Auto --jobs planned two lanes before loading the kernels; fa4 runs on CUDA, so the run
    goes back to one campaign at a time with exactly the threads a serial run sets (this
    process and its worker: half of 8 cores each, or the OMP_NUM_THREADS the user set)."""
    env = {**_env(tmp_path), **({"OMP_NUM_THREADS": omp} if omp else {})}
    code = (
        "import os, sys, torch; from difftest.commands import cli; from difftest.run import threads\n"
        "os.sched_getaffinity = lambda pid: set(range(8))\n"  # an 8-core host, for threads.py and isolation.py
        "rc = cli.main(sys.argv[1:])\n"
        "print('OMP', os.environ.get('OMP_NUM_THREADS'), 'TORCH', torch.get_num_threads(), 'RC', rc)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *BASE, "-k", "fa4", "-k", SLOW_REF, "--max-examples", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    want = omp or "4"
    assert f"OMP {want} TORCH {want} RC 0" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
    assert "campaigns at once" not in r.stderr


@pytest.mark.slow
def test_a_run_that_cannot_fork_runs_its_campaigns_here_one_at_a_time(tmp_path):
    code = (
        "import sys; from difftest.commands import cli; from difftest.run import lanes\n"
        "lanes.fork_hazard = lambda: 'a test hazard'\n"
        "lanes.run_lanes = lambda *a, **k: sys.exit(99)\n"  # not even one forked lane
        "sys.exit(cli.main(sys.argv[1:]))\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *BASE, "-k", SLOW_REF, "-k", SLOW_TOO, "--jobs", "2"],
        cwd=tmp_path,
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "campaigns one at a time: a test hazard" in r.stderr
    camps = _report(tmp_path)["campaigns"]
    assert [c["kernel"] for c in camps] == list(KS) and all(c["status"] == "passed" and c["cases"] for c in camps)


class _Named:
    def __init__(self, name):
        self.name = name

    def available(self):
        return None


def _priorities(k):
    """(kernel, nice when its campaign starts, nice after its prebuild started): the builder's
    prebuild calls ``yield_to_builds`` once its pool has forked (RunPlan.prebuild)."""
    before = os.nice(0)
    if k.name == "builder":
        lanes.yield_to_builds()
    return k.name, (before, os.nice(0))


@pytest.fixture
def keep_gc():
    """This test process's collector as it was (run_lanes freezes the run's objects)."""
    before = gc.get_freeze_count()
    yield
    if before == 0:
        gc.unfreeze()


def test_campaign_lanes_run_below_the_build_workers_in_a_run_with_builds(monkeypatch, keep_gc):
    monkeypatch.setattr(lanes.isolation, "prestart", lambda *a, **kw: None)  # no kernel worker here
    base = os.nice(0)
    low = min(19, base + lanes.CAMPAIGN_NICE)
    got: dict = {}
    ks = [_Named("builder"), _Named("plain")]
    out = lanes.run_lanes(ks, 2, _priorities, lambda i, r: got.update([r]), builders=["builder"])
    assert not out["lost"] and not out["interrupted"]
    # the builder's pool forks at the run's priority, then its lane goes below; the other at once
    assert got == {"builder": (base, low), "plain": (low, low)}
    got.clear()
    lanes.run_lanes(ks, 2, _priorities, lambda i, r: got.update([r]))  # no builds: nothing changes
    assert got == {"builder": (base, base), "plain": (base, base)}
    lanes.yield_to_builds()  # outside a lane: a no-op
    assert os.nice(0) == base


def _frozen(k):
    return k.name, gc.get_freeze_count()


def test_lanes_fork_with_the_runs_objects_frozen(monkeypatch, keep_gc):
    """A lane's (and its worker's) cyclic GC skips what the run had made before the fork."""
    monkeypatch.setattr(lanes.isolation, "prestart", lambda *a, **kw: None)  # no kernel worker here
    gc.unfreeze()
    got: dict = {}
    out = lanes.run_lanes([_Named("a"), _Named("b")], 2, _frozen, lambda i, r: got.update([r]))
    assert not out["lost"] and set(got) == {"a", "b"}
    here = gc.get_freeze_count()  # torch, pytest and the rest, frozen before the fork
    assert here > 1000 and all(n >= here for n in got.values())  # and so in the lanes


def test_the_runs_setup_runs_without_the_collector_and_freezes_what_it_made():
    was, before = gc.isenabled(), gc.get_freeze_count()
    try:
        with heap.setup():
            assert not gc.isenabled()
            made = [[i] for i in range(1000)]
        assert gc.isenabled() == was and gc.get_freeze_count() >= before + len(made)
        gc.disable()
        with heap.setup():
            pass
        assert not gc.isenabled()  # off before: left off
    finally:
        gc.enable() if was else gc.disable()
        if before == 0:
            gc.unfreeze()
