"""Findings are written the moment they exist: a campaign's first failure gets its
reproducer and its failure-store entry when it is found, and both are rewritten at each
shrink step (each strictly simpler Problem that fails the same way), so a campaign
killed while shrinking has already left its best reproducer and store entry behind.

The reproducer pair keeps one name per campaign run and finding (``<spec>-<run id>.json``/
``.py`` for the first, ``-f2``, ``-f3`` ... for a hunt's later findings), written atomically;
the store keeps the first failing Problem and the current simplest, replacing the previous
simplest in place (atomically) rather than appending every step.

``Finding`` is one distinct bug of a campaign as the reports list it (signature.py says
what makes two failures the same bug).
"""

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from difftest.execute.interrupt import OutputFailed
from difftest.model.problem import Problem
from difftest.search.failure_store import keep_current
from difftest.search.reproducer import write_reproducer
from difftest.search.shrinking import complexity
from difftest.search.signature import Signature

if TYPE_CHECKING:  # annotations only
    from difftest.judge.runner import CaseResult


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


class Findings:
    def __init__(self, kernel, config, repro_dir, database: str | None, spec: str, run_id: str, number: int = 1):
        self.kernel, self.config, self.repro_dir = kernel, config, repro_dir
        self.database, self.spec = database, spec
        # a hunt's later findings get their own pair: <spec>-<run id>-f2, -f3, ...
        self.stem = f"{_safe(spec)}-{run_id[:12]}" + (f"-f{number}" if number > 1 else "")
        self.first: "CaseResult | None" = None
        self.best: "CaseResult | None" = None  # the simplest failing the first's way so far
        self.reproducer: dict[str, str] | None = None  # {"json": path, "py": path}
        self._mine: "set[Problem]" = set()  # the Problems this run put in the store
        # the Problems its reproducer runs first, in the same process: a failure that shows only after
        # them (``Signature.history``, the one named in ``after``)
        self.before: tuple = ()

    def found(self, case, first) -> bool:
        """Record ``case`` (a failing case of the campaign's first failure's kind, or the
        first failure itself); rewrite the reproducer and store when it is simpler than the
        best so far. True when it became the best."""
        if self.first is None:
            self.first = first
        if self.best is not None and not complexity(case.problem) < complexity(self.best.problem):
            return False
        self.write(case)
        return True

    def write(self, case=None) -> None:
        """Write ``case`` (default: the best so far) as the reproducer and store entry; it
        becomes the best once both are on disk. A write that fails (a full disk, a link planted
        where it writes) stops the campaign as an interruption does (``OutputFailed``: exit 2,
        a partial report, resumable), never as a kernel's failure inside Hypothesis."""
        case = case or self.best
        try:
            self.reproducer = write_reproducer(
                self.kernel, case, self.config, self.repro_dir, stem=self.stem, before=self.before
            )
            self._store(case)
        except OSError as e:
            raise OutputFailed(e.filename or self.repro_dir, e) from None
        self.best = case

    def discard(self) -> None:
        """Remove the reproducer pair this writer wrote (a candidate that turned out to be
        a finding already kept); its store entries stay: failing Problems to replay first."""
        for path in (self.reproducer or {}).values():
            Path(path).unlink(missing_ok=True)
        self.reproducer = None

    def _store(self, best) -> None:
        """The simplest failing Problem so far, then the first one (the simplest replays
        first in the next campaign); entries this run did not write stay in place."""
        assert self.first is not None  # found() sets it before the first write
        self._mine = keep_current(self.database, self.spec, [best.problem, self.first.problem], self._mine)


@dataclass
class Finding:
    """One distinct bug a campaign found (or was told about, ``known``): its signature,
    the case that first hit it, its shrunk case, how many cases it explains and when it
    was first seen. Plain data, so a result crosses process boundaries (``--jobs``)."""

    signature: "Signature"
    first: "CaseResult | None" = None  # the case that first hit it (None: known and not hit)
    best: "CaseResult | None" = None  # the shrunk case (for a known finding: its replayed case)
    known: bool = False
    hits: int = 0  # failing cases of the campaign it explains (search, shrink and variation cases)
    search_hits: int = 0  # of those, drawn or replayed by the search itself
    skipped: int = 0  # drawn Problems it explains that were not run (steering)
    first_seen: dict = field(default_factory=dict)  # {"case": index in the campaign, "seconds": s, "utc": time}
    reproducer: dict | None = None  # {"json": path, "py": path}
    shrink: dict = field(default_factory=dict)  # {"calls": n, "seconds": s}
    source: str = ""  # for a known finding: the file it came from
    # signatures of the same bug reached from elsewhere (signature.same_identity), which
    # widen what the finding explains: a fault invisible on one key without sinks signs
    # "seqlen_k>=2" first and "sinks" once a case with sinks and one key shows it
    variants: "list[Signature]" = field(default_factory=list)
    number: int = 0  # a hunt's new findings in the order kept (1 = the first): its reproducer's -fN
    trigger: "Problem | None" = None  # the failing case whose hunt kept it (a resumed hunt replays from it)

    @property
    def id(self) -> str:
        return self.signature.id

    @property
    def signatures(self) -> list:
        return [self.signature] + self.variants

    def explains(self, case) -> bool:
        return any(s.explains(case) for s in self.signatures)

    def explains_problem(self, problem) -> bool:
        """``problem`` has every need of one of its signatures: a hunt steers away from it. A
        signature that found no need (it failed on every variation run) steers nothing: it
        would claim every Problem, and one misread error once made a campaign skip them all. Nor
        does a history-dependent one (``Signature.history``): its needs are where it was seen, not
        what it needs, and the bug of another case there shows alone."""
        return any(s.needs and not s.history and s.explains_problem(problem) for s in self.signatures)

    def log_record(self) -> dict:
        """What a hunt's case log keeps of a new finding (``"event": "finding"``), so a resumed
        hunt rebuilds it (``from_log``) instead of shrinking it again."""
        assert self.first is not None and self.best is not None  # a new finding has both
        return {
            "number": self.number,
            "signature": self.signature.to_dict(),
            "variants": [v.to_dict() for v in self.variants],
            "trigger": self.trigger.to_dict() if self.trigger is not None else None,
            "first": self.first.problem.to_dict(),
            "best": self.best.problem.to_dict(),
            "reproducer": self.reproducer,
            "shrink": self.shrink,
        }

    @classmethod
    def from_log(cls, d: dict, seen: dict) -> "Finding | None":
        """The finding a case-log record describes, its cases taken from ``seen`` (Problem ->
        CaseResult of the logged cases); None when a case it names is not there."""
        first, best = seen.get(Problem.from_dict(d["first"])), seen.get(Problem.from_dict(d["best"]))
        if first is None or best is None:
            return None
        return cls(
            Signature.from_dict(d["signature"]),
            first=first,
            best=best,
            reproducer=d.get("reproducer"),
            shrink=dict(d.get("shrink") or {}),
            number=int(d["number"]),
            variants=[Signature.from_dict(v) for v in d.get("variants") or ()],
            trigger=Problem.from_dict(d["trigger"]) if d.get("trigger") else None,
        )

    def to_dict(self) -> dict:
        return {
            "id": self.id,
            "status": "known" if self.known else "new",
            "signature": self.signature.to_dict(),
            "hits": self.hits,
            "search_hits": self.search_hits,
            "skipped": self.skipped,
            "first_seen": self.first_seen,
            "reproducer": self.reproducer,
            "shrink": self.shrink,
            "variants": [v.to_dict() for v in self.variants],
            "failure": self.best.to_dict() if self.best is not None else None,
            "first_failure": self.first.problem.to_dict() if self.first is not None else None,
            **({"source": self.source} if self.source else {}),
        }


def failure_message(res) -> str:
    """What a failing campaign reports where one message must say it all (the pytest
    fixture): every new finding, each with its signature, shrunk case, cases that hit it,
    when first seen and reproducer; then the known findings it hit, one line each."""
    new = [f for f in res.findings if not f.known] if res.findings else []
    if not new:
        repro = (res.reproducer or {}).get("py", "-")
        return f"{res.failure.render()}\nfirst failure after {res.examples_to_fail} examples; reproducer: {repro}"
    lines = [
        f"{res.kernel}: {len(new)} distinct finding{'s' * (len(new) != 1)}"
        + (f" ({res.explained_skipped} drawn problems they explain not run)" if res.explained_skipped else "")
    ]
    for i, f in enumerate(new, 1):
        seen = f.first_seen or {}
        lines.append(f"--- finding {i}/{len(new)} [{f.id}] {f.signature.describe()}")
        lines.append(
            f"  {f.hits} failing cases; first seen at case {seen.get('case', '-')} "
            f"({seen.get('seconds', 0.0):.1f} s in)"
        )
        lines += ["  " + x for x in f.best.render().splitlines()]
        lines.append(f"  reproducer: {(f.reproducer or {}).get('py', '-')}")
    for f in res.findings:
        if f.known and f.hits:
            lines.append(f"known [{f.id}] {f.signature.describe()}: {f.hits} cases")
    return "\n".join(lines)
