"""Where a campaign's wall time goes: a cheap per-phase accumulator.

A campaign installs a ``PhaseTimer`` (``with timing.collect() as t:``) and the code it
calls marks its phases with ``with timing.phase("truth"):``; with no timer installed a
phase costs one global lookup. Phases nest *exclusively*: time inside an inner phase is
charged to the inner one only (a TileLang build inside the kernel call is "compile", not
"kernel"), so the phases add up to at most the wall time and never double count.

The isolation worker runs its own timer per request and sends the phase seconds back
with the result; the parent adds them (``PhaseTimer.add``) and charges what is left of
the round trip (pickling, the pipe, copying tensors to the CPU) to "transfer".

Phases (``PHASES``):
  inputs       building the Problem's inputs (and poisoned output buffers)
  compile      JIT builds and disk-cache loads the adapter reports (TileLang's cache)
  kernel       the kernel's own calls: the first run of a case
  determinism  the reruns of the kernel for the determinism gate (kernel calls too)
  truth        the float64 truth (oracles/chunked.py)
  truth_compile  the truth's Triton kernels compiled or loaded from Triton's disk cache, once per
               specialisation and process (oracles/fused_passes.py): framework overhead, one-time
  yardsticks   the same-dtype references the budget is measured against
  gates        the gates and determinism comparisons
  second_ref   a second reference kernel (FA3), when configured
  transfer     isolation: the worker round trip beyond the worker's own phases
  worker_start isolation: starting a worker process (spawn + imports)
  search       the rest of the campaign's wall time: Hypothesis drawing and shrinking
               Problems, the edge corpus, logging, reproducers (``finish`` computes it)

A timer may be given ``on_compile`` (a callable of one bool): it is told when the code
enters its outermost set-up phase (``UNTIMED``: "compile", or "worker_start" when an adapter
starts a process of its own, as TileOPs' does) (True) and leaves it (False). The isolation
worker installs one that tells its parent, so a build or an adapter's process start is
bounded by ``RunConfig.compile_timeout_s`` and never counted against the kernel's
``timeout_s`` (a slow build, or a slow interpreter start on a loaded host, is not a hung
kernel).

Framework overhead is everything except ``compile``, ``kernel`` and ``determinism``
(the kernel's own calls): ``overhead_share``.
"""

import time
from contextlib import contextmanager

from difftest.errors import InputError

PHASES = (
    "inputs",
    "compile",
    "kernel",
    "determinism",
    "truth",
    "truth_compile",
    "yardsticks",
    "gates",
    "second_ref",
    "transfer",
    "worker_start",
    "search",
)
KERNEL_PHASES = ("compile", "kernel", "determinism")
UNTIMED = ("compile", "worker_start")  # set-up inside a kernel call: not the kernel's timeout_s

_clock = time.perf_counter


class PhaseTimer:
    """Exclusive per-phase seconds. Not thread-safe: one timer per process (the campaign
    and the worker each have their own)."""

    def __init__(self, on_compile=None):
        self.seconds: dict[str, float] = {}
        self._stack: list[str] = []
        self._mark = 0.0
        self.on_compile = on_compile  # told True/False entering/leaving the outermost UNTIMED phase

    def _charge(self, now: float) -> None:
        if self._stack:
            top = self._stack[-1]
            self.seconds[top] = self.seconds.get(top, 0.0) + (now - self._mark)
        self._mark = now

    def enter(self, name: str) -> None:
        if name not in PHASES:
            raise InputError(f"phase={name!r}: allowed {PHASES}")
        self._charge(_clock())
        if name in UNTIMED and self.on_compile is not None and not self._setting_up():
            self.on_compile(True)
        self._stack.append(name)

    def exit(self) -> None:
        self._charge(_clock())
        name = self._stack.pop()
        if name in UNTIMED and self.on_compile is not None and not self._setting_up():
            self.on_compile(False)

    def _setting_up(self) -> bool:
        return any(n in UNTIMED for n in self._stack)

    def add(self, seconds: dict) -> None:
        """Add phase seconds measured elsewhere (the worker's)."""
        for name, s in seconds.items():
            if name in PHASES and s:
                self.seconds[name] = self.seconds.get(name, 0.0) + float(s)

    def total(self) -> float:
        return sum(self.seconds.values())

    def finish(self, wall: float) -> dict:
        """The split of ``wall`` seconds: the measured phases plus ``search`` = the rest
        (never negative), each in seconds and as a share, and the framework overhead."""
        measured = {n: s for n, s in self.seconds.items() if n != "search"}
        phases = {n: round(measured.get(n, 0.0), 4) for n in PHASES if n != "search"}
        phases["search"] = round(max(0.0, wall - sum(measured.values())), 4)
        kernel = sum(phases[n] for n in KERNEL_PHASES)
        return {
            "wall_s": round(wall, 4),
            "phases_s": phases,
            "share": {n: round(s / wall, 4) if wall > 0 else 0.0 for n, s in phases.items()},
            "kernel_s": round(kernel, 4),
            "overhead_s": round(max(0.0, wall - kernel), 4),
            "overhead_share": round(max(0.0, wall - kernel) / wall, 4) if wall > 0 else 0.0,
        }


_CURRENT: list[PhaseTimer] = []


@contextmanager
def collect(timer: PhaseTimer | None = None):
    """Install ``timer`` (a new one by default) as the one ``phase`` charges, for the
    duration of the block."""
    t = timer or PhaseTimer()
    _CURRENT.append(t)
    try:
        yield t
    finally:
        _CURRENT.remove(t)


def current() -> PhaseTimer | None:
    return _CURRENT[-1] if _CURRENT else None


@contextmanager
def phase(name: str):
    """Charge the block's time to ``name`` in the installed timer (no-op without one)."""
    t = _CURRENT[-1] if _CURRENT else None
    if t is None:
        yield
        return
    t.enter(name)
    try:
        yield
    finally:
        t.exit()


def render(split: dict) -> str:
    """One line per phase (seconds and share), then the framework overhead."""
    wall = split["wall_s"]
    lines = [f"time split of {wall:.1f} s:"]
    for n, s in sorted(split["phases_s"].items(), key=lambda kv: -kv[1]):
        if s > 0:
            lines.append(f"  {n:<13} {s:8.2f} s  {100 * split['share'][n]:5.1f}%")
    lines.append(
        f"  framework overhead (all but compile and the kernel's calls): {split['overhead_s']:.2f} s, "
        f"{100 * split['overhead_share']:.1f}% of the wall time"
    )
    return "\n".join(lines)
