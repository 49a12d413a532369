"""The state of one campaign's search: every Problem it ran and the case it gave, the
findings so far, the clock and the budget. The settings are ``campaign.Campaign`` (frozen);
what a failing case means is the mode's (``first_failure.FirstFailure``, ``hunt.Hunt``).

The clock: ``time_budget`` bounds the whole campaign (the search, shrinking, signatures and
the declaration checks), to within one remainder: the case in flight when the budget runs
out, and writing the reports. The search phases stop ``reserve`` seconds early, so that
what they found is still shrunk and signed inside the budget; a hunt that has met no failure
keeps a twentieth back instead of a quarter, so a passing nightly spends its budget drawing.
"""

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from difftest.execute import interrupt
from difftest.judge.runner import CaseResult, run_case
from difftest.model.problem import Problem
from difftest.search.case_log import CaseLog
from difftest.search.findings import Finding, Findings
from difftest.search.progress import Progress
from difftest.search.result import CampaignResult
from difftest.search.signature import (
    UNEXPLAINED_LISTED,
    cheapest_absorption,
    device_fault_only,
    unexplained_gates,
)
from difftest.vocab import Status

if TYPE_CHECKING:  # annotations only (the modes import nothing of this module)
    from difftest.search.first_failure import FirstFailure
    from difftest.search.hunt import Hunt

# The share of the budget kept back from the search for shrinking and signing what it found
# (at most the shrink budget): the search phases stop at time_budget - reserve.
RESERVE_SHARE = 0.25
# A hunt that has met no failure has nothing to shrink or sign: it keeps only this share back, for
# a late failure's shrink (made in what is left) and its signature. On the H100 (2026-12-07) fa3,
# tilelang and flex stopped drawing at 75% of a 330 s budget with nothing to shrink.
QUIET_RESERVE_SHARE = 0.05


@dataclass
class SearchState:
    settings: Any  # campaign.Campaign (importing it would close a cycle): kernel, profile, config, budgets (frozen)
    result: CampaignResult
    run_id: str
    findings: Findings  # the first finding's writer: reproducer and store entry, kept current
    bar: Progress
    log: CaseLog | None = None
    max_examples: int = 0  # drawn examples (a resumed unseeded run: what was left)
    time_budget: float = 0.0  # seconds the whole campaign may take (a resumed run: what was left)
    t0: float = field(default_factory=time.perf_counter)
    wall0: float = field(default_factory=time.time)
    seen: dict[Problem, CaseResult] = field(default_factory=dict)  # Problem -> its case (replayed, never run twice)
    keys: set[tuple] = field(default_factory=set)  # compile signatures run by the search
    built: set[tuple] = field(default_factory=set)  # compile signatures of every case run (shrinks, variations too)
    raised_at: dict[tuple, list[CaseResult]] = field(default_factory=dict)  # compile signature -> its cases that raised
    failed_at: float | None = None  # seconds in, at the first failure
    found: list[Finding] = field(default_factory=list)  # Finding per distinct bug so far (known ones first)
    explicit: set[Problem] = field(default_factory=set)  # replayed and corner Problems: never skipped
    searched: set[Problem] = field(default_factory=set)  # Problems the search itself ran (not shrinks or variations)
    finished_at: dict[Problem, float] = field(default_factory=dict)  # Problem -> seconds in, when it ran
    known_problems: dict[Problem, str] = field(default_factory=dict)  # Problem -> its --known file
    prior: set[Problem] = field(default_factory=set)  # Problems a resumed run took from its log
    resume_hunt: Problem | None = None  # the Problem whose hunt the kill cut short
    leftovers_hunted: bool = False  # a hunt's leftover failures were hunted: the search may draw on (_draw_on)
    drawn: int = 0  # this shard's Problems the search drew (run or not)
    mode: "FirstFailure | Hunt" = None  # type: ignore[assignment]  # set right after the state is made (campaign.py)

    # ------------------------------------------------------------------ the clock
    def now(self) -> float:
        return time.perf_counter() - self.t0

    @property
    def deadline(self) -> float:
        """Seconds in by which nothing new runs."""
        return self.time_budget

    @property
    def search_end(self) -> float:
        """Seconds in by which the search phases stop drawing and planning: the reserve is kept
        back for shrinking and signing, and a hunt that has met no failure keeps a smaller one
        (QUIET_RESERVE_SHARE). First-failure mode keeps the whole reserve: its one failure is
        shrunk after the search."""
        reserve = min(self.settings.shrink_budget, RESERVE_SHARE * self.time_budget)
        quiet = self.failed_at is None or self.leftovers_hunted  # nothing (left) to shrink after the search
        if quiet and self.mode is not None and self.mode.hunting:
            reserve = min(reserve, QUIET_RESERVE_SHARE * self.time_budget)
        return self.time_budget - max(0.0, reserve)

    # ------------------------------------------------------------------ cases
    def case(self, problem: Problem) -> CaseResult:
        """Run ``problem`` once and record it: every case lands in the result and the log; the
        mode hears of it first (a failure in the log always has its reproducer on disk)."""
        s = self.settings
        interrupt.checkpoint()  # a signal whose raise a gc callback swallowed stops the run here
        if self.log and not s.config.isolate:
            self.log.started(problem, s.kernel.name)  # in-process: a crash leaves this line naming the Problem
        case = self.seen[problem] = run_case(s.kernel, problem, s.config)
        key = s.kernel.capability.compile_signature(problem)
        self.built.add(key)
        if case.status == Status.ERROR and s.kernel.capability.compile_key:
            self.raised_at.setdefault(key, []).append(case)
        res = self.result
        res.cases.append(case)
        self.finished_at[problem] = self.now()
        if case.failed and not self.known_covers(case) and self.failed_at is None:
            self.failed_at = self.now()
            res.first_failure = case
            res.examples_to_fail = len(res.cases)
            res.seconds_to_fail = self.failed_at
        self.mode.recorded(case)
        if self.log:
            self.log.write(case)
        return case

    def run_seen(self, problem: Problem) -> CaseResult:
        """The case of ``problem``: replayed when the campaign ran it, else run now."""
        case = self.seen.get(problem)
        return case if case is not None else self.case(problem)

    # ------------------------------------------------------------------ findings
    def signatures(self) -> list:
        return [s for f in self.found for s in f.signatures]

    def known_covers(self, case) -> bool:
        """Every failing gate of ``case`` is explained by a known finding (--known)."""
        known = [s for f in self.found if f.known for s in f.signatures]
        return bool(known) and case.failed and not unexplained_gates(known, case)

    def explained(self, case) -> bool:
        """``case`` failed, and the findings so far explain every gate it fails."""
        return case.failed and not unexplained_gates(self.signatures(), case)

    def explained_problem(self, problem) -> bool:
        return any(self.finding_explains(f, problem) for f in self.found)

    def finding_explains(self, f: Finding, problem) -> bool:
        """``f`` explains ``problem`` (a hunt steers away from it): ``problem`` has every need of
        one of its signatures (``Finding.explains_problem``), or, on a kernel with a compile key,
        one of its errors whose every variation raised it too (no need found) has already raised
        at ``problem``'s compile key. Such an error belongs to the build configuration: FA4
        4.0.0b25's head-dim predicate build error came from 48 (d_qk, d_v) pairs, no rule of needs
        describes it, and on the H100 it took 176 of 885 cases, many at keys it had raised at
        already. Neither a history-dependent error nor a CUDA error's name (a runtime fault whose
        trigger may be the values) marks a key."""
        return f.explains_problem(problem) or bool(self._raised_here(f, problem))

    def _raised_here(self, f: Finding, problem) -> list:
        """The signatures of ``f`` whose error needs nothing found and already raised at ``problem``'s
        compile key (``finding_explains``)."""
        cap = self.settings.kernel.capability
        raised = self.raised_at.get(cap.compile_signature(problem)) if cap.compile_key else None
        if not raised:
            return []
        broad = [
            s
            for s in f.signatures
            if s.error_type and not s.needs and s.complete and not s.history and not device_fault_only(s)
        ]
        return [s for s in broad if any(s.fails_alike(c) for c in raised)]

    def hidden_by_error(self, problem, case) -> bool:
        """A run of ``problem`` would raise an error that needs nothing found where it already raised
        (its compile key), one ``case`` does not fail alike: it would say nothing of ``case``'s failure.
        A hunt's shrink steps and signature variations for ``case`` do not run it (FA4 4.0.0b25 on the
        H100, four shards merged: 87 of 151 predicate-error cases ran at a key that had raised it, none of
        them a drawn Problem after the error was signed: the hunts' own steps)."""
        return any(not s.fails_alike(case) for f in self.found for s in self._raised_here(f, problem))

    def absorb_alike(self) -> None:
        """Kernel errors no finding explains but one fails alike (the same exception and message
        shape, outside its needs): the signature that widens least to hold it does
        (``signature.cheapest_absorption``), one finding per root cause rather
        than a case left over for a need it disproves."""
        cap = self.settings.kernel.capability
        for c in self.result.cases:
            if c.status != Status.ERROR or not unexplained_gates(self.signatures(), c):
                continue
            alike = [
                (f, i, sig)
                for f in self.found
                if not f.known
                for i, sig in enumerate(f.signatures)
                if sig.fails_alike(c)
            ]
            got = cheapest_absorption(alike, c.problem, cap)
            if got is None:
                continue
            f, i, wider = got
            if i == 0:
                f.signature = wider
            else:
                f.variants[i - 1] = wider
            self.result.settings["absorbed"] = self.result.settings.get("absorbed", 0) + 1

    def count_hits(self) -> None:
        """Each finding's hits (failing cases it explains), the search's share of them and
        when it was first seen; the failing cases no finding explains, listed."""
        st, res = self, self.result
        st.absorb_alike()
        for f in st.found:
            f.hits = f.search_hits = 0
        res.unexplained, res.unexplained_cases = 0, []
        for i, c in enumerate(res.cases):
            if not c.failed:
                continue
            if unexplained_gates(st.signatures(), c):
                res.unexplained += 1
                if len(res.unexplained_cases) < UNEXPLAINED_LISTED:
                    res.unexplained_cases.append(
                        f"case {i + 1}: {c.problem.short()} ({c.error_type or ', '.join(c.failed_gates)})"
                    )
            for f in st.found:
                if f.explains(c):
                    f.hits += 1
                    f.search_hits += c.problem in st.searched or c.problem in st.explicit
                    if not f.first_seen:
                        at = st.finished_at.get(c.problem, 0.0)
                        f.first_seen = {
                            "case": i + 1,
                            "seconds": round(at, 2),
                            "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(st.wall0 + at)),
                        }
                        if f.first is None:
                            f.first = c
                        if f.best is None:
                            f.best = c

    def log_event(self, event: str, record: dict) -> None:
        if self.log:
            self.log.event(event, record)
