"""The README's main job, `difftest run`, on this machine: exits 0 and
writes a report that parses; bad arguments get clear errors."""

import json
import re

import pytest


def test_main_job_passes_and_writes_a_report(tmp_path, difftest_cli):
    """Behaviour only: its time goal lives in results/speed.md, not in an
    assertion that two shared, noisy CI cores would fail at random."""
    r = difftest_cli("run", cwd=tmp_path)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = json.loads((tmp_path / ".difftest" / "out" / "report.json").read_text())
    kernels = {c["kernel"]: c for c in report["campaigns"]}
    assert set(kernels) == {"torch-blockwise", "sdpa-cpu-math", "sdpa-cpu-flash", "tilelang-det"}
    for c in kernels.values():
        assert c["status"] == "passed" and c["examples"] > 0 and c["counts"]["failed"] == 0
        assert c["outputs"]["dq"]["cases"] > 0 and c["cases"][0]["verdicts"]
    assert "worst ratio" in r.stdout and (tmp_path / ".difftest" / "out" / "summary.md").exists()


def test_unknown_kernel_is_a_clear_error(tmp_path, difftest_cli):
    r = difftest_cli("run", "-k", "no-such-kernel", cwd=tmp_path)
    assert r.returncode == 2 and "unknown kernel 'no-such-kernel'" in r.stderr and "torch-blockwise" in r.stderr


def test_bad_standard_is_a_clear_error(tmp_path, difftest_cli):
    r = difftest_cli("run", "--standard", "dx:atol=1", cwd=tmp_path)
    assert r.returncode != 0 and "OUTPUT in" in r.stderr


def test_list_shows_builtin_kernels(tmp_path, difftest_cli):
    r = difftest_cli("list", cwd=tmp_path)
    assert r.returncode == 0
    assert "torch-blockwise" in r.stdout and "sdpa-cpu-math" in r.stdout


@pytest.mark.slow
def test_repro_of_a_mutant_replays_in_a_fresh_process(tmp_path, difftest_cli):
    from difftest import Problem

    p = Problem(batch=1, seqlen_q=1, seqlen_k=17, head_dim_qk=8, head_dim_v=8).validate()
    f = tmp_path / "m.json"
    f.write_text(json.dumps({"kernel": "mutant:dq-double-scale", "problem": p.to_dict()}))
    r = difftest_cli("repro", str(f), cwd=tmp_path)
    assert r.returncode == 1 and "dq: budget FAILED" in r.stdout, r.stdout + r.stderr
    fixed = difftest_cli("repro", str(f), "--kernel", "torch-blockwise", cwd=tmp_path)
    assert fixed.returncode == 0 and "[PASSED]" in fixed.stdout


def _words(text: str) -> str:
    return " ".join(text.split())


def test_help_names_every_subcommand_with_its_own_help_line(capsys):
    """``difftest --help`` names all the subcommands in its opening (generated from COMMANDS, none
    left out by hand) and lists each with its help line; ``difftest NAME --help`` says it too."""
    import pytest

    from difftest.commands.cli import COMMANDS, build_parser

    text = build_parser().format_help()
    opening = _words(text.split("positional arguments:", 1)[0].split("\n\n", 1)[1])
    listing = _words(text.split("positional arguments:", 1)[1])
    missing = [n for n in COMMANDS if not re.search(rf"[ :]{re.escape(n)}[,;]", opening)]
    assert not missing, f"difftest --help's opening does not name {missing}: {opening}"
    for name, help_ in COMMANDS.items():
        assert f" {name} {_words(help_)}" in listing, name
        with pytest.raises(SystemExit):
            build_parser([name]).parse_args([name, "--help"])
        assert _words(help_) in _words(capsys.readouterr().out), name


def test_the_command_line_exits_with_its_code_its_output_flushed_and_its_atexit_handlers_run(tmp_path):
    """``entry`` skips the interpreter's teardown (cli.quick_exit), not what a user sees: a full
    stdout through a file, the exit code, a one-line error, and atexit handlers (temporary folders'
    finalizers) run first."""
    import subprocess
    import sys

    from tests.conftest import checkout_env

    marker = tmp_path / "atexit-ran"
    code = (
        "import atexit, sys; "
        f"atexit.register(lambda: open({str(marker)!r}, 'w').write('yes')); "
        "sys.argv = ['difftest'] + sys.argv[1:]; "
        "from difftest.commands.cli import entry; entry()"
    )
    out = tmp_path / "out.txt"
    with open(out, "w") as f:
        r = subprocess.run([sys.executable, "-c", code, "list"], stdout=f, env=checkout_env(), timeout=300)
    assert r.returncode == 0 and marker.read_text() == "yes"
    lines = out.read_text().splitlines()
    assert lines[0].startswith("KERNEL") and any(line.startswith("torch-blockwise ") for line in lines)
    marker.unlink()
    r = subprocess.run(
        [sys.executable, "-c", code, "run", "--bogus"], capture_output=True, text=True, env=checkout_env(), timeout=300
    )
    assert r.returncode == 2 and "unrecognized arguments: --bogus" in r.stderr and marker.exists()
