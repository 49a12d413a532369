"""Reproducers are data: ``difftest repro`` never executes a ``.py`` reproducer and never
imports a module a file names unless the user passes ``--allow-import``. Each test plants
code that writes a marker file when it runs, and checks that the marker never appears
(and, with --allow-import, that it does: the test can see code run)."""

import json
import sys

import pytest

from difftest import Problem
from difftest.commands.cli import main

P = Problem(batch=1, seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8).validate()


def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    return rc, capsys.readouterr()


def _plant_module(tmp_path, name):
    """A module in the current directory whose import writes a marker, and that holds a
    working adapter (so --allow-import can run it)."""
    marker = tmp_path / f"{name}.ran"
    (tmp_path / f"{name}.py").write_text(
        f"open({str(marker)!r}, 'w').write('imported')\nfrom tests.kernels_for_tests import RefKernel as K\n"
    )
    return marker


def test_py_reproducer_is_never_executed(tmp_path, capsys, monkeypatch):
    """A .py shaped like difftest's own reproducer, with code in its constants block."""
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "py.ran"
    f = tmp_path / "evil.py"
    f.write_text(
        f"import json\nopen({str(marker)!r}, 'w').write('ran')\n"
        f"KERNEL = 'torch-blockwise'\nPROBLEM = json.loads({P.to_json()!r})\nCONFIG = {{}}\n\n"
        "def main():\n    pass\n"
    )
    rc, cap = _cli(["repro", str(f)], capsys)
    assert rc == 2 and "difftest replays only the .json reproducer" in cap.err and "evil.json" in cap.err
    assert not marker.exists()


@pytest.mark.parametrize("where", ["kernel", "second_reference"])
def test_module_named_by_a_json_file_is_not_imported_without_allow_import(where, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    name = f"planted_{where}_mod"
    marker = _plant_module(tmp_path, name)
    rec = {"kernel": "torch-blockwise", "problem": P.to_dict(), "config": {}}
    if where == "kernel":
        rec["kernel"] = f"{name}:K"
    else:
        rec["config"]["second_reference"] = f"{name}:K"
    f = tmp_path / "case.json"
    f.write_text(json.dumps(rec))
    rc, cap = _cli(["repro", str(f)], capsys)
    assert rc == 2 and "--allow-import" in cap.err and len(cap.err.strip().splitlines()) == 1, cap.err
    assert not marker.exists() and name not in sys.modules
    # the user may trust the file: then (and only then) the module is imported and runs
    rc, cap = _cli(["repro", str(f), "--allow-import"], capsys)
    assert marker.exists(), cap.err
    assert rc == 0 and "[PASSED]" in cap.out, cap.out + cap.err


def test_user_chosen_kernel_spec_needs_no_flag(tmp_path, capsys, monkeypatch):
    """--kernel comes from the user, not the file: a module:attr there is the user's choice."""
    monkeypatch.chdir(tmp_path)
    marker = _plant_module(tmp_path, "planted_user_mod")
    f = tmp_path / "case.json"
    f.write_text(json.dumps({"kernel": "os:system", "problem": P.to_dict()}))
    rc, cap = _cli(["repro", str(f), "--kernel", "planted_user_mod:K"], capsys)
    assert rc == 0 and marker.exists(), cap.err


def test_written_reproducer_pair_replays_from_json_and_runs_standalone(tmp_path):
    """The campaign's .py still works for people; difftest replays the .json beside it."""
    import subprocess

    from difftest.judge.runner import RunConfig, run_case
    from difftest.search.reproducer import load, write_reproducer
    from tests.kernels_for_tests import WrongDkForLongGqa

    k = WrongDkForLongGqa()
    case = run_case(
        k, Problem(batch=1, seqlen_q=4, seqlen_k=33, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8).validate()
    )
    assert case.failed
    paths = write_reproducer(k, case, RunConfig(), tmp_path)
    spec, problem, cfg = load(paths["json"])
    assert spec == k.spec and problem == case.problem and cfg["isolate"] is False
    root = str(__import__("pathlib").Path(__file__).resolve().parents[1])
    r = subprocess.run(
        [sys.executable, paths["py"]],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": root},
        cwd=root,
    )
    assert r.returncode == 1 and "dk: budget FAILED" in r.stdout, r.stdout + r.stderr


@pytest.mark.parametrize(
    "before, says",
    [
        ("b1 sq1", "field 'before': allowed a list"),
        ([1], "field 'before': allowed a list"),
        ([P.to_dict()] * 9, "at most 8"),
        ([{"batch": 1}], "field 'before[0]' lacks"),
        ([{**P.to_dict(), "seqlen_q": 10**9}], "reproducer"),
    ],
)
def test_a_bad_before_list_is_one_line_and_exit_2(before, says, tmp_path, capsys):
    """The Problems a reproducer runs first (a failure that shows only after them) are read as
    hostile as its own: one line, exit 2, nothing run."""
    f = tmp_path / "r.json"
    f.write_text(json.dumps({"kernel": "torch-blockwise", "problem": P.to_dict(), "before": before}))
    rc, cap = _cli(["repro", str(f)], capsys)
    assert rc == 2 and says in cap.err and len(cap.err.strip().splitlines()) == 1, cap.err
