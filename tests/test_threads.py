"""difftest run's CPU thread count: shards side by side share the host's cores instead of
each taking all of them; an explicit choice (flag, DIFFTEST_THREADS, OMP_NUM_THREADS) wins."""

import os
import subprocess
import sys

import pytest

from difftest.commands.cli import build_parser
from difftest.run.threads import ThreadsError, choose, parse_threads, per_process

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_shards_split_the_cores():
    assert choose(None, (0, 2), env={}, cpus=32) == (16, "--shard 0/2: 32 cores / 2 shards")
    assert choose(None, (3, 4), env={}, cpus=32)[0] == 8
    assert choose(None, (0, 64), env={}, cpus=32)[0] == 1  # never 0
    assert choose(None, None, env={}, cpus=32) == (None, "torch's default")
    assert choose(None, (0, 1), env={}, cpus=32)[0] is None


def test_explicit_choices_win_in_order():
    env = {"DIFFTEST_THREADS": "3", "OMP_NUM_THREADS": "5"}
    assert choose(6, (0, 2), env=env, cpus=32) == (6, "--threads")
    assert choose(0, (0, 2), env=env, cpus=32) == (32, "--threads")  # 0: every core
    assert choose(None, (0, 2), env=env, cpus=32) == (3, "DIFFTEST_THREADS")
    assert choose(None, (0, 2), env={"OMP_NUM_THREADS": "5"}, cpus=32) == (None, "OMP_NUM_THREADS is set")


def test_bad_values_are_named():
    with pytest.raises(ThreadsError, match=r"--threads='-2' is invalid: allowed an integer in \[0, 1024\]"):
        parse_threads("-2")
    with pytest.raises(ThreadsError, match="DIFFTEST_THREADS='many'"):
        choose(None, None, env={"DIFFTEST_THREADS": "many"}, cpus=4)
    with pytest.raises(SystemExit) as e:
        build_parser(["run"]).parse_args(["run", "--threads", "x"])
    assert e.value.code == 2


@pytest.mark.slow
def test_run_applies_the_shard_default_to_itself_and_its_worker(tmp_path):
    """A real run: the message, and OMP_NUM_THREADS exported for the isolated worker."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "DIFFTEST_THREADS")}
    code = (
        "import os, sys; from difftest.commands import cli; from difftest.run import threads\n"
        "threads.usable_cpus = lambda: 8\n"
        "rc = cli.main(sys.argv[1:])\n"
        "print('OMP', os.environ.get('OMP_NUM_THREADS'))\n"
    )
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            code,
            "run",
            "-k",
            "torch-blockwise",
            "-p",
            "quick",
            "--max-examples",
            "1",
            "--no-edge-cases",
            "--no-isolate",
            "--shard",
            "1/4",
            "-q",
            "--db",
            "none",
            "--out",
            str(tmp_path / "o"),
            "--no-prebuild",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=600,
    )
    assert "difftest: 2 CPU threads per process (--shard 1/4: 8 cores / 4 shards)" in out.stderr, out.stderr[-2000:]
    assert "OMP 2" in out.stdout


def test_an_isolated_run_halves_its_share_with_the_kernel_worker():
    assert per_process(16, isolate=True) == 8 and per_process(1, isolate=True) == 1
    assert per_process(16, isolate=False) == 16
