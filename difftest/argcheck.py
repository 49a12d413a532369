"""Argument and path checks every front, subcommand and file reader shares: every bad option
or file gets one line naming what is wrong and what is allowed, and exit code 2 (exit code 1
means "a kernel failed", so a typo must never look like a finding, nor a nan or negative k
write false failures into the failure store).

The upper bound of every numeric input (``MAX_*``); argparse ``type=`` converters with range
checks (``positive_float``, ``examples_int``, ...); ``check_outputs``, ``check_device`` and
friends, which raise ``UsageError`` in the preflight before the first case, turned into the
same line by ``cli.main``. A base module (below execute/, search/, report/, run/ and
measure/, which all read these bounds); the parser itself and the option groups several
subcommands take live with the fronts, in ``difftest/commands/options.py``.
"""

import argparse
import math

from difftest.errors import UsageError  # noqa: F401 -- re-exported: argcheck.UsageError
from difftest.model.problem import OUTPUTS
from difftest.safeio import check_tree, check_writable_dir, check_writable_file, unsafe_component
from difftest.workdir import HYPOTHESIS_HOME


def _number(text: str, kind, what: str):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: allowed {what}") from None
    if kind is float and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r}: allowed {what}")
    return v


# Upper bounds of every numeric flag (docs/exit-codes.md lists them): beyond one, one line
# and exit 2. A timeout beyond ~2.1e6 s overflowed the pipe's poll() and failed a correct
# kernel; a million threads or examples never ends or crashes the host.
MAX_SECONDS = 7 * 86400.0  # --timeout, --compile-timeout, --time-budget, --shrink-budget: a week
MAX_EXAMPLES = 1_000_000  # --max-examples
MAX_DETERMINISM = 100  # --determinism: calls per case (a reproducer's determinism_runs too)
MAX_COUNT = 100_000  # other counts (bench --repeats, --warmup, --gqa-kv, ...)
MAX_THREADS = 1024  # --threads, DIFFTEST_THREADS, OMP_NUM_THREADS
MAX_JOBS = 256  # --jobs
MAX_SEED = 2**64 - 1  # --seed
MAX_K = 1e6  # --k OUTPUT=K
MAX_CHUNK_THRESHOLD = 2**50  # --chunk-threshold (score elements)


def _at_most(text: str, v, hi, what: str):
    if v > hi:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed at most {hi:g} ({what})")
    return v


def bounded(kind, lo: float, lo_open: bool, hi: float, what: str, name: str, doc: str):
    """An argparse ``type``: a ``kind`` (int or float) number above ``lo`` (excluded when
    ``lo_open``) and at most ``hi`` (``what`` the upper bound means), named ``name``."""
    noun = "an integer" if kind is int else "a finite number"
    allowed = f"{noun} {'>' if lo_open else '>='} {lo:g}"

    def parse(text: str):
        v = _number(text, kind, allowed)
        if v < lo or (lo_open and v == lo):
            raise argparse.ArgumentTypeError(f"{text!r}: allowed {allowed}")
        return _at_most(text, v, hi, what)

    parse.__name__ = parse.__qualname__ = name
    parse.__doc__ = doc
    return parse


positive_float = bounded(
    float, 0, True, MAX_SECONDS, "seconds: a week", "positive_float", "Seconds: a finite number in (0, MAX_SECONDS]."
)
nonneg_float = bounded(
    float, 0, False, MAX_SECONDS, "seconds: a week", "nonneg_float", "Seconds: a finite number in [0, MAX_SECONDS]."
)
positive_int = bounded(int, 1, False, MAX_COUNT, "a count", "positive_int", "A count in [1, MAX_COUNT].")
nonneg_int = bounded(int, 0, False, MAX_COUNT, "a count", "nonneg_int", "A count in [0, MAX_COUNT].")
examples_int = bounded(
    int,
    1,
    False,
    MAX_EXAMPLES,
    "examples per kernel",
    "examples_int",
    "``--max-examples``: an integer in [1, MAX_EXAMPLES].",
)
determinism_int = bounded(
    int,
    1,
    False,
    MAX_DETERMINISM,
    "kernel calls per case",
    "determinism_int",
    "``--determinism``: calls per case, an integer in [1, MAX_DETERMINISM].",
)
chunk_threshold_int = bounded(
    int,
    0,
    False,
    MAX_CHUNK_THRESHOLD,
    "score elements",
    "chunk_threshold_int",
    "``--chunk-threshold``: score elements, an integer in [0, MAX_CHUNK_THRESHOLD].",
)
coverage_int = bounded(
    int,
    0,
    False,
    3,
    "the highest coverage stage: triples",
    "coverage_int",
    "``--coverage``: the coverage phase's strength, an integer in [0, 3].",
)


def k_item(text: str) -> tuple[str, float]:
    """``OUTPUT=K`` with K a finite number > 0."""
    name, eq, val = text.partition("=")
    if name not in OUTPUTS or not eq:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed OUTPUT=K with OUTPUT in {', '.join(OUTPUTS)}")
    try:
        k = float(val)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: K={val!r} is not a number: allowed a finite number > 0") from None
    if not math.isfinite(k) or k <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: K={val!r}: allowed a finite number > 0")
    if k > MAX_K:
        raise argparse.ArgumentTypeError(f"{text!r}: K={val!r}: allowed at most {MAX_K:g}")
    return name, k


def check_device(device: str | None) -> None:
    """Refuse ``--device cuda`` up front on a machine without CUDA."""
    if device == "cuda":
        # lazy: keeps torch off --help
        import torch

        if not torch.cuda.is_available():
            raise UsageError(
                "--device cuda: no CUDA device is available here (torch.cuda.is_available() "
                "is False): allowed --device cpu, or leave --device out"
            )


def check_outputs(out=None, files=(), db=None) -> None:
    """Refuse unusable output paths before the first case: ``out`` a directory,
    ``files`` [(option, path)] files, ``db`` the failure-store directory (or 'none')."""
    for what, path in [("--out", out), ("--db", db), *files]:
        if path is not None and not str(path).strip():
            raise UsageError(f"{what} '': an empty path would mean the working directory: allowed a path")
    whys = []
    if out is not None:
        whys.append(check_writable_dir(out, "--out"))
    for what, path in files:
        if path is not None:
            whys.append(check_writable_file(path, what))
    if db not in (None, "none"):
        whys.append(check_writable_dir(db, "--db"))
        whys.append(check_database(db, "--db"))
    for why in whys:
        if why:
            raise UsageError(why)


def check_database(db, what: str) -> str | None:
    """Why the example database and failure store folder ``db`` cannot be used, or None: a
    link on its way (``.difftest/examples -> elsewhere``), or a link (a FIFO, a device)
    inside it, two levels deep (Hypothesis's key folders and
    their files, ``difftest-failures/*.jsonl``), would be written through or read."""
    bad = unsafe_component(db) or check_tree(db, depth=2)
    return None if bad is None else f"{what} {str(db)!r}: {str(bad[0])!r} is {bad[1]}"


def check_workdir() -> None:
    """Refuse a ``.difftest/hypothesis`` (Hypothesis's own storage, which the CLI claims)
    reached through a link or holding one: its cache files would be written elsewhere."""
    for why in (
        check_writable_dir(HYPOTHESIS_HOME, "Hypothesis's folder"),
        check_database(HYPOTHESIS_HOME, "Hypothesis's folder"),
    ):
        if why:
            raise UsageError(why)
