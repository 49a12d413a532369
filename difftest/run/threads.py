"""How many CPU threads one ``difftest run`` process uses (torch's intra-op pool, OpenMP in
its kernel worker, and difftest's own input generation, difftest/model/counter_rng.py).

Why: torch takes every core of the host by default. Two shards of a campaign side by side
on one 32-core host (one per GPU) then run 2 x 32 threads on 32 cores, and every parallel
CPU step of both (input generation, references, gates) slows down: measured on the H200
host (2026-11-30, two H200 shards of one gpu campaign) the inputs phase of two shards took 36.5 s for
121 cases and 83.9 s for 99, against 49.5 s for 236 cases alone.

Rule, first that applies:
1. ``--threads N`` (N >= 1; 0 means every usable core, torch's default);
2. the environment variable ``DIFFTEST_THREADS`` (same values);
3. an ``OMP_NUM_THREADS`` already set by the user is kept (as the pytest plugin does);
4. with ``--shard I/N``: the usable cores divided by N (at least 1), because the README's
   scale-out runs the N shards of a campaign side by side on one host; shards on separate
   hosts should pass ``--threads 0``; with ``--jobs J`` (J campaigns at once, lanes.py)
   divided by J as well, each campaign being one more process pair on the same cores;
5. otherwise ``isolation.share_cores`` (half the cores each for the run and its worker;
   nothing changed without isolation).
The number is the run's share of the host. With isolation (the default) the run and its
kernel worker compute at once (references here, the kernel there), so each gets half of it
(``per_process``), as ``isolation.share_cores`` does with the whole host when no rule above
applies. It is exported as OMP_NUM_THREADS before the worker starts (the worker inherits
it) and set with ``torch.set_num_threads``. ``difftest run`` prints the choice.
"""

import os

from difftest.argcheck import MAX_THREADS
from difftest.errors import UsageError

ENV = "DIFFTEST_THREADS"


class ThreadsError(UsageError):
    """A bad ``--threads``, DIFFTEST_THREADS or OMP_NUM_THREADS value (one line)."""


def usable_cpus() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def parse_threads(text: str, source: str = "--threads", least: int = 0) -> int:
    t = str(text).strip()
    try:
        n = int(t) if len(t) <= 10 else -1
    except ValueError:
        n = -1
    if not least <= n <= MAX_THREADS:
        every = " (0 = every usable core)" if least == 0 else ""
        raise ThreadsError(
            f"{source}={str(text)[:40]!r} is invalid: allowed an integer in [{least}, {MAX_THREADS}]{every}"
        )
    return n


def choose(
    threads: int | None = None, shard: tuple[int, int] | None = None, env=None, cpus: int | None = None, jobs: int = 1
) -> tuple[int | None, str]:
    """(threads, why): the number of threads the rule above gives, None to leave the
    process as it is, and a phrase saying which rule decided."""
    env = os.environ if env is None else env
    cpus = cpus or usable_cpus()
    if threads is not None:
        return (threads or cpus), "--threads"
    if env.get(ENV, "").strip():
        n = parse_threads(env[ENV], ENV)
        return (n or cpus), ENV
    if env.get("OMP_NUM_THREADS", "").strip():
        parse_threads(env["OMP_NUM_THREADS"], "OMP_NUM_THREADS", least=1)  # torch would silently ignore 'abc'
        return None, "OMP_NUM_THREADS is set"
    shards = shard[1] if shard is not None and shard[1] > 1 else 1
    if shards > 1 or jobs > 1:
        parts = ([f"{shards} shards"] if shards > 1 else []) + ([f"{jobs} campaigns at once"] if jobs > 1 else [])
        where = f"--shard {shard[0]}/{shard[1]}: " if shards > 1 else "--jobs: "  # type: ignore[index]  # shards > 1: a shard
        return max(1, cpus // (shards * jobs)), f"{where}{cpus} cores / {' x '.join(parts)}"
    return None, "torch's default"


def per_process(n: int, isolate: bool) -> int:
    """Threads for each process of a run whose share is ``n``: half each for the run and its
    isolated worker (at least 1), all of it without a worker."""
    return max(1, n // 2) if isolate else n


def apply(n: int | None) -> None:
    """Use ``n`` threads in this process and the processes it starts (None: unchanged)."""
    if n is None:
        return
    os.environ["OMP_NUM_THREADS"] = str(n)
    # lazy: keeps torch off --help
    import torch

    torch.set_num_threads(n)
