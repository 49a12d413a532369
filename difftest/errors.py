"""One error hierarchy and one exit-code table for every subcommand (docs/exit-codes.md).

==========  ==========================================================================
exit code   meaning
==========  ==========================================================================
0           every kernel passed (``run``, ``repro``), the gate passed, the command did
            what it was asked (``merge``, ``report``, ``list``, ...)
1           a kernel failed a gate (a finding), or the CI gate failed
2           usage or input error: a bad flag, a malformed or oversized file, an output
            that cannot be written (disk full included); nothing was judged
3           nothing was checked: ``run`` (or the pytest fixture) judged no case of a
            kernel, or of any kernel; ``gate``: the candidate judged none; ``repro``: the
            case was skipped (the kernel cannot run that Problem here), so nothing was
            replayed (``stress``: no problem ran; ``sanitize``: a CUDA reproducer got no
            tool run)
130 / 143   interrupted by SIGINT / SIGTERM (128 + the signal); a finding made before the
            signal still exits 1
==========  ==========================================================================

Every refusal of input is an ``InputError`` (or a subclass). The command line turns it
into one line on stderr and exit code 2 in exactly one place, ``difftest.commands.cli.main``;
modules raise, they never print and return 2 themselves (the one exception to the code:
``bisect --run``'s ``BisectAbort`` carries 128, which stops ``git bisect run``). The
subclasses stay ``ValueError``s (``KernelSpecError`` also a ``KeyError``) so callers that
caught the old classes still work.
"""

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_INPUT = 2
EXIT_SKIPPED = 3
EXIT_NOTHING_CHECKED = EXIT_SKIPPED  # a run, or a gate's candidate, that judged no case: never a pass


def exit_interrupted(signum: int) -> int:
    """The exit code of a run ended by signal ``signum``: 128 + the signal (130, 143)."""
    return 128 + int(signum)


class DifftestError(Exception):
    """Base of every error difftest raises on purpose (not a kernel's own exception)."""

    exit_code = EXIT_FAILED


class InputError(DifftestError, ValueError):
    """Bad input from the user or from a file the user passed: the message is one line
    naming what is wrong and what is allowed; exit code 2."""

    exit_code = EXIT_INPUT


class UsageError(InputError):
    """A bad flag or flag combination (found after argparse: the preflight checks)."""


class FileFormatError(InputError):
    """A file difftest reads (report, reproducer, run.json, failure store) is malformed,
    too large, too deep, or not one difftest wrote."""


class OutputError(InputError):
    """An output cannot be written (read-only folder, a directory in a file's place,
    disk full): nothing half-written is left where a reader would take it for whole."""


# a bound on what a hostile file can put on stderr, with room for the registry's 37 kernel names
# that an unknown kernel's error lists (at 500 the list lost its last names, torch-blockwise)
ONE_LINE_CHARS = 1000


def one_line(text) -> str:
    """``text`` on one line (newlines and other control characters escaped), at most
    ``ONE_LINE_CHARS`` characters: what goes on stderr from a message that may quote a file."""
    s = str(text)
    s = "".join(c if c.isprintable() or c == " " else repr(c)[1:-1] for c in s)
    return s if len(s) <= ONE_LINE_CHARS else s[: ONE_LINE_CHARS - 3] + "..."


def exception_text(e: BaseException) -> str:
    """``Type: message`` of a kernel's exception; where the message is empty (CUTLASS DSL's
    ``DSLRuntimeError`` raised on an old FA4 beta said nothing), what it chains to instead,
    so a reason or a bisect line never ends at the colon."""
    text = str(e)
    if not text.strip():
        cause = e.__cause__ or e.__context__
        text = (
            f"(no message; from {type(cause).__name__}: {str(cause).strip()[:300] or '(no message)'})"
            if cause is not None
            else f"(no message; {e!r})"
        )
    return f"{type(e).__name__}: {text}"
