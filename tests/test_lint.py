"""The repository passes its lint configuration (``[tool.ruff]`` in pyproject.toml):
pycodestyle, pyflakes (no unused imports or names) and import order. ruff is in the
``test`` extra, so CI (``pip install -e '.[test]'``) always has it."""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

FORMATTED = ("difftest", "kernels", "oracles", "strategies", "tests", "conftest.py")


def test_ruff_passes():
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "check", "--no-cache", "--output-format", "concise", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]


def test_the_engine_is_ruff_formatted():
    """The product's code is in ruff's format (results/bugs' scripts paste upstream as written,
    and scripts/ are one-off tools: both stay out)."""
    r = subprocess.run(
        [sys.executable, "-m", "ruff", "format", "--check", "--no-cache", *FORMATTED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout[-6000:] + r.stderr[-2000:]
