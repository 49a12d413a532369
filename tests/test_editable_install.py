"""The README's editable install behaves like a regular one for a script placed beside the clone.

A clone keeps the repository's name, difftest/, and has no ``__init__.py`` at its root. A script
in the folder holding the clone runs with that folder first on sys.path, so the import system
sees the clone root as a namespace package candidate for ``difftest``. setuptools' default
(lenient) editable mode imports through a finder appended after the path search, so that empty
namespace package won ("cannot import name 'Problem' from 'difftest' (unknown location)").
pyproject.toml makes editable installs strict (a link tree on sys.path), where the path search
finds the regular package and takes it over any namespace candidate.

The install goes through pip with build isolation, as a user's ``pip install -e`` does, so the
setuptools that builds it is the one pyproject.toml asks for, whatever this interpreter holds."""

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what setuptools reads to build the distribution (the readme is part of the metadata)
SOURCES = ("pyproject.toml", "README.md", "difftest", "kernels", "strategies", "oracles")

SCRIPT = """\
import importlib.util
from pathlib import Path

import difftest
from difftest import Problem
import difftest.kernels.blockwise, difftest.oracles, difftest.strategies

print(Path(difftest.__file__).resolve())
print(Path(difftest.kernels.__file__).resolve())
print(Problem.__module__)
for name in ("kernels", "strategies", "oracles"):  # no top-level name of the clone leaks onto the path
    spec = importlib.util.find_spec(name)
    print(name, spec.origin if spec else None)
"""


def _venv_seeing_this_interpreter(venv: Path) -> str:
    """A fresh virtual environment that finds this interpreter's packages (torch, hypothesis,
    pip) after its own, as plain path entries: their folders' ``.pth`` files (among them any
    other install of difftest) are not run. Returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=300)
    py = str(venv / "bin" / "python")
    site = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout.strip()
    ours = [
        p
        for p in dict.fromkeys([sysconfig.get_paths()["purelib"], *sys.path])
        if p.endswith(("site-packages", "dist-packages")) and Path(p).is_dir()
    ]
    (Path(site) / "outer_interpreter.pth").write_text("".join(f"{p}\n" for p in ours))
    return py


def test_a_script_beside_an_editable_clone_imports_the_package(tmp_path):
    clone = tmp_path / "difftest"
    clone.mkdir()
    for name in SOURCES:
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, clone / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
        else:
            shutil.copy2(src, clone / name)
    py = _venv_seeing_this_interpreter(tmp_path / "venv")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["OMP_NUM_THREADS"] = "1"
    r = subprocess.run(
        [py, "-m", "pip", "install", "-q", "--no-deps", "-e", str(clone)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        cwd=tmp_path,
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    (tmp_path / "use.py").write_text(SCRIPT)
    r = subprocess.run([py, "use.py"], capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    package, kernels, problem_module, *leaks = r.stdout.splitlines()
    assert package == str(clone.resolve() / "difftest" / "__init__.py")
    assert kernels == str(clone.resolve() / "kernels" / "__init__.py")
    assert problem_module == "difftest.model.problem"
    for line in leaks:
        name, origin = line.split(" ", 1)
        assert origin == "None" or not origin.startswith(str(clone.resolve())), line
