"""The modules ``[tool.mypy]`` in pyproject.toml lists pass mypy: basic settings, and every
function annotated in the public API's modules (issue #45). mypy is in the ``test`` extra, so
CI (``pip install -e '.[test]'``) always has it. A cold run (no cache: its cache goes under
the test's tmp_path, never into the checkout) takes ~10 s of CPU."""

import os
from pathlib import Path

from mypy import api

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_passes_on_the_configured_files(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)  # ``files`` in the config is relative to the checkout
    stdout, stderr, status = api.run(
        [
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            os.fspath(tmp_path / "mypy_cache"),
            "--no-error-summary",
            "--hide-error-context",
        ]
    )
    errors = [line for line in stdout.splitlines() if ": error:" in line]
    assert status == 0 and not errors, "\n".join(errors[:60]) + stderr[-2000:]
