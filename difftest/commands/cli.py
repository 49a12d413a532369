"""The difftest command line: one subcommand per entry of ``COMMANDS``, whose help line is also
what ``difftest --help`` says of it (docs/cli.md has an entry for each).

Each subcommand imports what it needs when it runs (torch takes seconds to import):
``difftest --help`` and ``difftest list`` never load torch, Hypothesis or a kernel module."""

import argparse
import sys

from difftest.commands.argcheck import (
    OneLineParser,
    UsageError,
    add_isolation_arguments,
    chunk_threshold_int,
    coverage_int,
    determinism_int,
    examples_int,
    k_item,
    nonneg_float,
    positive_float,
    positive_int,
)
from difftest.commands.scaffold import write_skeleton
from difftest.execute import adapter as registry
from difftest.model.profiles import PROFILES
from difftest.printable import block, cell
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
from difftest.search.reproducer import replay
from difftest.search.shard import ShardError, parse_shard
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT, WORKDIR


def config_from_args(a):
    """The RunConfig of a parsed ``difftest run`` (what RunPlan judges every case with)."""
    return RunOptions.from_args(a).run_config()


def add_run_arguments(p):
    p.add_argument("--kernel", "-k", action="append", dest="kernels", metavar="NAME",
                   help=f"kernel to test (repeatable; default: {', '.join(DEFAULT_KERNELS)}); see `difftest list`")
    p.add_argument("--profile", "-p", default="ci", choices=sorted(PROFILES), help="campaign profile")
    p.add_argument("--max-examples", type=examples_int, help="generated examples per kernel (overrides the profile)")
    p.add_argument("--time-budget", type=positive_float,
                   help="seconds each kernel's whole campaign may take: search, shrinking, signatures (overrides "
                        "the profile; no case starts after it, so a campaign ends within one case's duration "
                        "and the reports' writing past it)")
    p.add_argument("--shrink-budget", type=nonneg_float,
                   help="seconds one failure's shrink may take, inside the time budget (overrides the profile)")
    p.add_argument("--coverage", type=coverage_int, metavar="T",
                   help="the coverage phase's strength: 0 none, 1 every value of every configuration dimension, "
                        "2 every pair of values, 3 also triples of the small dimensions (default: the profile's: "
                        "quick 0, ci 1, nightly and gpu 3; docs/coverage.md)")
    p.add_argument("--max-findings", type=positive_int, metavar="N",
                   help="distinct findings a hunt shrinks and signs at most (default 16); failures beyond are "
                        "counted and listed as unexplained")
    p.add_argument("--out", default=DEFAULT_OUT, help=f"output directory: reports, case logs, reproducers "
                                                       f"(default {DEFAULT_OUT})")
    p.add_argument("--report", help="JSON report path (default OUT/report.json)")
    p.add_argument("--markdown", help="also write a markdown summary here (default OUT/summary.md)")
    p.add_argument("--device", choices=("cpu", "cuda"), help="device (default: the kernel's own)")
    p.add_argument("--prebuild", action=argparse.BooleanOptionalAction, default=True,
                   help="build the JIT kernels the campaigns start with in parallel on every core, before "
                        "the first campaign (default on; difftest/run/prebuild.py)")
    add_isolation_arguments(p, "case", DEFAULT_TIMEOUT_S, DEFAULT_COMPILE_TIMEOUT_S, resolved_later=True)
    p.add_argument("--determinism", type=determinism_int, metavar="N",
                   help="calls per case for the bitwise determinism gate (default 2 for kernels claiming determinism); "
                        "every call that differs from the first is judged by the gates too")
    p.add_argument("--k", action="append", type=k_item, metavar="OUTPUT=K",
                   help="error-budget multiplier for an output")
    p.add_argument("--standard", action="append", metavar="OUTPUT:SPEC",
                   help="elementwise standard, e.g. dq:atol=1e-2,rtol=1e-2,ratio=0.999 (OUTPUT may be 'all')")
    p.add_argument("--second-reference", metavar="KERNEL", help="a second reference kernel, e.g. fa3")
    p.add_argument("--truth", choices=("float64", "float32"), default="float64",
                   help="the reference --standard is judged against (float32: autograd in float32, as teams "
                        "state their standards); the error budget always uses the float64 truth")
    p.add_argument("--chunk-threshold", type=chunk_threshold_int,
                   help="score elements above which the chunked oracle is used")
    p.add_argument("--no-poison", action="store_true", help="do not NaN-poison output buffers")
    p.add_argument("--narrow", action="append", metavar="FIELD=VALUES",
                   help="draw inside less than the kernel's capability, e.g. head_dims_qk=64,128 or "
                        "sinks=false (repeatable; to focus a campaign or step around a known failure)")
    p.add_argument("--no-edge-cases", action="store_true", help="skip the explicit corner-case corpus")
    p.add_argument("--values-from", metavar="FILE",
                   help="draw q/k/v/dO as windows of activations captured with difftest.capture (a safetensors "
                        "file); implies --no-edge-cases")
    p.add_argument("--db", default=DEFAULT_DB, help="Hypothesis example database directory ('none' to disable)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress bar")
    p.add_argument("--seed", type=_seed, metavar="N",
                   help="fix the search (default: the profile's, 0 for quick and ci, unseeded for nightly and gpu); "
                        "a baseline and a candidate run with the same seed draw the same problems")
    p.add_argument("--shard", type=_shard, metavar="I/N",
                   help="run shard I of N disjoint problem streams (join the reports with `difftest merge`)")
    p.add_argument("--threads", type=_threads, metavar="N",
                   help="CPU threads of this run, halved between it and its kernel worker (0: every core). "
                        "Default: $DIFFTEST_THREADS, else an OMP_NUM_THREADS you set, else with --shard I/N the "
                        "cores divided by N (shards side by side on one host), else half the cores each "
                        "(difftest/run/threads.py)")
    p.add_argument("--jobs", "-j", type=_jobs, metavar="N",
                   help="campaigns at once, each in its own process with its own kernel worker (default auto: "
                        "one per campaign up to the usable cores on the CPU; 1 on a GPU (a CUDA kernel or "
                        "--device cuda) or with --no-isolate; 1 = one after another). Findings are the same; "
                        "blocks print as campaigns finish, reports keep the order of -k (difftest/run/lanes.py)")
    p.add_argument("--html", help="HTML report path (default OUT/report.html)")
    hunt = p.add_mutually_exclusive_group()
    hunt.add_argument("--hunt", dest="hunt", action="store_true", default=None,
                      help="go on after a failure: each distinct bug becomes one finding with a signature, shrunk "
                           "within a bound, and the search steers away from what a finding explains (default for "
                           "the nightly and gpu profiles)")
    hunt.add_argument("--first-failure", dest="hunt", action="store_false",
                      help="stop at the first failure and shrink it (default for quick and ci, and what "
                           "`difftest gate` baselines use: the same finding every run)")
    p.add_argument("--known", action="append", metavar="FILE",
                   help="findings known from an earlier run (its report.json or findings.json, or the failure "
                        "store: a difftest-failures/*.jsonl or its database folder): replayed first, listed as "
                        "known, not shrunk again, and the search goes on past them (repeatable)")
    p.add_argument("--resume", nargs="?", const="", metavar="RUN_ID",
                   help="continue a killed or interrupted run in --out (default: the latest unfinished one) "
                        "with its original search arguments, without re-running its finished cases; outputs "
                        "(--out, --report, --markdown, --html) come from this command line, never from the run")
    p.add_argument("--allow-import", action="store_true",
                   help="with --resume: trust a 'module:attr' kernel the resumed run's arguments name")


def _seed(text):
    from difftest.commands.argcheck import MAX_SEED

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


def cmd_run(a) -> int:
    """``difftest run``: the parsed arguments become RunOptions; a RunPlan runs them."""
    resume = None
    if a.resume is not None:  # continue a killed run with its own search arguments (folder.py: what is trusted)
        from difftest.run.folder import resumed_args

        resume, argv = resumable(a.out, a.resume or None)  # RunError: one line, exit 2
        a = resumed_args(a, parse(argv), a.allow_import, defaults=parse(["run"]))
    return RunPlan(RunOptions.from_args(a), resume=resume).execute()


def cmd_repro(a) -> int:
    from difftest.errors import EXIT_FAILED, EXIT_PASSED, EXIT_SKIPPED
    from difftest.vocab import Status

    r = replay(a.file, kernel=a.kernel, allow_import=a.allow_import, profile=a.profile,
               device=a.device)  # ReproducerError: exit 2
    print(block(r.render(verbose=True)))  # the kernel's own messages: printable (printable.py)
    if r.status == Status.SKIPPED:  # nothing was replayed: neither a pass nor a finding
        why = (r.reason or "").splitlines()[0] if r.reason else ""
        print(f"difftest repro: skipped, nothing replayed: {cell(why)}", file=sys.stderr)
        return EXIT_SKIPPED
    return EXIT_FAILED if r.failed else EXIT_PASSED


def cmd_list(a) -> int:
    """Kernel names with where they come from; ``--check`` loads each adapter (imports
    torch and the kernel's packages) to say whether it can run here and what it claims."""
    head = ("KERNEL", "ADAPTER (module:attr)") + (("RUNS HERE", "DEVICE", "DTYPES", "DETERMINISTIC") if a.check else ())
    rows = []
    for n in registry.names():
        target = registry.describe(n)
        if not a.check:
            rows.append((n, target))
            continue
        try:
            k = registry.get(n)
            why = k.available()
            c = k.capability
            rows.append((n, target, "yes" if why is None else f"no: {why}", c.device, ",".join(c.dtypes),
                         "yes" if c.deterministic else ""))
        except Exception as e:  # a broken third-party adapter must not hide the others
            rows.append((n, target, f"no: {type(e).__name__}: {e}", "", "", ""))
    w = [max(len(r[i]) for r in [head] + rows) for i in range(len(head))]
    for r in [head] + rows:
        print("  ".join(x.ljust(w[i]) for i, x in enumerate(r)).rstrip())
    if not a.check:
        print("\n(`difftest list --check` loads each adapter: whether it runs here, device, dtypes)")
    return 0


# subcommand -> the module holding its add_arguments/command (the others are defined here)
MODULES = {"mutants": "difftest.measure.mutants", "calibrate": "difftest.measure.calibration",
           "bench": "difftest.measure.bench", "merge": "difftest.report.merge", "gate": "difftest.report.ci_gate",
           "report": "difftest.report.html", "bisect": "difftest.measure.bisect", "probe": "difftest.measure.probe",
           "variants": "difftest.measure.variants", "stress": "difftest.measure.stress",
           "sanitize": "difftest.measure.sanitize"}


def cmd_new_adapter(a) -> int:
    from pathlib import Path

    if not str(a.dir).strip() or (Path(a.dir).exists() and not Path(a.dir).is_dir()):
        raise UsageError(f"--dir {a.dir!r}: not a folder: allowed a folder (existing or to be created)")
    try:
        root = write_skeleton(a.name, a.dir)
    except (ValueError, FileExistsError, NotADirectoryError) as e:
        raise UsageError(str(e)) from None
    print(f"wrote {root}/ (adapter, capability, pyproject.toml entry point, a pytest test)\n"
          f"next: pip install -e {root} && difftest run -k {a.name} -p quick")
    return 0


# subcommand -> its help line
COMMANDS = {
    "run": "run property campaigns against kernels",
    "repro": "replay a .json reproducer (the .py is run with python, never by difftest)",
    "list": "list known kernels (--check: whether they can run here)",
    "new-adapter": "write a skeleton adapter package for your own kernel",
    "mutants": "run the mutant catalogue (detection power)",
    "variants": "run the correct-variant catalogue (false alarms)",
    "calibrate": "measure k_needed over correct kernels",
    "bench": "time kernels' backward (CUDA events); --oracle: the float64 truth next to FA3; --inputs: the input draw",
    "merge": "join reports (the shards of a campaign) into one",
    "gate": "compare a candidate report with a baseline (CI gating)",
    "report": "render a report.json (HTML)",
    "bisect": "replay a reproducer across versions (wheels, folders, a git range): first bad, last good",
    "probe": "call a kernel across its capability's dimensions: served, refused, or accepted then wrong",
    "stress": "race stress: one large call repeated (100x) under load, every repetition compared bit for bit",
    "sanitize": "run .json reproducers (or a run's findings) under compute-sanitizer: memcheck, racecheck, ...",
}


def _fill(name: str, sp) -> None:
    """Arguments of subcommand ``name`` (only the chosen one is built: each may import heavy modules)."""
    if name == "run":
        add_run_arguments(sp)
        sp.set_defaults(func=cmd_run)
    elif name == "repro":
        sp.add_argument("file", help="a .json reproducer written by difftest")
        sp.add_argument("--kernel", help="run it against another kernel (e.g. the fixed one)")
        sp.add_argument("--allow-import", action="store_true",
                        help="trust a 'module:attr' kernel named in the file (imports that module)")
        sp.add_argument("--profile", "-p", choices=sorted(PROFILES),
                        help="size limits the problem must fit (default: the largest for the device it runs "
                             "on: nightly on the CPU, gpu on CUDA)")
        sp.add_argument("--device", choices=("cpu", "cuda"),
                        help="the device to replay on (default: the one recorded; a case recorded on CUDA is "
                             "refused where there is none, unless --device cpu)")
        sp.set_defaults(func=cmd_repro)
    elif name == "list":
        sp.add_argument("--check", action="store_true",
                        help="load every adapter: whether it can run here, device, dtypes (imports torch)")
        sp.set_defaults(func=cmd_list)
    elif name == "new-adapter":
        sp.add_argument("name", help="kernel name (the package is the name with '-' as '_')")
        sp.add_argument("--dir", default=".", help="folder to create the package in (default: here)")
        sp.set_defaults(func=cmd_new_adapter)
    else:
        import importlib

        mod = importlib.import_module(MODULES[name])
        mod.add_arguments(sp)
        sp.set_defaults(func=mod.command)


def description() -> str:
    """``difftest --help``'s opening, generated from ``COMMANDS``: it names every subcommand,
    and argparse lists each below it with its help line."""
    return (f"Property-based differential testing for attention backward kernels. {len(COMMANDS)} commands: "
            f"{', '.join(COMMANDS)}; each is described below and has its own --help.")


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` (default: all of them) gets its
    arguments, so ``difftest --help`` imports nothing heavy."""
    p = OneLineParser(prog="difftest", description=description(),
                      epilog=f"working folder: {WORKDIR}/ (outputs, failure store, Hypothesis data); add it "
                             f"to .gitignore")
    sub = p.add_subparsers(dest="command", required=True)
    chosen = [a for a in (argv or []) if a in COMMANDS][:1] if argv is not None else list(COMMANDS)
    for name, help_ in COMMANDS.items():
        sp = sub.add_parser(name, help=help_, description=help_)
        if name in chosen:
            _fill(name, sp)
    return p


def parse(argv: list) -> argparse.Namespace:
    """``argv`` parsed; the Namespace carries the command line itself as ``argv`` (a run
    records it for --resume) and is never written to afterwards."""
    p = build_parser(argv)
    p.set_defaults(argv=tuple(argv))
    return p.parse_args(argv)


def main(argv=None) -> int:
    """The one place an input error becomes an exit code (difftest/errors.py, docs/exit-codes.md):
    every ``InputError`` a subcommand raises (its ``exit_code``: 2, but ``bisect --run``'s
    128), and an ``OSError`` (an unreadable input, an unwritable output, a full disk), as one
    line on stderr, ``difftest SUBCOMMAND: error: WHAT``. Child processes start with a safe
    import path (``safe_child_path``: the working directory is not on their ``sys.path``)."""
    import signal

    from difftest.errors import EXIT_INPUT, InputError, exit_interrupted, one_line
    from difftest.safeio import safe_child_path

    argv = sys.argv[1:] if argv is None else list(argv)
    cmd = next((a for a in argv if a in COMMANDS), "")
    with safe_child_path():
        try:
            args = parse(argv)
            return args.func(args)
        except InputError as e:
            print(f"difftest{' ' + cmd if cmd else ''}: error: {one_line(e)}", file=sys.stderr)
            return e.exit_code  # EXIT_INPUT, or BisectAbort (measure/bisect.py) under git bisect run
        except KeyboardInterrupt as e:  # Ctrl-C in a subcommand without its own handling (run has interrupt.py)
            code = getattr(e, "exit_code", None) or exit_interrupted(signal.SIGINT)
            why = f" by {one_line(e.name)}" if hasattr(e, "name") else ""
            print(f"difftest{' ' + cmd if cmd else ''}: interrupted{why}", file=sys.stderr)
            return code
        except OSError as e:
            where = f" {e.filename}" if e.filename else ""
            print(f"difftest{' ' + cmd if cmd else ''}: error: cannot read or write{where}: "
                  f"{one_line(e.strerror or e)}", file=sys.stderr)
        finally:
            if "difftest.run.folder" in sys.modules:
                sys.modules["difftest.run.folder"].release_locks()
    return EXIT_INPUT


if __name__ == "__main__":
    sys.exit(main())
