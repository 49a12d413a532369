"""The CLI as a new user meets it: ``difftest --help``/``list`` load no torch,
``list`` has a header, a run writes only under ``.difftest/``, and ``-k module:attr``
finds a module in the current directory or fails in one line."""

import json
import subprocess
import sys
import textwrap

import pytest


def _env():
    """This checkout first on the path (the editable install may point at another one)."""
    import os
    from pathlib import Path

    root = str(Path(__file__).resolve().parents[1])
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, (root, os.environ.get("PYTHONPATH")))),
    }


def test_importing_the_cli_and_building_help_and_list_parsers_imports_no_torch():
    """Every subcommand's parser built, and ``difftest list`` run: no torch, Hypothesis or numpy
    (the fronts import their heavy parts when their command runs)."""
    code = (
        "import sys, difftest, difftest.commands.cli as c; c.build_parser(['--help']); c.build_parser(); "
        "assert c.main(['list']) == 0; "
        "print(sorted(m for m in ('torch', 'hypothesis', 'numpy') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=_env())
    assert r.returncode == 0 and r.stdout.strip().splitlines()[-1] == "[]", r.stdout + r.stderr


def test_top_level_names_still_resolve_lazily():
    import difftest

    assert difftest.Capability().dtypes and difftest.KernelAdapter.__name__ == "KernelAdapter"
    assert set(difftest.__all__) <= set(dir(difftest))


def test_list_has_a_header_and_names_where_each_kernel_comes_from(tmp_path, difftest_cli):
    r = difftest_cli("list", cwd=tmp_path)
    lines = r.stdout.splitlines()
    assert r.returncode == 0 and lines[0].split()[:2] == ["KERNEL", "ADAPTER"], r.stdout
    row = next(line for line in lines if line.startswith("torch-blockwise"))
    assert "difftest.kernels.blockwise:BlockwiseAttention" in row


def test_a_run_writes_only_under_the_hidden_working_folder(tmp_path, difftest_cli):
    r = difftest_cli(
        "run", "-k", "torch-blockwise", "-p", "quick", "--max-examples", "2", "--no-edge-cases", "-q", cwd=tmp_path
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".difftest"]
    assert json.loads((tmp_path / ".difftest" / "out" / "report.json").read_text())["campaigns"]
    assert (tmp_path / ".difftest" / "out" / "summary.md").exists()


MODULE = textwrap.dedent("""
    from difftest import Capability, KernelAdapter
    from difftest.oracles.reference import reference


    class Mine(KernelAdapter):
        name = "mine"
        capability = Capability(dtypes=("float32",), head_dims_qk=(8,), max_seqlen=8, max_heads=2, max_batch=1)

        def forward(self, inputs, out=None):
            return reference(inputs, "float32"), None

        def backward(self, inputs, fwd, ctx, out=None):
            return fwd
""")


@pytest.mark.slow
def test_module_attr_spec_finds_the_current_directory_in_the_worker_too(tmp_path, difftest_cli):
    (tmp_path / "mine_mod.py").write_text(MODULE)
    r = difftest_cli(
        "run", "-k", "mine_mod:Mine", "-p", "quick", "--max-examples", "2", "--no-edge-cases", "-q", cwd=tmp_path
    )  # isolated by default: the worker process imports it as well
    assert r.returncode == 0 and "mine: passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]


def test_module_attr_import_failure_is_one_line_naming_module_and_fix(tmp_path, difftest_cli):
    r = difftest_cli("run", "-k", "no_such_mod:Mine", cwd=tmp_path)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(err) == 1, r.stderr
    assert "no_such_mod" in err[0] and "PYTHONPATH" in err[0] and "current directory" in err[0]
    (tmp_path / "mine_mod.py").write_text(MODULE)
    r = difftest_cli("run", "-k", "mine_mod:Nope", cwd=tmp_path)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "has no attribute 'Nope'" in r.stderr


def test_a_difftest_folder_in_the_current_directory_does_not_shadow_the_package(tmp_path):
    """A user's module beside a `difftest/` folder (their checkout), the package installed (not on
    PYTHONPATH; -P: no current directory on the path, as the `difftest` script runs). Finding the
    module used to append the current directory to sys.path; the spawned worker inherited it and
    took `difftest/` for an empty namespace package: `from difftest import Capability` failed in
    every case."""
    import os

    (tmp_path / "difftest").mkdir()
    (tmp_path / "mine_mod.py").write_text(MODULE)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run(
        [
            sys.executable,
            "-P",
            "-m",
            "difftest",
            "run",
            "-k",
            "mine_mod:Mine",
            "-p",
            "quick",
            "--max-examples",
            "2",
            "--no-edge-cases",
            "-q",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**env, "OMP_NUM_THREADS": "1"},
    )
    assert r.returncode == 0 and "mine: passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
