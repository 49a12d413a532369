"""Campaign: Hypothesis drives a strategy over a kernel's capability, every drawn
Problem is a case (runner.run_case), failures are shrunk, saved in the failure store
(``failure_store.py``) and written as reproducers.

``Campaign`` holds one kernel's settings (resolved from its Profile, overrides applied)
and, while ``run()`` searches, the search's state: the cases seen, the compile keys, when
the first failure came. ``run_campaign(...)`` builds one and runs it.

Problems that failed in the kernel's earlier campaigns (the failure store) run first, as
explicit examples, whatever the seed; then the classic corners from
``strategies.edge_problems``; then drawn Problems. An unseeded search is steered with
``hypothesis.target`` on the worst error ratio, so it climbs toward the edge of the budget;
a seeded one draws from its seed alone, neither steered by the kernel's results nor fed
the literals of local source code (``seeded_search.py``), so a baseline and a candidate
draw the same Problems.

Two modes. *First failure* (profiles quick and ci, and the gate's baselines): the first
failure ends the search; Hypothesis and then ``shrinking.simplify`` shrink it, and it is
signed (``signature.derive``) so reports and the gate name it as a hunt would. *Hunt*
(nightly and gpu; ``hunt=True``): the property never raises. A failing case that the
findings so far do not explain (``signature.unexplained_gates``) is shrunk right there,
toward a failure none explains, within ``shrink_budget`` and ``finding_calls`` runs, then
signed and kept as a ``Finding`` (or added to the finding whose bug it is), and Hypothesis
goes on drawing. Drawn Problems a finding explains are skipped, all but 1 in
``steer_every``, and counted (``explained_skipped``). The search's examples and seconds
still bound it: no new Problem runs after ``time_budget``, and no shrink or variation after
``time_budget + shrink_budget``. Known findings (``known``, from ``--known``) replay first,
are listed, never shrunk, and neither stop nor fail the campaign.

Time budgets: Hypothesis has no wall-clock stop, so once a campaign's budget is spent
new Problems are not run (they count as passing) while Problems already seen replay
their recorded outcome; the failure Hypothesis replays at the end is therefore always
the one that was measured (no flaky reports).
"""

import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, example, given, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from difftest.execute import adapter as registry
from difftest.execute import interrupt, timing
from difftest.execute.adapter import KernelAdapter
from difftest.judge.declaration import claim_record
from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.model.profiles import Profile, get_profile
from difftest.search.case_log import CaseLog, logged_cases, logged_events
from difftest.search.failure_store import load_failures, safe_name
from difftest.search.findings import Finding, Findings
from difftest.search.progress import Progress
from difftest.search.seeded import local_constants_off
from difftest.search.shard import in_shard
from difftest.search.shard import label as shard_label
from difftest.search.signature import MAX_VARIATIONS, derive, same_identity, unexplained_gates
from difftest.strategies.compile import compile_reuse
from difftest.vocab import CampaignStatus, FailureKind, Status
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT

# Seconds the simplify walk and the signature's variations each get after a first failure
# when the shrink budget is spent already ("at least a few seconds": _conclude).
FINISH_FLOOR_S = 5.0


class CaseFailed(AssertionError):
    def __init__(self, case: CaseResult):
        super().__init__(case.render())
        self.case = case


class _BudgetSpent(BaseException):
    """The search's time budget is spent: a hard stop. A BaseException, as KeyboardInterrupt
    is, so Hypothesis lets it through instead of taking it for a failure, and stops drawing
    (it used to draw, and skip, every remaining example: 3000 of them took 30 s)."""


@dataclass
class CampaignResult:
    kernel: str
    profile: str
    status: CampaignStatus = CampaignStatus.PASSED
    reason: str = ""
    cases: list = field(default_factory=list)
    failure: CaseResult | None = None  # the shrunk failing case
    first_failure: CaseResult | None = None  # the first failing case seen, before shrinking
    examples_to_fail: int | None = None
    seconds_to_fail: float | None = None
    unrun: int = 0  # Problems drawn after the search budget was spent: not run (difftest gate reads it)
    reproducer: dict | None = None
    compile_keys: int = 0
    coverage: dict = field(default_factory=dict)  # {"hit": {feature: cases}, "missing": [features]}
    compile_stats: dict | None = None  # builds/cache hits during the campaign, for kernels that count them
    elapsed: float = 0.0
    timing: dict | None = None  # where the wall time went (difftest/execute/timing.py: PhaseTimer.finish)
    compile_reuse: dict | None = None  # cases reusing a compiled configuration (strategies.compile_reuse)
    settings: dict = field(default_factory=dict)
    declaration: list = field(default_factory=list)  # declaration problems behind the failure (declaration.py)
    hunt: bool = False  # the search went on after failures (one Finding per distinct bug)
    findings: list = field(default_factory=list)  # Finding per distinct bug (findings.py), known ones included
    explained_skipped: int = 0  # drawn Problems not run: a finding's signature explains them (steering)
    unexplained: int = 0  # failing cases no finding explains (the findings cap or the budget ran out first)

    def __post_init__(self):
        self.status = CampaignStatus(self.status)

    @property
    def failed(self) -> bool:
        return self.status == CampaignStatus.FAILED


@dataclass
class Campaign:
    """One kernel's search. The fields are its settings; ``run()`` searches once and
    returns the CampaignResult. ``of(...)`` fills them from a Profile."""

    kernel: KernelAdapter
    profile: Profile
    max_examples: int
    time_budget: float  # seconds of search
    shrink_budget: float  # extra seconds once a failure is found
    seed: int | None  # None: a fresh random search each run
    config: RunConfig = field(default_factory=RunConfig)
    strategy: object = None  # a Hypothesis strategy of Problems (None: strategies.problems for the kernel)
    out_dir: Path | None = None  # case log and reproducers (None: no log; reproducers under DEFAULT_OUT)
    database: str | None = DEFAULT_DB  # Hypothesis's example database and the failure store (None: neither)
    edge_cases: bool = True  # run strategies.edge_problems first
    progress: bool = False
    on_case: object = None  # called with every new CaseResult
    shard: tuple[int, int] | None = None  # (I, N): only the Problems of shard I of N (difftest.search.shard)
    run_id: str | None = None  # tags every case-log line, names this run's reproducer (None: a new uuid)
    resume: bool = False  # out_dir's case log holds this run's finished cases (a killed run): never rerun
    hunt: bool | None = None  # go on after a failure (None: the profile's ``hunt``)
    known: list = field(default_factory=list)  # signature.Known entries of this kernel (--known)
    steer_every: int = 4  # of the drawn Problems a finding explains, run 1 in N (0: run them all)
    max_findings: int = 16  # distinct findings a hunt shrinks at most; later failures are counted
    finding_calls: int = 200  # shrink runs per finding, at most
    # the search's state, set by run()
    result: CampaignResult | None = field(default=None, init=False, repr=False)
    seen: dict = field(default_factory=dict, init=False, repr=False)  # Problem -> its CaseResult (replayed)
    keys: set = field(default_factory=set, init=False, repr=False)  # compile signatures run
    failed_at: float | None = field(default=None, init=False, repr=False)  # seconds in, at the first failure
    t0: float = field(default=0.0, init=False, repr=False)
    log: CaseLog | None = field(default=None, init=False, repr=False)
    bar: Progress | None = field(default=None, init=False, repr=False)
    findings: Findings | None = field(default=None, init=False, repr=False)  # reproducer + store, kept current
    found: list = field(default_factory=list, init=False, repr=False)  # Finding per distinct bug so far
    explicit: set = field(default_factory=set, init=False, repr=False)  # replayed/corner Problems: never skipped
    searched: set = field(default_factory=set, init=False, repr=False)  # Problems the search itself ran
    finished_at: dict = field(default_factory=dict, init=False, repr=False)  # Problem -> seconds in, when it ran
    hunting: bool = field(default=False, init=False, repr=False)
    _explained_drawn: int = field(default=0, init=False, repr=False)
    _skipped: set = field(default_factory=set, init=False, repr=False)
    known_problems: dict = field(default_factory=dict, init=False, repr=False)  # Problem -> its --known file
    wall0: float = field(default=0.0, init=False, repr=False)
    prior: set = field(default_factory=set, init=False, repr=False)  # Problems a resumed run took from its log
    resume_hunt: object = field(default=None, init=False, repr=False)  # the Problem whose hunt the kill cut short

    @classmethod
    def of(cls, kernel, profile="ci", *, max_examples: int | None = None, time_budget: float | None = None,
           shrink_budget: float | None = None, seed: int | None = -1, config: RunConfig | None = None,
           out_dir=None, **settings) -> "Campaign":
        """``kernel``: an adapter or a registry name; ``profile``: a name or a Profile. The
        numbers left as None (``seed``: -1) come from the profile."""
        if isinstance(kernel, str):
            kernel = registry.get(kernel)
        prof = get_profile(profile)
        return cls(kernel, prof, prof.examples if max_examples is None else max_examples,
                   prof.search_s if time_budget is None else time_budget,
                   prof.shrink_s if shrink_budget is None else shrink_budget,
                   prof.seed if seed == -1 else seed, config or RunConfig(),
                   out_dir=Path(out_dir) if out_dir else None, **settings)

    @property
    def spec(self) -> str:
        """The registry name that rebuilds the kernel (keys the failure store, reproducers)."""
        return getattr(self.kernel, "spec", None) or self.kernel.name

    def run(self) -> CampaignResult:
        """Search once. The first failure's reproducer and store entry are written when it
        is found and at each shrink step (findings.py). On SIGINT/SIGTERM
        (``KeyboardInterrupt``) it re-raises with ``.partial``, the result of what finished."""
        kernel, prof = self.kernel, self.profile
        self.run_id = self.run_id or uuid.uuid4().hex
        self.result = res = CampaignResult(kernel.name, prof.name, settings={
            "max_examples": self.max_examples, "time_budget_s": self.time_budget,
            "shrink_budget_s": self.shrink_budget, "seed": self.seed, "database": self.database,
            "config": self.config.to_dict(), "spec": self.spec, "shard": shard_label(self.shard),
            "run_id": self.run_id,
            "capability": claim_record(kernel.capability),
            **({"narrowed": kernel.narrowed} if getattr(kernel, "narrowed", None) else {})})
        self.hunting = bool(getattr(prof, "hunt", False) if self.hunt is None else self.hunt)
        res.hunt = res.settings["hunt"] = self.hunting
        why = kernel.available()
        if why:
            res.status, res.reason = CampaignStatus.UNAVAILABLE, why
            return res

        from difftest import strategies

        strategy = self.strategy if self.strategy is not None else strategies.problems(kernel.capability, prof)
        log_name = f"{safe_name(kernel.name)}.cases.jsonl"
        prior = logged_cases(self.out_dir / log_name, self.run_id) if self.out_dir and self.resume else []
        hunts = logged_events(self.out_dir / log_name, self.run_id, ("hunt", "finding", "merged")) \
            if prior and self.hunting else []
        self.log = CaseLog(self.out_dir / log_name, self.run_id) if self.out_dir else None
        res.settings["case_log"] = log_name if self.out_dir else None
        self.findings = Findings(kernel, self.config, (self.out_dir or Path(DEFAULT_OUT)) / "repro",
                                 self.database, self.spec, self.run_id)
        saved = [p for p in load_failures(self.database, self.spec, prof) if kernel.capability.covers(p)]
        # known findings (--known) first: their Problems replay before anything else
        self.found = [Finding(k.signature, known=True, source=k.source) for k in self.known if k.signature]
        self.known_problems = {p: k.source for k in self.known for p in k.problems if kernel.capability.covers(p)}
        saved = list(dict.fromkeys(list(self.known_problems) + saved))
        edge = list(strategies.edge_problems(kernel.capability, prof)) if self.edge_cases else []
        edge = [p for p in saved + [p for p in edge if p not in saved] if in_shard(p, self.shard)]  # saved first
        self.explicit = set(edge)
        res.settings["edge_cases"] = len(edge)  # explicit corners run first; the other cases are drawn
        res.settings["replayed_failures"] = len(saved)
        if self.known:
            res.settings["known"] = {"findings": len(self.found), "problems": len(self.known_problems)}
        self.bar = Progress(kernel.name, self.max_examples + len(edge), self.progress)
        self.seen, self.keys = {}, set()
        # JIT kernels may count builds (compile_stats()); in a worker process the count is not ours to read
        counting = hasattr(kernel, "compile_stats") and not self.config.isolate
        stats0 = kernel.compile_stats() if counting else None
        timer = timing.PhaseTimer()
        self.t0, self.wall0 = time.perf_counter(), time.time()
        self.failed_at = None
        self.drawn = 0  # this shard's Problems the search drew (run or not)
        if prior:
            self._resume_from(prior, hunts)
        try:
            with timing.collect(timer):
                try:
                    if self.resume_hunt is not None:  # finish the shrink the kill cut short, from where it began
                        self._hunt(self.seen[self.resume_hunt])
                    self._search(strategy, edge)
                    if self.hunting:
                        self._hunt_leftovers()
                except _BudgetSpent:  # the search's budget is spent; what it left undrawn is res.unrun
                    if self.hunting:
                        self._hunt_leftovers()  # returns at once: its deadline is the same budget
                except CaseFailed as e:
                    res.failure = e.case
                    res.status = CampaignStatus.FAILED
                    # finish the shrink: Hypothesis can stall in a local minimum and never shrinks the
                    # explicit edge corpus; walk down through simpler Problems that fail the same way
                    left = max(FINISH_FLOOR_S, self.failed_at + self.shrink_budget - self._now())
                    res.failure = self._simplify(res.failure, left)
                self._conclude()
        except KeyboardInterrupt as e:  # SIGINT/SIGTERM (interrupt.py): hand back what finished
            self._interrupted(e)
            raise
        finally:
            self.bar.close()
            if self.log:
                self.log.close()
            res.elapsed = self._now()
            res.compile_keys = len(self.keys)
            res.timing = timer.finish(res.elapsed)
            res.compile_reuse = compile_reuse(res.cases, kernel.capability)
            res.coverage = _coverage(res.cases, kernel.capability, prof)
            if counting:
                stats1 = kernel.compile_stats()
                res.compile_stats = {k: v - stats0.get(k, 0) for k, v in stats1.items() if isinstance(v, (int, float))}
        if res.failure is not None:  # the final shrunk case (usually written already at its shrink step)
            from difftest.judge.declaration import diagnose

            if not self.hunting and self.findings.best is not res.failure:
                self.findings.first = self.findings.first or res.first_failure
                self.findings.write(res.failure)
            res.reproducer = res.reproducer if self.hunting else self.findings.reproducer
            if not self.hunting and res.findings and not res.findings[-1].known:
                res.findings[-1].reproducer = res.reproducer
            def run(k, p):  # a Problem the campaign ran (a resumed one: before the kill) is not run again
                return self.seen[p] if k is kernel and p in self.seen else run_case(k, p, self.config)

            try:
                res.declaration = diagnose(kernel, res.failure, run, res.first_failure)
            except KeyboardInterrupt as e:
                e.partial = res
                raise
        return res

    def _resume_from(self, prior: list, hunts: list) -> None:
        """A resumed run: what finished before the kill counts as run and never runs again;
        a hunt's findings are kept as they were logged (``_resume_findings``)."""
        res, findings = self.result, self.findings
        self.prior = {c.problem for c in prior}
        for case in prior:
            self.seen[case.problem] = case
            res.cases.append(case)
            self.keys.add(self.kernel.capability.compile_signature(case.problem))
            self.finished_at[case.problem] = 0.0
            if self.hunting:  # a hunt attributes them once the search is done (_hunt_leftovers)
                continue
            if case.failed and res.first_failure is None:
                self.failed_at = 0.0  # the shrink budget restarts now
                res.first_failure, res.examples_to_fail = case, len(res.cases)
                res.seconds_to_fail = sum(c.seconds for c in res.cases)
            if res.first_failure is not None and case.failed and same_failure(res.first_failure, case):
                findings.found(case, res.first_failure)
        res.settings["resumed_cases"] = len(prior)
        if hunts:
            self._resume_findings(hunts)
        if self.seed is None:  # an unseeded search draws new Problems: only the rest of the examples
            self.max_examples = max(1, self.max_examples - len(prior))
        self.time_budget = max(0.0, self.time_budget - sum(c.seconds for c in prior))

    def _resume_findings(self, events: list) -> None:
        """The hunt's case-log events before the kill: each new finding it kept comes back as
        logged (signature, variants, shrunk case, reproducer, shrink record), so it is neither
        shrunk again nor kept twice; a shrink the kill cut short (its ``hunt`` line is the last)
        is finished first, from the case it began with (its steps are logged cases: only the
        rest runs). Findings are rebuilt in order up to the first whose cases are missing."""
        from difftest.errors import InputError
        from difftest.model.problem import Problem

        records = {}
        for e in events:
            if e["event"] == "finding":
                records[e.get("number")] = e
        restored = []
        for n in range(1, len(records) + 1):
            try:
                f = Finding.from_log(records[n], self.seen) if n in records else None
            except (KeyError, TypeError, ValueError, InputError):  # another schema: shrink it again
                f = None
            if f is None:
                break
            restored.append(f)
        self.found += restored
        self.result.settings["hunt_attempts"] = sum(e["event"] == "hunt" for e in events)
        last = events[-1] if events else None
        if last is not None and last["event"] == "hunt" and last.get("number") == len(restored) + 1:
            try:
                p = Problem.from_dict(last["problem"])
            except (KeyError, TypeError, ValueError, InputError):
                return
            if p in self.seen:
                self.resume_hunt = p

    def _log_event(self, event: str, record: dict) -> None:
        if self.log:
            self.log.event(event, record)

    def _interrupted(self, e: KeyboardInterrupt) -> None:
        res, findings = self.result, self.findings
        res.reason = f"interrupted by {getattr(e, 'name', 'SIGINT')}"
        if self.hunting:  # every finding's reproducer was written when it was found
            self._count_hits()
            new = [f for f in self.found if not f.known]
            res.findings = list(self.found)
            res.status = CampaignStatus.FAILED if new else CampaignStatus.INTERRUPTED
            if new:
                res.failure, res.first_failure, res.reproducer = new[0].best, new[0].first, new[0].reproducer
            e.partial = res
            return
        if res.first_failure is not None and (findings.best is None or findings.reproducer is None):
            findings.first = findings.first or res.first_failure  # the signal cut its write short
            findings.write(findings.best or res.first_failure)
        if findings.best is not None:
            res.status, res.failure = CampaignStatus.FAILED, findings.best
        else:
            res.status = CampaignStatus.INTERRUPTED
        res.reproducer = findings.reproducer
        e.partial = res

    def _now(self) -> float:
        return time.perf_counter() - self.t0

    def _over_budget(self) -> bool:
        if self.hunting or self.failed_at is None:  # a hunt's shrinks run inside its search budget
            return self._now() > self.time_budget
        return self._now() > self.failed_at + self.shrink_budget

    def _case(self, problem) -> CaseResult:
        """Run ``problem`` once and record it (every case lands in the result and the log;
        a failure of the first failure's kind updates the reproducer and store first, so a
        failure in the log always has them on disk)."""
        interrupt.checkpoint()  # a signal whose raise a gc callback swallowed stops the run here
        if self.log and not self.config.isolate:
            self.log.started(problem, self.kernel.name)  # in-process: a crash leaves this line naming the Problem
        case = self.seen[problem] = run_case(self.kernel, problem, self.config)
        res = self.result
        res.cases.append(case)
        self.finished_at[problem] = self._now()
        new = case.failed and not self._known_covers(case)  # a known finding neither stops nor shrinks
        if new and self.failed_at is None:
            self.failed_at = self._now()
            res.first_failure = case
            res.examples_to_fail = len(res.cases)
            res.seconds_to_fail = self.failed_at
        if new and not self.hunting and same_failure(res.first_failure, case):
            self.findings.found(case, res.first_failure)
        if self.log:
            self.log.write(case)
        return case

    def _property(self, problem) -> None:
        """The Hypothesis test: a case per new Problem, failing on the first failure's kind."""
        hypothesis.assume(in_shard(problem, self.shard))  # another shard's Problem: not ours to run
        res = self.result
        case = self.seen.get(problem)
        self.drawn += 1
        if case is not None and problem in self.prior:  # a resumed run's search meets what it ran before
            self.searched.add(problem)
        if case is None:
            if self._over_budget():
                if self.failed_at is None or self.hunting:  # the search's budget, not the shrink's: stop drawing
                    res.unrun = max(1, self.max_examples - (self.drawn - 1))
                    raise _BudgetSpent
                return
            if self._steered_away(problem):
                return
            case = self._case(problem)
            self.searched.add(problem)
            self.keys.add(self.kernel.capability.compile_signature(problem))
            if self.on_case:
                self.on_case(case)
            self.bar.update(len(res.cases), sum(c.failed for c in res.cases),
                            max(c.worst_ratio for c in res.cases), "shrinking" if self.failed_at else "")
        if self.seed is None:  # a seeded search must not follow the kernel's results (seeded_search.py)
            # nor climb back into a bug already found: an explained failure scores nothing
            known = case.failed and not unexplained_gates(self._signatures(), case)
            hypothesis.target(0.0 if known else min(case.worst_ratio, 1e6), label="worst error ratio")
        if self.hunting:  # record, shrink and sign a new bug, then let Hypothesis go on drawing
            if case.failed:
                self._hunt(case)
            return
        if case.failed and res.first_failure is not None and not self._known_covers(case) \
                and same_failure(res.first_failure, case):
            raise CaseFailed(case)  # other failures (and known findings) stay in res.cases

    # ------------------------------------------------------------------ hunting
    def _signatures(self) -> list:
        return [s for f in self.found for s in f.signatures]

    def _known_covers(self, case) -> bool:
        """Every failing gate of ``case`` is explained by a known finding (--known)."""
        known = [s for f in self.found if f.known for s in f.signatures]
        return bool(known) and case.failed and not unexplained_gates(known, case)

    def _steered_away(self, problem) -> bool:
        """A hunt skips a drawn Problem a finding already explains, all but 1 in
        ``steer_every`` of them (those check the signature and can show a bug it hides);
        replayed and corner Problems always run. Each skip is counted on its finding."""
        if not self.hunting or not self.steer_every or problem in self.explicit:
            return False
        who = [f for f in self.found if f.explains_problem(problem)]
        if not who or problem in self._skipped:
            return bool(who)
        self._explained_drawn += 1
        if self._explained_drawn % self.steer_every == 0:
            return False
        self._skipped.add(problem)
        who[0].skipped += 1
        self.result.explained_skipped += 1
        return True

    def _deadline(self) -> float:
        """Seconds in by which a hunt stops shrinking and signing: the search budget plus
        one shrink budget bounds the whole campaign."""
        return self.time_budget + self.shrink_budget

    def _run_seen(self, problem) -> CaseResult:
        case = self.seen.get(problem)
        return case if case is not None else self._case(problem)

    def _hunt(self, case: CaseResult) -> Finding | None:
        """``case`` failed: when no finding explains all of its failing gates, shrink it
        toward what none explains (a bounded budget), sign it (signature.derive) and keep it
        as a new finding, unless its signature is one already found."""
        new = unexplained_gates(self._signatures(), case)
        if not new:
            return None
        if len(self.found) >= self.max_findings + sum(f.known for f in self.found) or self._now() > self._deadline():
            return None  # counted as unexplained at the end
        t = self._now()
        self.result.settings["hunt_attempts"] = self.result.settings.get("hunt_attempts", 0) + 1
        n_new = sum(not f.known for f in self.found) + 1
        source = self.known_problems.get(case.problem)  # a known failure-store Problem: not shrunk again
        writer = None if source else Findings(self.kernel, self.config,
                                              (self.out_dir or Path(DEFAULT_OUT)) / "repro",
                                              self.database, self.spec, self.run_id, number=n_new)
        best, calls = case, 0
        if writer is not None:
            self._log_event("hunt", {"number": n_new, "problem": case.problem.to_dict()})
            writer.found(case, case)
            best, calls = self._shrink_toward(case, new, writer, min(self.shrink_budget, self._deadline() - t))
        over = self._deadline() if self._now() < self._deadline() else self._now() + 5.0
        target = (unexplained_gates(self._signatures(), best) & new) or new
        sig = derive(best, self._run_seen, self.kernel.capability, gates=target, budget_calls=MAX_VARIATIONS,
                     deadline=lambda: self._now() > over)
        for f in self.found:
            if any(same_identity(s, sig, best.problem) for s in f.signatures):
                if sig not in f.signatures:
                    f.variants.append(sig)  # the same bug, reached from elsewhere: it explains this too
                if writer is not None:
                    writer.discard()  # its reproducer pair was only a candidate's
                    # the hunt is over: a new finding's line again (its variants now), else a mark
                    self._log_event(*(("merged", {"number": n_new}) if f.known else ("finding", f.log_record())))
                return f
        if writer is not None and writer.best is not best:
            writer.write(best)
        f = Finding(sig, first=case, best=best, known=source is not None, source=source or "",
                    reproducer=writer.reproducer if writer else None,
                    shrink={} if source else {"calls": calls, "seconds": round(self._now() - t, 2)},
                    number=0 if source else n_new, trigger=case.problem)
        self.found.append(f)
        if writer is not None:
            self._log_event("finding", f.log_record())
        if writer is not None and self.findings.best is None:
            self.findings = writer  # the first new finding's writer (interrupt handling, res.reproducer)
        return f

    def _shrink_toward(self, case, gates: set, writer, budget: float):
        """Shrink ``case`` keeping a failure on one of ``gates`` that no finding explains."""
        from difftest.search.shrinking import simplify

        def still_fails(p):
            c = self._run_seen(p)
            if not c.failed or not (unexplained_gates(self._signatures(), c) & gates):
                return False
            if case.status == Status.ERROR and (c.status != Status.ERROR or c.error_type != case.error_type):
                return False
            writer.found(c, case)
            return True

        best, calls = simplify(case.problem, still_fails, self.kernel.capability, time_budget=max(0.0, budget),
                               max_calls=self.finding_calls)
        return self.seen.get(best, case), calls

    def _hunt_leftovers(self) -> None:
        """Failing cases the search left unexplained (met while shrinking another finding,
        or logged by a resumed run): hunted while the budget lasts."""
        for case in list(self.result.cases):
            if self._now() > self._deadline():
                return
            if case.failed:
                self._hunt(case)

    def _count_hits(self) -> None:
        """Each finding's hits (failing cases it explains), the search's share of them and
        when it was first seen; the failing cases no finding explains."""
        res = self.result
        for f in self.found:
            f.hits = f.search_hits = 0
        res.unexplained = 0
        for i, c in enumerate(res.cases):
            if not c.failed:
                continue
            if unexplained_gates(self._signatures(), c):
                res.unexplained += 1
            for f in self.found:
                if f.explains(c):
                    f.hits += 1
                    f.search_hits += c.problem in self.searched or c.problem in self.explicit
                    if not f.first_seen:
                        f.first_seen = {"case": i + 1, "seconds": round(self.finished_at.get(c.problem, 0.0), 2),
                                        "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(
                                            self.wall0 + self.finished_at.get(c.problem, 0.0)))}
                        if f.first is None:
                            f.first = c
                        if f.best is None:
                            f.best = c

    def _conclude(self) -> None:
        """The findings of the campaign into its result. First-failure mode: the one shrunk
        failure gets its signature now (variations in what is left of the shrink budget, at
        least a few seconds), so reports and the gate name it the same way a hunt does."""
        res = self.result
        if not self.hunting and res.failure is not None:
            over = self._now() + max(FINISH_FLOOR_S, (self.failed_at or 0.0) + self.shrink_budget - self._now())
            sig = derive(res.failure, self._run_seen, self.kernel.capability, budget_calls=MAX_VARIATIONS,
                         deadline=lambda: self._now() > over)
            if not any(same_identity(s, sig, res.failure.problem) for f in self.found for s in f.signatures):
                self.found.append(Finding(sig, first=res.first_failure, best=res.failure,
                                          reproducer=self.findings.reproducer,
                                          shrink={"seconds": round(self._now() - (self.failed_at or 0.0), 2)}))
        self._count_hits()
        res.findings = list(self.found)
        res.settings["searched"] = len(self.searched)  # cases the search ran; the rest shrank or signed
        if not self.hunting:
            return
        new = [f for f in self.found if not f.known]
        if new:
            res.status = CampaignStatus.FAILED
            res.failure, res.first_failure, res.reproducer = new[0].best, new[0].first, new[0].reproducer
            res.examples_to_fail = new[0].first_seen.get("case")
            res.seconds_to_fail = new[0].first_seen.get("seconds")
        elif res.unexplained:  # failures the budget left unsigned still fail the campaign, unshrunk
            first = next(c for c in res.cases if c.failed and unexplained_gates(self._signatures(), c))
            res.status, res.failure, res.first_failure = CampaignStatus.FAILED, first, first
            self.findings.first = first
            self.findings.write(first)
            res.reproducer = self.findings.reproducer
            res.reason = f"{res.unexplained} failing cases no finding explains (the budget ran out before they " \
                         f"were shrunk and signed); the first is reported unshrunk"

    def _search(self, strategy, edge: list) -> None:
        def prop(problem):  # Hypothesis wraps a plain function
            self._property(problem)

        prop._hypothesis_internal_add_digest = f"difftest:{self.kernel.name}:{self.profile.name}".encode()
        test = given(strategy)(prop)
        for p in reversed(edge):
            test = example(p)(test)
        test = settings(
            max_examples=self.max_examples, deadline=None,
            database=DirectoryBasedExampleDatabase(self.database) if self.database else None,
            # each example runs a kernel and two references: seconds, by design
            # a shard rejects the other shards' Problems: (N-1)/N of the draws, by design
            suppress_health_check=[HealthCheck.too_slow] + ([HealthCheck.filter_too_much] if self.shard else []),
            report_multiple_bugs=False, print_blob=False, verbosity=hypothesis.Verbosity.quiet,
        )(test)
        if self.seed is None:
            test()
            return
        with local_constants_off():
            hypothesis.seed(self.seed)(test)()

    def _simplify(self, failure: CaseResult, budget: float) -> CaseResult:
        from difftest.search.shrinking import simplify

        def still_fails(p):
            case = self.seen.get(p)
            if case is None:
                case = self._case(p)
            return same_failure(failure, case)

        best, _ = simplify(failure.problem, still_fails, self.kernel.capability, time_budget=budget)
        return self.seen.get(best, failure)


def run_campaign(kernel, profile="ci", *, max_examples: int | None = None, time_budget: float | None = None,
                 shrink_budget: float | None = None, strategy=None, out_dir=None, config: RunConfig | None = None,
                 progress: bool = False, edge_cases: bool = True, database: str | None = DEFAULT_DB,
                 seed: int | None = -1, on_case=None, shard: tuple[int, int] | None = None,
                 run_id: str | None = None, resume: bool = False, hunt: bool | None = None,
                 known=()) -> CampaignResult:
    """Run one kernel's campaign (``Campaign.of(...).run()``). ``kernel``: an adapter or a
    registry name. ``database``: directory of Hypothesis's example database and the
    failure store (None: neither), so failures found before are replayed first. ``seed``:
    fixes the search (profiles quick and ci use 0, so CI sees the same cases every run);
    None searches afresh each run. ``out_dir``: where the case log and reproducers go.
    ``shard``: (I, N) runs only the Problems of shard I of N (difftest.search.shard), drawn and corpus alike.
    ``run_id``: tags every case-log line (default: a new uuid). ``resume``: the case log in
    ``out_dir`` holds this run's finished cases (a killed run); they are never run again.
    ``hunt``: go on after a failure, one finding per distinct bug (None: the profile's; on
    for nightly and gpu, off for quick and ci). ``known``: signature.Known entries of this
    kernel (``load_known`` + ``known_for``): replayed first, listed as known, never shrunk."""
    return Campaign.of(kernel, profile, max_examples=max_examples, time_budget=time_budget,
                       shrink_budget=shrink_budget, seed=seed, config=config, out_dir=out_dir, strategy=strategy,
                       progress=progress, edge_cases=edge_cases, database=database, on_case=on_case,
                       shard=shard, run_id=run_id, resume=resume, hunt=hunt, known=list(known)).run()


def same_failure(a: CaseResult, b: CaseResult) -> bool:
    """b fails the way a does: errors of the same exception type (``CaseResult.error_type``,
    recorded where the exception was caught), or at least one failed gate in common.
    Shrinking follows only the first failure's kind, so an MLIR build error does not slip
    into an unrelated illegal memory access."""
    if a.failure_kind == FailureKind.ERROR:
        return b.failure_kind == FailureKind.ERROR and a.error_type == b.error_type
    return b.failure_kind == FailureKind.GATE and bool(set(a.failed_gates) & set(b.failed_gates))


def _coverage(cases, capability, profile) -> dict:
    """Which bug-class features (strategies.coverage) the cases actually ran."""
    from collections import Counter

    from difftest.strategies.compile import compile_coverage
    from difftest.strategies.coverage import beyond_profile, expected_features, features

    hit = Counter()
    ran = [c.problem for c in cases if c.status != Status.SKIPPED]
    for p in ran:
        hit.update(features(p, capability))
    compile_expected, compile_hit = compile_coverage(ran, capability, profile)  # compile:new_configuration
    hit.update(compile_hit)
    return {"hit": dict(sorted(hit.items())),
            "missing": sorted((expected_features(capability, profile) | compile_expected) - set(hit)),
            "beyond_profile": beyond_profile(capability, profile)}
