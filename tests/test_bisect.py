"""difftest bisect: the search over an ordered version list, the verdict of one replay,
and the command end to end with versions made here (wheels, install folders, a git range,
and ``git bisect run``), each version a package whose kernel is right up to some
version and wrong (dQ scaled) from version N on."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from difftest.commands import cli
from difftest.investigate import bisect as B
from difftest.model.problem import Problem

G, X, U = B.GOOD, B.BAD, B.UNTESTABLE


# ---------------------------------------------------------------- the search alone
def _run_search(verdicts, fixed=False):
    calls = []

    def test(i):
        calls.append(i)
        return verdicts[i], ""

    return B.search([f"v{i}" for i in range(len(verdicts))], test, fixed=fixed), calls


@pytest.mark.parametrize("n", range(1, 10))
def test_search_names_the_boundary_of_every_monotone_list(n):
    for k in range(n):  # versions k.. are bad
        res, calls = _run_search([G] * k + [X] * (n - k))
        assert res.found and res.first_bad == k and res.last_good == (k - 1 if k else None)
        assert len(calls) == len(set(calls)), "a version was tested twice"
        assert len(calls) <= 2 + (n - 1).bit_length(), (k, calls)  # the two ends, then halving
        assert [t.index for t in res.tested] == calls


def test_search_newest_good_means_no_bad_version():
    res, calls = _run_search([G, G, G])
    assert not res.found and res.first_bad is None and res.last_good == 2 and calls == [2]
    assert "no bad version" in res.summary()


def test_search_steps_around_untestable_versions():
    res, calls = _run_search([G, U, G, X])
    assert res.found and res.first_bad == 3 and res.last_good == 2 and calls == [3, 0, 1, 2]
    res, calls = _run_search([U, G, X, U])  # both ends untestable: stepped inward
    assert res.found and (res.first_bad, res.last_good) == (2, 1) and calls == [3, 2, 0, 1]


@pytest.mark.parametrize("n", range(1, 8))
def test_fixed_search_names_the_fix_of_every_monotone_list(n):
    """--fixed: bad ... bad, good ... good; the search names the first good and the last bad,
    and its record keeps the real verdicts."""
    for k in range(n):  # versions k.. are good (fixed in k)
        verdicts = [X] * k + [G] * (n - k)
        res, calls = _run_search(verdicts, fixed=True)
        if k == 0:  # the oldest already passes: no bad version, no fix to name
            assert not res.found and res.last_good is None
            assert "no bad version: the oldest testable one, v0, already passes" in res.summary()
            continue
        assert res.found and res.first_bad == k and res.last_good == k - 1, (k, res)
        assert f"fixed in: v{k}" in res.summary() and f"last bad: v{k - 1}" in res.summary()
        assert {t.index: t.verdict for t in res.tested} == {i: verdicts[i] for i in calls}
        assert res.to_dict()["fixed_in"] == f"v{k}" and res.to_dict()["last_bad"] == f"v{k - 1}"


def test_fixed_search_says_not_fixed_and_steps_around_versions_without_the_feature():
    res, calls = _run_search([X, X, X], fixed=True)
    assert not res.found and "not fixed: the newest testable version, v2, still fails" in res.summary()
    assert calls == [2]
    res, _ = _run_search([B.ABSENT, X, G, G], fixed=True)  # a version without the feature is no evidence of a fix
    assert res.found and (res.first_bad, res.last_good) == (2, 1)
    res, _ = _run_search([X, U, G], fixed=True)
    assert not res.found and res.candidates == [1, 2] and "fixed in: one of v1, v2" in res.summary()


def test_search_names_every_possible_first_bad_behind_untestable_versions():
    res, _ = _run_search([G, G, U, U, X, X])
    assert not res.found and res.first_bad == 4 and res.last_good == 1 and res.candidates == [2, 3, 4]
    assert "one of v2, v3, v4" in res.summary()
    res, _ = _run_search([U, U, U])
    assert not res.found and res.first_bad is None and res.last_good is None
    res, _ = _run_search([U, X, X])
    assert not res.found and res.candidates == [0, 1]


# ---------------------------------------------------------------- one replay's verdict
DOC_GATES = {"status": "failed", "gates": ["dq:budget"]}


def _rec(**kw):
    return {
        "phase": "done",
        "status": "passed",
        "failed_gates": [],
        "reason": "",
        "error_type": "",
        "used": ["toyattn 1"],
        "exit": 0,
        "timed_out": False,
        "last_line": "",
        **kw,
    }


def test_classify_against_the_documented_failure():
    assert B.classify(_rec(), DOC_GATES)[0] == G
    assert B.classify(_rec(status="failed", failed_gates=["dq:budget", "dk:budget"]), DOC_GATES)[0] == X
    other = _rec(status="failed", failed_gates=["dv:budget"])
    verdict, detail = B.classify(other, DOC_GATES)
    assert verdict == U and "fails differently" in detail
    assert B.classify(other, DOC_GATES, any_failure=True)[0] == X
    assert B.classify(other, None)[0] == X  # nothing documented: any failure (but one of loading: below)
    assert B.classify(_rec(status="error", reason="RuntimeError: boom"), None)[0] == X
    assert B.classify(_rec(status="error", reason="TypeError: bad arg"), DOC_GATES)[0] == U


def test_classify_errors_crashes_and_hangs():
    doc = B.documented_failure({"status": "error", "reason": "MLIRError: Operation creation failed"})
    assert doc == {"status": "error", "error": "MLIRError"}
    wrapped = B.documented_failure({"status": "error", "reason": "RuntimeError: MLIRError: Operation failed"})
    assert wrapped == doc  # a worker's wrapper names the kernel's own class inside
    assert B.classify(_rec(status="error", reason="RuntimeError: MLIRError: failed"), doc)[0] == X
    assert B.classify(_rec(status="error", reason="TypeError: got an unexpected keyword"), doc)[0] == U
    hang = B.documented_failure({"status": "error", "reason": "KernelTimeout: the backward never returns"})
    assert B.classify(_rec(phase="running", exit=-9, timed_out=True), hang)[0] == X
    crash = B.documented_failure({"status": "error", "reason": "CUDA error: an illegal memory access"})
    assert crash == {"status": "error", "error": ""}
    verdict, detail = B.classify(_rec(phase="running", exit=-11), crash)
    assert verdict == X and "signal 11" in detail


THRMMA = "AttributeError: module 'cutlass.cute.core' has no attribute 'ThrMma'"


def test_a_version_that_does_not_load_is_untestable_though_nothing_is_documented():
    """FA4 4.0.0b8 and b9 against cutlass-dsl 4.8 on the H100: bisect named b8 first bad for a
    reproducer documenting no failure, while neither beta could import. git bisect skip."""
    wrapped = _rec(status="error", reason=f"RuntimeError: {THRMMA}", error_type="AttributeError")  # a worker's
    for rec in (wrapped, _rec(status="error", reason=THRMMA, error_type="AttributeError")):
        verdict, detail = B.classify(rec, None)
        assert verdict == U, detail
        assert detail.startswith(f"the version does not load here: {THRMMA}"), detail
    for reason, error in (
        ("ImportError: cannot import name 'ThrMma' from 'cutlass.cute.core'", "ImportError"),
        ("ModuleNotFoundError: No module named 'flash_attn.cute.interface'", "ModuleNotFoundError"),
        ("SyntaxError: invalid syntax (flash_bwd.py, line 3)", "SyntaxError"),
        ("OSError: libcutlass.so: undefined symbol: _ZN7cutlass3fooEv", "OSError"),
        ("module 'cutlass.cute' has no attribute 'nvgpu'", "AttributeError"),  # the class only in error_type
    ):
        verdict, detail = B.classify(_rec(status="error", reason=reason, error_type=error), None)
        assert verdict == U and "does not load here" in detail, (reason, detail)
    # a reproducer documenting something else, and --any-failure, do not make it bad either
    assert B.classify(wrapped, DOC_GATES)[0] == U
    assert B.classify(wrapped, None, any_failure=True)[0] == U
    crash = B.documented_failure({"status": "error", "reason": "CUDA error: an illegal memory access"})
    assert B.classify(wrapped, crash)[0] == U  # a documented error of no class took any error as bad


def test_a_kernel_error_or_wrong_result_is_still_bad_when_nothing_is_documented():
    for reason, error in (
        ("RuntimeError: CUDA error: an illegal memory access was encountered", "RuntimeError"),
        ("RuntimeError: MLIRError: Operation creation failed", "MLIRError"),
        ("AttributeError: 'NoneType' object has no attribute 'shape'", "AttributeError"),  # the kernel's bug
        ("ValueError: head_dim 72 not supported", "ValueError"),
    ):
        assert B.classify(_rec(status="error", reason=reason, error_type=error), None)[0] == X, reason
    assert B.classify(_rec(status="failed", failed_gates=["dq:budget"]), None)[0] == X
    assert B.classify(_rec(phase="running", exit=-11), None)[0] == X  # a crash
    assert B.classify(_rec(phase="running", exit=-9, timed_out=True), None)[0] == X  # a hang


def test_a_documented_load_error_stays_bad():
    doc = B.documented_failure(
        {"status": "error", "reason": "ImportError: cannot import name 'ThrMma' from 'cutlass.cute.core'\nTraceback"}
    )
    assert doc == {"status": "error", "error": "ImportError", "load": ["ImportError", "cannot import name"]}
    same = _rec(status="error", reason="ImportError: cannot import name 'TiledMma' from 'cutlass'", error_type="")
    assert B.classify(same, doc)[0] == X
    verdict, detail = B.classify(
        _rec(status="error", reason="ModuleNotFoundError: No module named 'cutlass'", error_type=""), doc
    )
    assert verdict == U and "does not load here" in detail  # another class and shape
    attr = B.documented_failure({"status": "error", "reason": f"RuntimeError: {THRMMA}"})
    assert attr["load"] == ["AttributeError", "module has no attribute"]
    assert B.classify(_rec(status="error", reason=THRMMA, error_type="AttributeError"), attr)[0] == X


def test_classify_untestable_replays():
    assert B.classify(_rec(phase="none", exit=1, last_line="ModuleNotFoundError: difftest"), DOC_GATES)[0] == U
    assert B.classify(_rec(phase="refused", reason="unknown kernel 'toy'"), DOC_GATES)[0] == U
    assert B.classify(_rec(status="skipped", reason="unavailable: no CUDA"), DOC_GATES)[0] == U
    verdict, detail = B.classify(_rec(status="failed", failed_gates=["dq:budget"], used=[]), DOC_GATES)
    assert verdict == U and "nothing was imported" in detail


def test_a_version_without_the_feature_bounds_the_search_as_a_good_one():
    """A release whose adapter declares no such feature (fla-core 0.4.2 has no sinks) refuses the
    Problem as outside its capability: the bug cannot be older than its feature, so the first
    release that has it and fails is the first bad, not "one of" it and the older ones."""
    rec = _rec(status="skipped", reason="outside capability: sinks unsupported", used=[])
    verdict, detail = B.classify(rec, DOC_GATES)
    assert verdict == B.ABSENT and "outside capability: sinks" in detail and B.RUN_EXIT[verdict] == 0
    res, _ = _run_search([B.ABSENT, X, X, X])
    assert res.found and (res.first_bad, res.last_good) == (1, 0)
    summary = res.summary()
    assert "first bad: v1" in summary and "v0 (without: the first bad is the first with the feature)" in summary
    res, _ = _run_search([B.ABSENT, U, X])  # an untestable one between still hides the boundary
    assert not res.found and res.candidates == [1, 2]


def test_fla_declares_sinks_only_where_its_parallel_attn_takes_them(tmp_path, monkeypatch):
    from difftest.kernels.fla_attn import takes_sinks

    for version, signature, has in (
        ("0.4.2", "q, k, v, g=None, scale=None, cu_seqlens=None", False),
        ("0.6.0", "q, k, v, g=None, scale=None, window_size=None,\n    cu_seqlens=None, sink_bias=None", True),
    ):
        pkg = tmp_path / version / "fla"
        (pkg / "ops" / "attn").mkdir(parents=True)
        (pkg / "__init__.py").write_text("raise ImportError('read, never imported')\n")
        (pkg / "ops" / "attn" / "parallel.py").write_text(
            f"def parallel_attn(\n    {signature},\n) -> tuple:\n    pass\n"
        )
        monkeypatch.syspath_prepend(str(tmp_path / version))
        assert takes_sinks() is has, version
        monkeypatch.undo()


# ---------------------------------------------------------------- versions made here
ADAPTER = """
import toyattn
from difftest.kernels.blockwise import BlockwiseAttention


class Toy(BlockwiseAttention):
    name = "toy"

    def grad_scale(self, p, which):
        toyattn.load()  # an old version's code against this environment's packages
        s = super().grad_scale(p, which)
        return s * toyattn.DQ_FACTOR if which == "dq" else s
"""


LOADS = "def load():\n    pass\n"


def _package_files(version: int, bad_from: int, load: str = LOADS, fixed_from: int | None = None) -> dict:
    """toyattn VERSION: its adapter registers kernel 'toy' through an entry point; dQ is
    wrong (x1.25) from version ``bad_from`` on (up to ``fixed_from``, where it is right again).
    ``load``: the code of ``toyattn.load()``, which the kernel calls when it runs (an old
    version's that does not load here)."""
    factor = 1.25 if bad_from <= version < (fixed_from or version + 1) else 1.0
    info = f"toyattn-{version}.dist-info"
    return {
        "toyattn/__init__.py": f"__version__ = '{version}'\nDQ_FACTOR = {factor}\n{load}",
        "toyattn/adapter.py": ADAPTER,
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: toyattn\nVersion: {version}\n",
        f"{info}/entry_points.txt": "[difftest.kernels]\ntoy = toyattn.adapter:Toy\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
        f"{info}/RECORD": "",
    }


def _write_tree(root: Path, files: dict) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def _wheel(folder: Path, version: int, bad_from: int, fixed_from: int | None = None) -> Path:
    path = folder / f"toyattn-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in _package_files(version, bad_from, fixed_from=fixed_from).items():
            z.writestr(name, text)
    return path


def _reproducer(folder: Path, kernel="toy", status="failed", gates=("dq:budget",)) -> Path:
    """``status=None``: a hand-written reproducer, a kernel and a Problem, no failure documented."""
    p = Problem(
        batch=1, seqlen_q=8, seqlen_k=8, heads_q=1, heads_kv=1, head_dim_qk=16, head_dim_v=16, dtype="float32"
    ).validate()
    path = folder / "repro.json"
    record = {"kernel": kernel, "problem": p.to_dict()}
    if status is not None:
        record.update(config={}, status=status, failed_gates=list(gates), reason="", verdicts=[])
    path.write_text(json.dumps(record))
    return path


def _main(args, capsys):
    rc = cli.main(["bisect", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.slow
def test_bisect_over_wheels_names_first_bad_and_last_good(tmp_path, capsys, monkeypatch):
    wheels = [_wheel(tmp_path, v, bad_from=2) for v in (1, 2, 3)]
    repro = _reproducer(tmp_path)
    # a buggy toyattn where bisect is started from is never imported: the child starts
    # elsewhere with -P, so only the version's folders come first
    monkeypatch.chdir(_write_tree(tmp_path / "cwd", _package_files(9, bad_from=0)))
    rc, out, err = _main([repro, "--versions", *wheels, "--json", tmp_path / "r.json"], capsys)
    assert rc == 0, out + err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["first_bad"] == "toyattn 2" and r["last_good"] == "toyattn 1" and r["found"]
    got = {t["label"]: (t["verdict"], t["detail"]) for t in r["tested"]}
    assert got["toyattn 3"][0] == X and "dq:budget" in got["toyattn 3"][1] and "used toyattn 3" in got["toyattn 3"][1]
    assert got["toyattn 1"] == (G, "passed; used toyattn 1")
    assert [t["index"] for t in r["tested"]] == [2, 0, 1]  # newest, oldest, then the one between
    assert "first bad: toyattn 2" in out and "last good: toyattn 1" in out


@pytest.mark.slow
def test_bisect_fixed_names_the_release_that_fixed_the_bug(tmp_path, capsys, monkeypatch):
    """toyattn 1 is right, 2 and 3 wrong, 4 and 5 right again: the reproducer of the bug (written
    on 2) is fixed in 4; without --fixed the newest passes and no bad version is named."""
    wheels = [_wheel(tmp_path, v, bad_from=2, fixed_from=4) for v in (2, 3, 4, 5)]
    repro = _reproducer(tmp_path)
    monkeypatch.chdir(tmp_path)
    rc, out, err = _main([repro, "--versions", *wheels, "--fixed", "--json", tmp_path / "r.json"], capsys)
    assert rc == 0, out + err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["fixed_in"] == "toyattn 4" and r["last_bad"] == "toyattn 3" and r["found"]
    assert {t["label"]: t["verdict"] for t in r["tested"]}["toyattn 5"] == G
    assert "fixed in: toyattn 4" in out and "last bad: toyattn 3" in out
    rc, out, _ = _main([repro, "--versions", *wheels], capsys)
    assert rc == 1 and "no bad version" in out
    rc, out, err = _main([repro, "--run", "--fixed"], capsys)
    assert rc == B.EXIT_ABORT and "--fixed" in out + err


@pytest.mark.slow
def test_bisect_over_folders_steps_around_an_untestable_one(tmp_path, capsys, monkeypatch):
    """site2 provides nothing, so the replay imports the toyattn found further down
    PYTHONPATH (kept after the version's folders): its verdict would not be about site2."""
    base = _write_tree(tmp_path / "base", _package_files(0, bad_from=9))
    monkeypatch.setenv("PYTHONPATH", str(base))
    dirs = [
        _write_tree(tmp_path / "site1", _package_files(1, bad_from=3)),
        tmp_path / "site2",
        _write_tree(tmp_path / "site3", _package_files(3, bad_from=3)),
    ]
    dirs[1].mkdir()
    listing = tmp_path / "versions.txt"
    listing.write_text("# oldest first\n" + "\n".join(d.name for d in dirs) + "\n")  # relative to the file
    rc, out, err = _main([_reproducer(tmp_path), "--versions-file", listing, "--json", tmp_path / "r.json"], capsys)
    r = json.loads((tmp_path / "r.json").read_text())
    assert rc == 1, out + err  # the first bad is site2 or site3: site2 cannot be tested
    assert r["last_good"] == "site1" and r["possible_first_bad"] == ["site2", "site3"] and not r["found"]
    site2 = next(t for t in r["tested"] if t["label"] == "site2")
    assert site2["verdict"] == U and "nothing was imported from the version" in site2["detail"]
    assert "first bad: one of site2, site3" in out


@pytest.mark.slow
def test_bisect_steps_around_old_versions_that_do_not_load(tmp_path, capsys):
    """The H100's FA4 b8/b9 case in small: the oldest versions cannot load against this
    environment (an ImportError, a module attribute gone), the reproducer is a hand-written
    one that documents no failure. They are untestable, not first bad."""
    loads = [
        "def load():\n    from json import ThrMma\n",  # ImportError: cannot import name
        "def load():\n    import json\n    json.ThrMma\n",  # AttributeError: module 'json' has no attribute
        LOADS,
        LOADS,
    ]
    dirs = [_write_tree(tmp_path / f"site{v}", _package_files(v, bad_from=3, load=loads[v])) for v in range(4)]
    repro = _reproducer(tmp_path, status=None)
    rc, out, err = _main([repro, "--versions", *dirs, "--json", tmp_path / "r.json"], capsys)
    r = json.loads((tmp_path / "r.json").read_text())
    assert rc == 0, out + err
    assert r["first_bad"] == str(dirs[3]) and r["last_good"] == str(dirs[2]) and r["found"], r
    got = {t["index"]: (t["verdict"], t["detail"]) for t in r["tested"]}
    assert got[0][0] == U and "does not load here: ImportError: cannot import name 'ThrMma'" in got[0][1]
    assert got[1][0] == U and "does not load here: AttributeError: module 'json' has no attribute" in got[1][1]
    assert got[3][0] == X and "dq:budget" in got[3][1]


def _git(repo, *args):
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def _toy_repo(tmp_path, n=3, bad_from=1) -> tuple[Path, list[str]]:
    """A repository whose commit i holds toyattn version i (dQ wrong from ``bad_from`` on)."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    shas = []
    for v in range(n):
        shutil.rmtree(repo / "src", ignore_errors=True)
        _write_tree(repo / "src", _package_files(v, bad_from))
        _git(repo, "add", "-A")
        _git(repo, "commit", "-qm", f"toyattn {v}")
        shas.append(_git(repo, "rev-parse", "HEAD"))
    return repo, shas


BUILD = "rm -rf _v && mkdir _v && cp -r src/. _v/"  # a stand-in for pip install --target _v .


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.slow
def test_bisect_over_a_git_range_with_a_build(tmp_path, capsys):
    repo, shas = _toy_repo(tmp_path)
    work = tmp_path / "work"
    rc, out, err = _main(
        [
            _reproducer(tmp_path),
            "--git",
            repo,
            "--range",
            f"{shas[0]}..{shas[-1]}",
            "--build",
            BUILD,
            "--path",
            "_v",
            "--work",
            work,
            "--json",
            tmp_path / "r.json",
        ],
        capsys,
    )
    assert rc == 0, out + err
    r = json.loads((tmp_path / "r.json").read_text())
    assert r["first_bad"] == f"{shas[1][:10]} toyattn 1" and r["last_good"] == f"{shas[0][:10]} toyattn 0"
    assert (work / "git").is_dir()  # --work is kept: checkouts and builds reused by the next run


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.slow
def test_as_a_git_bisect_run_script(tmp_path):
    repo, shas = _toy_repo(tmp_path)
    repro = _reproducer(tmp_path)
    _git(repo, "bisect", "start", shas[-1], shas[0])
    run = [sys.executable, "-m", "difftest", "bisect", str(repro), "--run", "--build", BUILD, "--path", "_v"]
    r = subprocess.run(["git", "-C", str(repo), "bisect", "run", *run], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{shas[1]} is the first bad commit" in r.stdout
    _git(repo, "bisect", "reset")
    # bad input stops git bisect (exit > 127) instead of marking the commit bad
    _git(repo, "bisect", "start", shas[-1], shas[0])
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    r = subprocess.run(
        ["git", "-C", str(repo), "bisect", "run", *run[:4], str(broken), *run[5:]], capture_output=True, text=True
    )
    assert r.returncode != 0 and "is the first bad commit" not in r.stdout
    assert "not valid JSON" in r.stderr + r.stdout


@pytest.mark.slow
def test_run_mode_untestable_is_125(tmp_path):
    """git bisect run skips a commit on 125 (0 and 1: test_as_a_git_bisect_run_script)."""
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "bisect", str(_reproducer(tmp_path)), "--run", "--here", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 125 and "untestable" in r.stdout, r.stdout + r.stderr


# ---------------------------------------------------------------- hostile input: one line, exit 2
def _bad_wheels(tmp_path):
    text = tmp_path / "text.whl"
    text.write_text("not a zip")
    evil = tmp_path / "evil-1-py3-none-any.whl"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("../evil.py", "x = 1")
        z.writestr("evil-1.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    nowheel = tmp_path / "bare-1-py3-none-any.whl"
    with zipfile.ZipFile(nowheel, "w") as z:
        z.writestr("bare.py", "x = 1")
    return text, evil, nowheel


def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys):
    good = _wheel(tmp_path, 1, bad_from=2)
    repro = _reproducer(tmp_path)
    text, evil, nowheel = _bad_wheels(tmp_path)
    truncated = tmp_path / "t.json"
    truncated.write_text('{"kernel": "toy", "problem": {')
    badproblem = tmp_path / "p.json"
    badproblem.write_text(json.dumps({"kernel": "toy", "problem": {"batch": 0}}))
    (tmp_path / "x").mkdir()
    importing = _reproducer(tmp_path / "x", kernel="evilmod:K")
    empty_list = tmp_path / "empty.txt"
    empty_list.write_text("# nothing\n\n")
    bad_line = tmp_path / "bad.txt"
    bad_line.write_text(f"{good}\n{tmp_path / 'missing.whl'}\n")
    cases = [
        ([repro, "--versions", tmp_path / "missing"], "does not exist"),
        ([repro, "--versions", text], "not a wheel"),
        ([repro, "--versions", evil], "outside the wheel"),
        ([repro, "--versions", nowheel], "no *.dist-info/WHEEL"),
        ([repro, "--versions", good, good], "again"),
        ([repro, "--versions", repro], "neither a .whl file nor a directory"),
        ([repro, "--versions", f"{good},"], "empty part"),
        ([repro, "--versions-file", empty_list], "lists no version"),
        ([repro, "--versions-file", bad_line], "line 2"),
        ([repro, "--versions-file", tmp_path / "nofile.txt"], "no such file"),
        ([truncated, "--versions", good], "not valid JSON"),
        ([badproblem, "--versions", good], "batch"),
        ([tmp_path / "repro.py", "--versions", good], ".json"),
        ([importing, "--versions", good], "--allow-import"),
        ([repro, "--range", "a..b", "--versions", good], "--range needs --git"),
        ([repro, "--versions", good, "--build", "make"], "--build and --path apply to"),
        ([repro, "--git", tmp_path, "--range", "a..b"], "not a git repository"),
        ([repro, "--versions", good, "--work", repro], "--work"),
        ([repro, "--versions", good, "--timeout", "nan"], "timeout"),
    ]
    for args, words in cases:
        rc, out, err = _main(args, capsys) if "--timeout" not in args else _argparse_exit(args, capsys)
        lines = err.strip().splitlines()
        assert rc == 2 and len(lines) == 1 and words in lines[0], (args, rc, out, err)
        assert "bisect: [" not in out, f"{args}: a version ran before the input was checked"


def _argparse_exit(args, capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["bisect", *map(str, args)])
    out, err = capsys.readouterr()
    return e.value.code, out, err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_bad_git_ranges(tmp_path, capsys):
    repo, shas = _toy_repo(tmp_path, n=3)
    repro = _reproducer(tmp_path)
    for rng, words in (
        (shas[0], "allowed OLD..NEW"),
        (f"{shas[0]}..nosuch", "is not a commit"),
        (f"{shas[2]}..{shas[0]}", "not an ancestor"),
        (f"--all..{shas[0]}", "not a commit name"),
        (f"{shas[1]}..{shas[1]}", "no commit between"),
    ):
        rc, out, err = _main([repro, "--git", repo, f"--range={rng}"], capsys)
        assert rc == 2 and len(err.strip().splitlines()) == 1 and words in err, (rng, err)
    rc, out, err = _main([repro, "--git", repo, "--range", f"{shas[0]}..{shas[1]}", "--path", "../up"], capsys)
    assert rc == 2 and "--path" in err


def test_run_mode_bad_input_stops_git_bisect(tmp_path, capsys):
    broken = tmp_path / "broken.json"
    broken.write_text("[]")
    rc, out, err = _main([broken, "--run", "--here", tmp_path], capsys)
    assert rc == B.EXIT_ABORT and rc > 127 and len(err.strip().splitlines()) == 1


def test_wheel_unpacks_like_an_installer(tmp_path):
    whl = tmp_path / "pkg-1-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as z:
        z.writestr("pkg-1.data/purelib/pkg/__init__.py", "X = 1\n")
        z.writestr("pkg-1.dist-info/WHEEL", "Wheel-Version: 1.0\n")
    d = B.unpack_wheel(whl, tmp_path / "work")
    assert (d / "pkg" / "__init__.py").read_text() == "X = 1\n"
    assert B.unpack_wheel(whl, tmp_path / "work") == d  # cached by content
