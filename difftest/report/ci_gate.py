"""``difftest gate --baseline A.json --candidate B.json``: does a kernel change make things worse?

CI runs the same campaigns (same ``--seed``, so the same problems) on the target branch
(A, the baseline) and on the change (B, the candidate) and compares the two reports. The
gate fails (exit 1) on:

- **regression**: a kernel x output x gate with no failing case in A has one in B (a
  kernel that ran no case in A counts as passing nothing: its failures in B are new); a
  Problem that passed in A fails or errors in B; a kernel with no errors in A errors in B;
- **ratio growth**: a kernel x output's worst error ratio (budget / second reference)
  grows by more than ``--max-ratio-growth`` F, i.e. B > (1 + F) x max(A, ``--min-ratio``);
  the floor keeps ratios that are noise (1e-13 -> 1e-12) from counting;
- **determinism lost**: an output bitwise deterministic in every case of A differs in B
  (also for kernels that do not claim determinism, when A measured it);
- **coverage lost**: B covers less than A: a kernel of A absent or unavailable in B, a
  coverage feature hit in A and not in B, an output x gate checked in A and not in B, a
  Problem run in A and skipped in B;
- **settings**: B was judged by other gates than A (k, standards, floors, poison, second
  reference) or drawn inside another narrowing: a looser ``--k`` must not pass a regression.

Different shards of one kernel (or a shard against a whole campaign) are refused: merge first.

A gate that fails in both is a *known failure*: listed, not blocking (it is not this
change's doing), unless the candidate's finding on it is another bug: findings carry a
signature (difftest/search/signature.py), and a candidate finding whose signature matches
no baseline finding (``same_identity``) is a regression even where the baseline failed the
same output x gate (two bugs on one output are two bugs). Each candidate finding is also a
JUnit testcase ``finding <id>`` (failure when new, skipped when known).
Coverage the candidate lacks only because its search budget ran out first
(it left drawn Problems unrun, and every Problem it ran the baseline ran too: the same
seeded stream, stopped earlier, e.g. on a loaded runner or behind cold kernel builds) is
*not reached* (kind ``incomplete``): listed, not blocking. A report compared with itself
passes. The JUnit file has one testcase
per kernel x output x gate (plus ``all:run`` for kernel errors and ``coverage`` per kernel);
a failing testcase carries the shrunk problem and the reproducer path when B's campaign
shrank that failure, else the first failing Problem, marked as not shrunk.
"""

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from difftest.model.problem import OUTPUTS
from difftest.printable import cell
from difftest.report.checked import checked_status
from difftest.report.read import Report, ReportError, finding_case, gate_results, signed_findings
from difftest.report.write import diff_table, ratio
from difftest.search.signature import one_bug
from difftest.vocab import RATIO_GATES, CampaignStatus, FindingKind, Gate, Status

if TYPE_CHECKING:  # annotations only: `difftest --help` builds this command's parser, which loads no torch
    from difftest.judge.runner import CaseResult
    from difftest.search.result import CampaignResult

DEFAULT_GROWTH = 1.0
DEFAULT_MIN_RATIO = 0.05
RUN = ("all", "run")  # the pseudo output x gate of kernel errors (crash, exception, timeout)
DETERMINISM_GATES = (Gate.DETERMINISM, Gate.DETERMINISM_INFO)
# failing in the baseline too; not reached in the candidate's budget
NOT_BLOCKING = (FindingKind.KNOWN, FindingKind.INCOMPLETE)


@dataclass
class Finding:
    kernel: str
    output: str  # an output name, "all" or "coverage"
    gate: str
    kind: FindingKind
    message: str
    case: "CaseResult | None" = None  # B's failing case (shrunk when ``shrunk``)
    shrunk: bool = False
    reproducer: str | None = None

    def __post_init__(self):
        self.kind = FindingKind(self.kind)

    @property
    def blocking(self) -> bool:
        return self.kind not in NOT_BLOCKING

    @property
    def testcase(self) -> tuple[str, str]:
        if self.output == "coverage":
            return self.kernel, "settings" if self.kind == FindingKind.SETTINGS else "coverage"
        return self.kernel, f"{self.output}:{self.gate}"


@dataclass
class GateResult:
    findings: list = field(default_factory=list)
    rows: list = field(default_factory=list)  # (kernel, output, gate, a, b, ratio_a, ratio_b, verdict)
    notes: list = field(default_factory=list)
    testcases: dict = field(default_factory=dict)  # (kernel, name) -> [Finding]

    @property
    def passed(self) -> bool:
        return not any(f.blocking for f in self.findings)

    @property
    def checked_nothing(self) -> bool:
        """The candidate (or one of its kernels) judged no case, and nothing worse than lost
        coverage (which an empty campaign brings) was found: the gate's verdict is NOTHING
        CHECKED, exit 3 (report/checked.py); a regression elsewhere outranks it (exit 1)."""
        kinds = {f.kind for f in self.findings if f.blocking}
        return FindingKind.NOTHING_CHECKED in kinds and kinds <= {FindingKind.NOTHING_CHECKED, FindingKind.COVERAGE}


def _campaigns(doc, which) -> dict:
    """kernel -> CampaignResult of a report (a Report, or its document)."""
    out = {}
    for c in Report.of(doc).campaigns:
        if c.kernel in out:
            raise ReportError(
                f"{which}: kernel {c.kernel!r} appears twice: allowed once per kernel "
                f"(join shards with `difftest merge` first)"
            )
        out[c.kernel] = c
    return out


def _gates_with_run(c: "CampaignResult") -> dict:
    g = gate_results(c)
    ran = [x for x in c.cases if x.status != Status.SKIPPED]
    errors = [x for x in ran if x.status == Status.ERROR]
    if ran:
        g[RUN] = {
            "checked": len(ran),
            "failed": len(errors),
            "worst_ratio": 0.0,
            "differing_cases": 0,
            "first_failing": errors[0] if errors else None,
        }
    return g


def _reproducer_path(repro) -> str | None:
    """A reproducer record's script, else its JSON (None: no reproducer)."""
    return (repro.get("py") or repro.get("json")) if isinstance(repro, dict) else None


def _shrunk(c: "CampaignResult", output: str, gate: str):
    """B's shrunk failure (and reproducer path) for this output x gate, if it shrank one."""
    pairs = [(c.failure, c.reproducer)] + [(f["failure"], f["reproducer"]) for f in c.failures]
    for failure, repro in pairs:
        if not failure:
            continue
        hit = failure.status == Status.ERROR if (output, gate) == RUN else f"{output}:{gate}" in failure.failed_gates
        if hit:
            return failure, _reproducer_path(repro)
    return None, None


def _failing_message(case: "CaseResult", output: str, gate: str) -> str:
    if (output, gate) == RUN:
        return (case.reason or "kernel error").strip().splitlines()[0]
    for v in case.verdicts:
        if v.output == output and v.gate == gate and not v.passed:
            return v.message or f"{output}:{gate} failed"
    return f"{output}:{gate} failed"


def _finding(kernel, c_b, output, gate, kind, message, case=None) -> Finding:
    shrunk, repro = _shrunk(c_b, output, gate) if c_b else (None, None)
    return Finding(
        kernel, output, gate, kind, message, case=shrunk or case, shrunk=shrunk is not None, reproducer=repro
    )


def _matches(fb, known: list) -> bool:
    """Candidate finding ``fb`` ((record, Signature, Problem)) is one of ``known``'s bugs."""
    _, sb, pb = fb
    return any(one_bug(sa, sb, pa, pb) for _, sa, pa in known)


def _finding_cases(res: GateResult, kernel: str, found_b: list, found_a: list, a_ran: bool, ga: dict) -> None:
    """One JUnit testcase per candidate finding. Against a baseline without signed
    findings (an older report), a finding is known where the baseline failed its gates."""
    for fb in found_b:
        rec, sig, _ = fb
        case = finding_case(rec, kernel)
        if found_a:
            known = a_ran and _matches(fb, found_a)
        else:
            known = a_ran and any((ga.get(tuple(label.split(":", 1))) or {}).get("failed") for label in sig.gates)
        seen = rec.get("first_seen") if isinstance(rec.get("first_seen"), dict) else {}
        msg = (
            f"{kernel} finding {sig.id}: {sig.describe()}; {rec.get('hits', '?')} failing cases, first seen at "
            f"case {seen.get('case', '-')}" + ("; known (the baseline has it)" if known else "; new")
        )
        kind = FindingKind.KNOWN if known else FindingKind.REGRESSION
        res.testcases.setdefault((kernel, f"finding {sig.id}"), []).append(
            Finding(
                kernel,
                "finding",
                sig.id,
                kind,
                msg,
                case=case,
                shrunk=case is not None,
                reproducer=_reproducer_path(rec.get("reproducer")),
            )
        )


def compare(
    a: dict, b: dict, max_ratio_growth: float = DEFAULT_GROWTH, min_ratio: float = DEFAULT_MIN_RATIO
) -> GateResult:
    res = GateResult()
    ca, cb = _campaigns(a, "baseline"), _campaigns(b, "candidate")
    res.findings += _candidate_checked_nothing(ca, cb)
    sides = []
    for kernel in list(ca) + [k for k in cb if k not in ca]:
        A, B = ca.get(kernel), cb.get(kernel)
        res.findings += _kernel_checked_nothing(kernel, B)
        lost = _kernel_lost(kernel, A, B, res.notes)
        if lost is not None:
            res.findings += lost
            continue
        s = _Sides.of(kernel, A, B)
        res.notes += _setting_notes(s)
        res.findings += _settings_differ(s)
        sides.append(s)
        for output, gate in s.keys():
            x, y = s.ga.get((output, gate)), s.gb.get((output, gate))
            verdict = "ok"
            for check in (_gate_lost, _gate_fails):
                found, verdict = check(s, output, gate, x, y, verdict)
                res.findings += found
            found, verdict = _ratio_grew(s, output, gate, x, y, verdict, max_ratio_growth, min_ratio)
            res.findings += found
            found, verdict = _determinism_lost(s, output, gate, x, y, verdict)
            res.findings += found
            res.rows.append(
                (
                    kernel,
                    output,
                    gate,
                    _cell(x),
                    _cell(y),
                    x["worst_ratio"] if x and gate in RATIO_GATES else None,
                    y["worst_ratio"] if y and gate in RATIO_GATES else None,
                    verdict,
                )
            )
        if not s.a_up:
            continue
        found, note = _problems_regressed(s)
        res.findings += found
        res.notes.append(note)
        res.findings += _features_lost(s) + _pairs_lost(s)
    _testcases(res, ca, cb, sides)
    return res


@dataclass
class _Sides:
    """One kernel's two campaign records and what every finding kind compares of them."""

    kernel: str
    A: "CampaignResult | None"  # the baseline's campaign (None: absent there)
    B: "CampaignResult"
    a_up: bool  # the baseline ran it
    ga: dict  # gate_results with the kernel errors' RUN row, {} where the baseline did not run it
    gb: dict
    found_a: list  # _signed findings
    found_b: list
    cut: str | None  # why the candidate covers less without covering differently (_cut_short)

    @classmethod
    def of(cls, kernel: str, A: "CampaignResult | None", B: "CampaignResult") -> "_Sides":
        a_up = A is not None and A.status != CampaignStatus.UNAVAILABLE
        return cls(
            kernel,
            A,
            B,
            a_up,
            _gates_with_run(A) if a_up else {},
            _gates_with_run(B),
            signed_findings(A) if a_up else [],
            signed_findings(B),
            _cut_short(A, B) if a_up else None,
        )

    @property
    def lost(self) -> FindingKind:
        """The kind of coverage the candidate lacks: not reached where it was cut short."""
        return FindingKind.INCOMPLETE if self.cut else FindingKind.COVERAGE

    def keys(self) -> list:
        return sorted(set(self.ga) | set(self.gb), key=lambda k: (OUTPUTS.index(k[0]) if k[0] in OUTPUTS else -1, k[1]))

    def other_bugs(self, output: str, gate: str) -> list:
        """The candidate's findings on output:gate the baseline does not have (none against a
        baseline without signed findings)."""
        if not self.found_a:
            return []
        return [fb[1] for fb in self.found_b if f"{output}:{gate}" in fb[1].gates and not _matches(fb, self.found_a)]


def _candidate_checked_nothing(ca: dict, cb: dict) -> list:
    """NOTHING_CHECKED: no campaign of the candidate ran (a candidate without the baseline's
    kernels already fails as coverage lost)."""
    if (cb or not ca) and all(c.status == CampaignStatus.UNAVAILABLE for c in cb.values()):
        return [
            Finding(
                "(all)",
                "coverage",
                "cases",
                FindingKind.NOTHING_CHECKED,
                f"the candidate checked nothing: {len(cb)} campaigns, none of them ran (a report that judged "
                "no case does not pass the gate)",
            )
        ]
    return []


def _kernel_checked_nothing(kernel: str, B: "CampaignResult | None") -> list:
    """NOTHING_CHECKED: the candidate's campaign of ``kernel`` judged no case."""
    if B is not None and checked_status(B.status, B.cases) == CampaignStatus.NOTHING_CHECKED:
        return [
            Finding(
                kernel,
                "coverage",
                "cases",
                FindingKind.NOTHING_CHECKED,
                f"{kernel}: the candidate judged no case ({len(B.cases)} cases, none passed, "
                "failed or errored): nothing was checked, which never passes",
            )
        ]
    return []


def _kernel_lost(kernel: str, A: "CampaignResult | None", B: "CampaignResult | None", notes: list) -> list | None:
    """COVERAGE of a whole kernel: absent from the candidate, or unavailable there though the
    baseline ran it. None where its gates are compared; [] where there is nothing to compare
    (unavailable in both: a note)."""
    if B is None:
        return [
            Finding(
                kernel,
                "coverage",
                "kernel",
                FindingKind.COVERAGE,
                f"{kernel}: in the baseline, absent from the candidate",
            )
        ]
    a_up = A is not None and A.status != CampaignStatus.UNAVAILABLE
    b_up = B.status != CampaignStatus.UNAVAILABLE
    if a_up and not b_up:
        return [
            Finding(
                kernel,
                "coverage",
                "kernel",
                FindingKind.COVERAGE,
                f"{kernel}: ran in the baseline, unavailable in the candidate: {B.reason}",
            )
        ]
    if not b_up:
        notes.append(f"{kernel}: unavailable in both ({B.reason})")
        return []
    if not a_up:
        notes.append(
            f"{kernel}: not run in the baseline ({'absent' if A is None else A.reason}); "
            f"its failures in the candidate count as new"
        )
    return None


def _setting_notes(s: _Sides) -> list:
    """Differences in how the two sides drew (seed, hunt): notes; another shard: refused."""
    kernel, A, out = s.kernel, s.A, []
    sa, sb = A.settings if A is not None else {}, s.B.settings
    if A is not None and (sa.get("seed") is None or sa.get("seed") != sb.get("seed")):
        out.append(
            f"{kernel}: seeds differ or are unset (baseline {sa.get('seed')!r}, candidate "
            f"{sb.get('seed')!r}): the two drew different problems; run both with --seed N"
        )
    if A is not None and bool(sa.get("hunt")) != bool(sb.get("hunt")):
        mode = {True: "hunted", False: "stopped at its first failure"}
        out.append(
            f"{kernel}: the baseline {mode[bool(sa.get('hunt'))]}, the candidate "
            f"{mode[bool(sb.get('hunt'))]}: one side looked for more bugs than the other; run both "
            f"with the same --hunt/--first-failure"
        )
    if A is not None and sa.get("shard") != sb.get("shard"):
        raise ReportError(
            f"kernel {kernel!r}: baseline shard {sa.get('shard')!r}, candidate shard "
            f"{sb.get('shard')!r}: allowed the same shard on both sides, or whole campaigns "
            f"(join shards with `difftest merge` first)"
        )
    return out


def _settings_differ(s: _Sides) -> list:
    """SETTINGS: the candidate was judged by other gates or drawn inside another narrowing."""
    if s.A is None:
        return []
    diffs = settings_differences(s.A.settings, s.B.settings)
    if not diffs:
        return []
    return [
        Finding(
            s.kernel,
            "coverage",
            "settings",
            FindingKind.SETTINGS,
            f"{s.kernel}: the candidate ran with other gate settings ({'; '.join(diffs)}): its verdicts "
            f"are not comparable with the baseline's; run both sides with the same options",
        )
    ]


def _gate_lost(s: _Sides, output, gate, x, y, verdict) -> tuple[list, str]:
    """COVERAGE (or not reached): an output x gate checked in the baseline, never in the candidate."""
    if y is None or not y["checked"]:
        return [
            Finding(
                s.kernel,
                output,
                gate,
                s.lost,
                f"{s.kernel} {output}:{gate}: checked in {x['checked']} baseline cases, "
                "none in the candidate" + (f" ({s.cut})" if s.cut else ""),
            )
        ], "NOT REACHED" if s.cut else "COVERAGE LOST"
    return [], verdict


def _gate_fails(s: _Sides, output, gate, x, y, verdict) -> tuple[list, str]:
    """REGRESSION where an output x gate fails in the candidate and passed in the baseline, or
    fails in both by another bug (the candidate's finding is not the baseline's); KNOWN where
    it fails in both."""
    if y is None or not y["checked"] or not y["failed"]:
        return [], verdict
    kernel, B = s.kernel, s.B
    case = y["first_failing"]
    msg = _failing_message(case, output, gate)
    new_bugs = s.other_bugs(output, gate)
    if x and x["failed"] and new_bugs:
        return [
            _finding(
                kernel,
                B,
                output,
                gate,
                FindingKind.REGRESSION,
                f"{kernel} {output}:{gate}: fails in the baseline too, but the candidate's finding "
                f"{new_bugs[0].id} is another bug ({new_bugs[0].describe()}): {msg}",
                case,
            )
        ], "REGRESSION (new bug)"
    if x and x["failed"]:
        return [
            _finding(
                kernel,
                B,
                output,
                gate,
                FindingKind.KNOWN,
                f"{kernel} {output}:{gate}: fails in the baseline too "
                f"({x['failed']} of {x['checked']} cases; candidate {y['failed']} of "
                f"{y['checked']}): {msg}",
                case,
            )
        ], "known failure"
    return [
        _finding(
            kernel,
            B,
            output,
            gate,
            FindingKind.REGRESSION,
            f"{kernel} {output}:{gate}: {y['failed']} of {y['checked']} candidate cases fail, "
            + (f"0 of {x['checked']} in the baseline" if x else "not run in the baseline")
            + f": {msg}",
            case,
        )
    ], "REGRESSION"


def _ratio_grew(s: _Sides, output, gate, x, y, verdict, max_ratio_growth, min_ratio) -> tuple[list, str]:
    """RATIO: a worst error ratio grew past (1 + growth) x max(baseline, min_ratio)."""
    if not (x and y and gate in RATIO_GATES and y["checked"]):
        return [], verdict
    wa, wb = x["worst_ratio"], y["worst_ratio"]
    allowed = (1.0 + max_ratio_growth) * max(wa, min_ratio)
    if wb <= allowed:
        return [], verdict
    return [
        _finding(
            s.kernel,
            s.B,
            output,
            gate,
            FindingKind.RATIO,
            f"{s.kernel} {output}:{gate}: worst error ratio grew {wa:.3g} -> {wb:.3g} "
            f"(allowed up to {allowed:.3g}: "
            f"--max-ratio-growth {max_ratio_growth:g} over max(baseline, {min_ratio:g}))",
            _worst_case(s.B, output, gate),
        )
    ], "RATIO GREW" if verdict == "ok" else verdict


def _determinism_lost(s: _Sides, output, gate, x, y, verdict) -> tuple[list, str]:
    """DETERMINISM: bitwise equal in every baseline case, differing in some candidate case."""
    if not (
        x and y and gate in DETERMINISM_GATES and x["checked"] and not x["differing_cases"] and y["differing_cases"]
    ):
        return [], verdict
    return [
        _finding(
            s.kernel,
            s.B,
            output,
            gate,
            FindingKind.DETERMINISM,
            f"{s.kernel} {output}: determinism lost: bitwise equal in all {x['checked']} "
            "baseline cases, "
            f"differs in {y['differing_cases']} of {y['checked']} candidate cases",
            _first_differing(s.B, output, gate),
        )
    ], "DETERMINISM LOST" if verdict == "ok" else verdict


def _problems_regressed(s: _Sides) -> tuple[list, str]:
    """Problem by problem: REGRESSION where the same Problem passed in the baseline and fails
    or errors in the candidate (one finding per output x gate, not one per problem), COVERAGE
    where it ran in the baseline and is skipped in the candidate; and the note of how many
    problems the two share."""
    kernel, A, B, out = s.kernel, s.A, s.B, []
    b_cases = {c.problem: c for c in B.cases}
    common, skipped, newly = 0, [], {}
    for ac in A.cases:
        bc = b_cases.get(ac.problem)
        if bc is None:
            continue
        common += 1
        if ac.status == Status.PASSED and bc.status in (Status.FAILED, Status.ERROR):
            newly.setdefault(RUN if bc.status == Status.ERROR else _first_gate(bc), []).append(bc)
        elif ac.status != Status.SKIPPED and bc.status == Status.SKIPPED:
            skipped.append(bc)
    for (output, gate), bcs in newly.items():
        more = f" (and {len(bcs) - 1} more)" if len(bcs) > 1 else ""
        out.append(
            _finding(
                kernel,
                B,
                output,
                gate,
                FindingKind.REGRESSION,
                f"{kernel}: a problem that passed in the baseline {bcs[0].status} in the candidate"
                f"{more}: {_failing_message(bcs[0], output, gate)}",
                bcs[0],
            )
        )
    if skipped:
        more = f" (and {len(skipped) - 1} more)" if len(skipped) > 1 else ""
        out.append(
            Finding(
                kernel,
                "coverage",
                "cases",
                FindingKind.COVERAGE,
                f"{kernel}: a problem run in the baseline is skipped in the candidate{more}: {skipped[0].reason}",
                case=skipped[0],
            )
        )
    note = (
        f"{kernel}: {common} of {len(A.cases)} baseline problems also ran in the candidate "
        f"({len(B.cases)} candidate cases)"
    )
    return out, note


def _features_lost(s: _Sides) -> list:
    """COVERAGE (or not reached): coverage features hit in the baseline, not in the candidate."""
    hit_a = set(s.A.coverage.get("hit") or {})
    hit_b = set(s.B.coverage.get("hit") or {})
    if not hit_a - hit_b:
        return []
    return [
        Finding(
            s.kernel,
            "coverage",
            "features",
            s.lost,
            f"{s.kernel}: coverage features hit in the baseline, not in the candidate: "
            f"{', '.join(sorted(hit_a - hit_b))}" + (f" ({s.cut})" if s.cut else ""),
        )
    ]


def _pairs_lost(s: _Sides) -> list:
    """COVERAGE (or not reached): configuration pairs covered in the baseline, not in the candidate."""
    lost_pairs = _lost_pairs(s.A, s.B)
    if not lost_pairs:
        return []
    return [
        Finding(
            s.kernel,
            "coverage",
            "pairs",
            s.lost,
            f"{s.kernel}: {len(lost_pairs)} configuration pairs covered in the baseline, not in the "
            f"candidate: {', '.join(lost_pairs[:6])}"
            + (" ..." if len(lost_pairs) > 6 else "")
            + (f" ({s.cut})" if s.cut else ""),
        )
    ]


def _testcases(res: GateResult, ca: dict, cb: dict, sides: list) -> None:
    """The JUnit testcases: every finding under its own, one per candidate finding, and an
    empty (passing) one for every row, every candidate kernel's coverage and settings."""
    for f in res.findings:
        res.testcases.setdefault(f.testcase, []).append(f)
    for s in sides:
        _finding_cases(res, s.kernel, s.found_b, s.found_a, s.a_up, s.ga)
    for kernel, output, gate, *_ in res.rows:
        res.testcases.setdefault((kernel, f"{output}:{gate}"), [])
    for kernel in cb:
        if cb[kernel].status != CampaignStatus.UNAVAILABLE or kernel in ca:
            res.testcases.setdefault((kernel, "coverage"), [])
        if kernel in ca:
            res.testcases.setdefault((kernel, "settings"), [])


def _lost_pairs(a: "CampaignResult", b: "CampaignResult") -> list[str]:
    """Configuration pairs the baseline covered and the candidate, claiming the same
    dimensions, did not (docs/coverage.md)."""
    pa, pb = (x.coverage.get("pairs") or {} for x in (a, b))
    if not pa or not pb or pa.get("dimensions") != pb.get("dimensions"):
        return []
    return sorted(set(pb.get("missing") or ()) - set(pa.get("missing") or ()))


def _cut_short(a: "CampaignResult", b: "CampaignResult") -> str | None:
    """Why the candidate ``b`` covers less than ``a`` without covering differently, or None:
    it stopped at its first failure (first-failure mode: its regression blocks it already), or
    its search budget ran out (``unrun`` drawn Problems not run), its edge corpus was as large,
    and it ran no Problem the baseline did not (the same seeded stream, stopped earlier). A
    candidate that draws otherwise (a narrower capability, another seed) has another corpus or
    runs Problems the baseline never did."""
    if b.status == CampaignStatus.FAILED and not b.hunt:
        return (
            f"the candidate stopped at its first failure (case {b.examples_to_fail}): what it did not "
            f"run is not lost coverage"
        )
    unrun = b.unrun
    corpus = [x.settings.get("edge_cases") for x in (a, b)]
    if not unrun or corpus[0] != corpus[1]:
        return None
    ran_a = {c.problem for c in a.cases}
    cases_b = b.cases
    if any(c.problem not in ran_a for c in cases_b):
        return None
    return (
        f"the candidate's search budget ran out after {len(cases_b)} of the baseline's "
        f"{len(ran_a)} problems, {unrun} drawn problems left unrun; rerun it with a larger --time-budget"
    )


_COMPARED = ("gates", "poison", "second_reference")  # what a verdict depends on (operational knobs left out)


def _leaves(d, prefix=""):
    if isinstance(d, dict):
        for k, v in d.items():
            yield from _leaves(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1], d


def settings_differences(sa: dict, sb: dict) -> list[str]:
    """Gate settings that differ between two campaigns (keys one engine version lacks are
    not compared), and a different narrowing: each as 'name old -> new'."""
    # lazy: keeps torch off --help
    from difftest.judge.gates import GateConfig  # loads torch: `difftest gate` only needs it here

    ca, cb = sa.get("config") or {}, sb.get("config") or {}
    ca, cb = (
        {**c, "gates": {**c["gates"], "k": GateConfig.listed_k(c["gates"])}} if isinstance(c.get("gates"), dict) else c
        for c in (ca, cb)
    )
    la = dict(_leaves({k: ca[k] for k in _COMPARED if k in ca}))
    lb = dict(_leaves({k: cb[k] for k in _COMPARED if k in cb}))
    out = [f"{k} {la[k]!r} -> {lb[k]!r}" for k in la if k in lb and la[k] != lb[k]]
    if (sa.get("narrowed") or None) != (sb.get("narrowed") or None):
        out.append(f"narrowed {sa.get('narrowed')!r} -> {sb.get('narrowed')!r}")
    return out


def _first_gate(case: "CaseResult") -> tuple[str, str]:
    for v in case.verdicts:
        if not v.passed:
            return v.output, v.gate
    return RUN


def _worst_case(c: "CampaignResult", output: str, gate: str):
    best, top = None, -1.0
    for case in c.cases:
        for v in case.verdicts:
            if v.output == output and v.gate == gate and ratio(v) > top:
                best, top = case, ratio(v)
    return best


def _first_differing(c: "CampaignResult", output: str, gate: str):
    for case in c.cases:
        for v in case.verdicts:
            if v.output == output and v.gate == gate and v.numbers.get("differing", 0):
                return case
    return None


def _cell(s) -> str:
    if not s:
        return "-"
    return f"{s['checked'] - s['failed']}/{s['checked']} pass"


def render(res: GateResult) -> str:
    """The gate's report for a terminal or a CI log: every text that came from a report
    (kernel names, reasons, messages, paths) printed as ``printable.cell``, one line each."""
    lines = [diff_table(res), ""]
    for n in res.notes:
        lines.append(f"note: {cell(n)}")
    for f in res.findings:
        tag = {FindingKind.KNOWN: "known failure", FindingKind.INCOMPLETE: "not reached"}.get(f.kind, f.kind.upper())
        lines.append(f"{tag}: {cell(f.message)}")
        if f.blocking and f.case:
            what = "shrunk problem" if f.shrunk else "problem (not shrunk)"
            lines.append(f"  {what}: {cell(f.case.problem.short())}")
            if f.reproducer:
                lines.append(f"  reproducer: {cell(f.reproducer)}")
    blocking = [f for f in res.findings if f.blocking]
    lines.append("")
    count = {k: sum(f.kind == k for f in res.findings) for k in NOT_BLOCKING}
    listed = [
        f"{n} {what}"
        for what, n in (("known failures", count[FindingKind.KNOWN]), ("not reached", count[FindingKind.INCOMPLETE]))
        if n
    ]
    lines.append(
        "gate: PASSED" + (f" ({', '.join(listed)})" if listed else "")
        if res.passed
        else "gate: NOTHING CHECKED (the candidate judged no case)"
        if res.checked_nothing
        else f"gate: FAILED ({len(blocking)} findings)"
    )
    return "\n".join(lines)
