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
from difftest.execute import timing
from difftest.execute.adapter import KernelAdapter
from difftest.judge.declaration import claim_record
from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.report.write import CaseLog, Progress
from difftest.run.folder import logged_cases
from difftest.search.failure_store import load_failures, safe_name
from difftest.search.findings import Findings
from difftest.search.profiles import Profile, get_profile
from difftest.search.seeded import local_constants_off
from difftest.search.shard import in_shard
from difftest.search.shard import label as shard_label
from difftest.strategies.compile import compile_reuse
from difftest.vocab import CampaignStatus, FailureKind, Status
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT


class CaseFailed(AssertionError):
    def __init__(self, case: CaseResult):
        super().__init__(case.render())
        self.case = case


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
    # the search's state, set by run()
    result: CampaignResult | None = field(default=None, init=False, repr=False)
    seen: dict = field(default_factory=dict, init=False, repr=False)  # Problem -> its CaseResult (replayed)
    keys: set = field(default_factory=set, init=False, repr=False)  # compile signatures run
    failed_at: float | None = field(default=None, init=False, repr=False)  # seconds in, at the first failure
    t0: float = field(default=0.0, init=False, repr=False)
    log: CaseLog | None = field(default=None, init=False, repr=False)
    bar: Progress | None = field(default=None, init=False, repr=False)
    findings: Findings | None = field(default=None, init=False, repr=False)  # reproducer + store, kept current

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
        why = kernel.available()
        if why:
            res.status, res.reason = CampaignStatus.UNAVAILABLE, why
            return res

        from difftest import strategies

        strategy = self.strategy if self.strategy is not None else strategies.problems(kernel.capability, prof)
        log_name = f"{safe_name(kernel.name)}.cases.jsonl"
        prior = logged_cases(self.out_dir / log_name, self.run_id) if self.out_dir and self.resume else []
        self.log = CaseLog(self.out_dir / log_name, self.run_id) if self.out_dir else None
        res.settings["case_log"] = log_name if self.out_dir else None
        self.findings = Findings(kernel, self.config, (self.out_dir or Path(DEFAULT_OUT)) / "repro",
                                 self.database, self.spec, self.run_id)
        saved = [p for p in load_failures(self.database, self.spec) if kernel.capability.covers(p)]
        edge = list(strategies.edge_problems(kernel.capability, prof)) if self.edge_cases else []
        edge = [p for p in saved + [p for p in edge if p not in saved] if in_shard(p, self.shard)]  # saved first
        res.settings["edge_cases"] = len(edge)  # explicit corners run first; the other cases are drawn
        res.settings["replayed_failures"] = len(saved)
        self.bar = Progress(kernel.name, self.max_examples + len(edge), self.progress)
        self.seen, self.keys = {}, set()
        # JIT kernels may count builds (compile_stats()); in a worker process the count is not ours to read
        counting = hasattr(kernel, "compile_stats") and not self.config.isolate
        stats0 = kernel.compile_stats() if counting else None
        timer = timing.PhaseTimer()
        self.t0 = time.perf_counter()
        self.failed_at = None
        if prior:
            self._resume_from(prior)
        try:
            with timing.collect(timer):
                try:
                    self._search(strategy, edge)
                except CaseFailed as e:
                    res.failure = e.case
                    res.status = CampaignStatus.FAILED
                    # finish the shrink: Hypothesis can stall in a local minimum and never shrinks the
                    # explicit edge corpus; walk down through simpler Problems that fail the same way
                    left = max(5.0, self.failed_at + self.shrink_budget - self._now())
                    res.failure = self._simplify(res.failure, left)
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

            if self.findings.best is not res.failure:
                self.findings.first = self.findings.first or res.first_failure
                self.findings.write(res.failure)
            res.reproducer = self.findings.reproducer
            try:
                res.declaration = diagnose(kernel, res.failure, lambda k, p: run_case(k, p, self.config),
                                           res.first_failure)
            except KeyboardInterrupt as e:
                e.partial = res
                raise
        return res

    def _resume_from(self, prior: list) -> None:
        """A resumed run: what finished before the kill counts as run and never runs again."""
        res, findings = self.result, self.findings
        for case in prior:
            self.seen[case.problem] = case
            res.cases.append(case)
            self.keys.add(self.kernel.capability.compile_signature(case.problem))
            if case.failed and res.first_failure is None:
                self.failed_at = 0.0  # the shrink budget restarts now
                res.first_failure, res.examples_to_fail = case, len(res.cases)
                res.seconds_to_fail = sum(c.seconds for c in res.cases)
            if res.first_failure is not None and case.failed and same_failure(res.first_failure, case):
                findings.found(case, res.first_failure)
        res.settings["resumed_cases"] = len(prior)
        if self.seed is None:  # an unseeded search draws new Problems: only the rest of the examples
            self.max_examples = max(1, self.max_examples - len(prior))
        self.time_budget = max(0.0, self.time_budget - sum(c.seconds for c in prior))

    def _interrupted(self, e: KeyboardInterrupt) -> None:
        res, findings = self.result, self.findings
        res.reason = f"interrupted by {getattr(e, 'name', 'SIGINT')}"
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
        if self.failed_at is None:
            return self._now() > self.time_budget
        return self._now() > self.failed_at + self.shrink_budget

    def _case(self, problem) -> CaseResult:
        """Run ``problem`` once and record it (every case lands in the result and the log;
        a failure of the first failure's kind updates the reproducer and store first, so a
        failure in the log always has them on disk)."""
        if self.log and not self.config.isolate:
            self.log.started(problem, self.kernel.name)  # in-process: a crash leaves this line naming the Problem
        case = self.seen[problem] = run_case(self.kernel, problem, self.config)
        res = self.result
        res.cases.append(case)
        if case.failed and self.failed_at is None:
            self.failed_at = self._now()
            res.first_failure = case
            res.examples_to_fail = len(res.cases)
            res.seconds_to_fail = self.failed_at
        if case.failed and same_failure(res.first_failure, case):
            self.findings.found(case, res.first_failure)
        if self.log:
            self.log.write(case)
        return case

    def _property(self, problem) -> None:
        """The Hypothesis test: a case per new Problem, failing on the first failure's kind."""
        hypothesis.assume(in_shard(problem, self.shard))  # another shard's Problem: not ours to run
        res = self.result
        case = self.seen.get(problem)
        if case is None:
            if self._over_budget():
                res.unrun += self.failed_at is None  # the search's budget, not the shrink's
                return
            case = self._case(problem)
            self.keys.add(self.kernel.capability.compile_signature(problem))
            if self.on_case:
                self.on_case(case)
            self.bar.update(len(res.cases), sum(c.failed for c in res.cases),
                            max(c.worst_ratio for c in res.cases), "shrinking" if self.failed_at else "")
        if self.seed is None:  # a seeded search must not follow the kernel's results (seeded_search.py)
            hypothesis.target(min(case.worst_ratio, 1e6), label="worst error ratio")
        if case.failed and same_failure(res.first_failure, case):  # other failures stay in res.cases
            raise CaseFailed(case)

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
                 run_id: str | None = None, resume: bool = False) -> CampaignResult:
    """Run one kernel's campaign (``Campaign.of(...).run()``). ``kernel``: an adapter or a
    registry name. ``database``: directory of Hypothesis's example database and the
    failure store (None: neither), so failures found before are replayed first. ``seed``:
    fixes the search (profiles quick and ci use 0, so CI sees the same cases every run);
    None searches afresh each run. ``out_dir``: where the case log and reproducers go.
    ``shard``: (I, N) runs only the Problems of shard I of N (difftest.search.shard), drawn and corpus alike.
    ``run_id``: tags every case-log line (default: a new uuid). ``resume``: the case log in
    ``out_dir`` holds this run's finished cases (a killed run); they are never run again."""
    return Campaign.of(kernel, profile, max_examples=max_examples, time_budget=time_budget,
                       shrink_budget=shrink_budget, seed=seed, config=config, out_dir=out_dir, strategy=strategy,
                       progress=progress, edge_cases=edge_cases, database=database, on_case=on_case,
                       shard=shard, run_id=run_id, resume=resume).run()


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
