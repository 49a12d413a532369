"""A campaign's case log: one JSON line per finished case, flushed as it is written, so
the cases survive a campaign that is killed or crashes (``--resume`` reads them back and
never runs them again; ``OUT/runs/<run id>/<kernel>.cases.jsonl``)."""

import json
from pathlib import Path


class CaseLog:
    """Appends one JSON line per finished case and flushes it, so the results survive
    a campaign that is killed or crashes. Every line carries the ``run_id``; a case line
    has ``"event": "case"`` and the case's fields, and ``started(problem)`` (used when
    kernels run in this process, where a crash leaves nothing else) writes an
    ``"event": "started"`` line naming the Problem about to run."""

    def __init__(self, path, run_id: str | None = None):
        self.path = Path(path)
        self.run_id = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._f = self.path.open("a")

    def _line(self, d: dict) -> None:
        self._f.write(json.dumps(d, default=str) + "\n")
        self._f.flush()

    def started(self, problem, kernel: str | None = None) -> None:
        self._line({"run_id": self.run_id, "event": "started", "kernel": kernel, "problem": problem.to_dict()})

    def write(self, case) -> None:
        self._line({"run_id": self.run_id, "event": "case", **case.to_dict()})

    def close(self):
        self._f.close()


def read_case_log(path, events=("case",), run_id: str | None = None) -> list[dict]:
    """The lines of a case log whose event is in ``events`` (lines written before events
    existed count as cases), of ``run_id`` when given; a line cut by a kill is skipped."""
    out = []
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if line:
            try:
                d = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill: keep the rest
                continue
            if not isinstance(d, dict) or d.get("event", "case") not in events:
                continue
            if run_id is not None and d.get("run_id") != run_id:
                continue
            out.append(d)
    return out


def logged_cases(log_path, run_id: str) -> list:
    """The finished cases of ``run_id`` in a case log, as CaseResults, in order."""
    from difftest.judge.runner import CaseResult  # loads torch: not at `difftest --help`'s start

    path = Path(log_path)
    if not path.exists():
        return []
    out = []
    for d in read_case_log(path, run_id=run_id):
        try:
            out.append(CaseResult.from_dict(d))
        except (KeyError, TypeError, ValueError):  # a line from an older schema: run that case again
            continue
    return out
