"""The difftest command line: one subcommand per module of difftest/commands/ (``SUBCOMMANDS``),
each with its ``HELP`` line (what ``difftest --help`` says of it; docs/cli.md has an entry for
each), ``add_arguments`` and ``command``; ``main`` is the one place an error becomes an exit code.

Each subcommand imports its heavy parts when it runs (torch takes seconds to import; those
imports are marked ``# lazy: keeps torch off --help``): ``difftest --help`` and ``difftest list``
never load torch, Hypothesis or a kernel module."""

import argparse
import atexit
import os
import signal
import sys

from difftest.commands import (
    bench,
    bisect,
    calibrate,
    gate,
    merge,
    mutants,
    new_adapter,
    probe,
    report,
    repro,
    run,
    sanitize,
    stress,
    variants,
)
from difftest.commands import list as list_  # the module of `difftest list` (not the builtin)
from difftest.commands.options import OneLineParser
from difftest.errors import EXIT_INPUT, InputError, UsageError, exit_interrupted, one_line
from difftest.safeio import safe_child_path
from difftest.workdir import WORKDIR

# subcommand -> its module (difftest/commands/<name>.py: HELP, add_arguments, command), in --help's order
SUBCOMMANDS = {
    "run": run,
    "repro": repro,
    "list": list_,
    "new-adapter": new_adapter,
    "mutants": mutants,
    "variants": variants,
    "calibrate": calibrate,
    "bench": bench,
    "merge": merge,
    "gate": gate,
    "report": report,
    "bisect": bisect,
    "probe": probe,
    "stress": stress,
    "sanitize": sanitize,
}
# subcommand -> its help line, the module's HELP
COMMANDS = {name: mod.HELP for name, mod in SUBCOMMANDS.items()}


def _fill(name: str, sp) -> None:
    """Arguments of subcommand ``name``."""
    SUBCOMMANDS[name].add_arguments(sp)
    sp.set_defaults(func=SUBCOMMANDS[name].command)


def description() -> str:
    """``difftest --help``'s opening, generated from ``COMMANDS``: it names every subcommand,
    and argparse lists each below it with its help line."""
    return (
        f"Property-based differential testing for attention backward kernels. {len(COMMANDS)} commands: "
        f"{', '.join(COMMANDS)}; each is described below and has its own --help."
    )


def build_parser(argv=None) -> argparse.ArgumentParser:
    """The parser; only the subcommand named in ``argv`` (default: all of them) gets its
    arguments (every one is light to build: the fronts import their engines when they run)."""
    p = OneLineParser(
        prog="difftest",
        description=description(),
        epilog=f"working folder: {WORKDIR}/ (outputs, failure store, Hypothesis data); add it to .gitignore",
    )
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
    args, extra = p.parse_known_args(argv)
    if extra:  # argparse words these as the top parser's ("difftest: error: ..."): the subcommand's line
        raise UsageError(f"unrecognized arguments: {' '.join(extra)}")
    return args


def main(argv=None) -> int:
    """The one place an input error becomes an exit code (difftest/errors.py, docs/exit-codes.md):
    every ``InputError`` a subcommand raises (its ``exit_code``: 2, but ``bisect --run``'s
    128), and an ``OSError`` (an unreadable input, an unwritable output, a full disk), as one
    line on stderr, ``difftest SUBCOMMAND: error: WHAT``. Child processes start with a safe
    import path (``safe_child_path``: the working directory is not on their ``sys.path``)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    cmd = next((a for a in argv if a in COMMANDS), "")
    with safe_child_path():
        try:
            args = parse(argv)
            return args.func(args)
        except InputError as e:
            print(f"difftest{' ' + cmd if cmd else ''}: error: {one_line(e)}", file=sys.stderr)
            return e.exit_code  # EXIT_INPUT, or BisectAbort (investigate/bisect.py) under git bisect run
        except KeyboardInterrupt as e:  # Ctrl-C in a subcommand without its own handling (run has interrupt.py)
            code = getattr(e, "exit_code", None) or exit_interrupted(signal.SIGINT)
            why = f" by {one_line(e.name)}" if hasattr(e, "name") else ""
            print(f"difftest{' ' + cmd if cmd else ''}: interrupted{why}", file=sys.stderr)
            return code
        except OSError as e:
            where = f" {e.filename}" if e.filename else ""
            print(
                f"difftest{' ' + cmd if cmd else ''}: error: cannot read or write{where}: {one_line(e.strerror or e)}",
                file=sys.stderr,
            )
        finally:
            if "difftest.run.folder" in sys.modules:
                sys.modules["difftest.run.folder"].release_locks()
    return EXIT_INPUT


def quick_exit(code) -> None:
    """Leave with ``code`` once stdout and stderr are flushed and the atexit handlers have run
    (temporary folders' finalizers, logging), skipping the interpreter's own teardown of what a
    run leaves loaded (torch, TileLang/TVM, the campaigns' objects): 0.6 s of a 10 s warm
    ``difftest run`` on a 2-core CPU, after the report is written (results/cpu-main-job.md).
    Every file difftest writes is closed by then (``safeio``'s atomic writes and ``os.write``
    appends), and lanes and kernel workers die with this process (``PR_SET_PDEATHSIG``)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (difftest run | head): nothing left to say
            pass
    atexit._run_exitfuncs()
    os._exit(code if isinstance(code, int) else EXIT_INPUT)


def entry() -> None:
    """The ``difftest`` console script and ``python -m difftest``: ``main``, then ``quick_exit``."""
    quick_exit(main())


if __name__ == "__main__":
    entry()
