"""Hostile inputs, table-driven: every subcommand, every numeric flag beyond its bound, every
kind of file difftest reads (report, ``.xz`` report, reproducer, ``run.json``) malformed in
every way we know. Each case asserts exit code 2 (or the code the table says), exactly one
line on stderr containing the expected text, and that nothing was written: the folder the
command runs in, its inputs and its outputs are the same files with the same contents
afterwards.

The CLI runs in-process (``cli.main``), grouped by input kind so the whole table costs
about one torch import. ``python scripts/hostile_table.py`` runs the same table and writes
``results/hostile.md``."""

import hashlib
import json
import lzma
import os
import uuid
from pathlib import Path

import pytest

from difftest.model.problem import Problem

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
}
REPORT_EXPECT = {
    "report-empty": "not valid JSON", "report-not-json": "not valid JSON", "report-truncated": "not valid JSON",
    "report-not-utf8": "not UTF-8", "report-list": "not a difftest report",
    "report-no-version": "not a difftest report",
    "report-version-999": "field 'difftest_report' is '999'", "report-version-true": "field 'difftest_report'",
    "report-version-str": "field 'difftest_report'", "report-campaigns-missing": "field 'campaigns' missing",
    "report-campaigns-dict": "field 'campaigns' is dict", "report-campaign-int": "campaigns[0]: is int",
    "report-kernel-missing": "field 'kernel' missing", "report-kernel-int": "field 'kernel' is int",
    "report-status-bad": "field 'status' is 'great'", "report-cases-dict": "field 'cases' is dict",
    "report-case-int": "cases[0]: is int", "report-case-status": "field 'status' is 'fine'",
    "report-case-no-problem": "field 'problem' missing", "report-verdicts-dict": "field 'verdicts' is dict",
    "report-verdict-str": "verdicts[0]: is str", "report-verdict-passed-str": "field 'passed' is str",
    "report-verdict-output-int": "field 'output' is int", "report-worst-ratio-word": "field 'worst_ratio'",
    "report-settings-list": "field 'settings' is list", "report-seed-str": "field 'seed' is str",
    "report-shard-bad": "field 'shard' is '3/2'", "report-coverage-hit-str": "'hit' counts must be integers",
    "report-failures-dict": "field 'failures' is dict", "report-reproducer-int": "field 'json' is int",
    "report-unrun-float": "field 'unrun' is float", "report-deep": "nested deeper than",
    "report-big-int": "4300", "report-lone-surrogate": "unpaired surrogate",
    "report-bad-xz.json.xz": "cannot read",
}


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
    "repro-too-large": (_rec(problem={**P.to_dict(), "seqlen_q": 32768, "seqlen_k": 32768, "heads_q": 128,
                                      "heads_kv": 128}), "allowed at most"),
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
    for cmd in (["gate", "--baseline", "in/good.json", "--candidate"], ["merge", "-o", "m.json"],
                ["report", "--html", "r.html"]):
        add(f"{cmd[0]}-missing-file", [*cmd, "in/nope.json"], "no such file")
        add(f"{cmd[0]}-directory", [*cmd, "in"], "is a directory")
        add(f"{cmd[0]}-xz-bomb", [*cmd, "in/bomb.json.xz"], "expands to more than")
    add("gate-growth-nan", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                            "--max-ratio-growth", "nan"], "--max-ratio-growth nan is invalid")
    add("gate-growth-negative", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                                 "--max-ratio-growth", "-1"], "--max-ratio-growth -1.0 is invalid")
    add("gate-growth-huge", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                             "--max-ratio-growth", "1e9"], "--max-ratio-growth 1000000000.0 is invalid")
    add("gate-growth-word", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                             "--max-ratio-growth", "lots"], "invalid float value: 'lots'")
    add("gate-min-ratio-inf", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                               "--min-ratio", "inf"], "--min-ratio inf is invalid")
    add("gate-junit-directory", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                                 "--junit", "in"], "--junit 'in' is a directory")
    add("gate-html-under-file", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                                 "--html", "in/good.json/x.html"], "--html 'in/good.json/x.html': its folder")
    add("gate-junit-empty", ["gate", "--baseline", "in/good.json", "--candidate", "in/good.json",
                             "--junit", ""], "--junit '': an empty path")
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
    add("repro-kernel-flag-not-adapter", ["repro", "in/good-repro.json", "--kernel", "os:getcwd"],
        "factory returned str, not a KernelAdapter")
    add("repro-quick-profile-too-small", ["repro", "in/mid-repro.json", "-p", "quick"], "under profile 'quick'")

    # -- run: every numeric flag beyond its bounds, and every other flag's bad values
    run = ["run", "-q", "-p", "quick", "--no-edge-cases", "-k", "torch-blockwise", "--out", "out", "--db", "none",
           "--no-isolate"]  # no worker is started for a refused run
    bad_numbers = {
        "--max-examples": [("0", "allowed an integer >= 1"), ("-3", "allowed an integer >= 1"),
                           ("2.5", "is not a number"), ("1e20", "is not a number"), ("lots", "is not a number"),
                           ("1000001", "allowed at most 1e+06"), (BIG_INT, "is not a number")],
        "--time-budget": [("0", "allowed a finite number > 0"), ("-1", "allowed a finite number > 0"),
                          ("nan", "allowed a finite number > 0"), ("inf", "allowed a finite number > 0"),
                          ("1e9", "allowed at most 604800"), ("soon", "is not a number")],
        "--shrink-budget": [("-1", "allowed a finite number >= 0"), ("nan", "allowed a finite number >= 0"),
                            ("1e7", "allowed at most 604800"), ("x", "is not a number")],
        "--timeout": [("0", "allowed a finite number > 0"), ("-5", "allowed a finite number > 0"),
                      ("nan", "allowed a finite number > 0"), ("inf", "allowed a finite number > 0"),
                      ("3e6", "allowed at most 604800"), ("1e300", "allowed at most 604800"),
                      ("soon", "is not a number")],
        "--compile-timeout": [("0", "allowed a finite number > 0"), ("-inf", "allowed a finite number > 0"),
                              ("2.2e6", "allowed at most 604800"), ("x", "is not a number")],
        "--determinism": [("0", "allowed an integer >= 1"), ("101", "allowed at most 100"),
                          ("1000000", "allowed at most 100"), ("2.0", "is not a number"), ("x", "is not a number")],
        "--chunk-threshold": [("-1", "allowed an integer >= 0"), (str(2**51), "allowed at most"),
                              ("x", "is not a number")],
        "--threads": [("-1", "allowed an integer in [0, 1024]"), ("1025", "allowed an integer in [0, 1024]"),
                      ("1000000", "allowed an integer in [0, 1024]"), ("abc", "allowed an integer in [0, 1024]"),
                      ("1.5", "allowed an integer in [0, 1024]")],
        "--jobs": [("0", "allowed an integer in [1, 256]"), ("-2", "allowed an integer in [1, 256]"),
                   ("257", "allowed an integer in [1, 256]"), ("many", "allowed an integer in [1, 256]")],
        "--seed": [("-1", "allowed an integer in [0, 2**64-1]"), ("x", "allowed an integer in [0, 2**64-1]"),
                   (str(2**64), "allowed an integer in [0, 2**64-1]"), (BIG_INT, "allowed an integer in [0, 2**64-1]")],
        "--shard": [("2/2", "allowed I/N"), ("-1/2", "allowed I/N"), ("0/0", "allowed I/N"), ("a/b", "allowed I/N"),
                    ("0/10001", "allowed I/N"), ("1", "allowed I/N"), ("", "allowed I/N")],
        "--k": [("dq=0", "allowed a finite number > 0"), ("dq=nan", "allowed a finite number > 0"),
                ("dq=-1", "allowed a finite number > 0"), ("dq=1e7", "allowed at most 1e+06"),
                ("dq=abc", "is not a number"), ("dx=3", "allowed OUTPUT=K"), ("dq", "allowed OUTPUT=K")],
    }
    for flag, values in bad_numbers.items():
        for i, (value, expected) in enumerate(values):
            add(f"run{flag}-{i}", [*run, f"{flag}={value}"], expected)
    for i, (value, expected) in enumerate([
            ("dq", "no SPEC"), ("all:", "no SPEC"), ("dx:atol=1", "allowed OUTPUT:atol="),
            ("dq:atol=abc", "--standard 'dq:atol=abc'"), ("dq:atol=-1", "allowed a float >= 0"),
            ("dq:rtol=nan", "allowed a float >= 0"), ("dq:ratio=2", "allowed a float in [0, 1]"),
            ("dq:foo=1", "allowed keys")]):
        add(f"run--standard-{i}", [*run, "--standard", value], expected)
    for i, (value, expected) in enumerate([
            ("foo=1", "allowed FIELD=VALUE"), ("head_dims_qk=abc", "comma-separated integers"),
            ("head_dims_qk=7", "allowed a non-empty subset of"), ("max_seqlen=0", "narrow max_seqlen=0")]):
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
            ("run-known-store-deep", ["--known", "in/store-deep.jsonl"], "not a Problem")]:
        add(case_id, [*run, *extra], expected)
    for case_id, env, expected in [
            ("env-omp-word", {"OMP_NUM_THREADS": "abc"}, "OMP_NUM_THREADS='abc' is invalid"),
            ("env-omp-zero", {"OMP_NUM_THREADS": "0"}, "OMP_NUM_THREADS='0' is invalid"),
            ("env-omp-huge", {"OMP_NUM_THREADS": "100000"}, "OMP_NUM_THREADS='100000' is invalid"),
            ("env-difftest-threads-word", {"DIFFTEST_THREADS": "all"}, "DIFFTEST_THREADS='all' is invalid"),
            ("env-difftest-threads-negative", {"DIFFTEST_THREADS": "-1"}, "DIFFTEST_THREADS='-1' is invalid"),
            ("env-difftest-threads-huge", {"DIFFTEST_THREADS": "5000"}, "DIFFTEST_THREADS='5000' is invalid")]:
        add(case_id, run, expected, env=env)

    # -- run --resume: ids, planted and malformed run folders (the folders: _plant_runs)
    resume = ["run", "--resume"]
    for case_id, rid, expected in [
            ("resume-dotdot", "../../elsewhere", "not a run id"), ("resume-dot", ".", "not a run id"),
            ("resume-absolute", "/etc", "not a run id"), ("resume-short", "0" * 31, "not a run id"),
            ("resume-upper", "A" * 32, "not a run id"), ("resume-slash", "0" * 32 + "/x", "not a run id"),
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
            ("resume-finished", FINISHED, "that run finished")]:
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
            ("calibrate-variant-log-is-a-report", ["calibrate", "--from-variant-logs", "in/good.json"],
             "line 1 is not a variant case record"),
            ("calibrate-report-missing", ["calibrate", "--from-reports", "in/nope.json"], "cannot read"),
            ("calibrate-replay-huge", ["calibrate", "--from-reports", "in/good.json", "--replay", "1001"],
             "at most 1000"),
            ("calibrate-examples-zero", ["calibrate", "-k", "torch-blockwise", "--max-examples", "0"],
             "allowed an integer >= 1"),
            ("calibrate-examples-huge", ["calibrate", "-k", "torch-blockwise", "--max-examples", "10000000"],
             "allowed at most"),
            ("calibrate-budget-negative", ["calibrate", "-k", "torch-blockwise", "--time-budget", "-1"],
             "allowed a finite number > 0"),
            ("calibrate-json-under-file", ["calibrate", "-k", "torch-blockwise", "--json", "in/good.json/x.json"],
             "its folder"),
            ("calibrate-json-directory", ["calibrate", "-k", "torch-blockwise", "--json", "in"],
             "--json 'in' is a directory"),
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
            ("no-subcommand", [], "the following arguments are required: command"),
            ("unknown-subcommand", ["frobnicate"], "invalid choice: 'frobnicate'")]:
        add(case_id, argv, expected)
    return rows


PLANTED = uuid.UUID(int=1).hex
LINKED = uuid.UUID(int=2).hex
FINISHED = uuid.UUID(int=3).hex
MODULE_RUN = uuid.UUID(int=4).hex
BROKEN = {name: uuid.UUID(int=100 + i).hex for i, name in enumerate(
    ["not-json", "deep", "big-int", "surrogate", "list", "argv-not-run", "argv-int", "wrong-id"])}


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
    _write(inp / "mid-repro.json", _rec(problem={**P.to_dict(), "seqlen_q": 1000, "seqlen_k": 1000,
                                                 "heads_q": 100, "heads_kv": 100}))
    _write(inp / "case.py", "raise SystemExit('ran')\n")
    _write(inp / "store-deep.jsonl", DEEP + "\n")
    _write(inp / "case.txt", "{}")
    (inp / "dir.json").mkdir()
    with open(inp / "huge.json", "wb") as f:  # sparse: 17 MB that take no disk
        f.truncate(17 * 2**20)
    out = root / "runs-out"
    (out / "runs").mkdir(parents=True)
    _plant(out, PLANTED, {"run_id": PLANTED, "argv": ["run", "-k", "evil:A"], "status": "running",
                          "finished_kernels": {}, "started_ns": 10**30})
    _plant(root / "planted-out", PLANTED, {"run_id": PLANTED, "argv": ["run"], "status": "running",
                                           "finished_kernels": {}, "started_ns": 1})
    (root / "empty-out").mkdir()
    elsewhere = root / "elsewhere"
    for rid, status, argv in ((LINKED, "interrupted", ["run"]), (FINISHED, "finished", ["run"]),
                              (MODULE_RUN, "interrupted", ["run", "-k", "evil_module_xyz:Adapter"])):
        r = Run(elsewhere if rid == LINKED else out, rid)
        r.dir.mkdir(parents=True)
        (r.dir / ".lock").touch()  # as Run.start leaves it
        r._save({"run_id": rid, "argv": argv, "status": status, "finished_kernels": {}, "started_ns": 1})
    (out / "runs" / LINKED).symlink_to(elsewhere / "runs" / LINKED)
    bad = {"not-json": "{", "deep": DEEP, "big-int": '{"argv": ' + BIG_INT + "}",
           "surrogate": '{"argv": ["run", "\\ud800"]}', "list": [],
           "argv-not-run": {"argv": ["gate"], "run_id": BROKEN["argv-not-run"]},
           "argv-int": {"argv": 3, "run_id": BROKEN["argv-int"]},
           "wrong-id": {"argv": ["run"], "run_id": PLANTED}}
    for name, content in bad.items():
        _write(out / "runs" / BROKEN[name] / "run.json", content)


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
        after = snapshot(world)
        if after != before:
            changed = sorted(set(after.items()) ^ set(before.items()))
            bad.append(f"{case_id}: wrote {changed[:4]}")
            before = after
    assert not bad, "\n".join(bad)
