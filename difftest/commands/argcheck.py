"""Command-line input checks: every bad option or file gets one line naming what is
wrong and what is allowed, and exit code 2 (exit code 1 means "a kernel failed", so a
typo must never look like a finding, nor a nan or negative k write false failures into
the failure store).

``OneLineParser`` makes argparse's own errors one line; the ``*_arg`` functions are
argparse ``type=`` converters with range checks; ``UsageError`` is raised by later
checks (the preflight before the first case) and turned into the same line by
``cli.main``.
"""

import argparse
import math
import sys

from difftest.errors import UsageError  # noqa: F401 -- re-exported: argcheck.UsageError


class OneLineParser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line (no usage dump) with exit code 2."""

    def error(self, message):
        sys.stderr.write(f"{self.prog}: error: {message}\n")
        sys.exit(2)


def _number(text: str, kind, what: str):
    try:
        v = kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number: allowed {what}") from None
    if kind is float and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"{text!r}: allowed {what}")
    return v


def positive_float(text: str) -> float:
    v = _number(text, float, "a finite number > 0")
    if v <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed a finite number > 0")
    return v


def nonneg_float(text: str) -> float:
    v = _number(text, float, "a finite number >= 0")
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed a finite number >= 0")
    return v


def positive_int(text: str) -> int:
    v = _number(text, int, "an integer >= 1")
    if v < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed an integer >= 1")
    return v


def nonneg_int(text: str) -> int:
    v = _number(text, int, "an integer >= 0")
    if v < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed an integer >= 0")
    return v


def k_item(text: str) -> tuple[str, float]:
    """``OUTPUT=K`` with K a finite number > 0."""
    from difftest.model.problem import OUTPUTS

    name, eq, val = text.partition("=")
    if name not in OUTPUTS or not eq:
        raise argparse.ArgumentTypeError(f"{text!r}: allowed OUTPUT=K with OUTPUT in {', '.join(OUTPUTS)}")
    try:
        k = float(val)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: K={val!r} is not a number: allowed a finite number > 0") from None
    if not math.isfinite(k) or k <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: K={val!r}: allowed a finite number > 0")
    return name, k


def check_device(device: str | None) -> None:
    """Refuse ``--device cuda`` up front on a machine without CUDA."""
    if device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available here (torch.cuda.is_available() "
                             "is False): allowed --device cpu, or leave --device out")


def check_outputs(out=None, files=(), db=None) -> None:
    """Refuse unusable output paths before the first case: ``out`` a directory,
    ``files`` [(option, path)] files, ``db`` the failure-store directory (or 'none')."""
    from difftest.safeio import check_writable_dir, check_writable_file

    whys = []
    if out is not None:
        whys.append(check_writable_dir(out, "--out"))
    for what, path in files:
        if path is not None:
            whys.append(check_writable_file(path, what))
    if db not in (None, "none"):
        whys.append(check_writable_dir(db, "--db"))
    for why in whys:
        if why:
            raise UsageError(why)
