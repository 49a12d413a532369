"""The argparse pieces several subcommands share: the parser whose errors are one line, and
the isolation flags of every command that calls kernels."""

import argparse
import sys

from difftest.argcheck import positive_float


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (no usage dump) with exit code 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def add_isolation_arguments(
    p, unit: str, timeout_s: float, compile_timeout_s: float, *, resolved_later: bool = False
) -> None:
    """``--isolate``, ``--timeout`` and ``--compile-timeout``, as every command that calls kernels
    takes them; ``unit``: what a crash or hang costs (a case, a problem); ``timeout_s`` and
    ``compile_timeout_s`` the defaults (``resolved_later``: the flags default to None and the
    command fills them in, so it can tell a flag given from one left out)."""
    p.add_argument(
        "--isolate",
        action=argparse.BooleanOptionalAction,
        default=True,
        help=f"run kernels in a worker process so a crash or hang costs one {unit} (default on)",
    )
    p.add_argument(
        "--timeout",
        type=positive_float,
        default=None if resolved_later else timeout_s,
        help=f"seconds per kernel call before it counts as hung (default {timeout_s:g}; "
        "needs --isolate; JIT builds the adapter reports are not counted: --compile-timeout)",
    )
    p.add_argument(
        "--compile-timeout",
        type=positive_float,
        default=None if resolved_later else compile_timeout_s,
        help=f"seconds of a {unit}'s JIT builds before it counts as a build timeout, not a hang "
        f"(default {compile_timeout_s:g}; needs --isolate)",
    )
