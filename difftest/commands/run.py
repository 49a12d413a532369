"""``difftest run``: the parsed arguments become RunOptions; a RunPlan runs them
(difftest/run/plan.py)."""

import argparse

from difftest.argcheck import (
    MAX_SEED,
    chunk_threshold_int,
    coverage_int,
    determinism_int,
    examples_int,
    k_item,
    nonneg_float,
    positive_float,
    positive_int,
)
from difftest.commands.options import OneLineParser, add_isolation_arguments
from difftest.model.profiles import PROFILES
from difftest.run.folder import resumed_args
from difftest.run.lanes import JobsError, parse_jobs
from difftest.run.plan import (
    DEFAULT_COMPILE_TIMEOUT_S,
    DEFAULT_KERNELS,
    DEFAULT_TIMEOUT_S,
    RunOptions,
    RunPlan,
    resumable,
)
from difftest.run.threads import ThreadsError, parse_threads
from difftest.search.shard import ShardError, parse_shard
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT

HELP = "run property campaigns against kernels"


def config_from_args(a):
    """The RunConfig of a parsed ``difftest run`` (what RunPlan judges every case with)."""
    return RunOptions.from_args(a).run_config()


def add_arguments(p):
    p.add_argument(
        "--kernel",
        "-k",
        action="append",
        dest="kernels",
        metavar="NAME",
        help=f"kernel to test (repeatable; default: {', '.join(DEFAULT_KERNELS)}); see `difftest list`",
    )
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES), help="campaign profile")
    p.add_argument("--max-examples", type=examples_int, help="generated examples per kernel (overrides the profile)")
    p.add_argument(
        "--time-budget",
        type=positive_float,
        help="seconds each kernel's whole campaign may take: search, shrinking, signatures (overrides "
        "the profile; no case starts after it, so a campaign ends within one case's duration "
        "and the reports' writing past it)",
    )
    p.add_argument(
        "--shrink-budget",
        type=nonneg_float,
        help="seconds one failure's shrink may take, inside the time budget (overrides the profile)",
    )
    p.add_argument(
        "--coverage",
        type=coverage_int,
        metavar="T",
        help="the coverage phase's strength: 0 none, 1 every value of every configuration dimension, "
        "2 every pair of values, 3 also triples of the small dimensions (default: the profile's: "
        "quick 0, ci 1, nightly and gpu 3; docs/coverage.md)",
    )
    p.add_argument(
        "--max-findings",
        type=positive_int,
        metavar="N",
        help="distinct findings a hunt shrinks and signs at most (default 16); failures beyond are "
        "counted and listed as unexplained",
    )
    p.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output directory: reports, case logs, reproducers (default {DEFAULT_OUT})"
    )
    p.add_argument("--report", help="JSON report path (default OUT/report.json)")
    p.add_argument("--markdown", help="also write a markdown summary here (default OUT/summary.md)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument(
        "--prebuild",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="build the JIT kernels the campaigns start with in parallel on every core, before "
        "the first campaign (default on; difftest/run/prebuild.py)",
    )
    add_isolation_arguments(p, "case", DEFAULT_TIMEOUT_S, DEFAULT_COMPILE_TIMEOUT_S, resolved_later=True)
    p.add_argument(
        "--determinism",
        type=determinism_int,
        metavar="N",
        help="calls per case for the bitwise determinism gate (default 2 for kernels claiming determinism); "
        "every call that differs from the first is judged by the gates too",
    )
    p.add_argument(
        "--k", action="append", type=k_item, metavar="OUTPUT=K", help="error-budget multiplier for an output"
    )
    p.add_argument(
        "--standard",
        action="append",
        metavar="OUTPUT:SPEC",
        help="elementwise standard, e.g. dq:atol=1e-2,rtol=1e-2,ratio=0.999 (OUTPUT may be 'all')",
    )
    p.add_argument("--second-reference", metavar="KERNEL", help="a second reference kernel, e.g. fa3")
    p.add_argument(
        "--truth",
        choices=("float64", "float32"),
        default="float64",
        help="the reference --standard is judged against (float32: autograd in float32, as teams "
        "state their standards); the error budget always uses the float64 truth",
    )
    p.add_argument(
        "--chunk-threshold", type=chunk_threshold_int, help="score elements above which the chunked oracle is used"
    )
    p.add_argument("--no-poison", action="store_true", help="do not NaN-poison output buffers")
    p.add_argument(
        "--narrow",
        action="append",
        metavar="FIELD=VALUES",
        help="draw inside less than the kernel's capability, e.g. head_dims_qk=64,128 or "
        "sinks=false (repeatable; to focus a campaign or step around a known failure)",
    )
    p.add_argument("--no-edge-cases", action="store_true", help="skip the explicit corner-case corpus")
    p.add_argument(
        "--values-from",
        metavar="FILE",
        help="draw q/k/v/dO as windows of activations captured with difftest.capture (a safetensors "
        "file); implies --no-edge-cases",
    )
    p.add_argument("--db", default=DEFAULT_DB, help="Hypothesis example database directory ('none' to disable)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument(
        "--seed",
        type=_seed,
        metavar="N",
        help="fix the search (default: the profile's, 0 for quick and ci, unseeded for nightly and gpu); "
        "a baseline and a candidate run with the same seed draw the same problems",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        metavar="I/N",
        help="run shard I of N disjoint problem streams (join the reports with `difftest merge`)",
    )
    p.add_argument(
        "--threads",
        type=_threads,
        metavar="N",
        help="CPU threads of this run, halved between it and its kernel worker (0: every core). "
        "Default: $DIFFTEST_THREADS, else an OMP_NUM_THREADS you set, else with --shard I/N the "
        "cores divided by N (shards side by side on one host), else half the cores each "
        "(difftest/run/threads.py)",
    )
    p.add_argument(
        "--jobs",
        "-j",
        type=_jobs,
        metavar="N",
        help="campaigns at once, each in its own process with its own kernel worker (default auto: "
        "one per campaign up to the usable cores on the CPU; 1 on a GPU (a CUDA kernel or "
        "--device cuda) or with --no-isolate; 1 = one after another). Findings are the same; "
        "blocks print as campaigns finish, reports keep the order of -k (difftest/run/lanes.py)",
    )
    p.add_argument("--html", help="HTML report path (default OUT/report.html)")
    hunt = p.add_mutually_exclusive_group()
    hunt.add_argument(
        "--hunt",
        dest="hunt",
        action="store_true",
        default=None,
        help="go on after a failure: each distinct bug becomes one finding with a signature, shrunk "
        "within a bound, and the search steers away from what a finding explains (default for "
        "the nightly and gpu profiles)",
    )
    hunt.add_argument(
        "--first-failure",
        dest="hunt",
        action="store_false",
        help="stop at the first failure and shrink it (default for quick and ci, and what "
        "`difftest gate` baselines use: the same finding every run)",
    )
    p.add_argument(
        "--known",
        action="append",
        metavar="FILE",
        help="findings known from an earlier run (its report.json or findings.json, or the failure "
        "store: a difftest-failures/*.jsonl or its database folder): replayed first, listed as "
        "known, not shrunk again, and the search goes on past them (repeatable)",
    )
    p.add_argument(
        "--resume",
        nargs="?",
        const="",
        metavar="RUN_ID",
        help="continue a killed or interrupted run in --out (default: the latest unfinished one) "
        "with its original search arguments, without re-running its finished cases; outputs "
        "(--out, --report, --markdown, --html) come from this command line, never from the run",
    )
    p.add_argument(
        "--allow-import",
        action="store_true",
        help="with --resume: trust a 'module:attr' kernel the resumed run's arguments name",
    )


def _seed(text):
    try:
        v = int(text) if len(str(text)) <= 40 else -1
    except ValueError:
        v = -1
    if not 0 <= v <= MAX_SEED:
        raise argparse.ArgumentTypeError(f"--seed {str(text)[:40]!r} is invalid: allowed an integer in [0, 2**64-1]")
    return v


def _threads(text):
    try:
        return parse_threads(text)
    except ThreadsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _jobs(text):
    try:
        return parse_jobs(text)
    except JobsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _shard(text):
    try:
        return parse_shard(text)
    except ShardError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def command(a) -> int:
    """``difftest run``: the parsed arguments become RunOptions; a RunPlan runs them."""
    resume = None
    if a.resume is not None:  # continue a killed run with its own search arguments (folder.py: what is trusted)
        resume, argv = resumable(a.out, a.resume or None)  # RunError: one line, exit 2
        a = resumed_args(a, parse(argv), a.allow_import, defaults=parse(["run"]))
    return RunPlan(RunOptions.from_args(a), resume=resume).execute()


def parse(argv) -> argparse.Namespace:
    """``difftest run ...`` (``argv[0]`` is ``run``) parsed as ``cli.parse`` parses it: a resumed
    run's recorded command line, and the defaults it is compared with."""
    p = OneLineParser(prog="difftest")
    sp = p.add_subparsers(dest="command", required=True).add_parser("run")
    add_arguments(sp)
    sp.set_defaults(func=command)
    p.set_defaults(argv=tuple(argv))
    return p.parse_args(argv)
