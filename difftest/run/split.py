"""Where a whole ``difftest run``'s wall time goes (each campaign prints its own time split of
its phases: execute/timing.py). A cold CPU main job spends most of its time outside any
campaign's clock: the interpreter's start and the imports before the first campaign, a
lane's wait for its JIT builds (run/prebuild.py), the report writing after the last one;
the campaigns' own splits add up to less than the run, and run side by side.

``RunSplit`` keeps the run's phases in order, each ending where the next begins:

  start      from the process's start (Linux: /proc/self/stat; elsewhere from the plan's
             start) to the first campaign: interpreter, imports, the kernels loaded, the
             lanes' preload
  prebuild   one campaign at a time: every JIT build joined before the first campaign
  campaigns  the campaigns, side by side or one after another; each with its interval
             (seconds from this phase's start) and the part of it spent waiting for its
             builds (a lane prebuilds before its campaign's clock starts)
  reports    report.json, summary.md, report.html, the summary printed

``render`` is the block ``difftest run`` prints before its last line."""

import os
import time

from difftest.errors import InputError

PHASES = ("start", "prebuild", "campaigns", "reports")


def process_age_s() -> float | None:
    """Seconds since this process started (Linux ``/proc``), None where unknown."""
    try:
        with open("/proc/self/stat", "rb") as f:
            after_name = f.read().rsplit(b")", 1)[1].split()  # the name may hold spaces and ")"
        with open("/proc/uptime", "rb") as f:
            uptime = float(f.read().split()[0])
        started = int(after_name[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in ticks since boot
    except (OSError, ValueError, IndexError):
        return None
    return max(0.0, uptime - started)


class RunSplit:
    """The run's phases and its campaigns' intervals, on one clock (``time.perf_counter``)."""

    def __init__(self, clock=time.perf_counter, age_s=process_age_s):
        self.clock = clock
        now = clock()
        age = age_s()
        self.origin = now - (age or 0.0)  # the process's start where known, else now
        self.from_process = age is not None
        self.marks: list[tuple[str, float]] = [("start", self.origin)]
        self.campaigns: dict[str, list] = {}  # kernel -> [start, end or None, seconds waiting for builds]

    def enter(self, phase: str) -> None:
        """End the phase under way and begin ``phase`` (one of ``PHASES``, in that order)."""
        if phase not in PHASES:
            raise InputError(f"phase {phase!r}: allowed {PHASES}")
        self.marks.append((phase, self.clock()))

    def campaign_started(self, kernel: str) -> None:
        self.campaigns[kernel] = [self.clock(), None, 0.0]

    def campaign_ended(self, kernel: str, prebuild: dict | None = None) -> None:
        """``prebuild``: the counts of its builds (run/prebuild.py), whose ``waited_s`` it spent
        before its own clock started."""
        span = self.campaigns.setdefault(kernel, [self.clock(), None, 0.0])
        span[1] = self.clock()
        span[2] = float((prebuild or {}).get("waited_s") or 0.0)

    def phases(self, now: float | None = None) -> dict:
        """phase -> seconds, the phases entered so far, the last one up to ``now``."""
        end = self.clock() if now is None else now
        out: dict = {}
        for (name, t), nxt in zip(self.marks, [*self.marks[1:], ("", end)]):
            out[name] = out.get(name, 0.0) + max(0.0, nxt[1] - t)
        return out

    def render(self) -> str:
        now = self.clock()
        wall = now - self.origin
        since = "since the process started" if self.from_process else "since the run's plan started"
        lines = [f"run time split of {wall:.1f} s ({since}):"]
        phases = self.phases(now)
        begun = dict(self.marks)
        for name in PHASES:
            if name not in phases:
                continue
            share = phases[name] / wall if wall > 0 else 0.0
            lines.append(f"  {name:<13} {phases[name]:8.2f} s  {100 * share:5.1f}%")
            if name == "campaigns":
                t0 = begun[name]
                for kernel, (a, b, waited) in self.campaigns.items():
                    end = f"{b - t0:6.2f}" if b is not None else "   ..."
                    note = f"  (waited {waited:.2f} s for its builds)" if waited > 0 else ""
                    lines.append(f"    {kernel:<20} {a - t0:6.2f} -> {end} s{note}")
        return "\n".join(lines)
