"""Findings are written the moment they exist: a campaign's first failure gets its
reproducer and its failure-store entry when it is found, and both are rewritten at each
shrink step (each strictly simpler Problem that fails the same way), so a campaign
killed while shrinking has already left its best reproducer and store entry behind.

The reproducer pair keeps one name per campaign run (``<spec>-<run id>.json``/``.py``),
written atomically; the store keeps the first failing Problem and the current simplest,
replacing the previous simplest in place (atomically) rather than appending every step.
"""

from difftest.search.shrinking import complexity


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)


class Findings:
    def __init__(self, kernel, config, repro_dir, database: str | None, spec: str, run_id: str):
        self.kernel, self.config, self.repro_dir = kernel, config, repro_dir
        self.database, self.spec = database, spec
        self.stem = f"{_safe(spec)}-{run_id[:12]}"
        self.first = None  # CaseResult
        self.best = None  # CaseResult, the simplest failing the first's way so far
        self.reproducer = None  # {"json": path, "py": path}
        self._mine = set()  # the Problems this run put in the store

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
        becomes the best once both are on disk."""
        from difftest.search.reproducer import write_reproducer

        case = case or self.best
        self.reproducer = write_reproducer(self.kernel, case, self.config, self.repro_dir, stem=self.stem)
        self._store(case)
        self.best = case

    def _store(self, best) -> None:
        """The simplest failing Problem so far, then the first one (the simplest replays
        first in the next campaign); entries this run did not write stay in place."""
        from difftest.search.failure_store import keep_current

        self._mine = keep_current(self.database, self.spec, [best.problem, self.first.problem], self._mine)
