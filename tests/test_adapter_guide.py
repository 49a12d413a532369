"""docs/adapters.md stays true: its Capability table lists exactly the
dataclass's fields with their defaults; its worked example (examples/myattn) passes a
campaign and its planted bug is found and named by head; ``difftest new-adapter`` writes a
package that pip installs, registers through its entry point and passes out of the box."""

import dataclasses
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from difftest import Capability
from difftest.search.campaign import run_campaign

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "adapters.md"
EXAMPLE = ROOT / "examples" / "myattn"


def _table() -> list[tuple[str, str]]:
    text = GUIDE.read_text().split("## Capability fields", 1)[1]
    return [(m.group(1), m.group(2)) for m in re.finditer(r"^\| `(\w+)` \| `([^`]*)` \|", text, re.M)]


def test_capability_table_lists_every_field_with_its_default():
    rows = _table()
    fields = dataclasses.fields(Capability)
    assert [name for name, _ in rows] == [f.name for f in fields], "docs/adapters.md table != Capability fields"
    for (name, default), f in zip(rows, fields):
        assert default == repr(f.default), f"{name}: docs say {default}, the dataclass says {f.default!r}"


def test_readme_links_the_guide():
    assert "docs/adapters.md" in (ROOT / "README.md").read_text()


@pytest.fixture
def myattn(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLE))
    from myattn.difftest_adapter import MyAttn

    return MyAttn()


def test_worked_example_passes(myattn, tmp_path, monkeypatch):
    monkeypatch.delenv("MYATTN_BUG", raising=False)
    res = run_campaign(myattn, "quick", max_examples=10, database=None, out_dir=tmp_path)
    assert res.status == "passed" and res.cases, [c.render() for c in res.cases if c.failed][:1]
    ran = [c.problem for c in res.cases if c.status == "passed"]
    assert any(p.varlen and p.pad_tail for p in ran) and any(not p.varlen for p in ran)  # tail rows, dense


def test_worked_example_planted_bug_is_found_and_named_by_head(myattn, tmp_path, monkeypatch):
    monkeypatch.setenv("MYATTN_BUG", "gqa-head-map")
    res = run_campaign(myattn, "quick", max_examples=30, database=None, out_dir=tmp_path)
    assert res.failed and res.failure.problem.heads_q == 4 and res.failure.problem.heads_kv == 2
    o = next(v for v in res.failure.verdicts if v.output == "o" and not v.passed)
    assert o.numbers["breakdown"]["head"]["wrong"] == [1, 2] and o.numbers["breakdown"]["head"]["right"] == [0, 3]


def _venv_over_this_interpreter(venv: Path) -> str:
    """A fresh virtual environment that sees this interpreter's packages (torch, hypothesis,
    pytest, pip) and nothing of the base Python's: a ``.pth`` adds this interpreter's site
    folders after the venv's own, so what pip installs there comes first. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    ours = [p for p in sys.path if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()]
    (Path(site) / "outer_interpreter.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    return py


@pytest.mark.slow
def test_new_adapter_skeleton_installs_registers_and_passes(tmp_path):
    """The skeleton goes through pip into a fresh virtual environment (it sees the packages of
    the interpreter running this test, not those of the base Python it was made from), appears
    in `difftest list` through its entry point, and its own pytest test passes. pip builds it
    with build isolation, as the skeleton's README says, so the setuptools it builds with is the
    one its pyproject asks for, whatever this interpreter holds. This checkout's difftest comes
    first on the path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "difftest", "new-adapter", "my-attn", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "pip install -e " in r.stdout and "no-build-isolation" not in r.stdout
    pkg = tmp_path / "my-attn"
    assert {p.name for p in pkg.rglob("*.py")} == {"__init__.py", "kernel.py", "adapter.py", "test_my_attn.py"}
    again = subprocess.run(
        [sys.executable, "-m", "difftest", "new-adapter", "my-attn", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert again.returncode == 2 and "already exists" in again.stderr
    py = _venv_over_this_interpreter(tmp_path / "venv")
    r = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(pkg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    r = subprocess.run(
        [py, "-m", "difftest", "list"], capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path
    )
    assert any(line.split()[:2] == ["my-attn", "my_attn.adapter:MyAttnAdapter"] for line in r.stdout.splitlines()), (
        r.stdout
    )
    r = subprocess.run(
        [py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests", "--difftest-max-examples", "4"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=pkg,
    )
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-3000:] + r.stderr[-2000:]
    assert "my-attn [quick]: passed" in r.stdout
