"""Runs: every ``difftest run`` has a run id (a uuid4) and its own folder
``OUT/runs/<run id>/`` holding its case logs, reproducers, reports and ``run.json``
(argv, status, which kernels finished), so runs sharing an ``--out`` never clobber each
other. A run that finishes publishes its reports to ``OUT/report.json``,
``OUT/summary.md`` and ``OUT/report.html`` (atomically; the last finished run wins) and
its id to ``OUT/latest``.

``--resume [RUN_ID]`` continues a run that was killed or interrupted (default: the most
recently started unfinished one in ``OUT``) with its original arguments: kernels whose
campaign finished are taken from their record, the others re-enter their campaign with
every logged case already known (campaign.py never runs those again).
"""

import json
import time
import uuid
from pathlib import Path

from difftest.safeio import atomic_write_text
from difftest.vocab import RunStatus

RUNS = "runs"
CRASH_LOG = "crash.log"  # faulthandler's output with --no-isolate (a fatal signal in the kernel)
PUBLISHED = ("report.json", "summary.md", "report.html", "findings.json")


class RunError(ValueError):
    """No run to resume, or a run folder that cannot be read (one line)."""


class Run:
    def __init__(self, out, run_id: str):
        self.out = Path(out)
        self.id = run_id
        self.dir = self.out / RUNS / run_id

    @property
    def meta_path(self) -> Path:
        return self.dir / "run.json"

    def meta(self) -> dict:
        try:
            return json.loads(self.meta_path.read_text())
        except (OSError, json.JSONDecodeError) as e:
            raise RunError(f"--resume {self.id}: {self.meta_path} cannot be read ({e})") from None

    def _write_meta(self, **changes) -> None:
        d = self.meta() if self.meta_path.exists() else {}
        d.update(changes)
        atomic_write_text(self.meta_path, json.dumps(d, indent=1, default=str))

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, out, argv: list) -> "Run":
        run = cls(out, uuid.uuid4().hex)
        run.dir.mkdir(parents=True, exist_ok=False)
        run._write_meta(run_id=run.id, argv=list(argv), status=RunStatus.RUNNING, finished_kernels={},
                        started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), started_ns=time.time_ns())
        return run

    @classmethod
    def resume(cls, out, run_id: str | None) -> "Run":
        """The run to continue: ``run_id``, or the most recently started unfinished run."""
        base = Path(out) / RUNS
        if run_id:
            run = cls(out, run_id)
            if not run.meta_path.exists():
                known = sorted(p.name for p in base.glob("*") if (p / "run.json").exists()) if base.exists() else []
                raise RunError(f"--resume {run_id}: no such run in {str(base)!r}: known runs are {known}")
            if run.meta().get("status") == RunStatus.FINISHED:
                raise RunError(f"--resume {run_id}: that run finished; nothing to resume")
            return run
        candidates = []
        for p in base.glob("*/run.json") if base.exists() else ():
            try:
                d = json.loads(p.read_text())
            except (OSError, json.JSONDecodeError):
                continue
            if d.get("status") != RunStatus.FINISHED:
                candidates.append((d.get("started_ns", 0), p.parent.name))
        if not candidates:
            raise RunError(f"--resume: no unfinished run in {str(base)!r}: "
                           "allowed after a run was killed or interrupted")
        return cls(out, max(candidates)[1])

    def mark_kernel(self, name: str, record: dict) -> None:
        """A kernel's campaign finished: keep its record (without the cases, which are in
        the case log) so a resumed run does not run it again."""
        d = self.meta()
        d["finished_kernels"][name] = {k: v for k, v in record.items() if k != "cases"}
        atomic_write_text(self.meta_path, json.dumps(d, indent=1, default=str))

    def finished_kernel(self, name: str) -> dict | None:
        return self.meta().get("finished_kernels", {}).get(name)

    def set_status(self, status: str, **extra) -> None:
        self._write_meta(status=status, **extra)

    def publish(self) -> None:
        """Copy this run's reports to ``OUT`` (atomically) and point ``OUT/latest`` at it."""
        for name in PUBLISHED:
            src = self.dir / name
            if src.exists():
                atomic_write_text(self.out / name, src.read_text())
        atomic_write_text(self.out / "latest", self.id + "\n")


def result_from_record(rec: dict, cases: list):
    """A CampaignResult rebuilt from a finished kernel's record and its logged cases."""
    from difftest.judge.runner import CaseResult
    from difftest.search.campaign import CampaignResult

    def case(d):
        return CaseResult.from_dict(d) if d else None

    res = CampaignResult(rec["kernel"], rec["profile"], status=rec["status"], reason=rec.get("reason", ""),
                         cases=cases, failure=case(rec.get("failure")), first_failure=case(rec.get("first_failure")),
                         examples_to_fail=rec.get("examples_to_fail"), seconds_to_fail=rec.get("seconds_to_fail"),
                         reproducer=rec.get("reproducer"), compile_keys=rec.get("compile_keys", 0),
                         coverage=rec.get("coverage", {}), compile_stats=rec.get("compile_stats"),
                         elapsed=rec.get("elapsed_s", 0.0), settings=rec.get("settings", {}),
                         hunt=bool(rec.get("hunt")), findings=list(rec.get("findings") or []),
                         explained_skipped=rec.get("explained_skipped") or 0, unexplained=rec.get("unexplained") or 0)
    return res


def record_crash(run: Run) -> str | None:
    """After an in-process crash (``--no-isolate``: faulthandler wrote ``crash.log``), the
    case the killed process had started and not finished becomes an error case in its case
    log, with faulthandler's first line as the reason, so ``--resume`` moves on instead of
    crashing on it again. A run killed from outside (SIGKILL) leaves no crash.log: its
    unfinished case simply runs again. Returns the crashed case's Problem, short form."""
    from difftest.judge.runner import CaseResult
    from difftest.model.problem import Problem
    from difftest.search.case_log import CaseLog, read_case_log

    crash = run.dir / CRASH_LOG
    text = crash.read_text().strip() if crash.exists() else ""
    if not text:
        return None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    found = None
    for path in sorted(run.dir.glob("*.cases.jsonl")):
        lines = read_case_log(path, events=("started", "case"), run_id=run.id)
        if lines and lines[-1].get("event") == "started":
            d = lines[-1]
            problem = Problem.from_dict(d["problem"])
            case = CaseResult(d.get("kernel") or path.name.split(".cases")[0], problem, "error",
                              reason=f"ProcessCrashed: the campaign process died running this case "
                                     f"(--no-isolate): {first}", error_type="ProcessCrashed")
            log = CaseLog(path, run.id)
            log.write(case)
            log.close()
            found = problem.short()
    crash.rename(run.dir / f"crash-{time.time_ns()}.log")  # kept for people; not read again
    return found
