"""Campaign: Hypothesis drives a strategy over a kernel's capability, every drawn
Problem is a case (runner.run_case), failures are shrunk, saved in the failure store,
and written as reproducers.

The failure store (``<database>/difftest-failures/<kernel>.jsonl``) keeps every shrunk
failing Problem and its first failing Problem; the next campaign of that kernel runs them
first, as explicit examples, whatever the seed. (Hypothesis's own example database in the
same folder only works for unseeded searches: a seeded run neither reads nor writes it,
and the quick and ci profiles are seeded.)

Hypothesis is steered with ``hypothesis.target`` on the worst error ratio, so the
search climbs toward the edge of the budget. The classic corners from
``strategies.edge_problems`` run first as explicit examples in every run.

Time budgets: Hypothesis has no wall-clock stop, so once a campaign's budget is spent
new Problems are not run (they count as passing) while Problems already seen replay
their recorded outcome; the failure Hypothesis replays at the end is therefore always
the one that was measured (no flaky reports).
"""

import time
from dataclasses import dataclass, field
from pathlib import Path

import hypothesis
from hypothesis import HealthCheck, example, given, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from . import adapter as registry
from .declaration import claim_record
from .profiles import get_profile
from .reports import CaseLog, Progress
from .reproducer import write_reproducer
from .runner import CaseResult, RunConfig, run_case
from .workdir import DEFAULT_DB, DEFAULT_OUT
from .vocab import CampaignStatus, FailureKind, Status



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
    reproducer: dict | None = None
    compile_keys: int = 0
    coverage: dict = field(default_factory=dict)  # {"hit": {feature: cases}, "missing": [features]}
    compile_stats: dict | None = None  # builds/cache hits during the campaign, for kernels that count them
    elapsed: float = 0.0
    settings: dict = field(default_factory=dict)
    declaration: list = field(default_factory=list)  # declaration problems behind the failure (declaration.py)

    def __post_init__(self):
        self.status = CampaignStatus(self.status)

    @property
    def failed(self) -> bool:
        return self.status == CampaignStatus.FAILED


def run_campaign(kernel, profile: str = "ci", *, max_examples: int | None = None, time_budget: float | None = None,
                 shrink_budget: float | None = None, strategy=None, out_dir=None, config: RunConfig | None = None,
                 progress: bool = False, edge_cases: bool = True, database: str | None = DEFAULT_DB,
                 seed: int | None = -1, on_case=None, shard: tuple[int, int] | None = None) -> CampaignResult:
    """Run one kernel's campaign. ``kernel``: an adapter or a registry name.
    ``database``: directory of Hypothesis's example database (None: none), so failures
    found before are replayed first. ``seed``: fixes the search (profiles quick and ci
    use 0, so CI sees the same cases every run); None searches afresh each run. ``out_dir``: where the case log and reproducers go.
    ``shard``: (I, N) runs only the Problems of shard I of N (difftest.shard), drawn and corpus alike."""
    from .shard import in_shard, label as shard_label

    if isinstance(kernel, str):
        kernel = registry.get(kernel)
    prof = get_profile(profile)
    n_examples = max_examples if max_examples is not None else prof.examples
    budget = time_budget if time_budget is not None else prof.search_s
    shrink_s = shrink_budget if shrink_budget is not None else prof.shrink_s
    seed = prof.seed if seed == -1 else seed  # None: a fresh random search each run
    config = config or RunConfig()
    spec = getattr(kernel, "spec", None) or kernel.name  # the registry name that rebuilds it
    res = CampaignResult(kernel.name, prof.name, settings={
        "max_examples": n_examples, "time_budget_s": budget, "shrink_budget_s": shrink_s, "seed": seed,
        "database": database, "config": config.to_dict(), "spec": spec, "shard": shard_label(shard),
        "capability": claim_record(kernel.capability),
        **({"narrowed": kernel.narrowed} if getattr(kernel, "narrowed", None) else {})})
    why = kernel.available()
    if why:
        res.status, res.reason = CampaignStatus.UNAVAILABLE, why
        return res

    from difftest import strategies

    if strategy is None:
        strategy = strategies.problems(kernel.capability, prof)
    out = Path(out_dir) if out_dir else None
    log = CaseLog(out / f"{_safe(kernel.name)}.cases.jsonl") if out else None
    saved = [p for p in load_failures(database, spec) if kernel.capability.covers(p)]
    edge = list(strategies.edge_problems(kernel.capability, prof)) if edge_cases else []
    edge = [p for p in saved + [p for p in edge if p not in saved] if in_shard(p, shard)]  # saved failures first
    res.settings["edge_cases"] = len(edge)  # explicit corners run first; the other cases are drawn
    res.settings["replayed_failures"] = len(saved)
    bar = Progress(kernel.name, n_examples + len(edge), progress)
    seen: dict = {}
    keys = set()
    # JIT kernels may count builds (compile_stats()); in a worker process the count is not ours to read
    counting = hasattr(kernel, "compile_stats") and not config.isolate
    stats0 = kernel.compile_stats() if counting else None
    t0 = time.perf_counter()
    state = {"failed_at": None}

    def over_budget() -> bool:
        now = time.perf_counter() - t0
        if state["failed_at"] is None:
            return now > budget
        return now > state["failed_at"] + shrink_s

    def prop(problem):
        hypothesis.assume(in_shard(problem, shard))  # another shard's Problem: not ours to run
        case = seen.get(problem)
        if case is None:
            if over_budget():
                return
            case = run_case(kernel, problem, config)
            seen[problem] = case
            res.cases.append(case)
            keys.add(kernel.capability.compile_signature(problem))
            if log:
                log.write(case)
            if on_case:
                on_case(case)
            if case.failed and state["failed_at"] is None:
                state["failed_at"] = time.perf_counter() - t0
                res.first_failure = case
                res.examples_to_fail = len(res.cases)
                res.seconds_to_fail = state["failed_at"]
            bar.update(len(res.cases), sum(c.failed for c in res.cases),
                       max(c.worst_ratio for c in res.cases), "shrinking" if state["failed_at"] else "")
        hypothesis.target(min(case.worst_ratio, 1e6), label="worst error ratio")
        if case.failed and same_failure(res.first_failure, case):  # other failures stay in res.cases
            raise CaseFailed(case)

    prop._hypothesis_internal_add_digest = f"difftest:{kernel.name}:{prof.name}".encode()
    test = given(strategy)(prop)
    for p in reversed(edge):
        test = example(p)(test)
    test = settings(
        max_examples=n_examples, deadline=None,
        database=DirectoryBasedExampleDatabase(database) if database else None,
        # each example runs a kernel and two references: seconds, by design
        # a shard rejects the other shards' Problems: (N-1)/N of the draws, by design
        suppress_health_check=[HealthCheck.too_slow] + ([HealthCheck.filter_too_much] if shard else []),
        report_multiple_bugs=False, print_blob=False, verbosity=hypothesis.Verbosity.quiet,
    )(test)
    if seed is not None:
        test = hypothesis.seed(seed)(test)
    try:
        test()
    except CaseFailed as e:
        res.failure = e.case
        res.status = CampaignStatus.FAILED
        # finish the shrink: Hypothesis can stall in a local minimum and never shrinks the
        # explicit edge corpus; walk down through simpler Problems that fail the same way
        res.failure = _simplify(kernel, config, res.failure, seen, res, log,
                                max(5.0, state["failed_at"] + shrink_s - (time.perf_counter() - t0)))
    finally:
        bar.close()
        if log:
            log.close()
        res.elapsed = time.perf_counter() - t0
        res.compile_keys = len(keys)
        res.coverage = _coverage(res.cases, kernel.capability, prof)
        if counting:
            stats1 = kernel.compile_stats()
            res.compile_stats = {k: v - stats0.get(k, 0) for k, v in stats1.items() if isinstance(v, (int, float))}
    if res.failure is not None:
        from .declaration import diagnose

        res.declaration = diagnose(kernel, res.failure, lambda k, p: run_case(k, p, config))
        res.reproducer = write_reproducer(kernel, res.failure, config, (out or Path(DEFAULT_OUT)) / "repro")
        save_failures(database, spec, [res.failure.problem, res.first_failure.problem])
    return res


def failure_store(database: str | None, spec: str) -> Path | None:
    return Path(database) / "difftest-failures" / f"{_safe(spec)}.jsonl" if database else None


def load_failures(database: str | None, spec: str) -> list:
    """Problems that failed in earlier campaigns of ``spec`` (shrunk first), oldest first;
    a line that no longer parses as a Problem is skipped."""
    from .problem import Problem, ProblemError

    path = failure_store(database, spec)
    if path is None or not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            p = Problem.from_json(line)
        except (ValueError, TypeError, ProblemError):
            continue
        if p not in out:
            out.append(p)
    return out


def save_failures(database: str | None, spec: str, problems) -> None:
    path = failure_store(database, spec)
    if path is None:
        return
    known = load_failures(database, spec)
    new = [p for p in dict.fromkeys(problems) if p is not None and p not in known]
    if new:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            for p in new:
                f.write(p.to_json() + "\n")


def same_failure(a: CaseResult, b: CaseResult) -> bool:
    """b fails the way a does: errors of the same exception type (``CaseResult.error_type``,
    recorded where the exception was caught), or at least one failed gate in common.
    Shrinking follows only the first failure's kind, so an MLIR build error does not slip
    into an unrelated illegal memory access."""
    if a.failure_kind == FailureKind.ERROR:
        return b.failure_kind == FailureKind.ERROR and a.error_type == b.error_type
    return b.failure_kind == FailureKind.GATE and bool(set(a.failed_gates) & set(b.failed_gates))


def _simplify(kernel, config, failure: CaseResult, seen: dict, res, log, budget: float) -> CaseResult:
    from .simplify import simplify

    def still_fails(p):
        case = seen.get(p)
        if case is None:
            case = seen[p] = run_case(kernel, p, config)
            res.cases.append(case)
            if log:
                log.write(case)
        return same_failure(failure, case)

    best, _ = simplify(failure.problem, still_fails, kernel.capability, time_budget=budget)
    return seen.get(best, failure)


def _coverage(cases, capability, profile) -> dict:
    """Which bug-class features (strategies.coverage) the cases actually ran."""
    from collections import Counter

    from difftest.strategies.coverage import expected_features, features

    hit = Counter()
    for c in cases:
        if c.status != Status.SKIPPED:
            hit.update(features(c.problem, capability))
    return {"hit": dict(sorted(hit.items())),
            "missing": sorted(expected_features(capability, profile) - set(hit))}


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
