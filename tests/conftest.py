"""Helpers shared by the tests (the root conftest.py only puts the checkout on the path).

``difftest_cli(*args, cwd, timeout=600)`` runs ``python -m difftest ARGS`` in a fresh process
the way a user's shell does, with this checkout first on the path (the editable install may
point at another one) and one torch thread, and returns the ``CompletedProcess`` (text mode,
stdout and stderr captured)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def checkout_env(**extra) -> dict:
    """os.environ with this checkout first on PYTHONPATH and OMP_NUM_THREADS=1, plus ``extra``."""
    path = os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path, **extra}


def _run_difftest(*args, cwd, timeout=600, env=None):
    return subprocess.run(
        [sys.executable, "-m", "difftest", *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=checkout_env() if env is None else env,
    )


@pytest.fixture
def difftest_cli():
    """``difftest_cli("run", "-k", "torch-blockwise", cwd=tmp_path)``: the CLI in a subprocess."""
    return _run_difftest
