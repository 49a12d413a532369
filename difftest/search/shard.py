"""Shards: ``--shard I/N`` splits a campaign's problems into N disjoint streams.

A Problem belongs to shard ``sha256(problem.to_json()) mod N``: a function of the
Problem alone, stable across processes, machines and Python versions (unlike
``hash()``). Every shard runs the same strategy with the same seed and keeps only its
own Problems (the others are rejected before they run), and the edge corpus and the
saved failures are split the same way, so N shards run side by side never run the same
drawn Problem twice, and ``difftest merge`` joins their reports into one.

The coverage phase splits its configuration tuples the same way (``owns``: the tuple's text
in place of the Problem's), so each shard plans rows for its own share of the tuples;
``difftest merge`` joins their pair coverage. Our own shrink walk after Hypothesis
(campaign._simplify) is not filtered: it follows one failure wherever it leads.
"""

import hashlib

from difftest.errors import UsageError


class ShardError(UsageError):
    """A bad ``--shard`` value or shard field (one line)."""


MAX_SHARDS = 10_000


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``"I/N"`` -> (I, N) with 0 <= I < N; None stays None."""
    if text is None:
        return None
    left, sep, right = str(text).partition("/")
    i: int | None
    n: int | None
    try:
        i, n = (int(left), int(right)) if len(str(text)) <= 20 else (None, None)
    except ValueError:
        i = n = None
    if not sep or i is None or n is None or n < 1 or not 0 <= i < n or n > MAX_SHARDS:
        raise ShardError(
            f"--shard {str(text)[:40]!r} is invalid: allowed I/N with integers 0 <= I < N <= "
            f"{MAX_SHARDS} (e.g. 0/2, 1/2)"
        )
    return i, n


def shard_of(problem, n: int) -> int:
    """The shard (0..n-1) a Problem belongs to."""
    digest = hashlib.sha256(problem.to_json().encode()).digest()
    return int.from_bytes(digest[:8], "big") % n


def in_shard(problem, shard: tuple[int, int] | None) -> bool:
    return shard is None or shard_of(problem, shard[1]) == shard[0]


def owns(text: str, shard: tuple[int, int] | None) -> bool:
    """Whether shard I of N owns a configuration tuple, given as its text."""
    if shard is None:
        return True
    digest = hashlib.sha256(text.encode()).digest()
    return int.from_bytes(digest[:8], "big") % shard[1] == shard[0]


def label(shard: tuple[int, int] | None) -> str | None:
    return None if shard is None else f"{shard[0]}/{shard[1]}"
