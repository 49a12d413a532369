"""One writer, one permission policy: every file difftest writes (reports, the HTML, the
run state, reproducers) gets the mode a plain open() would give it, 0666 less the umask;
before, report.json and summary.md came out 0600 and report.html 0644 from two writers."""

import os
import stat
from pathlib import Path

import pytest

from difftest import safeio

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def umask():
    def use(mask):
        os.umask(mask)
        return mask

    old = os.umask(0o022)
    try:
        yield use
    finally:
        os.umask(old)


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077])
def test_the_writer_follows_the_umask_like_open(tmp_path, umask, mask):
    umask(mask)
    assert safeio.default_mode() == 0o666 & ~mask
    plain = tmp_path / "plain.txt"
    plain.write_text("x")
    assert _mode(safeio.atomic_write_text(tmp_path / "a.txt", "x")) == _mode(plain) == 0o666 & ~mask
    assert _mode(safeio.atomic_write_text(tmp_path / "b.txt", "x", mode=0o600)) == 0o600


def test_a_run_writes_its_reports_and_state_with_one_mode(tmp_path, umask):
    """A real (tiny) run: report.json, summary.md, report.html, run.json and the published
    copies all read 0640 under umask 027."""
    from difftest.run.plan import RunOptions, RunPlan

    umask(0o027)
    opts = RunOptions(
        kernels=("tests.kernels_for_tests:RefKernel",),
        profile="quick",
        max_examples=2,
        edge_cases=False,
        db="none",
        isolate=False,
        out=str(tmp_path / "out"),
        quiet=True,
        prebuild=False,
        jobs=1,
        argv=("run",),
    )
    assert RunPlan(opts).execute() == 0
    out = tmp_path / "out"
    (run,) = (out / "runs").iterdir()
    files = [run / n for n in ("report.json", "summary.md", "report.html", "run.json")]
    files += [out / n for n in ("report.json", "summary.md", "report.html", "latest")]
    assert {f.name: oct(_mode(f)) for f in files} == {f.name: oct(0o640) for f in files}


def _replaces(path) -> bool:
    """Whether the module's own code calls os.replace (a program it writes out as text for
    another interpreter, e.g. bisect's child script, is not its code)."""
    import ast

    return any(
        isinstance(n, ast.Call)
        and isinstance(n.func, ast.Attribute)
        and n.func.attr == "replace"
        and isinstance(n.func.value, ast.Name)
        and n.func.value.id == "os"
        for n in ast.walk(ast.parse(path.read_text()))
    )


# os.replace of a folder, not a file written: bisect moves an unpacked wheel's folder into place
FOLDER_MOVES = {"difftest/investigate/bisect.py"}


def test_no_second_atomic_writer():
    """Only safeio replaces files: a second writer would bring a second policy."""
    offenders = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "difftest").rglob("*.py")
        if p.name != "safeio.py" and str(p.relative_to(ROOT)) not in FOLDER_MOVES and _replaces(p)
    ]
    assert offenders == []
