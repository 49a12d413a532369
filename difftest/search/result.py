"""What a campaign hands back: ``CampaignResult``, and the identity of a failure that
shrinking follows (``same_failure``)."""

from dataclasses import dataclass, field

from difftest.judge import triage
from difftest.judge.runner import CaseResult
from difftest.vocab import CampaignStatus, FailureKind


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
    coverage: dict = field(default_factory=dict)  # {"hit": {feature: cases}, "missing": [features], "pairs": {...}}
    compile_stats: dict | None = None  # builds/cache hits during the campaign, for kernels that count them
    elapsed: float = 0.0
    timing: dict | None = None  # where the wall time went (difftest/execute/timing.py: PhaseTimer.finish)
    compile_reuse: dict | None = None  # cases reusing a compiled configuration (strategies.compile_reuse)
    settings: dict = field(default_factory=dict)
    declaration: list = field(default_factory=list)  # declaration problems behind the failure (declaration.py)
    hunt: bool = False  # the search went on after failures (one Finding per distinct bug)
    findings: list = field(default_factory=list)  # Finding per distinct bug (findings.py), known ones included
    explained_skipped: int = 0  # Problems not run: a finding's signature explains them (steering)
    unexplained: int = 0  # failing cases no finding explains (the findings cap or the budget ran out first)
    # those cases, one line each, and how to have them shrunk and signed (a larger budget or cap)
    unexplained_cases: list = field(default_factory=list)
    # a merged report's failure of every shard: {"shard": "I/N", "failure": CaseResult, "reproducer": {...}}
    failures: list = field(default_factory=list)

    def __post_init__(self):
        self.status = CampaignStatus(self.status)

    @classmethod
    def from_dict(cls, rec: dict, cases: list | None = None) -> "CampaignResult":
        """The result a campaign record (``report.write.campaign_record``, or a merged one) was
        written from: its cases as CaseResults (``cases``: those already rebuilt, e.g. from a
        case log), its findings as the records they were written as. Fields a record lacks
        or holds as another type (an older or hand-edited report) take their defaults; what
        does not fit the types raises (TypeError, ValueError, KeyError: ``report.read`` says
        which record in one line)."""
        kernel = rec["kernel"]

        def case(d):
            return CaseResult.from_dict({"kernel": kernel, **d}) if d else None

        def of(key, kind, default=None):
            v = rec.get(key)
            return v if isinstance(v, kind) and not (isinstance(v, bool) and kind is not bool) else default

        if cases is None:
            cases = [case(d) for d in rec.get("cases") or ()]
        return cls(
            kernel,
            of("profile", str, ""),
            status=rec.get("status") or CampaignStatus.PASSED,
            reason=of("reason", str, ""),
            cases=cases,
            failure=case(rec.get("failure")),
            first_failure=case(rec.get("first_failure")),
            examples_to_fail=of("examples_to_fail", int),
            seconds_to_fail=of("seconds_to_fail", (int, float)),
            unrun=of("unrun", int, 0),
            reproducer=of("reproducer", dict),
            compile_keys=of("compile_keys", int, 0),
            coverage=of("coverage", dict, {}),
            compile_stats=of("compile_stats", dict),
            elapsed=of("elapsed_s", (int, float), 0.0),
            timing=of("timing", dict),
            compile_reuse=of("compile_reuse", dict),
            settings=of("settings", dict, {}),
            declaration=[x for x in of("declaration", list, []) if isinstance(x, str)],
            hunt=bool(rec.get("hunt")),
            findings=[f for f in of("findings", list, []) if isinstance(f, dict)],
            explained_skipped=of("explained_skipped", int, 0),
            unexplained=of("unexplained", int, 0),
            unexplained_cases=[x for x in of("unexplained_cases", list, []) if isinstance(x, str)],
            failures=[
                {"shard": f.get("shard"), "failure": case(f.get("failure")), "reproducer": f.get("reproducer")}
                for f in of("failures", list, [])
                if isinstance(f, dict)
            ],
        )

    @property
    def failed(self) -> bool:
        return self.status == CampaignStatus.FAILED


class CaseFailed(AssertionError):
    """First-failure mode: a case failed the way the first failure did (ends the search)."""

    def __init__(self, case: CaseResult):
        super().__init__(case.render())
        self.case = case


class BudgetSpent(BaseException):
    """The search's time budget is spent: a hard stop. A BaseException, as KeyboardInterrupt
    is, so Hypothesis lets it through instead of taking it for a failure, and stops drawing
    (it used to draw, and skip, every remaining example: 3000 of them took 30 s)."""


def same_failure(a: CaseResult, b: CaseResult) -> bool:
    """b fails the way a does: errors of the same exception type (``CaseResult.error_type``,
    recorded where the exception was caught) or CUDA runtime error (``triage.failure_name``),
    or at least one failed gate in common. Shrinking follows only the first failure's kind, so
    an MLIR build error does not slip into an unrelated illegal memory access."""
    if a.failure_kind == FailureKind.ERROR:
        return b.failure_kind == FailureKind.ERROR and triage.failure_name(a) == triage.failure_name(b)
    return b.failure_kind == FailureKind.GATE and bool(set(a.failed_gates) & set(b.failed_gates))
