"""SIGINT and SIGTERM end a campaign cleanly: the signal becomes ``Interrupted`` (a
KeyboardInterrupt, so Hypothesis and the runner let it through instead of recording it
as a kernel error), the campaign returns what it finished, and the CLI writes a partial
report and exits without a traceback.

Exit codes (docs/exit-codes.md): 1 when a failure was found before the signal (a finding outranks
the interruption), else 128 + the signal: 130 for SIGINT, 143 for SIGTERM. A second
signal while the partial report is being written is ignored; the worker process ignores
SIGINT (a Ctrl-C reaches the whole process group) so it never turns the interrupt into
a kernel error.
"""

import contextlib
import signal
import sys

from difftest.errors import EXIT_INPUT


class Interrupted(KeyboardInterrupt):
    """The run got SIGINT or SIGTERM."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum: int | None = signum  # None: OutputFailed (no signal)

    @property
    def name(self) -> str:
        assert self.signum is not None
        return signal.Signals(self.signum).name

    @property
    def exit_code(self) -> int:
        assert self.signum is not None
        return 128 + self.signum


class OutputFailed(Interrupted):
    """A write the run cannot go on without failed (the case log on a full disk: ENOSPC,
    EDQUOT, EIO): the run stops as if interrupted (the campaign hands back what finished,
    the CLI writes a partial report if it can, and ``--resume`` continues), with exit code
    2 (docs/exit-codes.md) and one line naming the file and the error."""

    def __init__(self, path, error: OSError):
        KeyboardInterrupt.__init__(self, str(path))
        self.signum = None
        self.path = str(path)
        self.error = error

    @property
    def name(self) -> str:
        return f"a failed write to {self.path} ({self.error.strerror or self.error})"

    @property
    def exit_code(self) -> int:
        return EXIT_INPUT


SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def interruptible():
    """Within the block, SIGINT/SIGTERM raise ``Interrupted`` once; later signals are
    ignored until the block exits (so the partial report gets written). Yields a dict
    whose ``"signum"`` is the first signal received (None if none)."""
    state = {"signum": None}

    def handler(signum, frame):
        if state["signum"] is None:
            state["signum"] = _PENDING[0] = signum
            raise Interrupted(signum)

    old_hook = sys.unraisablehook

    def unraisable(args):
        # the handler's raise swallowed where Python cannot propagate (a gc callback, __del__):
        # ``checkpoint`` raises it again, so the interpreter need not print it as a traceback
        if not isinstance(args.exc_value, Interrupted):
            old_hook(args)

    old = {s: signal.signal(s, handler) for s in SIGNALS}
    sys.unraisablehook = unraisable
    _PENDING[0] = None
    try:
        yield state
    finally:
        _PENDING[0] = None
        sys.unraisablehook = old_hook
        for s, h in old.items():
            signal.signal(s, h)


# The first signal of the innermost ``interruptible`` block, until ``checkpoint`` takes it.
# A handler's raise can be swallowed: a signal landing while Python runs a gc callback (Hypothesis
# registers one) raises there, and the interpreter prints "Exception ignored in gc_callback" and
# goes on; the block then ignored every later signal and the run ended with exit 0, not 143.
_PENDING = [None]


def checkpoint() -> None:
    """Raise ``Interrupted`` for a signal whose handler's raise never reached the run (called
    between cases: once a raise propagates, no further case runs to call it)."""
    signum, _PENDING[0] = _PENDING[0], None
    if signum is not None:
        raise Interrupted(signum)


@contextlib.contextmanager
def deferred():
    """Hold SIGINT/SIGTERM while a write must finish (they are ignored inside)."""
    old = {s: signal.signal(s, signal.SIG_IGN) for s in SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
