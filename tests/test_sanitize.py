"""``difftest sanitize`` (difftest/investigate/sanitize.py) against a fake compute-sanitizer the
test writes: it logs its arguments and prints a planted ``ERROR SUMMARY`` with an error
block (or 0 errors, or no summary, or hangs). The sanitizer path comes from --sanitizer or
PATH only; a CPU reproducer never reaches it; a run's findings get the result attached;
every bad input is one line and exit 2 with nothing written."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from difftest.commands import cli
from difftest.investigate.sanitize import NOTE, error_blocks, parse
from difftest.model.problem import Problem
from difftest.report.read import load_report_doc

P = Problem(batch=1, seqlen_q=8, seqlen_k=8, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16)
BLOCK = [
    "Invalid __global__ write of size 4 bytes",
    "at 0x1a0 in bwd_kernel(float*)",
    "by thread (3,0,0) in block (0,0,0)",
    "Address 0x7f00 is 4 bytes after the nearest allocation",
]


def fake_sanitizer(folder, errors=2, mode="summary"):
    """A ``compute-sanitizer`` that logs argv to ``calls.jsonl`` beside it and prints ``errors``
    planted errors; ``mode``: 'summary', 'none' (no summary: an unsupported tool) or 'hang'."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "compute-sanitizer"
    block = "\n".join(["========= " + BLOCK[0]] + [f"=========     {x}" for x in BLOCK[1:]] + ["========= "])
    path.write_text(
        textwrap.dedent(f"""\
        #!{sys.executable}
        import json, sys, time
        with open({str(folder / "calls.jsonl")!r}, "a") as f:
            f.write(json.dumps(sys.argv[1:]) + "\\n")
        print("========= COMPUTE-SANITIZER")
        if {mode!r} == "hang":
            time.sleep(600)
        if {mode!r} == "none":
            print("========= Error: Target device does not support this tool")
            sys.exit(1)
        for _ in range({errors}):
            print({block!r})
        print("[FAILED] torch-blockwise on b1 sq8 sk8 h1/1 d16/16 float32")
        print("========= ERROR SUMMARY: {errors} error{"s" if errors != 1 else ""}")
        sys.exit(1)
        """)
    )
    path.chmod(0o755)
    return path


def calls(folder) -> list:
    log = folder / "calls.jsonl"
    return [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []


def repro(tmp_path, device="cuda", name="r.json", kernel="torch-blockwise"):
    path = tmp_path / name
    path.write_text(json.dumps({"kernel": kernel, "problem": P.to_dict(), "config": {"device": device}}))
    return path


def run(*args):
    try:
        return cli.main(["sanitize", *map(str, args)])
    except SystemExit as e:
        return e.code


def test_planted_errors_are_counted_with_their_first_block_and_written_beside_the_reproducer(tmp_path, capsys):
    fake = fake_sanitizer(tmp_path / "bin", errors=2)
    r = repro(tmp_path)
    rc = run(r, "--sanitizer", fake)
    out = capsys.readouterr().out
    assert rc == 1
    got = json.loads((tmp_path / "r.sanitizer.json").read_text())
    assert set(got["tools"]) == {"memcheck", "racecheck", "initcheck", "synccheck"} and got["cuda"] is True
    mem = got["tools"]["memcheck"]
    assert mem["status"] == "errors" and mem["errors"] == 2 and mem["exit_code"] == 1
    assert mem["first"][:4] == BLOCK and mem["case"].startswith("[FAILED]")
    assert got["env"] == {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
    # one child per tool: the sanitizer runs `python -P -m difftest repro FILE` (the JSON, never a .py)
    argvs = calls(tmp_path / "bin")
    assert [a[:2] for a in argvs] == [["--tool", t] for t in ("memcheck", "racecheck", "initcheck", "synccheck")]
    assert argvs[0][2:] == [
        "--report-api-errors",
        "no",
        sys.executable,
        "-P",
        "-m",
        "difftest",
        "repro",
        str(r.resolve()),
    ]
    assert "2 errors" in out and NOTE in out and BLOCK[0] in out


def test_zero_errors_from_the_sanitizer_on_path_says_it_saw_nothing(tmp_path, capsys, monkeypatch):
    fake_sanitizer(tmp_path / "bin", errors=0)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    rc = run(repro(tmp_path), "--tools", "memcheck,synccheck", "--keep-pools")
    out = capsys.readouterr().out
    got = json.loads((tmp_path / "r.sanitizer.json").read_text())
    assert rc == 0 and {t: r["status"] for t, r in got["tools"].items()} == {"memcheck": "clean", "synccheck": "clean"}
    assert got["tools"]["memcheck"]["errors"] == 0 and got["env"] == {}
    assert "saw nothing" in out and "not that there is no bug" in out


def test_a_tool_without_summary_a_timeout_and_no_sanitizer_are_not_run_with_why(tmp_path, capsys, monkeypatch):
    none = fake_sanitizer(tmp_path / "none", mode="none")
    rc = run(repro(tmp_path), "--sanitizer", none, "--tools", "racecheck")
    got = json.loads((tmp_path / "r.sanitizer.json").read_text())["tools"]["racecheck"]
    assert rc == 3 and got["status"] == "not run" and "does not support this tool" in got["why"]
    hang = fake_sanitizer(tmp_path / "hang", mode="hang")
    rc = run(repro(tmp_path), "--sanitizer", hang, "--tools", "memcheck", "--timeout", "1")
    got = json.loads((tmp_path / "r.sanitizer.json").read_text())["tools"]["memcheck"]
    assert rc == 3 and got["status"] == "not run" and "timed out after 1 s" in got["why"]
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    rc = run(repro(tmp_path), "--tools", "initcheck")
    got = json.loads((tmp_path / "r.sanitizer.json").read_text())["tools"]["initcheck"]
    assert rc == 3 and "compute-sanitizer not found on PATH" in got["why"]
    capsys.readouterr()


def test_a_cpu_reproducer_is_not_a_cuda_problem_and_never_reaches_the_sanitizer(tmp_path, capsys):
    fake = fake_sanitizer(tmp_path / "bin")
    for device in ("cpu", None):  # the config's device, else the kernel's own (torch-blockwise: cpu)
        rc = run(repro(tmp_path, device=device), "--sanitizer", fake)
        got = json.loads((tmp_path / "r.sanitizer.json").read_text())
        assert rc == 0 and not got["cuda"]
        assert {r["why"] for r in got["tools"].values()} == {"not a CUDA problem"}
    assert calls(tmp_path / "bin") == []
    assert "not run: not a CUDA problem" in capsys.readouterr().out


def test_the_parser_reads_summaries_and_blocks_of_each_tool():
    race = (
        "========= COMPUTE-SANITIZER\n========= Error: Race reported between Write access at 0x50 in k()\n"
        "=========     and Read access at 0x90 in k() [128 hazards]\n=========\n"
        "========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)\n"
        "========= ERROR SUMMARY: 1 error\n"
    )
    got = parse("racecheck", race, 0, 1.0)
    assert got.status == "errors" and got.errors == 1 and got.first[0].startswith("Error: Race reported")
    assert error_blocks(race) == [
        ["Error: Race reported between Write access at 0x50 in k()", "and Read access at 0x90 in k() [128 hazards]"]
    ]
    assert parse("memcheck", "hello\n", 0, 0.1).status == "not run"


def _run_folder(tmp_path):
    """A run folder as difftest run leaves it: report.json naming a CUDA and a CPU finding's
    reproducers (paths relative to where the run started), findings.json, summary.md."""
    folder = tmp_path / "out"
    (folder / "runs" / "abc" / "repro").mkdir(parents=True)
    cuda = repro(folder / "runs" / "abc" / "repro", name="k-cuda.json")
    cpu = repro(folder / "runs" / "abc" / "repro", device="cpu", name="k-cpu.json")
    rel = os.path.relpath(cuda, tmp_path)
    case = {"kernel": "torch-blockwise", "problem": P.to_dict(), "status": "failed", "verdicts": []}
    finding = {"id": "f1", "status": "new", "reproducer": {"json": rel, "py": rel[:-5] + ".py"}, "failure": case}
    camp = [
        {"kernel": "torch-blockwise", "cases": [], "reproducer": {"json": str(cpu)}, "findings": [finding]},
        {"kernel": "other", "cases": [], "reproducer": {"json": "/etc/elsewhere/x.json"}},
    ]
    (folder / "report.json").write_text(json.dumps({"difftest_report": 1, "campaigns": camp}))
    (folder / "findings.json").write_text(
        json.dumps({"difftest_findings": 1, "campaigns": [{"kernel": "torch-blockwise", "findings": [finding]}]})
    )
    (folder / "summary.md").write_text("| kernel |\n|---|\n")
    return folder, cuda, cpu


def test_run_dir_sanitizes_every_finding_and_attaches_the_result_where_a_reader_looks(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder, cuda, cpu = _run_folder(tmp_path)
    fake = fake_sanitizer(tmp_path / "bin", errors=2)
    for _ in range(2):  # a second run replaces its summary section
        rc = run("--run-dir", folder, "--sanitizer", fake, "--tools", "memcheck")
        out = capsys.readouterr().out
        assert rc == 1, out
    doc = load_report_doc(folder / "report.json")  # still a report difftest reads
    f = doc["campaigns"][0]["findings"][0]["sanitizer"]
    assert f["tools"]["memcheck"] == {"status": "errors", "errors": 2, "why": ""}
    assert f["file"].endswith("k-cuda.sanitizer.json") and f["note"] == NOTE
    assert doc["campaigns"][0]["sanitizer"]["tools"]["memcheck"]["why"] == "not a CUDA problem"
    assert "sanitizer" not in doc["campaigns"][1]  # outside the folder: skipped, named in the output
    assert "/etc/elsewhere/x.json" in out and "not replayed" in out
    fd = json.loads((folder / "findings.json").read_text())
    assert fd["campaigns"][0]["findings"][0]["sanitizer"]["tools"]["memcheck"]["errors"] == 2
    md = (folder / "summary.md").read_text()
    assert md.count("## Sanitizers") == 1 and "2 errors" in md and "saw nothing, not that" in md
    assert len(calls(tmp_path / "bin")) == 2  # the CUDA finding, once per run; the CPU one never


def _write(path, text):
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "make, args, words",
    [
        (lambda t: t / "r.json", [], "no such file"),
        (lambda t: _write(t / "r.json", "{nope"), [], "reproducer"),
        (lambda t: _write(t / "r.json", "[1, 2]"), [], "top level is a JSON list"),
        (
            lambda t: _write(t / "r.json", '{"kernel": "torch-blockwise", "problem": {"batch": 1e400}}'),
            [],
            "reproducer",
        ),
        (lambda t: _write(t / "r.py", "import os"), [], "replays only the .json"),
        (lambda t: repro(t, kernel="os:system"), [], "--allow-import"),
        (lambda t: repro(t, kernel="no-such-kernel"), [], "no-such-kernel"),
        (lambda t: repro(t), ["--sanitizer", "/no/such/sanitizer"], "not an executable file"),
        (lambda t: repro(t), ["--tools", "memcheck,leakcheck"], "allowed a comma-separated subset"),
        (lambda t: repro(t), ["--timeout", "0"], "> 0"),
        (lambda t: repro(t), ["--timeout", "1e9"], "at most 604800"),
        (lambda t: None, [], "nothing to sanitize"),
        (lambda t: None, ["--run-dir", "/no/such/dir"], "not a folder"),
    ],
)
def test_hostile_and_bad_input_is_one_line_exit_2_and_writes_nothing(tmp_path, capsys, make, args, words):
    fake = fake_sanitizer(tmp_path / "bin")
    path = make(tmp_path)
    rc = run(
        *([path] if path is not None else []), *args, *(["--sanitizer", fake] if "--sanitizer" not in args else [])
    )
    err = capsys.readouterr().err
    assert rc == 2 and words in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_path.glob("*.sanitizer.json")) and calls(tmp_path / "bin") == []


def test_a_hostile_run_folder_report_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "report.json").write_text(json.dumps({"difftest_report": 1, "campaigns": [{"kernel": 3}]}))
    rc = run("--run-dir", tmp_path, "--sanitizer", fake_sanitizer(tmp_path / "bin"))
    err = capsys.readouterr().err
    assert rc == 2 and "kernel" in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # a fresh interpreter replays the reproducer (~8 s on the 2-core CI machine)
def test_the_command_the_sanitizer_is_given_replays_the_reproducer(tmp_path, capsys):
    fake = fake_sanitizer(tmp_path / "bin")
    run(repro(tmp_path), "--sanitizer", fake, "--tools", "memcheck")
    capsys.readouterr()
    cmd = calls(tmp_path / "bin")[0][4:]  # after --tool T --report-api-errors no
    cmd[cmd.index(str((tmp_path / "r.json").resolve()))] = str(repro(tmp_path, device="cpu", name="c.json"))
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "[PASSED] torch-blockwise" in r.stdout, r.stdout + r.stderr


def test_racecheck_counts_from_its_own_summary_and_a_long_output_keeps_its_end(tmp_path, capsys, monkeypatch):
    """On the H200, racecheck on cuDNN printed races but no ERROR SUMMARY where we read it: the
    hazards from RACECHECK SUMMARY count, and an output longer than what is read keeps its end
    (where the summaries are); host-side API return codes are not asked for (memcheck counted
    163 cuGetProcAddress 'errors' on cuDNN)."""
    from difftest.investigate import sanitize

    race = (
        "========= Error: Race reported between Write access at 0x50 in k()\n"
        "========= RACECHECK SUMMARY: 3 hazards displayed (2 errors, 1 warning)\n"
    )
    got = parse("racecheck", race, 1, 1.0)
    assert got.status == "errors" and got.errors == 2
    monkeypatch.setattr(sanitize, "MAX_OUTPUT", 2000)
    monkeypatch.setattr(sanitize, "TAIL", 300)
    san = fake_sanitizer(tmp_path / "bin", errors=40)
    r = repro(tmp_path)
    assert run(r, "--sanitizer", san, "--tools", "memcheck") == 1
    rec = json.loads((tmp_path / "r.sanitizer.json").read_text())
    assert rec["tools"]["memcheck"]["errors"] == 40  # the summary past the first 2000 bytes was read
    assert calls(tmp_path / "bin")[0][:4] == ["--tool", "memcheck", "--report-api-errors", "no"]
