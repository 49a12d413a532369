"""Nothing finished is lost: the CLI runs as a subprocess, is killed (SIGKILL) or
interrupted (SIGINT/SIGTERM) once its case log shows the state wanted, and ``--resume``
continues the run. Checked: no finished case runs again (the kernels record every call),
the failure is in the report, the failure store and a reproducer, an interrupt exits
cleanly (130/143, or 1 with a failure; no traceback), and with ``--no-isolate`` a segfault
leaves a "started" line naming the Problem and faulthandler's stack.

The kernels (tests/faulty_kernels.py) sleep per call so the kill lands mid-campaign;
every wait is bounded."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = [
    "run",
    "-p",
    "quick",
    "--max-examples",
    "25",
    "--no-edge-cases",
    "--out",
    "out",
    "--db",
    "db",
    "-q",
    "--no-isolate",
]


def _env(tmp_path, sleep="0.3", **extra):
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DIFFTEST_TEST_CALLS": str(tmp_path / "calls"),
        "DIFFTEST_TEST_SLEEP": sleep,
        "OMP_NUM_THREADS": "1",
        **extra,
    }


def _start(tmp_path, kernel, *extra, env=None):
    return subprocess.Popen(
        [sys.executable, "-m", "difftest", *RUN, "-k", f"tests.faulty_kernels:{kernel}", *extra],
        cwd=tmp_path,
        env=env or _env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _log_lines(tmp_path, event="case"):
    out = []
    for f in sorted((tmp_path / "out" / "runs").glob("*/*.cases.jsonl")):
        for line in f.read_text().splitlines():
            try:
                d = json.loads(line)
            except json.JSONDecodeError:
                continue
            if d.get("event") == event:
                out.append(d)
    return out


def _wait_for(proc, tmp_path, pred, limit_s=300):
    t0 = time.monotonic()
    while not pred(_log_lines(tmp_path)):
        if proc.poll() is not None:
            out, err = proc.communicate()
            raise AssertionError(f"the run ended (rc {proc.returncode}) before the state wanted:\n{out}\n{err}")
        assert time.monotonic() - t0 < limit_s, "the case log never reached the state wanted"
        time.sleep(0.2)


def _key(problem: dict) -> str:
    return json.dumps(problem, sort_keys=True)


def _calls(tmp_path) -> list[str]:
    f = tmp_path / "calls"
    return f.read_text().splitlines() if f.exists() else []


def _resume(tmp_path, *extra):
    return subprocess.run(
        [sys.executable, "-m", "difftest", "run", "--resume", "--allow-import", "--out", "out", *extra],
        cwd=tmp_path,
        env=_env(tmp_path, "0"),
        capture_output=True,
        text=True,
        timeout=600,
    )


def _kill(proc, sig):
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def _no_finished_case_reran(tmp_path, finished, calls_before):
    again = {c.split(" ", 1)[1] for c in _calls(tmp_path)[calls_before:]} & finished
    assert not again, f"{len(again)} finished cases ran again after --resume"


@pytest.mark.slow
def test_sigkill_during_search_then_resume(tmp_path):
    proc = _start(tmp_path, "SlowRef")
    _wait_for(proc, tmp_path, lambda cases: len(cases) >= 3)
    _kill(proc, signal.SIGKILL)
    finished = {_key(c["problem"]) for c in _log_lines(tmp_path)}
    calls_before = len(_calls(tmp_path))
    run_id = {c["run_id"] for c in _log_lines(tmp_path)}
    assert len(run_id) == 1 and None not in run_id
    assert not (tmp_path / "out" / "report.json").exists()

    r = _resume(tmp_path)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    _no_finished_case_reran(tmp_path, finished, calls_before)
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["run_id"] == run_id.pop() and report["interrupted"] is None
    (camp,) = report["campaigns"]
    assert camp["status"] == "passed" and camp["settings"]["resumed_cases"] == len(finished)
    assert finished <= {_key(c["problem"]) for c in camp["cases"]}
    assert (tmp_path / "out" / "latest").read_text().strip() == report["run_id"]


@pytest.mark.slow
def test_sigkill_while_shrinking_leaves_reproducer_and_store_then_resume(tmp_path):
    proc = _start(tmp_path, "SlowWrongDk")

    def shrinking(cases):
        first = next((i for i, c in enumerate(cases) if c["status"] == "failed"), None)
        return first is not None and len(cases) >= first + 3

    _wait_for(proc, tmp_path, shrinking)
    _kill(proc, signal.SIGKILL)
    # written at the first failure and at each shrink step: there before any resume
    (repro,) = (tmp_path / "out" / "runs").glob("*/repro/*.json")
    rec = json.loads(repro.read_text())
    assert rec["status"] == "failed" and rec["failed_gates"] == ["dk:budget"]
    store = (tmp_path / "db" / "difftest-failures" / "tests.faulty_kernels_SlowWrongDk.jsonl").read_text()
    assert _key(rec["problem"]) in {_key(json.loads(x)) for x in store.splitlines()}
    finished = {_key(c["problem"]) for c in _log_lines(tmp_path)}
    calls_before = len(_calls(tmp_path))

    r = _resume(tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    _no_finished_case_reran(tmp_path, finished, calls_before)
    (camp,) = json.loads((tmp_path / "out" / "report.json").read_text())["campaigns"]
    shrunk = camp["failure"]["problem"]
    assert camp["status"] == "failed" and shrunk["seqlen_k"] == 17 and shrunk["heads_q"] == 1
    assert json.loads((tmp_path / camp["reproducer"]["json"]).read_text())["problem"] == shrunk
    store = (tmp_path / "db" / "difftest-failures" / "tests.faulty_kernels_SlowWrongDk.jsonl").read_text()
    assert _key(shrunk) in {_key(json.loads(x)) for x in store.splitlines()}


def test_sigterm_writes_a_partial_report_and_exits_143_then_resume(tmp_path):
    proc = _start(tmp_path, "SlowRef")
    _wait_for(proc, tmp_path, lambda cases: len(cases) >= 2)
    rc, out, err = _kill(proc, signal.SIGTERM)
    assert rc == 143 and "Traceback" not in err, err
    assert "interrupted by SIGTERM" in err and "--resume" in err
    (run_dir,) = (tmp_path / "out" / "runs").glob("*")
    partial = json.loads((run_dir / "report.json").read_text())
    assert partial["interrupted"] == "SIGTERM" and partial["campaigns"][0]["status"] == "interrupted"
    assert len(partial["campaigns"][0]["cases"]) >= 2
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert not (tmp_path / "out" / "report.json").exists()  # only a finished run publishes
    r = _resume(tmp_path)
    assert r.returncode == 0 and (tmp_path / "out" / "report.json").exists(), r.stderr[-2000:]


@pytest.mark.slow
def test_sigint_after_a_failure_exits_1_with_the_failure_reported(tmp_path):
    proc = _start(tmp_path, "SlowWrongDk")
    _wait_for(proc, tmp_path, lambda cases: any(c["status"] == "failed" for c in cases))
    rc, out, err = _kill(proc, signal.SIGINT)
    assert rc == 1 and "Traceback" not in err, err
    (run_dir,) = (tmp_path / "out" / "runs").glob("*")
    (camp,) = json.loads((run_dir / "report.json").read_text())["campaigns"]
    assert camp["status"] == "failed" and camp["failure"]["failed_gates"] == ["dk:budget"]
    assert (tmp_path / camp["reproducer"]["json"]).exists() and "interrupted by SIGINT" in camp["reason"]


@pytest.mark.slow
def test_no_isolate_segfault_leaves_started_line_and_stack_then_resume_records_it(tmp_path):
    proc = _start(tmp_path, "Segfaults", "--timeout", "5")
    out, err = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGSEGV
    assert "--timeout needs isolation" in err  # the warning
    (run_dir,) = (tmp_path / "out" / "runs").glob("*")
    assert "Segmentation fault" in (run_dir / "crash.log").read_text()  # faulthandler's stack
    started = {_key(d["problem"]) for d in _log_lines(tmp_path, "started")}
    done = {_key(d["problem"]) for d in _log_lines(tmp_path)}
    (crashed,) = started - done
    assert json.loads(crashed)["seqlen_k"] > 16
    # resume: the crashed case is an error case (not run again); each further crash is one more
    r = _resume(tmp_path)
    assert "recorded as an error case" in r.stderr
    errors = [d for d in _log_lines(tmp_path) if d["status"] == "error"]
    assert _key(errors[0]["problem"]) == crashed and "Segmentation fault" in errors[0]["reason"]
    assert errors[0]["error_type"] == "ProcessCrashed"


@pytest.mark.slow
def test_sigkill_in_the_second_kernel_resumes_it_and_keeps_the_first(tmp_path):
    """A kernel whose campaign finished before the kill is taken from its record: not one
    call of it after --resume, and the report still holds both campaigns."""
    # only slow-ref sleeps (the kill must land mid-campaign there); slow-wrong-dk's campaign runs at full speed
    proc = _start(
        tmp_path,
        "SlowWrongDk",
        "-k",
        "tests.faulty_kernels:SlowRef",
        "--shrink-budget",
        "3",
        env=_env(tmp_path, DIFFTEST_TEST_SLEEPERS="slow-ref"),
    )
    _wait_for(proc, tmp_path, lambda cases: sum(c["kernel"] == "slow-ref" for c in cases) >= 2)
    _kill(proc, signal.SIGKILL)
    calls_before = len(_calls(tmp_path))
    r = _resume(tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert not [c for c in _calls(tmp_path)[calls_before:] if c.startswith("slow-wrong-dk ")]
    camps = {c["kernel"]: c for c in json.loads((tmp_path / "out" / "report.json").read_text())["campaigns"]}
    assert camps["slow-wrong-dk"]["status"] == "failed" and camps["slow-wrong-dk"]["cases"]
    assert camps["slow-wrong-dk"]["failure"]["failed_gates"] == ["dk:budget"]
    assert camps["slow-ref"]["status"] == "passed" and camps["slow-ref"]["settings"]["resumed_cases"] >= 2


@pytest.mark.slow
def test_sigkill_of_a_hunt_after_its_first_finding_keeps_it_once_and_hunts_on(tmp_path):
    """A hunt (two independent bugs: dQ with sinks, dK past 16 keys) killed once its first
    finding is kept and the second is being shrunk: ``--resume`` keeps the first finding as
    it was (its reproducer not rewritten, no second copy, the shrink not redone), runs no
    finished case again, and goes on to the second finding."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "difftest", *RUN, "--hunt", "-k", "tests.faulty_kernels:SlowTwoBugs"],
        cwd=tmp_path,
        env=_env(tmp_path, "0.1"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def repro(name):
        return list((tmp_path / "out" / "runs").glob(f"*/repro/tests_faulty_kernels_SlowTwoBugs-{name}.json"))

    second = [0]

    def second_shrinking(cases):  # the second finding's reproducer is written at its first failure
        if repro("*-f2") and not second[0]:
            second[0] = len(cases)
        return bool(second[0]) and len(cases) >= second[0] + 3

    _wait_for(proc, tmp_path, second_shrinking)
    _kill(proc, signal.SIGKILL)
    (first,) = [f for f in repro("*") if not f.name.endswith("-f2.json")]
    first_bytes, first_mtime = first.read_bytes(), first.stat().st_mtime_ns
    first_problem = json.loads(first_bytes)["problem"]
    finished = {_key(c["problem"]) for c in _log_lines(tmp_path)}
    calls_before = len(_calls(tmp_path))

    r = _resume(tmp_path)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    _no_finished_case_reran(tmp_path, finished, calls_before)
    (camp,) = json.loads((tmp_path / "out" / "report.json").read_text())["campaigns"]
    found = {f["signature"]["gates"][0]: f for f in camp["findings"]}
    assert len(camp["findings"]) == 2, [f["signature"]["describe"] for f in camp["findings"]]
    assert sorted(found) == ["dk:budget", "dq:budget"], [f["signature"] for f in camp["findings"]]
    one, two = sorted(camp["findings"], key=lambda f: f["reproducer"]["json"].endswith("-f2.json"))
    # the first finding as the killed run kept it: same shrunk Problem, same reproducer, untouched
    assert one["failure"]["problem"] == first_problem and one["reproducer"]["json"].endswith(first.name)
    assert first.read_bytes() == first_bytes and first.stat().st_mtime_ns == first_mtime
    assert one["shrink"]["calls"] > 0  # its shrink's record, not a replay's
    # the hunt went on: the second finding shrunk to its trigger, in its own reproducer
    assert two["reproducer"]["json"].endswith("-f2.json")
    shrunk = found["dk:budget"]["failure"]["problem"]
    assert shrunk["seqlen_k"] == 17 and found["dq:budget"]["failure"]["problem"]["sinks"]
    keys = [_key(c["problem"]) for c in camp["cases"]]
    assert len(keys) == len(set(keys))  # every case once
    store = (tmp_path / "db" / "difftest-failures" / "tests.faulty_kernels_SlowTwoBugs.jsonl").read_text()
    assert len(store.splitlines()) == len(set(store.splitlines()))


def test_a_signal_whose_raise_a_gc_callback_swallowed_still_stops_the_run(capfd, monkeypatch):
    """SIGTERM landing while Python runs a gc callback (Hypothesis registers one): the handler's
    raise is swallowed ("Exception ignored in gc_callback"), and the run used to go on to exit 0
    with every later signal ignored (a flaky exit-143 test). The next case boundary raises it;
    and the swallowed raise prints nothing (it printed a traceback on stderr, which the SIGINT
    test of test_lanes.py forbids: it failed whenever the signal met a collection)."""
    import gc

    from difftest.execute import interrupt

    def callback(phase, info):
        if phase == "start":
            os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside the callback

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)  # as outside pytest: print it
    with interrupt.interruptible() as state:
        gc.callbacks.append(callback)
        try:
            gc.collect()
        finally:
            gc.callbacks.remove(callback)
        assert state["signum"] == signal.SIGTERM  # delivered, and its raise swallowed
        with pytest.raises(interrupt.Interrupted) as e:
            interrupt.checkpoint()
        assert e.value.exit_code == 143
        interrupt.checkpoint()  # taken once
    err = capfd.readouterr().err
    assert "Traceback" not in err and "Exception ignored" not in err, err
