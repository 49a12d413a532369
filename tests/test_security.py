"""Nothing the user did not name runs, in a hostile working directory or output folder.
Each test plants one attack and checks that the planted code never ran (a marker file
it would write stays absent) and that the refusal is one line with exit code 2:

- a ``multiprocessing.py`` in the working directory (spawned kernel workers used to
  start with the cwd first on ``sys.path``);
- a planted or edited ``run.json`` under ``OUT/runs`` (``--resume`` used to import the
  ``module:attr`` its argv named, write to the paths it named, accept ``../`` ids and
  pick the run with the largest file-supplied ``started_ns``);
- a kernel error text holding triple quotes (the standalone reproducer used to paste it
  into its docstring, where it became code);
- a killed run (its kernel worker used to keep computing, orphaned)."""

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from difftest import Problem
from difftest.commands.cli import main

ROOT = Path(__file__).resolve().parents[1]
P = Problem(batch=1, seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8).validate()


@pytest.fixture(autouse=True)
def _own_key(tmp_path, monkeypatch):
    """Each test signs runs with a key of its own (and never touches the real one)."""
    monkeypatch.setenv("DIFFTEST_STATE_DIR", str(tmp_path / "state"))


def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr().err


def _one_line(rc, err, expected, code=2):
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == code and len(lines) == 1, err
    assert expected in lines[0], lines[0]


def _plant_module(where: Path, name: str) -> Path:
    marker = where / f"{name}.ran"
    (where / f"{name}.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    return marker


# ---------------------------------------------------------------- a module in the cwd
def test_planted_multiprocessing_in_cwd_never_runs_in_the_kernel_worker(tmp_path):
    """The parent is a script in another folder (as the ``difftest`` console script is): its
    own ``sys.path`` starts there, not at the cwd, so only the spawned worker could meet the
    planted module."""
    marker = _plant_module(tmp_path, "multiprocessing")
    script = tmp_path / "bin" / "launch.py"
    script.parent.mkdir()
    script.write_text(
        "from difftest.execute.isolation import Worker\n"
        "if __name__ == '__main__':\n"
        "    w = Worker(); w.launch(); w._start(); print('ready', flush=True); w.close()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}
    r = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0 and "ready" in r.stdout, r.stderr[-3000:]
    assert not marker.exists(), "the worker imported multiprocessing.py from the working directory"


def test_safe_child_path_is_set_only_inside_the_block(monkeypatch):
    from difftest.safeio import safe_child_path

    monkeypatch.delenv("PYTHONSAFEPATH", raising=False)
    with safe_child_path():
        assert os.environ["PYTHONSAFEPATH"] == "1"
        r = subprocess.run(
            [sys.executable, "-c", "import sys; print(sys.flags.safe_path)"],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.stdout.strip() == "True"
    assert "PYTHONSAFEPATH" not in os.environ


# ---------------------------------------------------------------- planted run folders
def _plant_run(out: Path, argv, started_ns=10**30, status="running", run_id=None) -> Path:
    run_id = run_id or uuid.uuid4().hex
    d = out / "runs" / run_id
    d.mkdir(parents=True)
    (d / "run.json").write_text(
        json.dumps({"run_id": run_id, "argv": argv, "status": status, "finished_kernels": {}, "started_ns": started_ns})
    )
    return d


def test_planted_run_json_is_never_resumed(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    marker = _plant_module(tmp_path, "evilmod")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    d = _plant_run(out, ["run", "-k", "evilmod:Adapter", "--markdown", str(victim)])
    rc, err = _cli(["run", "--resume", "--out", str(out)], capsys)
    _one_line(rc, err, "no unfinished run in")
    rc, err = _cli(["run", "--resume", d.name, "--out", str(out)], capsys)
    _one_line(rc, err, "is not signed by this user's difftest")
    # even a signature copied from a genuine run does not make a planted argv verify
    from difftest.run.folder import Run

    real = Run.start(out, ["run", "-k", "torch-blockwise"])
    real.unlock()
    sig = json.loads(real.meta_path.read_text())["signature"]
    meta = json.loads((d / "run.json").read_text())
    (d / "run.json").write_text(json.dumps({**meta, "signature": sig}))
    rc, err = _cli(["run", "--resume", d.name, "--out", str(out)], capsys)
    _one_line(rc, err, "is not signed by this user's difftest")
    assert not marker.exists() and "evilmod" not in sys.modules
    assert victim.read_text() == "precious\n"


@pytest.mark.parametrize(
    "run_id,expected",
    [
        ("../../elsewhere", "not a run id"),
        ("..", "not a run id"),
        ("/etc", "not a run id"),
        ("0" * 31, "not a run id"),
        ("A" * 32, "not a run id"),
        ("0" * 32 + "/x", "not a run id"),
    ],
)
def test_resume_id_must_be_a_run_id(run_id, expected, tmp_path, capsys):
    rc, err = _cli(["run", "--resume", run_id, "--out", str(tmp_path / "out")], capsys)
    _one_line(rc, err, expected)
    assert not (tmp_path / "out").exists()


def test_resume_refuses_a_symlinked_run_folder(tmp_path, capsys):
    from difftest.run.folder import Run

    elsewhere = tmp_path / "elsewhere"
    real = Run.start(elsewhere, ["run", "-k", "torch-blockwise"])  # a genuine, signed run, outside OUT/runs
    real.set_status("interrupted")
    real.unlock()
    out = tmp_path / "out"
    (out / "runs").mkdir(parents=True)
    (out / "runs" / real.id).symlink_to(real.dir)
    rc, err = _cli(["run", "--resume", real.id, "--out", str(out)], capsys)
    _one_line(rc, err, "is a symbolic link")
    rc, err = _cli(["run", "--resume", "--out", str(out)], capsys)
    _one_line(rc, err, "no unfinished run in")


def test_signed_run_naming_a_module_needs_allow_import(tmp_path, capsys, monkeypatch):
    from difftest.run.folder import Run

    monkeypatch.chdir(tmp_path)
    marker = _plant_module(tmp_path, "evilmod2")
    out = tmp_path / "out"
    run = Run.start(out, ["run", "-k", "evilmod2:Adapter", "-p", "quick"])
    run.set_status("interrupted")
    run.unlock()
    rc, err = _cli(["run", "--resume", "--out", str(out)], capsys)
    _one_line(rc, err, "--allow-import")
    assert not marker.exists() and "evilmod2" not in sys.modules


def test_two_resumes_of_one_run_cannot_both_work(tmp_path, capsys):
    from difftest.run.folder import Run

    out = tmp_path / "out"
    run = Run.start(out, ["run", "-k", "torch-blockwise"])
    run.set_status("interrupted")  # still locked: this process is "the first --resume"
    rc, err = _cli(["run", "--resume", run.id, "--out", str(out)], capsys)
    _one_line(rc, err, "is in use by another difftest process")
    run.unlock()


def test_resume_writes_outputs_of_the_current_command_line_and_skips_a_newer_planted_run(tmp_path, capsys, monkeypatch):
    """A genuine interrupted run recorded ``--markdown victim.txt``; a planted run is "newer".
    ``--resume`` (no id) continues the genuine one and writes only where this command says."""
    from difftest.run.folder import Run

    monkeypatch.chdir(tmp_path)
    marker = _plant_module(tmp_path, "evilmod3")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    out = tmp_path / "out"
    run = Run.start(
        out,
        [
            "run",
            "-q",
            "-p",
            "quick",
            "--max-examples",
            "1",
            "--no-edge-cases",
            "--no-isolate",
            "--no-prebuild",
            "-k",
            "torch-blockwise",
            "--markdown",
            str(victim),
            "--db",
            "none",
        ],
    )
    run.set_status("interrupted")
    run.unlock()
    _plant_run(out, ["run", "-k", "evilmod3:Adapter"])
    mine = tmp_path / "mine.md"
    rc, err = _cli(["run", "--resume", "--out", str(out), "--markdown", str(mine), "--db", "none"], capsys)
    assert rc == 0, err
    assert f"run {run.id} (resumed)" in err
    assert victim.read_text() == "precious\n" and mine.exists()
    assert not marker.exists()
    assert json.loads(run.meta_path.read_text())["status"] == "finished"


def test_malformed_run_json_is_one_line(tmp_path, capsys):
    from difftest.run.folder import Run

    out = tmp_path / "out"
    run = Run.start(out, ["run", "-k", "torch-blockwise"])
    run.unlock()
    for text, expected in (
        ("{", "not valid JSON"),
        ("[" * 100000 + "]" * 100000, "nested deeper"),
        ('{"argv": ["run"], "x": "\\ud800"}', "unpaired surrogate"),
        ('{"argv": 1' + "0" * 5000 + "}", "4300"),
        ("[]", "allowed the object"),
    ):
        run.meta_path.write_text(text)
        rc, err = _cli(["run", "--resume", run.id, "--out", str(out)], capsys)
        _one_line(rc, err, expected)


# ---------------------------------------------------------------- the standalone reproducer
def test_reproducer_script_never_turns_recorded_text_into_code(tmp_path):
    from difftest.execute import adapter
    from difftest.judge.runner import CaseResult, RunConfig
    from difftest.search.reproducer import write_reproducer

    marker = tmp_path / "script.ran"
    payload = f'RuntimeError: """; open({str(marker)!r}, "w").write("ran"); """'
    for reason in (payload, payload.replace('"""', "'''"), "\\\n" + payload, payload + "\n" + payload):
        case = CaseResult("torch-blockwise", P, "error", reason=reason, error_type="RuntimeError")
        paths = write_reproducer(adapter.get("torch-blockwise"), case, RunConfig(), tmp_path)
        code = "import runpy, sys; g = runpy.run_path(sys.argv[1]); print(g['KERNEL'])"  # module level, no main()
        r = subprocess.run([sys.executable, "-P", "-c", code, paths["py"]], capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "torch-blockwise", r.stderr
        assert not marker.exists(), Path(paths["py"]).read_text()


# ---------------------------------------------------------------- a killed run's worker
def test_kernel_worker_dies_with_a_sigkilled_parent(tmp_path):
    code = (
        "import sys, time\n"
        "from difftest import Problem\n"
        "from difftest.execute.isolation import Worker\n"
        "w = Worker(); w.launch(); w._start()\n"
        "p = Problem(batch=1, seqlen_q=4, seqlen_k=17, head_dim_qk=8, head_dim_v=8).validate()\n"
        "w.send('tests.faulty_kernels:Hangs', p, 'cpu', False, 1)\n"
        "print(w.proc.pid, flush=True)\n"
        "time.sleep(3600)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    parent = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        worker = int(parent.stdout.readline())
        time.sleep(1.0)  # the worker is in the kernel (sleeping an hour)
        assert _alive(worker)
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(60)
    deadline = time.monotonic() + 60  # a liveness bound, not a speed claim: the old worker lived an hour
    while _alive(worker) and time.monotonic() < deadline:
        time.sleep(0.2)
    if _alive(worker):
        os.kill(worker, signal.SIGKILL)
        pytest.fail("the kernel worker outlived its SIGKILLed parent")


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state


# ---------------------------------------------------------------- bounded resources
def test_a_huge_timeout_is_no_false_failure(tmp_path):
    """poll() overflows past ~2.1e6 s: the worker waits in slices, the correct kernel passes."""
    from difftest.execute.isolation import Worker

    w = Worker(env={"OMP_NUM_THREADS": "1"})
    try:
        out = w.run("torch-blockwise", P, "cpu", False, 1, timeout_s=1e7, compile_timeout_s=1e7)
    finally:
        w.close()
    assert len(out) == 1 and out[0].dq is not None


def test_the_time_budget_is_a_hard_stop(monkeypatch):
    """Past the budget the search draws no more Problems (it used to draw, and skip, all
    max_examples of them); how many it left undrawn is reported as unrun."""
    from difftest.judge.runner import RunConfig
    from difftest.search import campaign

    calls = []
    real = campaign.Search._property
    monkeypatch.setattr(campaign.Search, "_property", lambda self, p: (calls.append(p), real(self, p))[1])
    r = campaign.run_campaign(
        "torch-blockwise",
        "quick",
        max_examples=3000,
        time_budget=1e-3,
        edge_cases=False,
        database=None,
        config=RunConfig(isolate=False),
    )
    assert r.status == "passed" and r.unrun >= 3000 - len(r.cases) - 1
    assert len(calls) <= len(r.cases) + 1, f"{len(calls)} draws for {len(r.cases)} cases"


def test_strict_json_report_round_trip(tmp_path):
    """report.json holds no Infinity/NaN (not JSON); reading it back gives the floats."""
    import math

    from difftest.report.read import load_report, load_report_doc
    from difftest.safeio import json_text

    doc = {
        "difftest_report": 1,
        "campaigns": [
            {
                "kernel": "k",
                "status": "failed",
                "cases": [
                    {
                        "problem": P.to_dict(),
                        "status": "failed",
                        "worst_ratio": float("inf"),
                        "verdicts": [
                            {
                                "output": "dq",
                                "gate": "elementwise",
                                "passed": False,
                                "numbers": {"ratio": float("inf"), "max_abs": float("nan"), "n": 3},
                            }
                        ],
                    }
                ],
            }
        ],
    }
    f = tmp_path / "report.json"
    f.write_text(json_text(doc, indent=1))

    def refuse(name):
        raise ValueError(name)

    json.loads(f.read_text(), parse_constant=refuse)  # strict: no Infinity / NaN tokens
    back = load_report_doc(f)["campaigns"][0]["cases"][0]
    assert back["worst_ratio"] == math.inf
    assert back["verdicts"][0]["numbers"]["ratio"] == math.inf and math.isnan(back["verdicts"][0]["numbers"]["max_abs"])
    case = load_report(f).campaigns[0].cases[0]  # read as the CaseResult that wrote it
    assert case.verdicts[0].numbers["ratio"] == math.inf and math.isnan(case.verdicts[0].numbers["max_abs"])


# ---------------------------------------------------------------- malformed store and log lines
def test_a_bad_failure_store_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path, capsys):
    from difftest.search.failure_store import load_failures, save_failures, store_path

    good2 = Problem(batch=1, seqlen_q=3, seqlen_k=7, head_dim_qk=8, head_dim_v=8).validate()
    path = store_path(str(tmp_path), "torch-blockwise")
    path.parent.mkdir(parents=True)
    lines = [
        P.to_json(),
        "{",
        "[" * 10000 + "]" * 10000,
        '{"batch": 1' + "0" * 5000 + "}",
        '{"dtype": "\\ud800"}',
        "[]",
        json.dumps({**P.to_dict(), "batch": -1}),
        good2.to_json(),
    ]
    path.write_text("\n".join(lines) + "\n")
    assert load_failures(str(tmp_path), "torch-blockwise") == [P, good2]
    err = capsys.readouterr().err
    for n in range(2, 8):
        assert f"{path}:{n}: failure-store line skipped" in err, err
    assert len(err.strip().splitlines()) == 6
    # a cut last line (a kill, a full disk) does not swallow the next entry
    path.write_text(P.to_json() + "\n" + good2.to_json()[:20])
    third = Problem(batch=2, seqlen_q=3, seqlen_k=7, head_dim_qk=8, head_dim_v=8).validate()
    save_failures(str(tmp_path), "torch-blockwise", [third])
    assert load_failures(str(tmp_path), "torch-blockwise") == [P, third]


def test_case_log_cuts_an_incomplete_line_and_undoes_a_failed_write(tmp_path, monkeypatch):
    import errno

    from difftest.execute.interrupt import OutputFailed
    from difftest.judge.runner import CaseResult
    from difftest.search.case_log import CaseLog, read_case_log

    path = tmp_path / "k.cases.jsonl"
    case = CaseResult("k", P, "passed")
    log = CaseLog(path, "r1")
    log.write(case)
    log.close()
    with open(path, "ab") as f:
        f.write(b'{"run_id": "r1", "event": "case", "problem": {"ba')  # a kill mid-write
    log = CaseLog(path, "r1")  # a resumed run opens it: the cut line goes
    assert path.read_bytes().endswith(b"}\n") and len(read_case_log(path)) == 1
    real = CaseLog._write_all

    def half_then_full(self, data):
        real(self, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(CaseLog, "_write_all", half_then_full)
    with pytest.raises(OutputFailed) as e:
        log.write(case)
    assert "No space left on device" in e.value.name and e.value.exit_code == 2
    assert path.read_bytes().endswith(b"}\n") and len(read_case_log(path)) == 1  # no cut line left behind
    log.close()


def test_disk_full_stops_the_run_in_one_line_with_a_partial_report_and_resume_finishes_it(
    tmp_path, capsys, monkeypatch
):
    import errno

    from difftest.search.case_log import CaseLog

    monkeypatch.chdir(tmp_path)
    real, n = CaseLog._write_all, []

    def full_after_two(self, data):
        n.append(1)
        if len(n) > 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, data)

    monkeypatch.setattr(CaseLog, "_write_all", full_after_two)
    argv = [
        "run",
        "-q",
        "-p",
        "quick",
        "--max-examples",
        "5",
        "--no-edge-cases",
        "--no-isolate",
        "--no-prebuild",
        "-k",
        "torch-blockwise",
        "--out",
        "out",
        "--db",
        "none",
    ]
    rc, err = _cli(argv, capsys)
    lines = [ln for ln in err.splitlines() if "No space left on device" in ln]
    assert rc == 2 and len(lines) == 1 and "--resume" in lines[0] and "Traceback" not in err, err
    run_dir = next((tmp_path / "out" / "runs").iterdir())
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert (run_dir / "report.json").exists()  # the partial report
    monkeypatch.setattr(CaseLog, "_write_all", real)
    rc, err = _cli(["run", "--resume", "--out", "out", "--db", "none"], capsys)
    assert rc == 0, err
    log = (run_dir / "torch-blockwise.cases.jsonl").read_text().splitlines()
    assert all(json.loads(ln) for ln in log)  # every line whole
    assert json.loads((run_dir / "run.json").read_text())["status"] == "finished"


def test_a_planted_runs_link_is_refused_before_anything_is_written(tmp_path, capsys):
    target = tmp_path / "target"
    target.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "runs").symlink_to(target)
    rc, err = _cli(
        [
            "run",
            "-q",
            "-p",
            "quick",
            "--max-examples",
            "1",
            "--no-edge-cases",
            "--no-isolate",
            "-k",
            "torch-blockwise",
            "--out",
            str(out),
            "--db",
            "none",
        ],
        capsys,
    )
    _one_line(rc, err, "is a symbolic link")
    assert not any(target.iterdir())
