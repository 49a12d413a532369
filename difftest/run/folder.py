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

An output folder may hold files someone else planted (a pull request's checkout, a
downloaded artifact), so ``--resume`` accepts only a run this user's difftest created:

- ``run.json`` carries an HMAC-SHA256 of its content under a key kept outside every run
  folder (``state_dir()/run-key``, mode 0600, made at the first run): a planted or edited
  ``run.json`` does not verify and is refused (or, without an id, never chosen);
- a run id is 32 hex digits (a uuid4), and the run's folder must be a real folder (no
  symlink) that resolves inside ``OUT/runs``;
- ``run.json`` is size- and depth-limited before it is parsed, and its ``argv`` must be a
  short list of strings that starts with ``run``;
- outputs (``--out``, ``--report``, ``--markdown``, ``--html``) come from the current
  command line, never from the recorded ``argv`` (``CURRENT_ONLY``; ``--db`` and the
  threads from it when given there), and a
  ``module:attr`` kernel in the recorded ``argv`` is imported only with ``--allow-import``;
- one process at a time writes a run folder (``fcntl.flock`` on ``.lock``): a second
  ``--resume`` of a run under way is refused.
"""

import fcntl
import hashlib
import hmac
import json
import os
import re
import time
import uuid
from pathlib import Path

from difftest.errors import FileFormatError
from difftest.execute.adapter import is_import_spec
from difftest.model.problem import Problem
from difftest.safeio import atomic_write_text, ensure_dir, read_capped, read_json
from difftest.search.case_log import CaseLog, read_case_log
from difftest.vocab import RunStatus

RUNS = "runs"
PLANS = "plans"  # OUT/plans: the coverage phase's plans between runs (search/plan_cache.py)
CRASH_LOG = "crash.log"  # faulthandler's output with --no-isolate (a fatal signal in the kernel)
PUBLISHED = ("report.json", "summary.md", "report.html", "findings.json")


class RunError(FileFormatError):
    """No run to resume, or a run folder that cannot be read (one line)."""


RUN_ID = re.compile(r"[0-9a-f]{32}")  # uuid.uuid4().hex
MAX_META_BYTES = 16 * 2**20
MAX_ARGV = 1000  # recorded arguments
MAX_ARG_CHARS = 4096
CURRENT_ONLY = ("out", "report", "markdown", "html", "resume", "allow_import")  # never from run.json
CURRENT_IF_GIVEN = ("db", "quiet", "jobs", "threads", "prebuild")  # from this command line when given here
KEY_FILE = "run-key"
STATE_ENV = "DIFFTEST_STATE_DIR"


def state_dir() -> Path:
    """Where difftest keeps what must not live in an output folder (the run-signing key):
    ``$DIFFTEST_STATE_DIR``, else ``$XDG_STATE_HOME/difftest``, else ``~/.local/state/difftest``."""
    if os.environ.get(STATE_ENV):
        return Path(os.environ[STATE_ENV])
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "difftest"


def _key(create: bool) -> bytes | None:
    """This user's run-signing key (32 random bytes), made on first use with mode 0600;
    None when it cannot be read (or made)."""
    path = state_dir() / KEY_FILE
    try:
        with open(path, "rb") as f:
            key = f.read(64)
        return key if len(key) >= 32 else None
    except FileNotFoundError:
        if not create:
            return None
    except OSError:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(32))
    except FileExistsError:  # another run made it first
        pass
    except OSError:
        return None
    return _key(create=False)


def _canonical(d: dict) -> bytes:
    body = {k: v for k, v in d.items() if k != "signature"}
    return json.dumps(json.loads(json.dumps(body, default=str)), sort_keys=True).encode()


def sign(d: dict) -> str | None:
    key = _key(create=True)
    return None if key is None else hmac.new(key, _canonical(d), hashlib.sha256).hexdigest()


def verified(d: dict) -> bool:
    """True when ``d`` (a run.json) carries a valid signature under this user's key."""
    key = _key(create=False)
    sig = d.get("signature")
    if key is None or not isinstance(sig, str):
        return False
    return hmac.compare_digest(sig, hmac.new(key, _canonical(d), hashlib.sha256).hexdigest())


def check_run_id(run_id) -> str:
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise RunError(
            f"--resume {str(run_id)[:80]!r}: not a run id: allowed the 32 hex digits `difftest run` "
            "printed (run <id>), or no id for the latest unfinished run"
        )
    return run_id


def run_folder(out, run_id: str) -> Path:
    """``OUT/runs/<run_id>``, refused unless it is a real folder (no symlink on the way from
    ``OUT/runs``) whose resolved path lies inside ``OUT/runs``."""
    check_run_id(run_id)
    base = Path(out) / RUNS
    folder = base / run_id
    for p in (base, folder, folder / "run.json"):
        if p.is_symlink():
            raise RunError(f"--resume {run_id}: {str(p)!r} is a symbolic link: allowed a run folder difftest made")
    try:
        inside = folder.resolve().parent == base.resolve()
    except OSError as e:
        raise RunError(f"--resume {run_id}: {str(folder)!r} cannot be resolved ({e.strerror or e})") from None
    if not inside:
        raise RunError(f"--resume {run_id}: {str(folder)!r} lies outside {str(base)!r}: allowed a run folder there")
    return folder


def read_meta(path, run_id: str) -> dict:
    """A run.json, size- and depth-limited before parsing and checked field by field."""
    d = read_json(path, RunError, "run.json written by difftest", MAX_META_BYTES)
    if not isinstance(d, dict):
        raise RunError(f"--resume {run_id}: {path}: a JSON {type(d).__name__}: allowed the object difftest wrote")
    argv = d.get("argv")
    # a pytest session's run folder (OUT/pytest/runs) records its own command line: readable, never resumed
    if (
        not isinstance(argv, list)
        or not argv
        or argv[0] not in ("run", "pytest")
        or len(argv) > MAX_ARGV
        or not all(isinstance(a, str) and len(a) <= MAX_ARG_CHARS for a in argv)
    ):
        raise RunError(
            f"--resume {run_id}: {path}: field 'argv' is not the arguments of a `difftest run`: "
            f"allowed a list of at most {MAX_ARGV} strings starting with 'run'"
        )
    if d.get("run_id") != run_id:
        raise RunError(
            f"--resume {run_id}: {path}: field 'run_id' is {str(d.get('run_id'))[:40]!r}: allowed the folder's own id"
        )
    for key, types in (("status", str), ("finished_kernels", dict), ("started_ns", int)):
        if not isinstance(d.get(key), types) or isinstance(d.get(key), bool):
            raise RunError(
                f"--resume {run_id}: {path}: field {key!r} is missing or of the wrong type: allowed "
                "the run.json difftest wrote"
            )
    return d


def resumed_args(current, recorded, allow_import: bool, defaults=None):
    """The namespace a resumed run uses: the recorded run's search arguments with every
    option of ``CURRENT_ONLY`` (the outputs) from the current command line, and those of
    ``CURRENT_IF_GIVEN`` (the failure store, which the search reads, this host's threads
    and lanes) from it when given there (differing from ``defaults``, the parser's);
    refused (RunError) when the recorded arguments name a ``module:attr`` kernel and the
    current command line has no ``--allow-import``."""
    for attr in CURRENT_ONLY + CURRENT_IF_GIVEN:
        if not hasattr(current, attr):
            continue
        if attr in CURRENT_ONLY or defaults is None or getattr(current, attr) != getattr(defaults, attr, None):
            setattr(recorded, attr, getattr(current, attr))
    specs = list(getattr(recorded, "kernels", None) or ()) + [getattr(recorded, "second_reference", None) or ""]
    for spec in specs:
        if spec and not allow_import and is_import_spec(spec):
            raise RunError(
                f"--resume: the run's arguments name {spec[:80]!r}, which imports a module: allowed with "
                "--allow-import (trust that run folder), or a registered kernel name"
            )
    return recorded


_HELD: list = []  # runs whose writer lock this process holds


def release_locks() -> None:
    """Release every run folder lock this process holds (``cli.main`` on return: a run
    called in-process, from a test or a notebook, leaves its folder resumable)."""
    for run in list(_HELD):
        run.unlock()


def latest_records(out) -> dict | None:
    """kernel -> its campaign's record (without its cases) in the run ``OUT/latest`` names, the
    last one published to ``OUT`` (its reports are OUT's); None when there is none or it cannot be
    read. Its run.json holds the records report.json holds, less the cases: ~0.1 MB against
    report.json's ~8 MB in the CPU main job (``lanes.previous_times``)."""
    try:
        run_id = read_capped(Path(out) / "latest", 64, RunError, "OUT/latest", root=out).decode("ascii").strip()
        folder = run_folder(out, run_id)
        return read_meta(folder / "run.json", run_id)["finished_kernels"]
    except (RunError, OSError, UnicodeDecodeError):
        return None


class Run:
    def __init__(self, out, run_id: str):
        self.out = Path(out)
        self.id = run_id
        self.dir = self.out / RUNS / run_id
        self._lock: int | None = None  # the lock file's fd while held

    @property
    def meta_path(self) -> Path:
        return self.dir / "run.json"

    def meta(self) -> dict:
        return read_meta(self.meta_path, self.id)

    def _write_meta(self, **changes) -> None:
        d = self.meta() if self.meta_path.exists() else {}
        d.update(changes)
        self._save(d)

    def _save(self, d: dict) -> None:
        d.pop("signature", None)
        sig = sign(d)
        if sig is not None:
            d["signature"] = sig
        atomic_write_text(self.meta_path, json.dumps(d, indent=1, default=str), root=self.out)

    def lock(self) -> "Run":
        """Hold this run folder's writer lock for the life of this process (released at exit);
        RunError when another process holds it (a second ``--resume`` of a run under way)."""
        fd = os.open(self.dir / ".lock", os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise RunError(
                f"--resume {self.id}: the run is in use by another difftest process (its folder "
                f"{str(self.dir)!r} is locked): allowed once that process has ended"
            ) from None
        self._lock = fd
        _HELD.append(self)
        return self

    def unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None
        if self in _HELD:
            _HELD.remove(self)

    # ------------------------------------------------------------------ lifecycle
    @classmethod
    def start(cls, out, argv: list) -> "Run":
        run = cls(out, uuid.uuid4().hex)
        if (run.out / RUNS).is_symlink():  # planted: the run would write wherever it points
            raise RunError(
                f"--out {str(run.out)!r}: {str(run.out / RUNS)!r} is a symbolic link: allowed a folder "
                "difftest made (remove the link)"
            )
        ensure_dir(run.out / RUNS, root=run.out)  # no link on the way (.difftest/out -> ../baseline): OSError
        os.mkdir(run.dir)
        run.lock()
        run._save(
            dict(
                run_id=run.id,
                argv=list(argv),
                status=RunStatus.RUNNING,
                finished_kernels={},
                started=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                started_ns=time.time_ns(),
            )
        )
        return run

    @classmethod
    def resume(cls, out, run_id: str | None) -> "Run":
        """The run to continue: ``run_id``, or the most recently started unfinished run among
        the ones this user's difftest signed. Locked for this process."""
        base = Path(out) / RUNS
        if run_id:
            run = cls(out, run_id)
            folder = run_folder(out, run_id)
            if not (folder / "run.json").is_file():
                known = sorted(p.name for p in base.iterdir() if RUN_ID.fullmatch(p.name)) if base.is_dir() else []
                raise RunError(f"--resume {run_id}: no such run in {str(base)!r}: known runs are {known[:20]}")
            d = run.meta()
            if not verified(d):
                raise RunError(
                    f"--resume {run_id}: {str(run.meta_path)!r} is not signed by this user's difftest "
                    f"(planted, edited, or made with another key than {str(state_dir() / KEY_FILE)!r}): "
                    "allowed a run this difftest started"
                )
            if d.get("status") == RunStatus.FINISHED:
                raise RunError(f"--resume {run_id}: that run finished; nothing to resume")
            return run.lock()
        candidates = []
        for p in base.iterdir() if base.is_dir() and not base.is_symlink() else ():
            if not RUN_ID.fullmatch(p.name) or p.is_symlink() or not p.is_dir():
                continue
            try:
                run_folder(out, p.name)
                d = read_meta(p / "run.json", p.name)
            except RunError:
                continue
            if verified(d) and d.get("status") != RunStatus.FINISHED:
                candidates.append((d["started_ns"], p.name))
        if not candidates:
            raise RunError(
                f"--resume: no unfinished run in {str(base)!r} that this difftest started: "
                "allowed after a run was killed or interrupted"
            )
        return cls(out, max(candidates)[1]).lock()

    def mark_kernel(self, name: str, record: dict) -> None:
        """A kernel's campaign finished: keep its record (without the cases, which are in
        the case log) so a resumed run does not run it again."""
        d = self.meta()
        d["finished_kernels"][name] = {k: v for k, v in record.items() if k != "cases"}
        self._save(d)

    def finished_kernel(self, name: str) -> dict | None:
        return self.meta().get("finished_kernels", {}).get(name)

    def set_status(self, status: str, **extra) -> None:
        self._write_meta(status=status, **extra)

    def publish(self) -> None:
        """Copy this run's reports to ``OUT`` (atomically) and point ``OUT/latest`` at it; each
        is read as a file of the run folder (no link followed) and replaces what is in OUT."""
        for name in PUBLISHED:
            src = self.dir / name
            if os.path.lexists(src):
                atomic_write_text(self.out / name, self.read(name).decode("utf-8", "replace"), root=self.out)
        atomic_write_text(self.out / "latest", self.id + "\n", root=self.out)

    def read(self, name: str, max_bytes: int = 256 * 2**20) -> bytes:
        """A file of this run folder, read without following a link (RunError otherwise)."""
        return read_capped(self.dir / name, max_bytes, RunError, f"file of run {self.id}", root=self.out)


def result_from_record(rec: dict, cases: list):
    """A CampaignResult rebuilt from a finished kernel's record and its logged cases."""
    # lazy: keeps torch off --help
    from difftest.search.result import CampaignResult

    return CampaignResult.from_dict(rec, cases=cases)


def record_crash(run: Run) -> str | None:
    """After an in-process crash (``--no-isolate``: faulthandler wrote ``crash.log``), the
    case the killed process had started and not finished becomes an error case in its case
    log, with faulthandler's first line as the reason, so ``--resume`` moves on instead of
    crashing on it again. A run killed from outside (SIGKILL) leaves no crash.log: its
    unfinished case simply runs again. Returns the crashed case's Problem, short form."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import CaseResult

    crash = run.dir / CRASH_LOG
    text = run.read(CRASH_LOG, 16 * 2**20).decode("utf-8", "replace").strip() if os.path.lexists(crash) else ""
    if not text:
        return None
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    found = None
    for path in sorted(run.dir.glob("*.cases.jsonl")):
        lines = read_case_log(path, events=("started", "case"), run_id=run.id)
        if lines and lines[-1].get("event") == "started":
            d = lines[-1]
            problem = Problem.from_dict(d["problem"])
            case = CaseResult(
                d.get("kernel") or path.name.split(".cases")[0],
                problem,
                "error",  # type: ignore[arg-type]  # coerced
                reason=f"ProcessCrashed: the campaign process died running this case (--no-isolate): {first}",
                error_type="ProcessCrashed",
            )
            log = CaseLog(path, run.id)
            log.write(case)
            log.close()
            found = problem.short()
    crash.rename(run.dir / f"crash-{time.time_ns()}.log")  # kept for people; not read again
    return found
