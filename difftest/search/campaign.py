"""Campaign: one kernel's search over its capability, every Problem a case (runner.run_case).

``Campaign`` holds the settings (frozen; ``Campaign.of`` fills them from a Profile);
``run()`` searches once (``Search``) and returns the CampaignResult. The search's state is a
``state.SearchState``; what a failing case means is the mode's: ``first_failure.FirstFailure``
(profiles quick and ci, the gate's baselines: the first failure ends the search and is shrunk
and signed) or ``hunt.Hunt`` (nightly and gpu: every distinct bug is shrunk, signed and
kept as a finding, and the search goes on).

A search runs in three phases:

1. *Explicit Problems*: failures of the kernel's earlier campaigns (the failure store) and
   known findings (``--known``) first, whatever the seed; then every value of every
   configuration dimension once (the coverage phase's first stage: what a compile-bound
   kernel reaches first); then the classic corners of ``strategies.edge_problems`` (on a
   kernel with a compile key, a corner needing a build of its own waits until the
   coverage phase's pairs have run).
2. *Configuration coverage* (``configuration_phase.py``): the capability's configuration
   dimensions (dtype, head dims, GQA ratio, mask, lengths, varlen, sinks, layout...) planned
   as a covering array, so every pair of values (the profile's ``coverage`` strength t)
   runs at least once, each on the cheapest Problem that realises it, re-planned around
   each finding. A bug at one corner of the space is met on schedule, not by luck.
3. *Value search*: Hypothesis draws Problems (``strategies.problems``); an unseeded search
   is steered with ``hypothesis.target`` on the worst error ratio, so it climbs toward the
   edge of the budget; a seeded one draws from its seed alone, neither steered by the
   kernel's results nor fed the literals of local source code (``seeded_search.py``), so a
   baseline and a candidate draw the same Problems. A hunt whose profile fills its budget
   (``fill_budget``) draws again while time is left.

``time_budget`` bounds the whole campaign (``state.py``): no case starts after it, and the
phases stop early enough to shrink and sign what they found inside it; Problems drawn
after the search's share is spent are not run (``unrun``), and Problems already seen
replay their recorded outcome, so the failure Hypothesis replays at the end is always the
one that was measured.
"""

import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import hypothesis
from hypothesis import HealthCheck, given, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from difftest.errors import InputError
from difftest.execute import adapter as registry
from difftest.execute import timing
from difftest.execute.adapter import KernelAdapter
from difftest.judge.declaration import claim_record
from difftest.judge.runner import CaseResult, RunConfig, run_case
from difftest.model.capability import Capability
from difftest.model.problem import Problem
from difftest.model.profiles import Profile, get_profile
from difftest.search.case_log import CaseLog, logged_cases, logged_events
from difftest.search.configuration_phase import ConfigurationPhase, pair_report
from difftest.search.failure_store import load_failures, safe_name
from difftest.search.findings import Finding, Findings
from difftest.search.first_failure import FirstFailure
from difftest.search.hunt import Hunt
from difftest.search.progress import Progress
from difftest.search.result import BudgetSpent, CampaignResult, CaseFailed, same_failure
from difftest.search.seeded import local_constants_off
from difftest.search.shard import in_shard
from difftest.search.shard import label as shard_label
from difftest.search.state import SearchState
from difftest.strategies import edge_problems, problems
from difftest.strategies.compile import compile_coverage, compile_reuse
from difftest.strategies.coverage import beyond_profile, expected_features, features
from difftest.vocab import CampaignStatus, Status
from difftest.workdir import DEFAULT_DB, DEFAULT_OUT

__all__ = ["Campaign", "CampaignResult", "CaseFailed", "run_campaign", "same_failure"]


@dataclass(frozen=True)
class Campaign:
    """One kernel's campaign settings. ``of(...)`` fills them from a Profile; ``run()``
    searches once and returns the CampaignResult."""

    kernel: KernelAdapter
    profile: Profile
    max_examples: int  # drawn examples of the value search
    time_budget: float  # seconds the whole campaign may take (search, shrinking, signatures)
    shrink_budget: float  # seconds one failure's shrink may take, at most
    seed: int | None  # None: a fresh random search each run
    config: RunConfig = field(default_factory=RunConfig)
    strategy: Any = None  # a Hypothesis strategy of Problems (None: strategies.problems for the kernel)
    out_dir: Path | None = None  # case log and reproducers (None: no log; reproducers under DEFAULT_OUT)
    database: str | None = DEFAULT_DB  # Hypothesis's example database and the failure store (None: neither)
    edge_cases: bool = True  # run strategies.edge_problems first
    progress: bool = False
    on_case: Callable[[CaseResult], object] | None = None  # called with every new CaseResult
    shard: tuple[int, int] | None = None  # (I, N): only the Problems of shard I of N (difftest.search.shard)
    run_id: str | None = None  # tags every case-log line, names this run's reproducer (None: a new uuid)
    resume: bool = False  # out_dir's case log holds this run's finished cases (a killed run): never rerun
    hunt: bool | None = None  # go on after a failure (None: the profile's ``hunt``)
    known: tuple = ()  # signature.Known entries of this kernel (--known)
    steer_every: int | None = None  # of the Problems a finding explains, run 1 in N (None: none; 0: all)
    max_findings: int = 16  # distinct findings a hunt shrinks at most; later failures are counted
    finding_calls: int = 200  # shrink runs per finding, at most
    coverage: int | None = None  # the coverage phase's strength t (None: the profile's; 0 with a strategy given)
    plan_cache: Path | None = None  # where the coverage phase keeps its plans between runs (None: nowhere)
    # a hunt runs each wrong result's shrunk Problem again in a fresh kernel process, and a signature's
    # failing switched-off variations too (hunt.py, signature.derive's ``clean``); None: where the
    # kernel runs in a worker process on a GPU (a fresh process costs an import of torch and a build)
    fresh_process: bool | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "known", tuple(self.known))
        object.__setattr__(self, "out_dir", Path(self.out_dir) if self.out_dir else None)

    @classmethod
    def of(
        cls,
        kernel: KernelAdapter | str,
        profile: Profile | str = "ci",
        *,
        max_examples: int | None = None,
        time_budget: float | None = None,
        shrink_budget: float | None = None,
        seed: int | None = -1,
        config: RunConfig | None = None,
        out_dir: Path | str | None = None,
        **settings: Any,
    ) -> "Campaign":
        """``kernel``: an adapter or a registry name; ``profile``: a name or a Profile. The
        numbers left as None (``seed``: -1) come from the profile."""
        if isinstance(kernel, str):
            kernel = registry.get(kernel)
        prof = get_profile(profile)
        return cls(
            kernel,
            prof,
            prof.examples if max_examples is None else max_examples,
            prof.search_s if time_budget is None else time_budget,
            prof.shrink_s if shrink_budget is None else shrink_budget,
            prof.seed if seed == -1 else seed,
            config or RunConfig(),
            out_dir=out_dir,  # type: ignore[arg-type]  # a str: __post_init__
            **settings,
        )

    @property
    def spec(self) -> str:
        """The registry name that rebuilds the kernel (keys the failure store, reproducers)."""
        return getattr(self.kernel, "spec", None) or self.kernel.name

    @property
    def hunting(self) -> bool:
        return bool(getattr(self.profile, "hunt", False) if self.hunt is None else self.hunt)

    @property
    def coverage_strength(self) -> int:
        if self.coverage is not None:
            return self.coverage
        return 0 if self.strategy is not None else self.profile.coverage

    def run(self) -> CampaignResult:
        """Search once. Findings' reproducers and store entries are written when found and at
        each shrink step (findings.py). On SIGINT/SIGTERM (``KeyboardInterrupt``) it re-raises
        with ``.partial``, the result of what finished."""
        return Search(self).run()


class Search:
    """One run of a Campaign: its phases over a SearchState, under a mode."""

    def __init__(self, campaign: Campaign):
        self.c = campaign
        self.st: SearchState | None = None
        self.phase: ConfigurationPhase | None = None
        self.pending = 0  # explicit Problems not yet visited (counted as unrun when the budget ends)
        self.replayed = 0  # of the explicit Problems, the failure store's and --known's (they run first)

    def run(self) -> CampaignResult:
        c = self.c
        kernel, prof = c.kernel, c.profile
        run_id = c.run_id or uuid.uuid4().hex
        res = CampaignResult(
            kernel.name,
            prof.name,
            settings={
                "max_examples": c.max_examples,
                "time_budget_s": c.time_budget,
                "shrink_budget_s": c.shrink_budget,
                "seed": c.seed,
                "database": c.database,
                "config": c.config.to_dict(),
                "spec": c.spec,
                "shard": shard_label(c.shard),
                "run_id": run_id,
                "capability": claim_record(kernel.capability),
                "coverage_strength": c.coverage_strength,
                **({"narrowed": kernel.narrowed} if getattr(kernel, "narrowed", None) else {}),
            },
        )
        res.hunt = res.settings["hunt"] = c.hunting
        why = kernel.available()
        if why:
            res.status, res.reason = CampaignStatus.UNAVAILABLE, why
            return res
        log_name = f"{safe_name(kernel.name)}.cases.jsonl"
        prior = logged_cases(c.out_dir / log_name, run_id) if c.out_dir and c.resume else []
        hunts = (
            logged_events(c.out_dir / log_name, run_id, ("hunt", "finding", "merged"))
            if prior and c.hunting and c.out_dir
            else []
        )  # (prior: out_dir is set)
        log = CaseLog(c.out_dir / log_name, run_id) if c.out_dir else None
        res.settings["case_log"] = log_name if c.out_dir else None
        writer = Findings(kernel, c.config, (c.out_dir or Path(DEFAULT_OUT)) / "repro", c.database, c.spec, run_id)
        st = self.st = SearchState(
            c,
            res,
            run_id,
            writer,
            bar=None,  # type: ignore[arg-type]  # bar: below
            log=log,
            max_examples=c.max_examples,
            time_budget=c.time_budget,
        )
        st.mode = Hunt(st) if c.hunting else FirstFailure(st)
        explicit = self._explicit_problems()
        st.bar = Progress(kernel.name, st.max_examples + len(explicit), c.progress)
        # JIT kernels may count builds (compile_stats()); in a worker process the count is not ours to read
        counting = hasattr(kernel, "compile_stats") and not c.config.isolate
        stats0 = kernel.compile_stats() if counting else None  # type: ignore[attr-defined]  # optional (hasattr)
        timer = timing.PhaseTimer()
        st.t0, st.wall0 = time.perf_counter(), time.time()  # the clock starts now
        if prior:
            self._resume(prior, hunts)
        self.phase = ConfigurationPhase(self, c.coverage_strength)
        try:
            with timing.collect(timer):
                try:
                    if st.resume_hunt is not None:  # finish the shrink the kill cut short, from where it began
                        assert isinstance(st.mode, Hunt)  # only a hunt logs a shrink to resume
                        st.mode.hunt(st.seen[st.resume_hunt])
                    replays, edge = explicit[: self.replayed], explicit[self.replayed :]
                    self._explicit(replays, len(edge))
                    self.phase.run(strengths=(1,))  # every value once: what a compile-bound kernel reaches first
                    edge, costly = self._by_build_cost(edge)
                    self._explicit(edge, len(costly))
                    self.phase.run(strengths=(2, 3))
                    self._explicit(costly)
                    self._draws(self._strategy())
                    st.mode.finish()
                except BudgetSpent:  # the search's budget is spent; what it left undrawn is res.unrun
                    st.mode.finish()  # a hunt's leftovers, while the deadline allows
                except CaseFailed as e:
                    res.failure = e.case
                    st.mode.failed(e.case)
                self._draw_on()
                self._conclude()
        except KeyboardInterrupt as e:  # SIGINT/SIGTERM (interrupt.py): hand back what finished
            res.reason = f"interrupted by {getattr(e, 'name', 'SIGINT')}"
            st.mode.interrupted(e)
            e.partial = res  # type: ignore[attr-defined]  # the result rides on the exception (run())
            raise
        finally:
            st.bar.close()
            if st.log:
                st.log.close()
            res.elapsed = st.now()
            res.compile_keys = len(st.keys)
            res.timing = timer.finish(res.elapsed)
            res.compile_reuse = compile_reuse(res.cases, kernel.capability)
            res.coverage = _coverage(res.cases, kernel.capability, prof)
            res.coverage["pairs"] = pair_report(self.phase, res.cases) if self.phase else {}
            if counting:
                assert stats0 is not None
                stats1 = kernel.compile_stats()  # type: ignore[attr-defined]  # optional (hasattr)
                res.compile_stats = {k: v - stats0.get(k, 0) for k, v in stats1.items() if isinstance(v, (int, float))}
        if res.failure is not None:
            # a Problem the campaign ran (a resumed one: before the kill) is not run again
            def run(k: KernelAdapter, p: Problem) -> CaseResult:
                return st.seen[p] if k is kernel and p in st.seen else run_case(k, p, c.config)

            try:
                st.mode.report(run)
            except KeyboardInterrupt as e:
                e.partial = res  # type: ignore[attr-defined]  # the result rides on the exception (run())
                raise
        return res

    # ------------------------------------------------------------------ the explicit Problems
    def _explicit_problems(self) -> list[Problem]:
        """Failure-store Problems, known findings' Problems and the edge corpus, in this order,
        inside the capability and this shard; the known findings go into the state."""
        c, st = self.c, self.st
        assert st is not None
        res = st.result
        cap = c.kernel.capability
        saved = [p for p in load_failures(c.database, c.spec, c.profile) if cap.covers(p)]
        st.found = [Finding(k.signature, known=True, source=k.source) for k in c.known if k.signature]
        st.known_problems = {p: k.source for k in c.known for p in k.problems if cap.covers(p)}
        saved = list(dict.fromkeys(list(st.known_problems) + saved))
        edge = list(edge_problems(cap, c.profile)) if c.edge_cases else []
        saved = [p for p in saved if in_shard(p, c.shard)]
        out = saved + [p for p in edge if p not in saved and in_shard(p, c.shard)]
        self.replayed = len(saved)
        st.explicit = set(out)
        res.settings["edge_cases"] = len(out)  # explicit corners run first; the other cases are planned or drawn
        res.settings["replayed_failures"] = len(saved)
        if c.known:
            res.settings["known"] = {"findings": len(st.found), "problems": len(st.known_problems)}
        return out

    def _by_build_cost(self, edge: list) -> tuple[list, list]:
        """The corner Problems in two lists, run before and after the coverage phase's pairs: on a
        kernel with a compile key (coverage on), a corner that alone needs a configuration not
        built yet goes after them. Such a corner is one build for one Problem, where a coverage
        row is one build for dozens of configuration pairs (the corpus's head-dim sweep repeats
        what the phase's first stage ran); a simulated FA4 (tests/test_hunt.py) spent a third of
        its builds on them before reaching the pairs that hold its bugs."""
        c, st = self.c, self.st
        assert st is not None
        cap = c.kernel.capability
        if not cap.compile_key or c.coverage_strength <= 0:
            return edge, []
        keys = Counter(cap.compile_signature(p) for p in edge)
        first: list[Problem] = []
        later: list[Problem] = []
        for p in edge:
            k = cap.compile_signature(p)
            (first if keys[k] > 1 or k in st.built else later).append(p)
        return first, later

    def _explicit(self, problems: list, later: int = 0) -> None:
        """Run ``problems`` in order (``later``: explicit Problems still to come, unrun if the
        budget ends here)."""
        assert self.st is not None
        for i, p in enumerate(problems):
            self.pending = len(problems) - i + later
            case = self.visit(p)
            if case is not None:
                self.st.mode.visited(case)
        self.pending = later

    # ------------------------------------------------------------------ one Problem
    def visit(self, problem: Problem) -> CaseResult | None:
        """The case of ``problem``: replayed when the campaign ran it, else run now, unless the
        mode steers away from it (None) or the search's budget is spent (``BudgetSpent``; in
        first-failure mode after the failure, None: Hypothesis's shrink attempts count as passing)."""
        st = self.st
        assert st is not None
        res = st.result
        case = st.seen.get(problem)
        if case is not None and problem in st.prior:  # a resumed run's search meets what it ran before
            st.searched.add(problem)
        if case is not None:
            return case
        if st.mode.search_over():
            if st.failed_at is None or st.mode.hunting:  # the search's budget, not the shrink's: stop
                res.unrun = max(1, self.pending + st.max_examples - max(0, st.drawn - 1))
                raise BudgetSpent
            return None
        problem = st.mode.steer(problem)  # a hunt runs what no finding explains
        if problem is None:
            return None
        case = st.seen.get(problem)
        if case is not None:
            return case
        case = st.case(problem)
        st.searched.add(problem)
        st.keys.add(self.c.kernel.capability.compile_signature(problem))
        if self.c.on_case:
            self.c.on_case(case)
        st.bar.update(
            len(res.cases),
            sum(x.failed for x in res.cases),
            max(x.worst_ratio for x in res.cases),
            "shrinking" if st.failed_at is not None and not st.mode.hunting else "",
        )
        return case

    # ------------------------------------------------------------------ the value search
    def _property(self, problem: Problem) -> None:
        """The Hypothesis test: a case per new Problem; the mode says what a failure means."""
        st = self.st
        assert st is not None
        hypothesis.assume(in_shard(problem, self.c.shard))  # another shard's Problem: not ours to run
        st.drawn += 1
        case = self.visit(problem)
        if case is None:
            return
        if self.c.seed is None:  # a seeded search must not follow the kernel's results (seeded_search.py)
            # nor climb back into a bug already found: an explained failure scores nothing
            hypothesis.target(0.0 if st.explained(case) else min(case.worst_ratio, 1e6), label="worst error ratio")
        st.mode.visited(case)

    def _strategy(self) -> Any:
        """The value search's Problems: the campaign's strategy, or ``strategies.problems``; a
        kernel with a compile key draws in the configurations the search compiled already
        (every one the coverage phase ran, not only the corpus's first), a new one in ten."""
        c, st = self.c, self.st
        assert st is not None
        if c.strategy is not None:
            return c.strategy
        cap = c.kernel.capability
        if not cap.compile_key or c.coverage_strength <= 0:
            return problems(cap, c.profile)
        ran = [p for p, x in st.seen.items() if x.status == Status.PASSED or x.status == Status.FAILED]
        return problems(cap, c.profile, warm=ran or None)

    def _draws(self, strategy: Any) -> None:
        c, st = self.c, self.st
        assert st is not None

        def prop(problem: Problem) -> None:  # Hypothesis wraps a plain function
            self._property(problem)

        prop._hypothesis_internal_add_digest = f"difftest:{c.kernel.name}:{c.profile.name}".encode()  # type: ignore[attr-defined]  # Hypothesis's hook
        test = settings(
            max_examples=max(1, st.max_examples),
            deadline=None,
            database=DirectoryBasedExampleDatabase(c.database) if c.database else None,
            # each example runs a kernel and two references: seconds, by design
            # a shard rejects the other shards' Problems: (N-1)/N of the draws, by design
            suppress_health_check=[HealthCheck.too_slow] + ([HealthCheck.filter_too_much] if c.shard else []),
            report_multiple_bugs=False,
            print_blob=False,
            verbosity=hypothesis.Verbosity.quiet,
        )(given(strategy)(prop))
        if c.seed is not None:
            with local_constants_off():
                hypothesis.seed(c.seed)(test)()
            return
        test()
        # a hunt whose profile fills its budget draws again while time is left and draws are new
        while st.mode.hunting and c.profile.fill_budget and st.now() < st.search_end:
            ran = len(st.result.cases)
            test()
            if len(st.result.cases) == ran:
                return

    def _draw_on(self) -> None:
        """A hunt keeps a quarter of its budget back once it met a failure, for the failures
        the search leaves unexplained (``Hunt.finish``). Once those are hunted the rest of the
        reserve is the search's again: it draws on up to the quiet reserve. Before, a nightly
        that found bugs ended at ~75% of its budget with nothing left to shrink (a simulated
        420 s FA4 nightly: 315 s)."""
        st, c = self.st, self.c
        assert st is not None
        if not (st.mode.hunting and c.profile.fill_budget) or st.leftovers_hunted:
            return
        st.leftovers_hunted = True  # search_end: the quiet reserve from here
        if st.now() >= st.search_end:
            return
        try:
            self._draws(self._strategy())
        except BudgetSpent:
            pass
        st.mode.finish()

    # ------------------------------------------------------------------ after the search
    def _conclude(self) -> None:
        st = self.st
        assert st is not None
        st.mode.sign()
        st.count_hits()
        st.result.findings = list(st.found)
        st.result.settings["searched"] = len(st.searched)  # cases the search ran; the rest shrank or signed
        st.mode.verdict()

    def _resume(self, prior: list, hunts: list) -> None:
        """A resumed run: what finished before the kill counts as run and never runs again;
        a hunt's findings are kept as they were logged (``_resume_findings``)."""
        c, st = self.c, self.st
        assert st is not None
        res, findings = st.result, st.findings
        st.prior = {x.problem for x in prior}
        for case in prior:
            st.seen[case.problem] = case
            res.cases.append(case)
            st.keys.add(c.kernel.capability.compile_signature(case.problem))
            st.finished_at[case.problem] = 0.0
            if c.hunting:  # a hunt attributes them once the search is done (Hunt.finish)
                if case.failed and st.failed_at is None:
                    st.failed_at = 0.0  # failures to attribute and sign: the search keeps the whole reserve
                continue
            if case.failed and res.first_failure is None:
                st.failed_at = 0.0  # the shrink budget restarts now
                res.first_failure, res.examples_to_fail = case, len(res.cases)
                res.seconds_to_fail = sum(x.seconds for x in res.cases)
            if res.first_failure is not None and case.failed and same_failure(res.first_failure, case):
                findings.found(case, res.first_failure)
        res.settings["resumed_cases"] = len(prior)
        if hunts:
            self._resume_findings(hunts)
        if c.seed is None:  # an unseeded search draws new Problems: only the rest of the examples
            st.max_examples = max(1, c.max_examples - len(prior))
        st.time_budget = max(0.0, c.time_budget - sum(x.seconds for x in prior))

    def _resume_findings(self, events: list) -> None:
        """The hunt's case-log events before the kill: each new finding it kept comes back as
        logged (signature, variants, shrunk case, reproducer, shrink record), so it is neither
        shrunk again nor kept twice; a shrink the kill cut short (its ``hunt`` line is the last)
        is finished first, from the case it began with (its steps are logged cases: only the
        rest runs). Findings are rebuilt in order up to the first whose cases are missing."""
        st = self.st
        assert st is not None
        records = {}
        for e in events:
            if e["event"] == "finding":
                records[e.get("number")] = e
        restored = []
        for n in range(1, len(records) + 1):
            try:
                f = Finding.from_log(records[n], st.seen) if n in records else None
            except (KeyError, TypeError, ValueError, InputError):  # another schema: shrink it again
                f = None
            if f is None:
                break
            restored.append(f)
        st.found += restored
        st.result.settings["hunt_attempts"] = sum(e["event"] == "hunt" for e in events)
        last = events[-1] if events else None
        if last is not None and last["event"] == "hunt" and last.get("number") == len(restored) + 1:
            try:
                p = Problem.from_dict(last["problem"])
            except (KeyError, TypeError, ValueError, InputError):
                return
            if p in st.seen:
                st.resume_hunt = p


def run_campaign(
    kernel: KernelAdapter | str,
    profile: Profile | str = "ci",
    *,
    max_examples: int | None = None,
    time_budget: float | None = None,
    shrink_budget: float | None = None,
    strategy: Any = None,
    out_dir: Path | str | None = None,
    config: RunConfig | None = None,
    progress: bool = False,
    edge_cases: bool = True,
    database: str | None = DEFAULT_DB,
    seed: int | None = -1,
    on_case: Callable[[CaseResult], object] | None = None,
    shard: tuple[int, int] | None = None,
    run_id: str | None = None,
    resume: bool = False,
    hunt: bool | None = None,
    known: Any = (),
    coverage: int | None = None,
    max_findings: int = 16,
    plan_cache: Path | str | None = None,
) -> CampaignResult:
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
    kernel (``load_known`` + ``known_for``): replayed first, listed as known, never shrunk.
    ``coverage``: the coverage phase's strength (None: the profile's, 0 when ``strategy`` is given).
    ``max_findings``: distinct findings a hunt shrinks and signs at most. ``plan_cache``: a
    folder where the coverage phase keeps its plans between runs (search/plan_cache.py)."""
    return Campaign.of(
        kernel,
        profile,
        max_examples=max_examples,
        time_budget=time_budget,
        shrink_budget=shrink_budget,
        seed=seed,
        config=config,
        out_dir=out_dir,
        strategy=strategy,
        progress=progress,
        edge_cases=edge_cases,
        database=database,
        on_case=on_case,
        shard=shard,
        run_id=run_id,
        resume=resume,
        hunt=hunt,
        known=tuple(known),
        coverage=coverage,
        max_findings=max_findings,
        plan_cache=Path(plan_cache) if plan_cache is not None else None,
    ).run()


def _coverage(cases: list[CaseResult], capability: Capability, profile: Profile) -> dict:
    """Which bug-class features (strategies.coverage) the cases actually ran."""
    hit: Counter[str] = Counter()
    ran = [c.problem for c in cases if c.status != Status.SKIPPED]
    for p in ran:
        hit.update(features(p, capability))
    compile_expected, compile_hit = compile_coverage(ran, capability, profile)  # compile:new_configuration
    hit.update(compile_hit)
    return {
        "hit": dict(sorted(hit.items())),
        "missing": sorted((expected_features(capability, profile) | compile_expected) - set(hit)),
        "beyond_profile": beyond_profile(capability, profile),
    }
