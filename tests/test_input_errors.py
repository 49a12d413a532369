"""Every bad input gets one line on stderr naming what is wrong and what is allowed, and
exit code 2 (1 means "a kernel failed"): options of ``difftest run`` and every field
of a reproducer file ``difftest repro`` reads. All checks happen before the first case,
so none of these runs a kernel (the run arguments would keep one tiny if they did). One
error family: every ValueError difftest defines is an InputError, and only ``cli.main``
turns one into its line and exit code."""

import ast
import json
from pathlib import Path

import pytest

from difftest import Problem
from difftest.commands.cli import main

SMALL_RUN = ["run", "-q", "-p", "quick", "--max-examples", "1", "--no-edge-cases", "-k", "torch-blockwise"]
P = Problem(batch=1, seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8).validate()
VARLEN = Problem(batch=1, seqlen_q=(4,), seqlen_k=(5,), head_dim_qk=8, head_dim_v=8).validate()


def _cli(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse's own errors
        rc = e.code
    return rc, capsys.readouterr().err


def _one_line_exit_2(rc, err, expected):
    assert rc == 2, err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert expected in lines[0], lines[0]


# (id, extra `run` arguments (FILE/DIR/UNDER_FILE replaced by tmp paths), expected text in the line)
RUN_CASES = [
    ("k-not-a-number", ["--k", "dq=abc"], "'dq=abc': K='abc' is not a number: allowed a finite number > 0"),
    ("k-nan", ["--k", "dq=nan"], "K='nan': allowed a finite number > 0"),
    ("k-negative", ["--k", "dq=-1"], "K='-1': allowed a finite number > 0"),
    ("k-zero", ["--k", "dq=0"], "K='0': allowed a finite number > 0"),
    ("k-unknown-output", ["--k", "dx=3"], "allowed OUTPUT=K with OUTPUT in o, lse, dq, dk, dv, dsink"),
    ("k-no-value", ["--k", "dq"], "allowed OUTPUT=K"),
    ("timeout-zero", ["--timeout", "0"], "--timeout: '0': allowed a finite number > 0"),
    ("timeout-nan", ["--timeout", "nan"], "--timeout: 'nan': allowed a finite number > 0"),
    ("timeout-word", ["--timeout", "soon"], "'soon' is not a number: allowed a finite number > 0"),
    ("compile-timeout-zero", ["--compile-timeout", "0"], "--compile-timeout: '0': allowed a finite number > 0"),
    ("max-examples-zero", ["--max-examples", "0"], "--max-examples: '0': allowed an integer >= 1"),
    ("max-examples-float", ["--max-examples", "2.5"], "'2.5' is not a number: allowed an integer >= 1"),
    ("time-budget-negative", ["--time-budget", "-5"], "--time-budget: '-5': allowed a finite number > 0"),
    ("time-budget-inf", ["--time-budget", "inf"], "--time-budget: 'inf': allowed a finite number > 0"),
    ("shrink-budget-negative", ["--shrink-budget", "-1"], "--shrink-budget: '-1': allowed a finite number >= 0"),
    ("determinism-zero", ["--determinism", "0"], "--determinism: '0': allowed an integer >= 1"),
    ("chunk-threshold-negative", ["--chunk-threshold", "-1"], "--chunk-threshold: '-1': allowed an integer >= 0"),
    ("kernel-module-missing", ["-k", "no_module_xyz:X"], "cannot import module 'no_module_xyz'"),
    ("kernel-unknown", ["-k", "no-such-kernel"], "unknown kernel 'no-such-kernel': known kernels are"),
    ("second-reference-unknown", ["--second-reference", "nope"], "unknown kernel 'nope'"),
    ("device-unknown", ["--device", "tpu"], "--device: invalid choice: 'tpu'"),
    ("device-cuda-without-cuda", ["--device", "cuda"], "--device cuda: no CUDA device is available here"),
    ("profile-unknown", ["--profile", "huge"], "--profile/-p: invalid choice: 'huge'"),
    ("standard-unknown-output", ["--standard", "dx:atol=1"], "--standard 'dx:atol=1': allowed OUTPUT:atol="),
    ("standard-not-a-number", ["--standard", "dq:atol=abc"], "--standard 'dq:atol=abc'"),
    ("standard-negative", ["--standard", "dq:atol=-1"], "Standard.atol=-1.0: allowed a float >= 0"),
    ("standard-nan", ["--standard", "dq:rtol=nan"], "Standard.rtol=nan: allowed a float >= 0"),
    ("standard-ratio", ["--standard", "dq:ratio=2"], "Standard.required_ratio=2.0: allowed a float in [0, 1]"),
    ("standard-unknown-key", ["--standard", "dq:foo=1"], "standard item 'foo=1': allowed keys"),
    ("narrow-unknown-field", ["--narrow", "foo=1"], "--narrow 'foo=1': allowed FIELD=VALUE with FIELD in"),
    ("narrow-not-ints", ["--narrow", "head_dims_qk=abc"], "head_dims_qk takes comma-separated integers"),
    ("narrow-widens", ["--narrow", "head_dims_qk=7"], "allowed a non-empty subset of"),
    ("narrow-max-zero", ["--narrow", "max_seqlen=0"], "narrow max_seqlen=0: allowed"),
    ("db-is-a-file", ["--db", "FILE"], "--db 'FILE' is a file: allowed a directory"),
    ("out-is-a-file", ["--out", "FILE"], "--out 'FILE' is a file: allowed a directory"),
    ("out-under-a-file", ["--out", "UNDER_FILE"], "--out 'UNDER_FILE' is not a writable directory"),
    ("report-is-a-directory", ["--report", "DIR"], "--report 'DIR' is a directory: allowed a file path"),
    ("report-under-a-file", ["--report", "UNDER_FILE/r.json"], "--report 'UNDER_FILE/r.json': its folder"),
    ("markdown-is-a-directory", ["--markdown", "DIR"], "--markdown 'DIR' is a directory: allowed a file path"),
]


@pytest.mark.parametrize("extra,expected", [c[1:] for c in RUN_CASES], ids=[c[0] for c in RUN_CASES])
def test_bad_run_option_is_one_line_and_exit_2(extra, expected, tmp_path, capsys, monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("x")
    (tmp_path / "adir").mkdir()
    subs = {
        "UNDER_FILE": str(tmp_path / "afile" / "sub"),
        "FILE": str(tmp_path / "afile"),
        "DIR": str(tmp_path / "adir"),
    }

    def sub(s):
        for k, v in subs.items():
            s = s.replace(k, v)
        return s

    out = [] if "--out" in extra else ["--out", str(tmp_path / "out")]
    rc, err = _cli(SMALL_RUN + out + [sub(x) for x in extra], capsys)
    _one_line_exit_2(rc, err, sub(expected))
    assert not (tmp_path / "out" / "report.json").exists()  # refused before any case ran


def _record(**changes):
    d = {"kernel": "torch-blockwise", "problem": P.to_dict(), "config": {}}
    d.update(changes)
    return d


REPRO_CASES = [
    ("missing", None, "no such file"),
    ("empty", "", "the file is empty: allowed a JSON reproducer"),
    ("truncated", json.dumps(_record())[:40], "not valid JSON (truncated or edited?)"),
    ("not-an-object", "[1, 2]", "top level is a JSON list: allowed an object"),
    ("kernel-not-a-string", _record(kernel=5), "field 'kernel' = 5: allowed a kernel name"),
    ("problem-not-an-object", _record(problem="b1 sq4"), "field 'problem' is a str: allowed an object"),
    (
        "problem-ill-typed",
        _record(problem={**P.to_dict(), "batch": "1"}),
        "Problem.batch='1' is invalid: allowed an int in 1..65536",
    ),
    (
        "problem-unknown-field",
        _record(problem={**P.to_dict(), "heads": 2}),
        "Problem.heads=2 is invalid: allowed known fields",
    ),
    (
        "pad-tail-huge",
        _record(problem={**VARLEN.to_dict(), "pad_tail": 10**7}),
        "Problem.pad_tail=10000000 is invalid: allowed an int in 0..4096",
    ),
    (
        "problem-too-many-tokens",
        _record(problem={**VARLEN.to_dict(), "seqlen_q": [2000000], "seqlen_k": [5]}),
        "2000000 packed tokens (pad_tail 0 included): allowed at most",
    ),
    (
        "problem-too-many-scores",
        _record(problem={**P.to_dict(), "seqlen_q": 32768, "seqlen_k": 32768, "heads_q": 128, "heads_kv": 128}),
        "score elements (sum seqlen_q*seqlen_k x heads_q): allowed at most",
    ),
    ("config-not-an-object", _record(config=[1]), "field 'config' is a list: allowed an object"),
    ("config-unknown-field", _record(config={"isolated": True}), "config field 'isolated' is unknown"),
    (
        "config-timeout-zero",
        _record(config={"timeout_s": 0}),
        "config field 'timeout_s' = 0: allowed a finite number in (0, 604800]",
    ),
    (
        "config-compile-timeout-zero",
        _record(config={"compile_timeout_s": 0}),
        "config field 'compile_timeout_s' = 0: allowed a finite number in (0, 604800]",
    ),
    (
        "config-device",
        _record(config={"device": "tpu"}),
        "config field 'device' = 'tpu': allowed 'cpu', 'cuda' or null",
    ),
    (
        "config-determinism-ill-typed",
        _record(config={"determinism_runs": "2"}),
        "config field 'determinism_runs' = '2': allowed int or null",
    ),
    ("config-truth", _record(config={"truth": "float16"}), "config field 'truth' = 'float16': allowed one of"),
    (
        "config-k-nan",
        _record(config={"gates": {"k": {"dq": float("nan")}}}),
        "k for dq = nan: allowed a finite number > 0",
    ),
    ("config-k-negative", _record(config={"gates": {"k": {"dq": -1}}}), "k for dq = -1: allowed a finite number > 0"),
    ("kernel-unknown", _record(kernel="no-such-kernel"), "unknown kernel 'no-such-kernel'"),
    ("kernel-import-spec", _record(kernel="os:getcwd"), "kernel 'os:getcwd' would import a module named by the file"),
    (
        "second-reference-import-spec",
        _record(config={"second_reference": "os:getcwd"}),
        "config.second_reference 'os:getcwd' would import a module",
    ),
    ("no-kernel", _record(kernel=""), "names no kernel: pass one with --kernel"),
]


@pytest.mark.parametrize("content,expected", [c[1:] for c in REPRO_CASES], ids=[c[0] for c in REPRO_CASES])
def test_bad_reproducer_file_is_one_line_and_exit_2(content, expected, tmp_path, capsys):
    f = tmp_path / "case.json"
    if content is not None:
        f.write_text(content if isinstance(content, str) else json.dumps(content))
    rc, err = _cli(["repro", str(f)], capsys)
    _one_line_exit_2(rc, err, expected)
    assert str(f) in err  # names the file


def test_a_valid_reproducer_still_replays(tmp_path, capsys):
    f = tmp_path / "case.json"
    f.write_text(json.dumps(_record()))
    rc, err = _cli(["repro", str(f)], capsys)
    assert rc == 0, err


def test_reproducer_size_follows_the_chosen_profile(tmp_path, capsys):
    """100 heads x 1000 x 1000 = 10^8 score elements: within the CPU's default limits (the
    kernel's capability then skips it: exit 3, nothing replayed), refused under --profile quick."""
    f = tmp_path / "case.json"
    f.write_text(
        json.dumps(
            _record(problem={**P.to_dict(), "seqlen_q": 1000, "seqlen_k": 1000, "heads_q": 100, "heads_kv": 100})
        )
    )
    rc, err = _cli(["repro", str(f)], capsys)
    assert rc == 3 and "skipped, nothing replayed" in err, err
    rc, err = _cli(["repro", str(f), "--profile", "quick"], capsys)
    _one_line_exit_2(
        rc,
        err,
        "100000000 score elements (sum seqlen_q*seqlen_k x heads_q): allowed at most 16777216 under profile 'quick'",
    )


@pytest.mark.parametrize(
    "argv,expected",
    [
        (["mutants", "--only", "no-such-mutant"], "--only no-such-mutant: unknown mutants"),
        (["mutants", "--max-examples", "0"], "--max-examples: '0': allowed an integer >= 1"),
        (["calibrate", "-k", "no-such-kernel"], "unknown kernel 'no-such-kernel'"),
        (
            ["calibrate", "-k", "torch-blockwise", "--time-budget", "-1"],
            "--time-budget: '-1': allowed a finite number > 0",
        ),
        (["bench", "-k", "fa3", "--repeats", "0"], "--repeats: '0': allowed an integer >= 1"),
        (["run", "--resume", "--out", "OUT"], "--resume: no unfinished run in"),
        (["run", "--resume", "nope", "--out", "OUT"], "--resume 'nope': not a run id"),
    ],
    ids=[
        "mutants-only",
        "mutants-examples",
        "calibrate-kernel",
        "calibrate-budget",
        "bench-repeats",
        "resume-nothing",
        "resume-unknown-id",
    ],
)
def test_other_subcommands_refuse_bad_input_in_one_line(argv, expected, tmp_path, capsys):
    rc, err = _cli([x.replace("OUT", str(tmp_path / "out")) for x in argv], capsys)
    _one_line_exit_2(rc, err, expected)


# ---------------------------------------------------------------- one error family (difftest/errors.py)
ROOT = Path(__file__).resolve().parents[1]
ENGINE = sorted(p for p in (ROOT / "difftest").rglob("*.py") if p.name != "__main__.py")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_value_error_difftest_defines_is_an_input_error():
    """A refusal of input that is not an InputError escapes ``cli.main`` as a traceback, or makes
    its module print and exit by itself: every ValueError subclass defined in difftest/ is one."""
    import importlib
    import inspect

    from difftest.errors import InputError

    outside = []
    for path in ENGINE:
        name = _module_name(path)
        mod = importlib.import_module(name)
        for cls_name, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__ == name and issubclass(cls, ValueError) and not issubclass(cls, InputError):
                outside.append(f"{name}.{cls_name}")
    assert not outside, f"ValueErrors outside the InputError family: {outside}"


def _returned(expr):
    """The values a return statement can hand back (both arms of ``a if c else b``)."""
    if isinstance(expr, ast.IfExp):
        return [*_returned(expr.body), *_returned(expr.orelse)]
    if isinstance(expr, ast.BoolOp):
        return [v for e in expr.values for v in _returned(e)]
    return [expr]


def test_only_cli_main_returns_exit_code_2():
    """Modules raise an InputError; ``cli.main`` alone turns it into a line and exit code 2."""
    found = []
    for path in ENGINE:
        if path == ROOT / "difftest" / "commands" / "cli.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Return)
                and node.value is not None
                and any(
                    isinstance(v, ast.Constant) and v.value == 2 and type(v.value) is int for v in _returned(node.value)
                )
            ):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, f"`return 2` outside difftest/commands/cli.py: {found}"


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["probe", "-k", "no-such-kernel"], "difftest probe: error: unknown kernel 'no-such-kernel'"),
        (["bisect", "NOFILE", "--versions", "NOFILE"], "difftest bisect: error: "),
    ],
    ids=["probe", "bisect"],
)
def test_every_subcommand_words_its_error_line_alike(argv, expected, tmp_path, capsys):
    """``difftest SUBCOMMAND: error: WHAT`` (docs/exit-codes.md), bisect and probe included."""
    rc, err = _cli([x.replace("NOFILE", str(tmp_path / "nope.json")) for x in argv], capsys)
    _one_line_exit_2(rc, err, expected)
    assert err.startswith(expected), err
