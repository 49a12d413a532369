"""Hostile inputs, table-driven: every subcommand, every numeric flag beyond its bound, every
kind of file difftest reads (report, ``.xz`` report, reproducer, ``run.json``) malformed in
every way we know. Each case asserts exit code 2 (or the code the table says), exactly one
line on stderr containing the expected text, and that nothing was written: the folder the
command runs in, its inputs and its outputs are the same files with the same contents
afterwards.

The CLI runs in-process (``cli.main``), grouped by input kind so the whole table costs
about one torch import. ``python scripts/hostile_table.py`` runs the same table and writes
``results/hostile.md``.

After the table, one test per attack of issue #41 (each fails on the code before it):
``TestSymlinks`` (a link planted where difftest writes, or in a folder whose files it reads:
never followed), ``TestSharedTmp`` (no code run from, nothing kept in, a folder others can
write), ``TestPrintable`` (text from files reaches no terminal or CI log raw),
``TestNothingChecked`` (a run, fixture call or gate candidate that judged no case never
passes), ``TestInputs`` (reproducer devices and capture files, profile limits on stored and
known Problems, a full disk, ``bisect --work``) and ``TestPytestPlugin`` (its options checked
as their CLI twins)."""

import hashlib
import json
import lzma
import os
import stat
import uuid
from pathlib import Path

import pytest

from difftest.model.problem import Problem
from tests.kernels_for_tests import RefKernel, full_capability

P = Problem(batch=1, seqlen_q=4, seqlen_k=5, head_dim_qk=8, head_dim_v=8).validate()
GOOD_REPORT = {"difftest_report": 1, "campaigns": [{"kernel": "k", "status": "passed", "cases": []}]}
DEEP = "[" * 100_000 + "]" * 100_000
BIG_INT = "1" + "0" * 5000


def _camp(**c):
    return {"difftest_report": 1, "campaigns": [{"kernel": "k", "status": "passed", "cases": [], **c}]}


def _case(**c):
    return _camp(cases=[{"problem": P.to_dict(), "status": "passed", "verdicts": [], **c}])


def _verdict(**v):
    return _case(verdicts=[{"output": "dq", "gate": "budget", "passed": True, **v}])


# name -> file content (str/bytes: written as is; anything else: JSON)
REPORTS = {
    "report-empty": b"",
    "report-not-json": b"{",
    "report-truncated": json.dumps(GOOD_REPORT)[:-3],
    "report-not-utf8": b"\xff\xfe{}",
    "report-list": [],
    "report-no-version": {"campaigns": []},
    "report-version-999": {"difftest_report": 999, "campaigns": []},
    "report-version-true": {"difftest_report": True, "campaigns": []},
    "report-version-str": {"difftest_report": "1", "campaigns": []},
    "report-campaigns-missing": {"difftest_report": 1},
    "report-campaigns-dict": {"difftest_report": 1, "campaigns": {}},
    "report-campaign-int": {"difftest_report": 1, "campaigns": [1]},
    "report-kernel-missing": {"difftest_report": 1, "campaigns": [{}]},
    "report-kernel-int": {"difftest_report": 1, "campaigns": [{"kernel": 3}]},
    "report-status-bad": _camp(status="great"),
    "report-cases-dict": _camp(cases={}),
    "report-case-int": _camp(cases=[7]),
    "report-case-status": _case(status="fine"),
    "report-case-no-problem": _camp(cases=[{"status": "passed"}]),
    "report-verdicts-dict": _case(verdicts={}),
    "report-verdict-str": _case(verdicts=["x"]),
    "report-verdict-passed-str": _verdict(passed="yes"),
    "report-verdict-output-int": _verdict(output=1),
    "report-worst-ratio-word": _case(worst_ratio="huge"),
    "report-settings-list": _camp(settings=[]),
    "report-seed-str": _camp(settings={"seed": "0"}),
    "report-shard-bad": _camp(settings={"shard": "3/2"}),
    "report-coverage-hit-str": _camp(coverage={"hit": {"gqa": "many"}, "missing": []}),
    "report-failures-dict": _camp(failures={}),
    "report-reproducer-int": _camp(reproducer={"json": 3}),
    "report-unrun-float": _camp(unrun=1.5),
    "report-deep": DEEP,
    "report-big-int": '{"difftest_report": ' + BIG_INT + ', "campaigns": []}',
    "report-lone-surrogate": '{"difftest_report": 1, "campaigns": [{"kernel": "\\ud800"}]}',
    "report-bad-xz.json.xz": b"\xfd7zXZ\x00 not really xz",
    "report-problem-bad": _case(problem={**P.to_dict(), "batch": 0}),
    "report-problem-unknown-field": _case(problem={**P.to_dict(), "evil": 1}),
    "report-verdict-output-bad": _verdict(output="::error::x"),
    "report-verdict-gate-bad": _verdict(gate="nope"),
    "report-outputs-bad": _camp(outputs={"zz": {}}),
    # read back as the types that wrote them (CampaignResult, CaseResult, Verdict): what they cannot hold
    "report-verdict-unknown-field": _verdict(evil=1),
    "report-case-seconds-str": _case(seconds="slow"),
    "report-case-notes-str": _case(notes="x"),
    "report-verdict-runs-str": _verdict(gate="determinism", numbers={"runs": "many"}),
    "report-failure-verdict-unknown-field": _camp(
        failure={
            "problem": P.to_dict(),
            "status": "failed",
            "verdicts": [{"output": "dq", "gate": "budget", "passed": False, "evil": 1}],
        }
    ),
}
REPORT_EXPECT = {
    "report-empty": "not valid JSON",
    "report-not-json": "not valid JSON",
    "report-truncated": "not valid JSON",
    "report-not-utf8": "not UTF-8",
    "report-list": "not a difftest report",
    "report-no-version": "not a difftest report",
    "report-version-999": "field 'difftest_report' is '999'",
    "report-version-true": "field 'difftest_report'",
    "report-version-str": "field 'difftest_report'",
    "report-campaigns-missing": "field 'campaigns' missing",
    "report-campaigns-dict": "field 'campaigns' is dict",
    "report-campaign-int": "campaigns[0]: is int",
    "report-kernel-missing": "field 'kernel' missing",
    "report-kernel-int": "field 'kernel' is int",
    "report-status-bad": "field 'status' is 'great'",
    "report-cases-dict": "field 'cases' is dict",
    "report-case-int": "cases[0]: is int",
    "report-case-status": "field 'status' is 'fine'",
    "report-case-no-problem": "field 'problem' missing",
    "report-verdicts-dict": "field 'verdicts' is dict",
    "report-verdict-str": "verdicts[0]: is str",
    "report-verdict-passed-str": "field 'passed' is str",
    "report-verdict-output-int": "field 'output' is int",
    "report-worst-ratio-word": "field 'worst_ratio'",
    "report-settings-list": "field 'settings' is list",
    "report-seed-str": "field 'seed' is str",
    "report-shard-bad": "field 'shard' is '3/2'",
    "report-coverage-hit-str": "'hit' counts must be integers",
    "report-failures-dict": "field 'failures' is dict",
    "report-reproducer-int": "field 'json' is int",
    "report-unrun-float": "field 'unrun' is float",
    "report-deep": "nested deeper than",
    "report-big-int": "4300",
    "report-lone-surrogate": "unpaired surrogate",
    "report-bad-xz.json.xz": "cannot read",
    "report-problem-bad": "field 'problem': Problem.batch=0",
    "report-problem-unknown-field": "field 'problem'",
    "report-verdict-output-bad": "field 'output' is '::error::x'",
    "report-verdict-gate-bad": "field 'gate' is 'nope'",
    "report-outputs-bad": "field 'outputs' is not per-output statistics",
    "report-verdict-unknown-field": "not a campaign record (TypeError",
    "report-case-seconds-str": "field 'seconds' is str",
    "report-case-notes-str": "field 'notes' is str",
    "report-verdict-runs-str": "field 'runs' is str",
    "report-failure-verdict-unknown-field": "not a campaign record (TypeError",
}


def _captured(file: str) -> dict:
    """A captured Problem whose window is not embedded: replaying it reads ``file``."""
    slice_ = {
        "file": file,
        "sha256": "0" * 16,
        "call": 0,
        "extents": [1, 1, 1, 4, 5, 8, 8],
        "dtype": "F32",
        "has_do": True,
        "b0": 0,
        "h0": 0,
        "q0": 0,
        "k0": 0,
    }
    return {**P.to_dict(), "values": "captured", "capture": slice_}


def _rec(**changes):
    d = {"kernel": "torch-blockwise", "problem": P.to_dict(), "config": {}}
    d.update(changes)
    return d


# name -> (content, expected text)
REPRODUCERS = {
    "repro-empty": (b"", "the file is empty"),
    "repro-not-json": (b"{", "not valid JSON"),
    "repro-not-utf8": (b"\xff{}", "not UTF-8"),
    "repro-list": ([], "top level is a JSON list"),
    "repro-deep": (DEEP, "nested deeper than"),
    "repro-big-int": ('{"kernel": "torch-blockwise", "problem": {"batch": ' + BIG_INT + "}}", "4300"),
    "repro-lone-surrogate": ('{"kernel": "\\ud800", "problem": {}}', "unpaired surrogate"),
    "repro-kernel-int": (_rec(kernel=3), "field 'kernel' = 3"),
    "repro-kernel-unknown": (_rec(kernel="no-such-kernel"), "unknown kernel 'no-such-kernel'"),
    "repro-kernel-module": (_rec(kernel="os:getcwd"), "--allow-import"),
    "repro-kernel-none": (_rec(kernel=""), "names no kernel"),
    "repro-second-ref-module": (_rec(config={"second_reference": "os:getcwd"}), "--allow-import"),
    "repro-problem-list": (_rec(problem=[]), "field 'problem' is a list"),
    "repro-batch-zero": (_rec(problem={**P.to_dict(), "batch": 0}), "Problem.batch=0"),
    "repro-batch-str": (_rec(problem={**P.to_dict(), "batch": "1"}), "Problem.batch"),
    "repro-batch-huge": (_rec(problem={**P.to_dict(), "batch": 10**15}), "Problem.batch"),
    "repro-seqlen-negative": (_rec(problem={**P.to_dict(), "seqlen_q": -4}), "seqlen_q"),
    "repro-head-dim-float": (_rec(problem={**P.to_dict(), "head_dim_qk": 8.5}), "head_dim_qk"),
    "repro-dtype-bad": (_rec(problem={**P.to_dict(), "dtype": "float7"}), "dtype"),
    "repro-unknown-field": (_rec(problem={**P.to_dict(), "evil": 1}), "evil"),
    "repro-too-large": (
        _rec(problem={**P.to_dict(), "seqlen_q": 32768, "seqlen_k": 32768, "heads_q": 128, "heads_kv": 128}),
        "allowed at most",
    ),
    "repro-pad-tail-huge": (_rec(problem={**P.to_dict(), "pad_tail": 10**7}), "pad_tail"),
    "repro-config-list": (_rec(config=[1]), "field 'config' is a list"),
    "repro-config-unknown": (_rec(config={"isolated": True}), "config field 'isolated' is unknown"),
    "repro-timeout-zero": (_rec(config={"timeout_s": 0}), "config field 'timeout_s' = 0"),
    "repro-timeout-huge": (_rec(config={"timeout_s": 1e7}), "config field 'timeout_s' = 10000000.0"),
    "repro-timeout-str": (_rec(config={"timeout_s": "60"}), "config field 'timeout_s' = '60'"),
    "repro-compile-timeout-huge": (_rec(config={"compile_timeout_s": 3e6}), "config field 'compile_timeout_s'"),
    "repro-determinism-zero": (_rec(config={"determinism_runs": 0}), "config field 'determinism_runs' = 0"),
    "repro-determinism-huge": (_rec(config={"determinism_runs": 10**6}), "config field 'determinism_runs'"),
    "repro-determinism-bool": (_rec(config={"determinism_runs": True}), "config field 'determinism_runs' = True"),
    "repro-chunk-negative": (_rec(config={"chunk_threshold": -1}), "config field 'chunk_threshold' = -1"),
    "repro-chunk-huge": (_rec(config={"chunk_threshold": 2**60}), "config field 'chunk_threshold'"),
    "repro-device-tpu": (_rec(config={"device": "tpu"}), "config field 'device' = 'tpu'"),
    "repro-isolate-str": (_rec(config={"isolate": "yes"}), "config field 'isolate' = 'yes'"),
    "repro-gates-list": (_rec(config={"gates": []}), "config field 'gates'"),
    "repro-problem-empty": ({"kernel": "torch-blockwise", "problem": {}}, "field 'problem' lacks batch"),
    "repro-bare-partial": ({"kernel": "torch-blockwise", "batch": 1}, "field 'problem' lacks seqlen_q"),
    "repro-recorded-on-cuda": (_rec(config={"device": "cuda"}), "recorded on CUDA and no CUDA device"),
    "repro-capture-etc-passwd": (_rec(problem=_captured("/etc/passwd")), "lies outside the reproducer's folder"),
    "repro-capture-directory": (_rec(problem=_captured("in/dir.json")), "is a directory"),
    "repro-capture-fifo": (_rec(problem=_captured("in/fifo")), "not a regular file"),
}


def _case_rows():
    """(id, argv, expected exit code, expected text, env) for every case; paths are
    relative to the folder the command runs in, whose ``in/`` holds the input files."""
    rows = []

    def add(case_id, argv, expected, code=2, env=None):
        rows.append((case_id, list(argv), code, expected, env or {}))

    # -- the reports, through each subcommand that reads one
    for name, expected in REPORT_EXPECT.items():
        f = f"in/{name}" + ("" if name.endswith(".xz") else ".json")
        add(f"gate-candidate-{name}", ["gate", "--baseline", "in/good.json", "--candidate", f], expected)
        add(f"gate-baseline-{name}", ["gate", "--baseline", f, "--candidate", "in/good.json"], expected)
        add(f"merge-{name}", ["merge", "in/good.json", f, "-o", "merged.json"], expected)
        add(f"report-{name}", ["report", f, "--html", "r.html"], expected)
    for cmd in (
        ["gate", "--baseline", "in/good.json", "--candidate"],
        ["merge", "-o", "m.json"],
        ["report", "--html", "r.html"],
    ):
        add(f"{cmd[0]}-missing-file", [*cmd, "in/nope.json"], "no such file")
        add(f"{cmd[0]}-directory", [*cmd, "in"], "is a directory")
        add(f"{cmd[0]}-xz-bomb", [*cmd, "in/bomb.json.xz"], "expands to more than")
    add(
        "gate-growth-nan",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--max-ratio-growth", "nan"],
        "--max-ratio-growth nan is invalid",
    )
    add(
        "gate-growth-negative",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--max-ratio-growth", "-1"],
        "--max-ratio-growth -1.0 is invalid",
    )
    add(
        "gate-growth-huge",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--max-ratio-growth", "1e9"],
        "--max-ratio-growth 1000000000.0 is invalid",
    )
    add(
        "gate-growth-word",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--max-ratio-growth", "lots"],
        "invalid float value: 'lots'",
    )
    add(
        "gate-min-ratio-inf",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--min-ratio", "inf"],
        "--min-ratio inf is invalid",
    )
    add(
        "gate-junit-directory",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--junit", "in"],
        "--junit 'in' is a directory",
    )
    add(
        "gate-html-under-file",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--html", "in/good.json/x.html"],
        "--html 'in/good.json/x.html': its folder",
    )
    add(
        "gate-junit-empty",
        ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json", "--junit", ""],
        "--junit '': an empty path",
    )
    add("gate-no-candidate", ["gate", "--baseline", "in/good.json"], "the following arguments are required")
    add("merge-output-directory", ["merge", "in/good.json", "-o", "in"], "-o 'in' is a directory")
    add("merge-output-empty", ["merge", "in/good.json", "-o", ""], "-o '': an empty path")
    add("merge-no-output", ["merge", "in/good.json"], "the following arguments are required: -o/--output")
    add("report-html-directory", ["report", "in/good.json", "--html", "in"], "--html 'in' is a directory")
    add("report-html-empty", ["report", "in/good.json", "--html", ""], "--html '': an empty path")
    add("report-no-html", ["report", "in/good.json"], "the following arguments are required: --html")

    # -- reproducers
    for name, (_, expected) in REPRODUCERS.items():
        add(name, ["repro", f"in/{name}.json"], expected)
    add("repro-py", ["repro", "in/case.py"], "difftest replays only the .json reproducer")
    add("repro-txt", ["repro", "in/case.txt"], "allowed a .json reproducer")
    add("repro-missing", ["repro", "in/nope.json"], "no such file")
    add("repro-directory", ["repro", "in/dir.json"], "not a regular file")
    add("repro-oversized", ["repro", "in/huge.json"], "allowed at most 16777216")
    add("repro-profile-bad", ["repro", "in/repro-kernel-int.json", "-p", "huge"], "invalid choice: 'huge'")
    add("repro-kernel-flag-unknown", ["repro", "in/good-repro.json", "--kernel", "nope"], "unknown kernel 'nope'")
    add(
        "repro-kernel-flag-not-adapter",
        ["repro", "in/good-repro.json", "--kernel", "os:getcwd"],
        "factory returned str, not a KernelAdapter",
    )
    add("repro-quick-profile-too-small", ["repro", "in/mid-repro.json", "-p", "quick"], "under profile 'quick'")

    # -- run: every numeric flag beyond its bounds, and every other flag's bad values
    run = [
        "run",
        "-q",
        "-p",
        "quick",
        "--no-edge-cases",
        "-k",
        "torch-blockwise",
        "--out",
        "out",
        "--db",
        "none",
        "--no-isolate",
    ]  # no worker is started for a refused run
    bad_numbers = {
        "--max-examples": [
            ("0", "allowed an integer >= 1"),
            ("-3", "allowed an integer >= 1"),
            ("2.5", "is not a number"),
            ("1e20", "is not a number"),
            ("lots", "is not a number"),
            ("1000001", "allowed at most 1e+06"),
            (BIG_INT, "is not a number"),
        ],
        "--time-budget": [
            ("0", "allowed a finite number > 0"),
            ("-1", "allowed a finite number > 0"),
            ("nan", "allowed a finite number > 0"),
            ("inf", "allowed a finite number > 0"),
            ("1e9", "allowed at most 604800"),
            ("soon", "is not a number"),
        ],
        "--shrink-budget": [
            ("-1", "allowed a finite number >= 0"),
            ("nan", "allowed a finite number >= 0"),
            ("1e7", "allowed at most 604800"),
            ("x", "is not a number"),
        ],
        "--timeout": [
            ("0", "allowed a finite number > 0"),
            ("-5", "allowed a finite number > 0"),
            ("nan", "allowed a finite number > 0"),
            ("inf", "allowed a finite number > 0"),
            ("3e6", "allowed at most 604800"),
            ("1e300", "allowed at most 604800"),
            ("soon", "is not a number"),
        ],
        "--compile-timeout": [
            ("0", "allowed a finite number > 0"),
            ("-inf", "allowed a finite number > 0"),
            ("2.2e6", "allowed at most 604800"),
            ("x", "is not a number"),
        ],
        "--determinism": [
            ("0", "allowed an integer >= 1"),
            ("101", "allowed at most 100"),
            ("1000000", "allowed at most 100"),
            ("2.0", "is not a number"),
            ("x", "is not a number"),
        ],
        "--chunk-threshold": [
            ("-1", "allowed an integer >= 0"),
            (str(2**51), "allowed at most"),
            ("x", "is not a number"),
        ],
        "--coverage": [("-1", "allowed an integer >= 0"), ("4", "allowed at most 3"), ("two", "is not a number")],
        "--max-findings": [("0", "allowed an integer >= 1"), ("1e9", "is not a number"), ("x", "is not a number")],
        "--threads": [
            ("-1", "allowed an integer in [0, 1024]"),
            ("1025", "allowed an integer in [0, 1024]"),
            ("1000000", "allowed an integer in [0, 1024]"),
            ("abc", "allowed an integer in [0, 1024]"),
            ("1.5", "allowed an integer in [0, 1024]"),
        ],
        "--jobs": [
            ("0", "allowed an integer in [1, 256]"),
            ("-2", "allowed an integer in [1, 256]"),
            ("257", "allowed an integer in [1, 256]"),
            ("many", "allowed an integer in [1, 256]"),
        ],
        "--seed": [
            ("-1", "allowed an integer in [0, 2**64-1]"),
            ("x", "allowed an integer in [0, 2**64-1]"),
            (str(2**64), "allowed an integer in [0, 2**64-1]"),
            (BIG_INT, "allowed an integer in [0, 2**64-1]"),
        ],
        "--shard": [
            ("2/2", "allowed I/N"),
            ("-1/2", "allowed I/N"),
            ("0/0", "allowed I/N"),
            ("a/b", "allowed I/N"),
            ("0/10001", "allowed I/N"),
            ("1", "allowed I/N"),
            ("", "allowed I/N"),
        ],
        "--k": [
            ("dq=0", "allowed a finite number > 0"),
            ("dq=nan", "allowed a finite number > 0"),
            ("dq=-1", "allowed a finite number > 0"),
            ("dq=1e7", "allowed at most 1e+06"),
            ("dq=abc", "is not a number"),
            ("dx=3", "allowed OUTPUT=K"),
            ("dq", "allowed OUTPUT=K"),
        ],
    }
    for flag, values in bad_numbers.items():
        for i, (value, expected) in enumerate(values):
            add(f"run{flag}-{i}", [*run, f"{flag}={value}"], expected)
    for i, (value, expected) in enumerate(
        [
            ("dq", "no SPEC"),
            ("all:", "no SPEC"),
            ("dx:atol=1", "allowed OUTPUT:atol="),
            ("dq:atol=abc", "--standard 'dq:atol=abc'"),
            ("dq:atol=-1", "allowed a float >= 0"),
            ("dq:rtol=nan", "allowed a float >= 0"),
            ("dq:ratio=2", "allowed a float in [0, 1]"),
            ("dq:foo=1", "allowed keys"),
        ]
    ):
        add(f"run--standard-{i}", [*run, "--standard", value], expected)
    for i, (value, expected) in enumerate(
        [
            ("foo=1", "allowed FIELD=VALUE"),
            ("head_dims_qk=abc", "comma-separated integers"),
            ("head_dims_qk=7", "allowed a non-empty subset of"),
            ("max_seqlen=0", "narrow max_seqlen=0"),
        ]
    ):
        add(f"run--narrow-{i}", [*run, "--narrow", value], expected)
    for case_id, extra, expected in [
        ("run-kernel-unknown", ["-k", "no-such-kernel"], "unknown kernel 'no-such-kernel'"),
        ("run-kernel-module-missing", ["-k", "no_module_xyz:X"], "cannot import module 'no_module_xyz'"),
        ("run-kernel-not-adapter", ["-k", "os:getcwd"], "factory returned str, not a KernelAdapter"),
        ("run-kernel-needs-args", ["-k", "os:system"], "cannot be called without arguments"),
        ("run-second-reference-unknown", ["--second-reference", "nope"], "unknown kernel 'nope'"),
        ("run-device-tpu", ["--device", "tpu"], "invalid choice: 'tpu'"),
        ("run-device-cuda-absent", ["--device", "cuda"], "no CUDA device is available here"),
        ("run-profile-unknown", ["--profile", "huge"], "invalid choice: 'huge'"),
        ("run-truth-unknown", ["--truth", "float16"], "invalid choice: 'float16'"),
        ("run-unknown-flag", ["--bogus"], "unrecognized arguments: --bogus"),
        ("run-out-empty", ["--out", ""], "--out '': an empty path"),
        ("run-out-file", ["--out", "in/good.json"], "--out 'in/good.json' is a file"),
        ("run-out-under-file", ["--out", "in/good.json/x"], "is not a writable directory"),
        ("run-db-empty", ["--db", ""], "--db '': an empty path"),
        ("run-db-file", ["--db", "in/good.json"], "--db 'in/good.json' is a file"),
        ("run-report-directory", ["--report", "in"], "--report 'in' is a directory"),
        ("run-report-empty", ["--report", ""], "--report '': an empty path"),
        ("run-report-under-file", ["--report", "in/good.json/r.json"], "its folder"),
        ("run-markdown-directory", ["--markdown", "in"], "--markdown 'in' is a directory"),
        ("run-html-directory", ["--html", "in"], "--html 'in' is a directory"),
        ("run-jobs-no-isolate", ["--jobs", "2", "-k", "sdpa-cpu-math"], "needs isolation"),
        ("run-known-deep", ["--known", "in/report-deep.json"], "nested deeper than"),
        ("run-known-big-int", ["--known", "in/report-big-int.json"], "4300"),
        ("run-known-surrogate", ["--known", "in/report-lone-surrogate.json"], "unpaired surrogate"),
        ("run-known-not-json", ["--known", "in/report-not-json.json"], "not valid JSON"),
        ("run-known-list", ["--known", "in/report-list.json"], "not a difftest report or findings file"),
        ("run-known-store-deep", ["--known", "in/store-deep.jsonl"], "not a Problem"),
        ("run-out-link", ["--out", "in/out-link"], "'in/out-link' is a symbolic link where difftest writes"),
        ("run-out-under-link", ["--out", "in/out-link/sub"], "'in/out-link' is a symbolic link"),
        ("run-db-link", ["--db", "in/db-link"], "'in/db-link' is a symbolic link"),
        ("run-db-store-link", ["--db", "in/db-store-link"], "difftest-failures' is a symbolic link"),
        ("run-db-key-link", ["--db", "in/db-key-link"], "is a symbolic link"),
        ("run-db-fifo", ["--db", "in/db-fifo"], "not a regular file"),
        ("run-report-under-link", ["--report", "in/out-link/r.json"], "'in/out-link' is a symbolic link"),
        (
            "run-values-from-huge-scale",
            ["--values-from", "in/huge-scale.safetensors"],
            "scale 1e+308: allowed a finite number > 0, at most 10000",
        ),
        ("run-values-from-fifo", ["--values-from", "in/fifo"], "not a regular file"),
        ("run-values-from-directory", ["--values-from", "in"], "is a directory"),
    ]:
        add(case_id, [*run, *extra], expected)
    for case_id, env, expected in [
        ("env-omp-word", {"OMP_NUM_THREADS": "abc"}, "OMP_NUM_THREADS='abc' is invalid"),
        ("env-omp-zero", {"OMP_NUM_THREADS": "0"}, "OMP_NUM_THREADS='0' is invalid"),
        ("env-omp-huge", {"OMP_NUM_THREADS": "100000"}, "OMP_NUM_THREADS='100000' is invalid"),
        ("env-difftest-threads-word", {"DIFFTEST_THREADS": "all"}, "DIFFTEST_THREADS='all' is invalid"),
        ("env-difftest-threads-negative", {"DIFFTEST_THREADS": "-1"}, "DIFFTEST_THREADS='-1' is invalid"),
        ("env-difftest-threads-huge", {"DIFFTEST_THREADS": "5000"}, "DIFFTEST_THREADS='5000' is invalid"),
    ]:
        add(case_id, run, expected, env=env)

    # -- run --resume: ids, planted and malformed run folders (the folders: _plant_runs)
    resume = ["run", "--resume"]
    for case_id, rid, expected in [
        ("resume-dotdot", "../../elsewhere", "not a run id"),
        ("resume-dot", ".", "not a run id"),
        ("resume-absolute", "/etc", "not a run id"),
        ("resume-short", "0" * 31, "not a run id"),
        ("resume-upper", "A" * 32, "not a run id"),
        ("resume-slash", "0" * 32 + "/x", "not a run id"),
        ("resume-unknown", "0" * 32, "no such run in"),
        ("resume-planted", PLANTED, "is not signed by this user's difftest"),
        ("resume-symlink", LINKED, "is a symbolic link"),
        ("resume-not-json", BROKEN["not-json"], "not valid JSON"),
        ("resume-deep", BROKEN["deep"], "nested deeper than"),
        ("resume-big-int", BROKEN["big-int"], "4300"),
        ("resume-surrogate", BROKEN["surrogate"], "unpaired surrogate"),
        ("resume-list", BROKEN["list"], "allowed the object difftest wrote"),
        ("resume-argv-not-run", BROKEN["argv-not-run"], "field 'argv' is not the arguments"),
        ("resume-argv-int", BROKEN["argv-int"], "field 'argv' is not the arguments"),
        ("resume-wrong-id", BROKEN["wrong-id"], "field 'run_id'"),
        ("resume-finished", FINISHED, "that run finished"),
    ]:
        add(case_id, [*resume, rid, "--out", "runs-out"], expected)
    add("resume-none-signed", [*resume, "--out", "planted-out"], "no unfinished run in")
    add("resume-nothing", [*resume, "--out", "empty-out"], "no unfinished run in")
    add("resume-module-without-allow-import", [*resume, MODULE_RUN, "--out", "runs-out"], "--allow-import")

    # -- the other subcommands
    for case_id, argv, expected in [
        ("new-adapter-bad-name", ["new-adapter", "1bad"], "allowed a name of letters"),
        ("new-adapter-dotdot", ["new-adapter", "../x"], "allowed a name of letters"),
        ("new-adapter-empty", ["new-adapter", ""], "allowed a name of letters"),
        ("new-adapter-dir-file", ["new-adapter", "mine", "--dir", "in/good.json"], "not a folder"),
        ("new-adapter-dir-empty", ["new-adapter", "mine", "--dir", ""], "not a folder"),
        ("mutants-only-unknown", ["mutants", "--only", "nope"], "--only nope: unknown mutants"),
        ("mutants-examples-zero", ["mutants", "--max-examples", "0"], "allowed an integer >= 1"),
        ("mutants-budget-nan", ["mutants", "--time-budget", "nan"], "allowed a finite number > 0"),
        ("mutants-budget-huge", ["mutants", "--time-budget", "1e9"], "allowed at most 604800"),
        ("mutants-per-mutant-zero", ["mutants", "--per-mutant-budget", "0"], "allowed a finite number > 0"),
        ("mutants-shrink-negative", ["mutants", "--shrink-budget", "-1"], "allowed a finite number >= 0"),
        ("mutants-profile-bad", ["mutants", "-p", "huge"], "invalid choice: 'huge'"),
        ("mutants-device-bad", ["mutants", "--device", "tpu"], "invalid choice: 'tpu'"),
        ("calibrate-kernel-unknown", ["calibrate", "-k", "nope"], "unknown kernel 'nope'"),
        ("calibrate-no-kernel", ["calibrate"], "--kernel: required unless --from-variant-logs or --from-reports"),
        (
            "calibrate-variant-log-is-a-report",
            ["calibrate", "--from-variant-logs", "in/good.json"],
            "line 1 is not a variant case record",
        ),
        ("calibrate-report-missing", ["calibrate", "--from-reports", "in/nope.json"], "cannot read"),
        ("calibrate-replay-huge", ["calibrate", "--from-reports", "in/good.json", "--replay", "1001"], "at most 1000"),
        (
            "calibrate-examples-zero",
            ["calibrate", "-k", "torch-blockwise", "--max-examples", "0"],
            "allowed an integer >= 1",
        ),
        (
            "calibrate-examples-huge",
            ["calibrate", "-k", "torch-blockwise", "--max-examples", "10000000"],
            "allowed at most",
        ),
        (
            "calibrate-budget-negative",
            ["calibrate", "-k", "torch-blockwise", "--time-budget", "-1"],
            "allowed a finite number > 0",
        ),
        (
            "calibrate-json-under-file",
            ["calibrate", "-k", "torch-blockwise", "--json", "in/good.json/x.json"],
            "its folder",
        ),
        (
            "calibrate-json-directory",
            ["calibrate", "-k", "torch-blockwise", "--json", "in"],
            "--json 'in' is a directory",
        ),
        ("calibrate-profile-bad", ["calibrate", "-k", "torch-blockwise", "-p", "x"], "invalid choice: 'x'"),
        ("bench-repeats-zero", ["bench", "-k", "fa3", "--repeats", "0"], "allowed an integer >= 1"),
        ("bench-repeats-huge", ["bench", "-k", "fa3", "--repeats", "1000000"], "allowed at most"),
        ("bench-warmup-negative", ["bench", "-k", "fa3", "--warmup", "-1"], "allowed an integer >= 0"),
        ("bench-gqa-zero", ["bench", "-k", "fa3", "--gqa-kv", "0"], "allowed an integer >= 1"),
        ("bench-dtype-bad", ["bench", "-k", "fa3", "--dtype", "float8"], "invalid choice: 'float8'"),
        ("bench-no-kernel", ["bench"], "--kernel/-k: required"),
        ("bench-shape-words", ["bench", "--oracle", "--shape", "a,b,c,d"], "allowed B,H,S,D integers"),
        ("bench-shape-three", ["bench", "--oracle", "--shape", "1,2,3"], "exactly four integers"),
        ("bench-shape-huge", ["bench", "--oracle", "--shape", "1,1,100000000,64"], "S <= 16777216"),
        ("bench-no-cuda", ["bench", "-k", "fa3"], "needs a CUDA device"),
        ("bench-oracle-cuda-absent", ["bench", "--oracle", "--device", "cuda"], "no CUDA device"),
        ("list-bogus", ["list", "--bogus"], "unrecognized arguments: --bogus"),
        ("calibrate-reports-dev-zero", ["calibrate", "--from-reports", "/dev/zero"], "not a regular file"),
        ("calibrate-reports-xz-bomb", ["calibrate", "--from-reports", "in/bomb.json.xz"], "expands to more than"),
        ("calibrate-reports-deep", ["calibrate", "--from-reports", "in/report-deep.json"], "nested deeper than"),
        ("calibrate-variant-log-dev-zero", ["calibrate", "--from-variant-logs", "/dev/zero"], "not a regular file"),
        (
            "calibrate-variant-log-deep",
            ["calibrate", "--from-variant-logs", "in/store-deep.jsonl"],
            "nested deeper than",
        ),
        ("calibrate-variant-log-fifo", ["calibrate", "--from-variant-logs", "in/fifo"], "not a regular file"),
        ("variants-log-dev-zero", ["variants", "--from-logs", "/dev/zero"], "not a regular file"),
        ("variants-log-deep", ["variants", "--from-logs", "in/store-deep.jsonl"], "nested deeper than"),
        ("variants-log-long-line", ["variants", "--from-logs", "in/huge.json"], "a line longer than"),
        ("variants-only-unknown", ["variants", "--only", "nope"], "--only nope: unknown variants"),
        ("sanitize-repro-empty-problem", ["sanitize", "in/repro-problem-empty.json"], "field 'problem' lacks batch"),
        ("sanitize-repro-capture-fifo", ["sanitize", "in/repro-capture-fifo.json"], "not a regular file"),
        ("sanitize-run-dir-missing", ["sanitize", "--run-dir", "in/nope"], "not a folder"),
        ("sanitize-nothing", ["sanitize"], "nothing to sanitize"),
        ("stress-kernel-unknown", ["stress", "-k", "nope"], "unknown kernel 'nope'"),
        ("probe-kernel-unknown", ["probe", "-k", "nope"], "unknown kernel 'nope'"),
        ("bisect-version-missing", ["bisect", "in/good-repro.json", "--versions", "in/nope"], "does not exist"),
        (
            "bisect-repro-empty-problem",
            ["bisect", "in/repro-problem-empty.json", "--versions", "in"],
            "field 'problem' lacks batch",
        ),
        ("no-subcommand", [], "the following arguments are required: command"),
        ("unknown-subcommand", ["frobnicate"], "invalid choice: 'frobnicate'"),
    ]:
        add(case_id, argv, expected)
    return rows


PLANTED = uuid.UUID(int=1).hex
LINKED = uuid.UUID(int=2).hex
FINISHED = uuid.UUID(int=3).hex
MODULE_RUN = uuid.UUID(int=4).hex
BROKEN = {
    name: uuid.UUID(int=100 + i).hex
    for i, name in enumerate(
        ["not-json", "deep", "big-int", "surrogate", "list", "argv-not-run", "argv-int", "wrong-id"]
    )
}


def _write(path: Path, content) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, errors="surrogatepass")
    else:
        path.write_text(json.dumps(content))


def make_world(root: Path) -> None:
    """The input files every case reads, under ``root/in`` and the run folders under
    ``root/runs-out``, ``root/planted-out``, ``root/empty-out``; signed runs are signed
    with the key in ``$DIFFTEST_STATE_DIR`` (set by the caller)."""
    from difftest.run.folder import Run

    inp = root / "in"
    _write(inp / "good.json", GOOD_REPORT)
    for name, content in REPORTS.items():
        _write(inp / (name if name.endswith(".xz") else name + ".json"), content)
    with lzma.open(inp / "bomb.json.xz", "wb", preset=0) as f:  # ~10 kB that expands to 70 MB
        block = b" " * 2**20
        for _ in range(70):
            f.write(block)
    for name, (content, _) in REPRODUCERS.items():
        _write(inp / f"{name}.json", content)
    _write(inp / "good-repro.json", _rec())
    _write(
        inp / "mid-repro.json",
        _rec(problem={**P.to_dict(), "seqlen_q": 1000, "seqlen_k": 1000, "heads_q": 100, "heads_kv": 100}),
    )
    _write(inp / "case.py", "raise SystemExit('ran')\n")
    _write(inp / "store-deep.jsonl", DEEP + "\n")
    _write(inp / "case.txt", "{}")
    (inp / "dir.json").mkdir()
    os.mkfifo(inp / "fifo")  # a reader that opens it blocking would hang: every one must refuse it
    (root / "elsewhere-out").mkdir()
    (inp / "out-link").symlink_to(root / "elsewhere-out")
    (inp / "db-link").symlink_to(root / "elsewhere-out")
    (inp / "db-store-link").mkdir()
    (inp / "db-store-link" / "difftest-failures").symlink_to(root / "elsewhere-out")
    (inp / "db-key-link").mkdir()
    (inp / "db-key-link" / "0123456789abcdef").symlink_to(root / "elsewhere-out")
    (inp / "db-fifo").mkdir()
    os.mkfifo(inp / "db-fifo" / "0123456789abcdef")
    write_capture(inp / "huge-scale.safetensors", scale=1e308)
    with open(inp / "huge.json", "wb") as f:  # sparse: 17 MB that take no disk
        f.truncate(17 * 2**20)
    out = root / "runs-out"
    (out / "runs").mkdir(parents=True)
    _plant(
        out,
        PLANTED,
        {
            "run_id": PLANTED,
            "argv": ["run", "-k", "evil:A"],
            "status": "running",
            "finished_kernels": {},
            "started_ns": 10**30,
        },
    )
    _plant(
        root / "planted-out",
        PLANTED,
        {"run_id": PLANTED, "argv": ["run"], "status": "running", "finished_kernels": {}, "started_ns": 1},
    )
    (root / "empty-out").mkdir()
    elsewhere = root / "elsewhere"
    for rid, status, argv in (
        (LINKED, "interrupted", ["run"]),
        (FINISHED, "finished", ["run"]),
        (MODULE_RUN, "interrupted", ["run", "-k", "evil_module_xyz:Adapter"]),
    ):
        r = Run(elsewhere if rid == LINKED else out, rid)
        r.dir.mkdir(parents=True)
        (r.dir / ".lock").touch()  # as Run.start leaves it
        r._save({"run_id": rid, "argv": argv, "status": status, "finished_kernels": {}, "started_ns": 1})
    (out / "runs" / LINKED).symlink_to(elsewhere / "runs" / LINKED)
    bad = {
        "not-json": "{",
        "deep": DEEP,
        "big-int": '{"argv": ' + BIG_INT + "}",
        "surrogate": '{"argv": ["run", "\\ud800"]}',
        "list": [],
        "argv-not-run": {"argv": ["gate"], "run_id": BROKEN["argv-not-run"]},
        "argv-int": {"argv": 3, "run_id": BROKEN["argv-int"]},
        "wrong-id": {"argv": ["run"], "run_id": PLANTED},
    }
    for name, content in bad.items():
        _write(out / "runs" / BROKEN[name] / "run.json", content)


def write_capture(path: Path, scale: float = 0.35, causal: bool = False) -> None:
    """A capture file (safetensors, difftest.capture's metadata) of one call, q/k/v/dO
    [1, 1, 4, 8] float32, written without the safetensors package."""
    import struct

    import numpy as np

    rng = np.random.default_rng(0)
    header, blobs, off = {}, [], 0
    for name in ("c0.q", "c0.k", "c0.v", "c0.do"):
        b = rng.standard_normal((1, 1, 4, 8)).astype(np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": [1, 1, 4, 8], "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    calls = [{"q": "c0.q", "k": "c0.k", "v": "c0.v", "do": "c0.do", "causal": causal, "scale": scale}]
    header["__metadata__"] = {"difftest.capture": json.dumps({"version": 1, "calls": calls})}
    head = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + b"".join(blobs))


def _plant(out: Path, rid: str, meta: dict) -> None:
    _write(out / "runs" / rid / "run.json", meta)


def snapshot(root: Path) -> dict:
    """Every path under ``root`` (links not followed) with its kind and content digest."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            if p.is_symlink():
                out[str(p.relative_to(root))] = "link:" + os.readlink(p)
            elif stat.S_ISFIFO(os.lstat(p).st_mode):
                out[str(p.relative_to(root))] = "fifo"
            elif p.is_dir():
                out[str(p.relative_to(root))] = "dir"
            elif name == "huge.json":
                out[str(p.relative_to(root))] = f"size:{p.stat().st_size}"
            else:
                out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def run_case(argv, env, capsys=None):
    """(exit code, stderr lines) of ``difftest ARGV`` run in-process in the current folder."""
    import contextlib
    import io

    from difftest.commands.cli import main

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                rc = main(argv)
            except SystemExit as e:  # argparse's own one-line errors
                rc = e.code
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return rc, [ln for ln in err.getvalue().splitlines() if ln.strip()]


ROWS = _case_rows()
GROUPS = sorted({r[0].split("-")[0] for r in ROWS})


def test_the_table_is_large_and_ids_unique():
    assert len(ROWS) >= 200, len(ROWS)
    assert len({r[0] for r in ROWS}) == len(ROWS)


def test_the_table_covers_every_subcommand():
    """Every subcommand ``difftest --help`` lists meets hostile input here (#45: 5 of 15 did not),
    so a new subcommand comes with its rows."""
    from difftest.commands.cli import COMMANDS

    covered = {argv[0] for _, argv, _, _, _ in ROWS if argv}
    assert not set(COMMANDS) - covered, f"subcommands without a hostile-input row: {sorted(set(COMMANDS) - covered)}"


def _error_prefix(argv) -> str:
    """``difftest SUBCOMMAND: error: `` (``difftest: error: `` before a subcommand is known)."""
    from difftest.commands.cli import COMMANDS

    return f"difftest {argv[0]}: error: " if argv and argv[0] in COMMANDS else "difftest: error: "


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    state = tmp_path_factory.mktemp("state")
    old = os.environ.get("DIFFTEST_STATE_DIR")
    os.environ["DIFFTEST_STATE_DIR"] = str(state)
    make_world(root)
    yield root
    if old is None:
        os.environ.pop("DIFFTEST_STATE_DIR", None)
    else:
        os.environ["DIFFTEST_STATE_DIR"] = old


@pytest.mark.parametrize("group", GROUPS)
def test_hostile_inputs_are_one_line_exit_code_and_write_nothing(group, world, monkeypatch):
    """All cases of a group in one test (one line per failing case in the message)."""
    monkeypatch.chdir(world)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("DIFFTEST_THREADS", raising=False)
    before = snapshot(world)
    bad = []
    for case_id, argv, code, expected, env in (r for r in ROWS if r[0].split("-")[0] == group):
        rc, lines = run_case(argv, env)
        if rc != code or len(lines) != 1 or expected not in lines[0]:
            bad.append(f"{case_id}: exit {rc}, {len(lines)} lines: {lines[:3]} (wanted exit {code}, {expected!r})")
        elif code == 2 and not lines[0].startswith(_error_prefix(argv)):  # one wording (docs/exit-codes.md)
            bad.append(f"{case_id}: {lines[0]!r} does not start with {_error_prefix(argv)!r}")
        after = snapshot(world)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))
            bad.append(f"{case_id}: wrote {changed[:4]}")
            before = after
    assert not bad, "\n".join(bad)


# ================================================================ beyond the table
# Each test below plants one attack (or one input that checks nothing) and asserts what the
# issue (#41) promised: one line and exit 2 where the input is refused, nothing read or
# written outside what the user named, never a pass for a run that judged no case.
KERNEL = "tests.kernels_for_tests:RefKernel"  # correct, tiny, importable in a worker
PLANTED_BUG = "tests.kernels_for_tests:NanAtLargestDq"  # a planted bug: a NaN in every dQ
TINY = ["-q", "-p", "quick", "--no-edge-cases", "--no-isolate", "--max-examples", "2", "--no-prebuild"]


@pytest.fixture
def here(tmp_path, monkeypatch):
    """An empty working directory of its own, and a run-signing key of its own."""
    monkeypatch.setenv("DIFFTEST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.delenv("DIFFTEST_THREADS", raising=False)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    return work


def _cli(argv):
    """(exit code, stdout, stderr lines) of ``difftest ARGV`` in-process."""
    import contextlib
    import io

    from difftest.commands.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            rc = main(list(map(str, argv)))
        except SystemExit as e:
            rc = e.code
    return rc, out.getvalue(), [ln for ln in err.getvalue().splitlines() if ln.strip()]


def _one_line(rc, lines, expected, code=2):
    assert rc == code and len(lines) == 1 and expected in lines[0], (rc, lines)


def _target(tmp_path, name="elsewhere") -> Path:
    """A folder a planted link points to, with a file in it that must stay as it is."""
    t = tmp_path / name
    t.mkdir()
    (t / "report.json").write_text(json.dumps(GOOD_REPORT))
    return t


class TestSymlinks:
    """A link planted where difftest writes (or reads a folder's own files) is never followed."""

    def test_default_out_linked_to_a_baseline_is_refused_and_the_baseline_kept(self, here, tmp_path):
        """``.difftest/out -> ../baseline``: the run and its reports used to land in the
        baseline, so that ``gate`` compared the candidate with itself and passed it."""
        base = _target(tmp_path, "baseline")
        before = snapshot(base)
        (here / ".difftest").mkdir()
        (here / ".difftest" / "out").symlink_to(base)
        rc, _, lines = _cli(["run", "-k", PLANTED_BUG, *TINY, "--db", "none"])
        _one_line(rc, lines, "'.difftest/out' is a symbolic link where difftest writes")
        assert snapshot(base) == before

    @pytest.mark.parametrize(
        "planted", [".difftest/examples", ".difftest/examples/difftest-failures", ".difftest/hypothesis"]
    )
    def test_workdir_folders_linked_elsewhere_are_refused(self, here, tmp_path, planted):
        """The failure store, Hypothesis's example database and its own cache used to write
        their files into a linked folder's target."""
        target = _target(tmp_path)
        before = snapshot(target)
        link = here / planted
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target)
        rc, _, lines = _cli(["run", "-k", PLANTED_BUG, *TINY])
        _one_line(rc, lines, f"'{planted}' is a symbolic link where difftest writes")
        assert snapshot(target) == before
        assert not (here / ".difftest" / "out").exists()  # nothing written before the refusal

    def test_a_case_log_linked_before_the_campaign_is_never_written_through(self, here, tmp_path, monkeypatch):
        """A watcher plants ``<kernel>.cases.jsonl -> victim`` in the fresh run folder before
        the campaign opens its log (3.6 s into a run, once): the log used to truncate the
        victim after its last newline and append case records to it."""
        from difftest.run import plan

        victim = tmp_path / "victim.txt"
        victim.write_text("line one\nhalf a line")
        real = plan.RunPlan.prebuild

        def plant_then_prebuild(self, kernels):  # after the run folder is made, before the campaign
            link = self.run.dir / "test-nan-at-largest-dq.cases.jsonl"
            if not os.path.lexists(link):
                link.symlink_to(victim)
            return real(self, kernels)

        monkeypatch.setattr(plan.RunPlan, "prebuild", plant_then_prebuild)
        rc, _, lines = _cli(["run", "-k", PLANTED_BUG, *TINY, "--db", "none"])
        assert rc == 2 and any("symbolic link" in ln for ln in lines), lines
        assert not any("Traceback" in ln for ln in lines), lines
        assert victim.read_text() == "line one\nhalf a line"

    def test_resume_never_reads_or_truncates_a_linked_case_log(self, tmp_path):
        from difftest.execute.interrupt import OutputFailed
        from difftest.search.case_log import CaseLog, CaseLogError, read_case_log

        victim = tmp_path / "victim.txt"
        victim.write_text("keep\nthis")
        run = tmp_path / "out" / "runs" / ("a" * 32)
        run.mkdir(parents=True)
        (run / "k.cases.jsonl").symlink_to(victim)
        with pytest.raises(OutputFailed) as stopped:
            CaseLog(run / "k.cases.jsonl", "a" * 32)
        assert "symbolic link" in stopped.value.name and stopped.value.exit_code == 2
        with pytest.raises(CaseLogError, match="symbolic link"):
            read_case_log(run / "k.cases.jsonl")
        assert victim.read_text() == "keep\nthis"

    def test_a_linked_repro_folder_gets_no_reproducer(self, here, tmp_path, monkeypatch):
        """``repro -> ~/bin``: the JSON and an executable .py (0755) used to land in the target."""
        from difftest.run import plan

        target = tmp_path / "bin"
        target.mkdir()
        real = plan.RunPlan.prebuild

        def plant_then_prebuild(self, kernels):  # after the run folder is made, before the campaign
            if not os.path.lexists(self.run.dir / "repro"):
                (self.run.dir / "repro").symlink_to(target)
            return real(self, kernels)

        monkeypatch.setattr(plan.RunPlan, "prebuild", plant_then_prebuild)
        rc, _, lines = _cli(["run", "-k", PLANTED_BUG, *TINY, "--db", "none"])
        assert rc == 2 and any("symbolic link" in ln for ln in lines), lines
        assert list(target.iterdir()) == []

    def test_the_failure_store_never_writes_or_reads_through_a_link(self, tmp_path):
        from difftest.search import failure_store as fs

        target = _target(tmp_path)
        db = tmp_path / "db"
        db.mkdir()
        (db / fs.FOLDER).symlink_to(target)
        with pytest.raises(OSError, match="symbolic link"):
            fs.keep_current(str(db), "k", [P], set())
        with pytest.raises(OSError, match="symbolic link"):
            fs.save_failures(str(db), "k", [P])
        assert sorted(p.name for p in target.iterdir()) == ["report.json"]
        (db / fs.FOLDER).unlink()
        (db / fs.FOLDER).mkdir()
        (db / fs.FOLDER / "k.jsonl").symlink_to(target / "report.json")
        assert fs.load_failures(str(db), "k") == []  # skipped with a warning, the target never read

    def test_sanitize_never_copies_a_linked_summary_into_the_run(self, here, tmp_path):
        """``--run-dir D`` with ``D/summary.md -> secret`` used to copy the secret into D."""
        secret = tmp_path / "secret.txt"
        secret.write_text("TOP-SECRET-TOKEN")
        run = here / "run"
        run.mkdir()
        (run / "report.json").write_text(json.dumps(GOOD_REPORT))
        (run / "summary.md").symlink_to(secret)
        before = snapshot(run)
        rc, out, lines = _cli(["sanitize", "--run-dir", run])
        _one_line(rc, lines, "summary.md: is a symbolic link")
        assert "TOP-SECRET" not in out and snapshot(run) == before
        (run / "summary.md").unlink()
        (run / "findings.json").symlink_to(secret)
        rc, out, lines = _cli(["sanitize", "--run-dir", run])
        _one_line(rc, lines, "findings.json: is a symbolic link")

    def test_a_linked_pytest_summary_part_is_dropped_unread(self, tmp_path):
        from difftest.pytest_plugin import _part_records

        secret = tmp_path / "secret.json"
        secret.write_text(json.dumps([{"kernel": "TOP-SECRET"}]))
        out = tmp_path / "out"
        out.mkdir()
        (out / "pytest-summary-gw0.json").symlink_to(secret)
        recs = _part_records(out / "pytest-summary-gw0.json", out)
        assert "TOP-SECRET" not in json.dumps(recs) and "unreadable part" in recs[0]["kernel"]
        assert not (out / "pytest-summary-gw0.json").is_symlink() and secret.exists()


class TestSharedTmp:
    """Nothing runs from, or is kept in, a folder other users can write to."""

    def test_the_tileops_site_defaults_to_the_users_cache(self, monkeypatch, tmp_path):
        from difftest.kernels import tileops

        monkeypatch.delenv(tileops.SITE_ENV, raising=False)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
        assert tileops.site_folder() == str(tmp_path / "cache" / "difftest" / "tileops_site")
        monkeypatch.delenv("XDG_CACHE_HOME")
        assert tileops.site_folder().startswith(os.path.expanduser("~")) and "/tmp/" not in tileops.site_folder()

    @pytest.mark.parametrize("how", ["world-writable", "group-writable", "package-world-writable", "other-owner"])
    def test_a_site_others_can_write_is_refused_and_its_torch_py_never_runs(self, monkeypatch, tmp_path, how):
        """Another user's ``torch.py`` planted in a shared site folder used to run in the
        TileOPs worker of ``difftest run -k tileops-gqa``."""
        from difftest.execute.adapter import KernelUnavailable
        from difftest.kernels import tileops

        site = tmp_path / "site"
        (site / "tileops").mkdir(parents=True)
        marker = tmp_path / "planted-ran"
        (site / "torch.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
        os.chmod(site, 0o700)
        os.chmod(site / "tileops", 0o700)
        if how == "world-writable":
            os.chmod(site, 0o777)
        elif how == "group-writable":
            os.chmod(site, 0o770)
        elif how == "package-world-writable":
            os.chmod(site / "tileops", 0o777)
        else:
            if os.geteuid() != 0:
                pytest.skip("chown to another user needs root")
            os.chown(site, 4242, 4242)
        monkeypatch.setenv(tileops.SITE_ENV, str(site))
        why = tileops.site_problem(str(site))  # what available() says once CUDA is there
        assert why and "refused" in why, why
        with pytest.raises(KernelUnavailable, match="refused"):
            tileops.Worker(str(site))
        assert not marker.exists()

    def test_a_private_site_passes_the_check(self, tmp_path):
        from difftest.kernels import tileops

        site = tmp_path / "site"
        (site / "tileops").mkdir(parents=True)
        os.chmod(site, 0o755)
        assert tileops.site_problem(str(site)) is None

    def test_a_run_out_in_a_shared_folder_with_a_planted_runs_link_is_refused(self, here, tmp_path):
        """``--out /tmp/shared`` where another user planted ``runs -> their folder``."""
        shared = tmp_path / "shared"
        shared.mkdir()
        os.chmod(shared, 0o1777)
        target = _target(tmp_path)
        (shared / "runs").symlink_to(target)
        rc, _, lines = _cli(["run", "-k", KERNEL, *TINY, "--db", "none", "--out", shared])
        _one_line(rc, lines, "is a symbolic link")
        assert sorted(p.name for p in target.iterdir()) == ["report.json"]


# ---------------------------------------------------------------- printed text from files
EVIL = "::error title=pwned::owned\x1b[2J\r::add-mask::x\u202e"  # a workflow command, an escape, a CR, an RLO


def _printable(text: str) -> None:
    """No control character, and no line a CI runner would take for a workflow command."""
    for line in text.split("\n"):
        assert all(c.isprintable() for c in line), repr(line)
        assert not line.lstrip().startswith(("::", "##")), repr(line)


def _report_of(kernel: str, failed: bool) -> dict:
    v = {
        "output": "dq",
        "gate": "budget",
        "passed": not failed,
        "numbers": {"ratio": 2.0 if failed else 0.1},
        "message": f"{kernel} dq budget",
    }
    case = {
        "problem": P.to_dict(),
        "status": "failed" if failed else "passed",
        "verdicts": [v],
        "reason": kernel,
        "kernel": kernel,
    }
    return {
        "difftest_report": 1,
        "campaigns": [
            {
                "kernel": kernel,
                "status": "failed" if failed else "passed",
                "cases": [case],
                "reproducer": {"py": kernel + ".py"},
            }
        ],
    }


class TestPrintable:
    def test_gate_prints_report_texts_escaped(self, here):
        """A kernel name from a report used to reach the CI log raw: ``::error``/``::add-mask::``
        workflow commands, escape sequences and carriage returns."""
        (here / "a.json").write_text(json.dumps(_report_of(EVIL, failed=False)))
        (here / "b.json").write_text(json.dumps(_report_of(EVIL, failed=True)))
        rc, out, lines = _cli(["gate", "--baseline", "a.json", "--candidate", "b.json"])
        assert rc == 1 and "REGRESSION" in out and "\\x1b[2J" in out, out
        _printable(out)
        _printable("\n".join(lines))

    def test_tables_and_blocks_are_printable(self):
        from difftest.printable import block, cell
        from difftest.report.write import text_table

        _printable(text_table([("kernel", "x"), (EVIL, "\n::error::y")]))
        _printable(block(f"ok\n{EVIL}\n  ##vso[task.setvariable]x"))
        assert cell("::error::x") == "\\x3a:error::x" and cell("plain text: ok") == "plain text: ok"

    def test_calibrate_and_variants_print_log_texts_escaped(self, here):
        """A variant log's failing problem and gates, a report's kernel name: printed raw before."""
        line = {
            "dtype": "float32",
            "budget": {"dq": [0.1, 0.5, True]},
            "problem": P.to_json(),
            "status": "passed",
            "failed": [],
        }
        (here / "ok.jsonl").write_text(json.dumps(line) + "\n")
        (here / "evil.jsonl").write_text(
            json.dumps({**line, "status": "failed", "problem": EVIL, "failed": [EVIL]}) + "\n"
        )
        rc, out, lines = _cli(["variants", "--from-logs", "evil.jsonl"])
        assert rc == 1 and "\\x1b[2J" in out, (rc, out, lines)
        _printable(out)
        report = _report_of(EVIL, failed=False)
        report["campaigns"][0]["cases"][0]["verdicts"][0]["numbers"]["k_needed"] = 0.9
        (here / "r.json").write_text(json.dumps(report))
        rc, out, lines = _cli(["calibrate", "--from-reports", "r.json", "--from-variant-logs", "ok.jsonl"])
        assert rc == 0 and "\\x1b[2J" in out, (rc, out, lines)
        _printable(out)

    def test_a_resumed_or_known_finding_prints_escaped(self, capsys):
        """print_campaign prints reasons and signatures a --known file or a resumed record brought."""
        from types import SimpleNamespace

        from difftest.run.plan import print_campaign

        k = SimpleNamespace(name="k", capability=SimpleNamespace(compile_key=()))
        r = SimpleNamespace(
            name="k",
            status="unavailable",
            cases=[],
            elapsed=0.0,
            compile_stats=None,
            reason=EVIL,
            coverage={},
            failure=None,
        )
        print_campaign(k, r)
        _printable(capsys.readouterr().out)


# ---------------------------------------------------------------- runs that check nothing
class TestNothingChecked:
    def test_a_run_that_judged_no_case_exits_3_on_a_broken_kernel(self, here):
        """``--time-budget 0.001`` ran 0 cases of a kernel with a planted bug and printed
        "passed", exit 0."""
        rc, out, lines = _cli(
            [
                "run",
                "-k",
                PLANTED_BUG,
                "-q",
                "-p",
                "quick",
                "--no-edge-cases",
                "--no-isolate",
                "--no-prebuild",
                "--db",
                "none",
                "--time-budget",
                "0.001",
            ]
        )
        assert rc == 3 and "nothing checked" in lines[-1], (rc, lines)
        assert ": nothing checked (0 cases" in out, out
        assert [ln.split()[-2:] for ln in out.splitlines() if "(all)" in ln] == [["checked", "-"]], out
        doc = json.loads((here / ".difftest" / "out" / "report.json").read_text())
        assert doc["campaigns"][0]["status"] == "nothing checked"

    def test_a_run_whose_every_case_is_skipped_checked_nothing(self, here):
        rc, out, lines = _cli(
            [
                "run",
                "-k",
                KERNEL,
                *TINY,
                "--db",
                "none",
                "--narrow",
                "dtypes=float16",
                "--narrow",
                "max_seqlen=1",
                "--time-budget",
                "0.001",
            ]
        )
        assert rc == 3 and "nothing checked" in lines[-1], (rc, lines)

    def test_the_gate_never_passes_a_candidate_that_checked_nothing(self, here):
        empty = {"difftest_report": 1, "campaigns": [{"kernel": "k", "status": "passed", "cases": []}]}
        skipped = {
            "difftest_report": 1,
            "campaigns": [
                {
                    "kernel": "k",
                    "status": "passed",
                    "cases": [{"problem": P.to_dict(), "status": "skipped", "verdicts": []}],
                }
            ],
        }
        unavailable = {"difftest_report": 1, "campaigns": [{"kernel": "k", "status": "unavailable", "cases": []}]}
        for name, doc in (
            ("empty", empty),
            ("skipped", skipped),
            ("unavailable", unavailable),
            ("none", {"difftest_report": 1, "campaigns": []}),
        ):
            (here / f"{name}.json").write_text(json.dumps(doc))
            rc, out, lines = _cli(["gate", "--baseline", f"{name}.json", "--candidate", f"{name}.json"])
            assert rc == 3 and "gate: NOTHING CHECKED" in out, (name, rc, out)
        (here / "base.json").write_text(json.dumps(_report_of("k", failed=False)))
        rc, out, _ = _cli(["gate", "--baseline", "base.json", "--candidate", "empty.json"])
        assert rc == 3 and "gate: NOTHING CHECKED" in out, out
        (here / "bad.json").write_text(
            json.dumps(
                {
                    "difftest_report": 1,
                    "campaigns": [_report_of("j", failed=True)["campaigns"][0], empty["campaigns"][0]],
                }
            )
        )
        rc, out, _ = _cli(["gate", "--baseline", "base.json", "--candidate", "bad.json"])
        assert rc == 1, out  # a regression outranks it

    def test_merged_shards_that_judged_no_case_checked_nothing(self, here):
        empty = {"difftest_report": 1, "campaigns": [{"kernel": "k", "status": "passed", "cases": []}]}
        (here / "s0.json").write_text(json.dumps(empty))
        rc, _, lines = _cli(["merge", "s0.json", "-o", "m.json"])
        assert rc == 0, lines
        assert json.loads((here / "m.json").read_text())["campaigns"][0]["status"] == "nothing checked"


# ---------------------------------------------------------------- bounded, validated inputs
class WideRef(RefKernel):
    """The float32 reference, serving sequences past the quick profile's token limit."""

    name = "test-wide-ref"
    spec = "tests.test_hostile:WideRef"
    capability = full_capability(dtypes=("float32",), head_dims_qk=(8,), max_seqlen=8400, max_heads=2, max_batch=2)


class TestInputs:
    def test_a_cuda_reproducer_on_a_cpu_host_is_refused_unless_device_cpu(self, here):
        import torch

        if torch.cuda.is_available():
            pytest.skip("this host has CUDA: the case would replay there")
        (here / "r.json").write_text(json.dumps(_rec(config={"device": "cuda"})))
        rc, _, lines = _cli(["repro", "r.json"])
        _one_line(rc, lines, "allowed --device cpu")
        rc, out, lines = _cli(["repro", "r.json", "--device", "cpu"])
        assert rc == 0 and "PASSED" in out, (rc, out, lines)

    def test_a_capture_fifo_is_refused_without_hanging(self, here):
        os.mkfifo(here / "fifo")
        (here / "r.json").write_text(json.dumps(_rec(problem=_captured("fifo"))))
        rc, _, lines = _cli(["repro", "r.json"])
        _one_line(rc, lines, "not a regular file")
        rc, _, lines = _cli(["run", "-k", KERNEL, *TINY, "--db", "none", "--values-from", "fifo"])
        _one_line(rc, lines, "not a regular file")

    def test_stored_and_known_problems_keep_to_the_profile(self, here, capsys):
        """A Problem beyond the profile's size limits in the failure store (a gigabyte one,
        stored by a nightly run) or in a --known file used to be replayed under ``-p quick``.
        Here 8200 and 8300 query tokens (quick allows 8192), which the kernel's capability takes."""
        stored = Problem(seqlen_q=8200, seqlen_k=1, head_dim_qk=8, head_dim_v=8).validate()
        known = Problem(seqlen_q=8300, seqlen_k=1, head_dim_qk=8, head_dim_v=8).validate()
        spec = "tests.test_hostile:WideRef"
        store = here / ".difftest" / "examples" / "difftest-failures"
        store.mkdir(parents=True)
        (store / "tests.test_hostile_WideRef.jsonl").write_text(stored.to_json() + "\n" + P.to_json() + "\n")
        (here / "k").mkdir()
        (here / "k" / "tests.test_hostile_WideRef.jsonl").write_text(known.to_json() + "\n")
        rc, out, lines = _cli(["run", "-k", spec, *TINY, "--known", "k/tests.test_hostile_WideRef.jsonl"])
        assert rc == 0, lines
        assert any("8200 packed tokens" in ln and "failure-store line skipped" in ln for ln in lines), lines
        assert any("--known" in ln and "8300 packed tokens" in ln for ln in lines), lines
        doc = json.loads((here / ".difftest" / "out" / "report.json").read_text())
        ran = [c["problem"] for c in doc["campaigns"][0]["cases"]]
        assert stored.to_dict() not in ran and known.to_dict() not in ran and P.to_dict() in ran

    def test_a_full_failure_store_disk_is_one_line_not_a_traceback(self, here, monkeypatch):
        """ENOSPC writing the store (``--db`` on a full disk) used to end in a 117-line traceback."""
        import errno

        from difftest import safeio
        from difftest.search import failure_store

        real = safeio.atomic_write_text

        def full(path, *a, **k):
            if "difftest-failures" in str(path):
                raise OSError(errno.ENOSPC, "No space left on device", str(path))
            return real(path, *a, **k)

        monkeypatch.setattr(safeio, "atomic_write_text", full)
        monkeypatch.setattr(failure_store, "atomic_write_text", full, raising=False)
        rc, out, lines = _cli(["run", "-k", PLANTED_BUG, *TINY])
        assert rc == 2, (rc, lines)
        assert not any("Traceback" in ln for ln in lines) and len(lines) <= 4, lines
        assert any("No space left on device" in ln and "--resume" in ln for ln in lines), lines

    def test_bisect_with_a_relative_work_folder_tests_every_version(self, here, capsys):
        """``--work w`` (relative) used to mark every version untestable: the replay children
        run in folders under it and looked for their files relative to themselves."""
        from tests.test_bisect import _reproducer, _wheel

        wheels = [_wheel(here, v, bad_from=2) for v in (1, 2)]
        repro = _reproducer(here)
        rc, out, lines = _cli(["bisect", repro, "--versions", *wheels, "--work", "w", "--json", "r.json"])
        r = json.loads((here / "r.json").read_text())
        assert rc == 0 and r["first_bad"] == "toyattn 2" and r["last_good"] == "toyattn 1", (out, lines)
        assert all(t["verdict"] != "untestable" for t in r["tested"])


# ---------------------------------------------------------------- the pytest plugin
@pytest.fixture
def sub(pytester, monkeypatch, tmp_path):
    root = str(Path(__file__).resolve().parents[1])
    monkeypatch.setenv("PYTHONPATH", root)
    monkeypatch.setenv("DIFFTEST_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.syspath_prepend(root)
    return pytester


class TestPytestPlugin:
    @pytest.mark.parametrize(
        "args,expected",
        [
            (["--difftest-profile", "nosuch"], "--difftest-profile 'nosuch'"),
            (["--difftest-out", ""], "--difftest-out '': an empty path"),
            (["--difftest-out", "afile"], "--difftest-out 'afile' is a file"),
            (["--difftest-out", "alink/out"], "'alink' is a symbolic link"),
            (["--difftest-max-examples", "10000000"], "allowed at most"),
            (["--difftest-max-examples", "0"], "allowed an integer >= 1"),
            (["--difftest-seed", str(2**64)], "allowed an integer in [0, 2**64-1]"),
        ],
    )
    def test_options_are_checked_like_their_cli_twins(self, sub, args, expected):
        (sub.path / "afile").write_text("x")
        (sub.path.parent / "elsewhere").mkdir(exist_ok=True)
        (sub.path / "alink").symlink_to(sub.path.parent / "elsewhere")
        sub.makepyfile(test_k="def test_x():\n    pass\n")
        res = sub.runpytest_inprocess(*args)
        assert res.ret == pytest.ExitCode.USAGE_ERROR, res.stdout.str() + res.stderr.str()
        assert expected in res.stderr.str() + res.stdout.str()

    def test_the_fixture_fails_a_campaign_that_checked_nothing(self, sub):
        sub.makepyfile(
            test_k=f"""
            def test_nothing(difftest_campaign):
                difftest_campaign("{PLANTED_BUG}", time_budget=0.001, edge_cases=False, database=None,
                                  isolate=False)

            def test_nothing_even_when_a_failure_is_expected(difftest_campaign):
                difftest_campaign("{PLANTED_BUG}", time_budget=0.001, edge_cases=False, database=None,
                                  isolate=False, expect_failure=True)
        """
        )
        res = sub.runpytest_inprocess("--difftest-profile", "quick", "--difftest-out", str(sub.path / "out"))
        res.assert_outcomes(failed=2)
        assert "nothing checked" in res.stdout.str()

    def test_a_planted_default_out_link_fails_the_campaign_in_one_line(self, sub, tmp_path):
        target = _target(tmp_path)
        (sub.path / ".difftest").mkdir()
        (sub.path / ".difftest" / "out").symlink_to(target)
        sub.makepyfile(
            test_k=f"""
            def test_k(difftest_campaign):
                difftest_campaign("{KERNEL}", max_examples=2, edge_cases=False, database=None, isolate=False)
        """
        )
        res = sub.runpytest_inprocess("--difftest-profile", "quick")
        res.assert_outcomes(failed=1)
        assert "is a symbolic link where difftest writes" in res.stdout.str()
        assert sorted(p.name for p in target.iterdir()) == ["report.json"]
