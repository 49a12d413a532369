"""``difftest bisect``: since which version does a reproducer fail?

A reproducer (``.json``, as ``difftest repro`` replays it) is replayed against an ordered
list of versions, oldest first, each in its own Python process whose environment is this
one with the version's directories put first on ``PYTHONPATH`` (the child starts with
``-P``: neither its working directory nor a script's folder lands on ``sys.path``, so only
the version and the installed environment can be imported). A version is

- a wheel file (``--versions a.whl b.whl``): unpacked, members checked, into a folder of
  its own (``purelib``/``platlib`` data merged at the root, as an installer does), cached
  by the wheel's hash under ``--work``;
- an install folder (``--versions dir1 dir2``; e.g. made by ``pip install --target``);
- several of those at once, joined by ``,`` (``flash_attn_4-b30.whl,cutlass_dsl-4.2.whl``);
- a commit of a git range (``--git REPO --range OLD..NEW [--build CMD] [--path SUBDIR]``):
  OLD and every commit on the ancestry path to NEW, each cloned (``--shared``) into its own
  folder, built with CMD run there by the shell, and imported from ``SUBDIR`` of it.

Each tested version gets a verdict: **good** (the replay passes), **bad** (it fails the
way the reproducer documents: one of its ``failed_gates``, or for a documented error an
error of the same class; ``--any-failure``: any failure, also what a reproducer without
a documented failure uses), **without** (the adapter, reading that version, declares no such
feature: the Problem is outside its capability there, as fla-core 0.4.2 has no sinks; the bug
cannot be older than its feature, so the search takes it as good and says why), or
**untestable** (the kernel is unavailable or refused there,
the build failed, the replay could not start, it failed differently, nothing was imported
from the version's folders, so the verdict would not be about the version, or the version
does not load here: its error says its code does not match this environment, whatever
the reproducer documents and ``--any-failure`` too, unless the reproducer documents that
same error). A version that does not load is an ``ImportError`` or ``ModuleNotFoundError``,
a ``SyntaxError``, an ``AttributeError`` of a module attribute (``module 'x' has no
attribute 'y'``: FA4 4.0.0b8 and b9 against cutlass-dsl 4.8's ``cutlass.cute.core``, which
has no ``ThrMma`` any more), ``cannot import name``, ``No module named``, or a missing
shared library or symbol (``undefined symbol``, ``cannot open shared object file``); as
``git bisect skip`` would, it is stepped around, not named first bad. A wrong result or
the kernel's own error at run time (a ``RuntimeError``, a CUDA or MLIR error, a build of
the kernel that fails) is bad where the reproducer documents no failure. A crash or hang
of the replay counts as an error of the kernel. The search assumes the list
is monotone (good ... good, bad ... bad): it tests the newest version (it must be bad),
the oldest (it must be good), then halves the interval; an untestable version is stepped
around as ``git bisect skip`` does, and if only untestable versions remain between the
last good and the first bad, every one of them is named as a possible first bad.
Exit 0 when a first bad version is named, 1 when none can be (the newest testable version
passes, or untestable versions hide the boundary), 2 for bad input (one line).

``--fixed`` asks the opposite question, since which version a reproducer of an old bug
passes (the release that fixed it): the list is taken as bad ... bad, good ... good, the
newest must be good and the oldest bad, and the search names the first good (the fix) and
the last bad. A version without the feature says nothing about a fix and is stepped
around as an untestable one.

``--run`` tests the current directory (``--here DIR``) once, for ``git bisect run``:

    git bisect start NEW OLD
    git bisect run difftest bisect repro.json --run --build "pip install --no-deps --target _v ." --path _v

exiting 0 (good), 1 (bad) or 125 (untestable: git skips the commit). Bad input in this
mode exits 128 instead of 2: ``git bisect run`` would take 2 for "bad" and blame the
commit, while an exit code above 127 makes it stop.
"""

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from difftest.errors import InputError
from difftest.printable import cell
from difftest.search import reproducer
from difftest.vocab import Status

GOOD, BAD, UNTESTABLE = "good", "bad", "untestable"
ABSENT = "without"  # the version lacks what the reproducer uses: the bug cannot be older than its feature
EXIT_FOUND, EXIT_NOT_FOUND = 0, 1
RUN_EXIT = {GOOD: 0, ABSENT: 0, BAD: 1, UNTESTABLE: 125}  # git bisect run's codes
EXIT_ABORT = 128  # git bisect run stops on an exit code above 127
DEFAULT_TIMEOUT_S = 3600.0  # one version's replay, JIT builds included (the reproducer's own timeout is per call)
DEFAULT_BUILD_TIMEOUT_S = 3600.0
MAX_LIST_BYTES = 1 << 20  # a versions file is a few lines
MAX_UNPACKED_BYTES = 32 << 30  # a wheel that unpacks to more than this is not one
MARKER = ".difftest-bisect-ready"


class BisectError(InputError):
    """Bad input (reproducer, version list, range, options): one line, exit 2 (``cli.main``)."""


class BisectAbort(BisectError):
    """Bad input under ``--run``: ``git bisect run`` takes exit codes 1 to 127 (but 125) for
    "bad", so the refusal exits ``EXIT_ABORT``, which stops the bisection instead."""

    exit_code = EXIT_ABORT


# ---------------------------------------------------------------- versions
@dataclass(frozen=True)
class Version:
    label: str
    parts: tuple[Path, ...] = ()  # wheels and folders (list mode)
    commit: str = ""  # git mode

    def describe(self) -> str:
        return self.label


def _wheel_label(path: Path) -> str:
    bits = path.name[: -len(".whl")].split("-")
    return f"{bits[0]} {bits[1]}" if len(bits) >= 2 else path.name


def _check_wheel(path: Path, where: str) -> None:
    """A readable zip with a .dist-info/WHEEL, every member a plain relative path inside it."""
    if not zipfile.is_zipfile(path):
        raise BisectError(f"{where}: {str(path)!r} is not a wheel (not a zip archive)")
    try:
        with zipfile.ZipFile(path) as z:
            infos = z.infolist()
    except (OSError, zipfile.BadZipFile) as e:
        raise BisectError(f"{where}: {str(path)!r} cannot be read as a wheel ({e})") from None
    total = 0
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        if name.startswith("/") or "\\" in name or ".." in parts or (parts and ":" in parts[0]):
            raise BisectError(
                f"{where}: {str(path)!r} has a member {name!r} outside the wheel: allowed relative paths inside it"
            )
        if (info.external_attr >> 16) & 0o170000 == 0o120000:
            raise BisectError(f"{where}: {str(path)!r} has a symbolic link {name!r}: allowed plain files")
        total += info.file_size
    if total > MAX_UNPACKED_BYTES:
        raise BisectError(f"{where}: {str(path)!r} unpacks to {total} bytes: allowed at most {MAX_UNPACKED_BYTES}")
    if not any(re.fullmatch(r"[^/]+\.dist-info/WHEEL", i.filename) for i in infos):
        raise BisectError(f"{where}: {str(path)!r} has no *.dist-info/WHEEL: not a wheel")


def parse_version(item: str, where: str, base: Path | None = None) -> Version:
    """One version: a wheel, a folder, or several joined by ','."""
    if not isinstance(item, str) or not item.strip():
        raise BisectError(f"{where}: empty: allowed a .whl file or a directory (several joined by ',')")
    parts, labels = [], []
    for raw in item.split(","):
        raw = raw.strip()
        if not raw:
            raise BisectError(f"{where}: {item!r} has an empty part: allowed PATH or PATH,PATH,...")
        p = Path(raw)
        if base is not None and not p.is_absolute():
            p = base / p
        if not p.exists():
            raise BisectError(f"{where}: {raw!r} does not exist: allowed a .whl file or a directory")
        if p.is_dir():
            labels.append(raw)
        elif p.is_file() and p.suffix == ".whl":
            _check_wheel(p, where)
            labels.append(_wheel_label(p))
        else:
            raise BisectError(f"{where}: {raw!r} is neither a .whl file nor a directory")
        parts.append(p.resolve())
    if len(set(parts)) != len(parts):
        raise BisectError(f"{where}: {item!r} names one path twice")
    return Version(" + ".join(labels), tuple(parts))


def parse_versions(items) -> list[Version]:
    versions = [parse_version(it, f"version {i + 1}") for i, it in enumerate(items)]
    return _distinct(versions)


def read_versions_file(path) -> list[Version]:
    """One version per line (oldest first; PATH or PATH,PATH; '#' starts a comment; paths
    relative to the file's folder)."""
    p = Path(path)
    where = f"versions file {str(path)!r}"
    if not p.is_file():
        raise BisectError(f"{where}: no such file")
    if p.stat().st_size > MAX_LIST_BYTES:
        raise BisectError(f"{where}: larger than {MAX_LIST_BYTES} bytes: allowed a list of versions, one a line")
    try:
        text = p.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise BisectError(f"{where}: cannot be read ({e}): allowed a UTF-8 text file") from None
    items = []
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if line:
            items.append((n, line))
    if not items:
        raise BisectError(f"{where}: lists no version: allowed one .whl or directory (or several joined by ',') a line")
    return _distinct([parse_version(line, f"{where} line {n}", base=p.parent.resolve()) for n, line in items])


def _distinct(versions: list[Version]) -> list[Version]:
    if not versions:
        raise BisectError(
            "no versions given: allowed --versions PATH ..., --versions-file FILE or --git REPO --range OLD..NEW"
        )
    seen = {}
    for i, v in enumerate(versions):
        if v.parts in seen:
            raise BisectError(
                f"version {i + 1} ({v.label}) is version {seen[v.parts] + 1} again: allowed each "
                f"version once, oldest first"
            )
        seen[v.parts] = i
    return versions


def _git(repo, *args, check=True) -> str:
    r = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and r.returncode:
        raise BisectError(f"git {' '.join(args)}: {(r.stderr.strip().splitlines() or ['failed'])[-1]}")
    return r.stdout.strip()


def git_versions(repo, rng: str) -> list[Version]:
    """OLD and every commit on the ancestry path OLD..NEW, oldest first."""
    repo = Path(repo)
    if shutil.which("git") is None:
        raise BisectError("--git needs the git command, which is not on PATH")
    if (
        not repo.is_dir()
        or subprocess.run(["git", "-C", str(repo), "rev-parse", "--git-dir"], capture_output=True).returncode
    ):
        raise BisectError(f"--git {str(repo)!r}: not a git repository")
    old, sep, new = rng.partition("..")
    if not sep or not old or not new or new.startswith("."):
        raise BisectError(f"--range {rng!r}: allowed OLD..NEW (two commits, OLD an ancestor of NEW)")
    shas = []
    for name in (old, new):
        if name.startswith("-") or any(c.isspace() for c in name):
            raise BisectError(f"--range {rng!r}: {name!r} is not a commit name")
        sha = _git(repo, "rev-parse", "--verify", "--quiet", f"{name}^{{commit}}", check=False)
        if not sha:
            raise BisectError(f"--range {rng!r}: {name!r} is not a commit of {str(repo)!r}")
        shas.append(sha)
    if subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", *shas]).returncode:
        raise BisectError(f"--range {rng!r}: {old!r} is not an ancestor of {new!r}")
    commits = [shas[0]] + _git(repo, "rev-list", "--reverse", "--ancestry-path", f"{shas[0]}..{shas[1]}").split()
    if len(commits) < 2:
        raise BisectError(f"--range {rng!r}: no commit between them: allowed OLD..NEW with NEW after OLD")
    return [Version(f"{c[:10]} {_git(repo, 'log', '-1', '--format=%s', c)[:60]}", commit=c) for c in commits]


def check_subdir(path: str) -> str:
    p = PurePosixPath(path)
    if p.is_absolute() or ".." in p.parts:
        raise BisectError(f"--path {path!r}: allowed a folder relative to the version's tree, inside it")
    return path


# ---------------------------------------------------------------- preparing a version
def unpack_wheel(whl: Path, work: Path) -> Path:
    """The wheel's files in a folder of their own (cached by content hash under ``work``)."""
    h = hashlib.sha256()
    with open(whl, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    dest = work / "wheels" / f"{whl.name[:-4][:80]}-{h.hexdigest()[:12]}"
    if (dest / MARKER).exists():
        return dest
    _check_wheel(whl, "wheel")
    tmp = dest.with_name(f"{dest.name}.tmp{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    with zipfile.ZipFile(whl) as z:
        z.extractall(tmp)
    for data in tmp.glob("*.data"):  # an installer puts purelib/platlib at the root too
        for sub in ("purelib", "platlib"):
            src = data / sub
            if src.is_dir():
                shutil.copytree(src, tmp, dirs_exist_ok=True)
    (tmp / MARKER).write_text(str(whl) + "\n")
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(tmp, dest)
    return dest


def _run_build(cmd: str, cwd: Path, timeout: float, log: Path) -> str | None:
    """Run the build command in ``cwd``; the reason it failed, or None."""
    with open(log, "wb") as f:
        proc = subprocess.Popen(cmd, shell=True, cwd=cwd, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            return f"build did not finish in {timeout:g} s (log {log})"
    if rc:
        return f"build failed (exit {rc}): {_last_line(log)} (log {log})"
    return None


def checkout(repo: Path, commit: str, work: Path) -> Path:
    dest = work / "git" / commit[:16]
    if not (dest / ".git").exists():
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            ["git", "clone", "--quiet", "--shared", "--no-checkout", str(repo), str(dest)],
            capture_output=True,
            text=True,
        )
        if r.returncode:
            raise OSError(f"git clone failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    r = subprocess.run(
        [
            "git",
            "-C",
            str(dest),
            "-c",
            "advice.detachedHead=false",
            "checkout",
            "--quiet",
            "--force",
            "--detach",
            commit,
        ],
        capture_output=True,
        text=True,
    )
    if r.returncode:
        raise OSError(f"git checkout {commit[:10]} failed: {(r.stderr.strip().splitlines() or ['?'])[-1]}")
    return dest


# ---------------------------------------------------------------- one replay in its own process
# Runs in the child, in the version's environment: only the reproducer API of difftest, so a
# difftest that the version itself provides (bisecting difftest) replays it too.
CHILD = r"""
import json, os, sys
out, repro, kernel, allow, roots = sys.argv[1], sys.argv[2], sys.argv[3] or None, sys.argv[4] == "1", sys.argv[5:]

def write(d):
    with open(out + ".tmp", "w") as f:
        json.dump(d, f)
    os.replace(out + ".tmp", out)

write({"phase": "starting"})
from difftest.search.reproducer import ReproducerError, replay
write({"phase": "running"})
try:
    r = replay(repro, kernel=kernel, allow_import=allow)
except ReproducerError as e:
    write({"phase": "refused", "reason": str(e)})
    sys.exit(0)
roots = [os.path.realpath(x) + os.sep for x in roots]
used = set()
for name, m in list(sys.modules.items()):
    f = getattr(m, "__file__", None) or ""
    f = os.path.realpath(f) if f else ""
    if f and any(f.startswith(x) for x in roots):
        top = name.split(".")[0]
        used.add(top + (" " + str(getattr(sys.modules.get(top), "__version__", "")) if
                        getattr(sys.modules.get(top), "__version__", None) else ""))
write({"phase": "done", "status": str(r.status), "failed_gates": list(r.failed_gates),
       "reason": (r.reason or "").strip().splitlines()[0] if (r.reason or "").strip() else "",
       "error_type": getattr(r, "error_type", "") or "", "used": sorted(used)})
"""


def _kill_group(proc) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


def _last_line(log: Path) -> str:
    try:
        lines = [ln for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1].strip()[:300] if lines else ""


def run_child(repro: Path, roots, logdir: Path, kernel: str | None, allow_import: bool, timeout: float) -> dict:
    """Replay ``repro`` in a fresh interpreter with ``roots`` first on PYTHONPATH; the
    child's record, plus ``exit`` / ``timed_out`` / ``log``."""
    logdir.mkdir(parents=True, exist_ok=True)
    out, log = logdir / "result.json", logdir / "replay.log"
    out.unlink(missing_ok=True)
    env = dict(os.environ)
    before = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
    env["PYTHONPATH"] = os.pathsep.join([str(r) for r in roots] + before)
    env["PYTHONSAFEPATH"] = "1"  # -P for the kernel worker processes the replay may start too
    cmd = [
        sys.executable,
        "-P",
        "-c",
        CHILD,
        str(out),
        str(repro),
        kernel or "",
        "1" if allow_import else "0",
        *[str(r) for r in roots],
    ]
    timed_out = False
    with open(log, "wb") as f:
        proc = subprocess.Popen(
            cmd,
            cwd=logdir,
            env=env,
            stdout=f,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            rc, timed_out = proc.returncode, True
    try:
        rec = json.loads(out.read_text())
    except (OSError, ValueError):
        rec = {"phase": "none"}
    rec.update(exit=rc, timed_out=timed_out, log=str(log), last_line=_last_line(log))
    return rec


# ---------------------------------------------------------------- verdicts
def _innermost_error(reason: str) -> tuple[str, str]:
    """(the innermost exception class the line names, the line from that class on):
    ``RuntimeError: MLIRError: ...`` (a worker's wrapper names the kernel's own class
    inside) gives ``("MLIRError", "MLIRError: ...")``; ``("", reason)`` when it names none."""
    cls, start, pos = "", 0, 0
    while True:
        m = re.match(r"\s*([A-Za-z_][A-Za-z0-9_.]*)\s*:", reason[pos:])
        if not m:
            break
        name = m.group(1).split(".")[-1]
        if name.endswith(("Error", "Exception", "Timeout", "Crashed")):
            cls, start = name, pos + m.start(1)
        pos += m.end()
    return cls, reason[start:].strip()


# the version does not load here: its code and this environment do not match, so no verdict
# about the failure is possible (``git bisect skip``). Classes that say so whatever their
# message, and message shapes that say so whatever the class (an AttributeError only of
# this shape: ``'NoneType' object has no attribute`` is a bug of the kernel).
LOAD_CLASSES = frozenset({"ImportError", "ModuleNotFoundError", "SyntaxError", "IndentationError", "TabError"})
LOAD_SHAPES = (
    ("module has no attribute", re.compile(r"\bmodule '[^']+' has no attribute '[^']+'")),
    ("cannot import name", re.compile(r"\bcannot import name\b")),
    ("no module named", re.compile(r"\bNo module named\b")),
    ("undefined symbol", re.compile(r"\bundefined symbol\b|\bsymbol not found\b")),
    ("no shared object", re.compile(r"\bcannot open shared object file\b")),
)


def load_failure(reason: str, error_type: str = "") -> tuple[str, str] | None:
    """(class, message shape) of an error that says the version could not be imported or
    loaded, or that its API does not match this environment (``LOAD_CLASSES``,
    ``LOAD_SHAPES``); None for any other error (the kernel's own: a RuntimeError, a CUDA
    or MLIR error, a crash, a hang). ``reason``: the error's first line; ``error_type``: the
    class the runner recorded, where the line names none."""
    first = (reason or "").strip().splitlines()
    cls, text = _innermost_error(first[0] if first else "")
    cls = cls or (error_type or "").split(".")[-1]
    shape = next((name for name, pattern in LOAD_SHAPES if pattern.search(text)), "")
    if cls in LOAD_CLASSES or shape:
        return cls, shape
    return None


def documented_failure(record: dict) -> dict | None:
    """What the reproducer says its failure is: status and gates or error class (and, for
    an error that says the version does not load, its ``load_failure`` shape); None when it
    documents none (then any failure but a version that does not load is bad)."""
    status = record.get("status")
    if status == Status.FAILED and record.get("failed_gates"):
        gates = record["failed_gates"]
        if isinstance(gates, list) and all(isinstance(g, str) for g in gates):
            return {"status": "failed", "gates": list(gates)}
    if status == Status.ERROR:
        reason = record.get("reason") if isinstance(record.get("reason"), str) else ""
        cls, _ = _innermost_error(reason)
        doc = {"status": "error", "error": cls}
        load = load_failure(reason)
        if load:
            doc["load"] = list(load)
        return doc
    return None


OUTSIDE = "outside capability"  # the runner's reason for a Problem the adapter does not declare


def classify(rec: dict, documented: dict | None, any_failure: bool = False) -> tuple[str, str]:
    """(verdict, one-line detail) of one replay record."""
    phase = rec.get("phase")
    exit_note = f"exit {rec.get('exit')}" if rec.get("exit", 0) >= 0 else f"signal {-rec['exit']}"
    if phase in ("none", "starting"):
        why = "timed out" if rec.get("timed_out") else exit_note
        return UNTESTABLE, f"the replay could not start ({why}): {rec.get('last_line', '')}".rstrip(": ")
    if phase == "refused":
        return UNTESTABLE, f"refused: {rec.get('reason', '')}"
    if phase == "running":  # died or hung inside the replay: the kernel's crash or hang
        status, gates = "error", []
        reason = "timed out" if rec.get("timed_out") else f"the process died ({exit_note})"
        error = "KernelTimeout" if rec.get("timed_out") else "KernelCrashed"
        used = None
    else:
        status, gates, reason = rec.get("status"), rec.get("failed_gates", []), rec.get("reason", "")
        error = rec.get("error_type", "")
        used = rec.get("used", [])
    if status == Status.SKIPPED and reason.startswith(OUTSIDE):
        # the adapter, reading this version, declares no such feature (fla-core 0.4.2: no sinks):
        # the bug cannot be there, as on a good version
        return ABSENT, f"without the feature: {reason}"
    if status == Status.SKIPPED:
        return UNTESTABLE, f"skipped: {reason}"
    if used is not None and not used:
        return UNTESTABLE, (
            f"{status}, but nothing was imported from the version's folders: the replay did not use this version"
        )
    uses = f"; used {', '.join(used)}" if used else ""
    if status == Status.PASSED:
        return GOOD, f"passed{uses}"
    got = f"failed {', '.join(gates)}" if status == Status.FAILED else f"error: {reason}"
    if status not in (Status.FAILED, Status.ERROR):
        return UNTESTABLE, f"unexpected status {status!r}"
    load = load_failure(reason, error) if status == Status.ERROR else None
    if load and not (documented and documented.get("load") == list(load)):
        # git bisect skip: an old version that cannot import against this environment's
        # packages says nothing about the failure, whatever the reproducer documents
        _, text = _innermost_error(reason.strip())
        if load[0] and not text.startswith(load[0]):
            text = f"{load[0]}: {text}"
        return UNTESTABLE, f"the version does not load here: {text}{uses}"
    if documented is None or any_failure:
        return BAD, got + uses
    if documented["status"] == Status.FAILED:
        same = [g for g in gates if g in documented["gates"]]
        if status == Status.FAILED and same:
            return BAD, got + uses
    elif status == Status.ERROR:
        cls = documented["error"]
        if not cls or re.search(rf"\b{re.escape(cls)}\b", f"{error} {reason}"):
            return BAD, got + uses
    want = (
        f"failed {', '.join(documented['gates'])}"
        if documented["status"] == Status.FAILED
        else f"error {documented['error'] or ''}".strip()
    )
    return UNTESTABLE, f"fails differently ({got}; documented: {want}; --any-failure counts it as bad){uses}"


# ---------------------------------------------------------------- the search
@dataclass
class Tested:
    index: int
    label: str
    verdict: str
    detail: str
    seconds: float

    def to_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass
class BisectResult:
    """With ``fixed`` the search ran on flipped verdicts: ``first_bad`` holds the first good
    version (the fix), ``last_good`` the last bad one, ``candidates`` the possible fixes."""

    versions: list[str]
    tested: list[Tested] = field(default_factory=list)
    first_bad: int | None = None
    last_good: int | None = None
    candidates: list[int] = field(default_factory=list)  # possible first bad versions (untestable between)
    fixed: bool = False

    @property
    def found(self) -> bool:
        # a fix needs a bad version before it: a list that passes from its oldest names none
        named = self.first_bad is not None and self.candidates == [self.first_bad]
        return named and not (self.fixed and self.last_good is None)

    def to_dict(self) -> dict:
        def name(i):
            return None if i is None else self.versions[i]

        # a fix search's boundary is the first good version and the last bad one
        first, last, possible = (
            ("fixed_in", "last_bad", "possible_fixed_in")
            if self.fixed
            else ("first_bad", "last_good", "possible_first_bad")
        )
        return {
            "versions": self.versions,
            "tested": [t.to_dict() for t in self.tested],
            first: name(self.first_bad),
            last: name(self.last_good),
            possible: [self.versions[i] for i in self.candidates],
            "found": self.found,
        }

    def _good(self, i: int) -> str:
        """Version i as a last good: its name, and why where it lacks the feature."""
        why = next((x.detail or ABSENT for x in self.tested if x.index == i and x.verdict == ABSENT), None)
        return self.versions[i] + (f" ({why}: the first bad is the first with the feature)" if why else "")

    def summary(self) -> str:
        if self.fixed:
            return self._fixed_summary()
        n, t = len(self.versions), len(self.tested)
        lines = []
        if self.first_bad is None:
            if self.last_good is not None:
                lines.append(f"no bad version: the newest testable one, {self.versions[self.last_good]}, passes")
            else:
                lines.append("no version could be tested")
        elif self.found:
            lines.append(f"first bad: {self.versions[self.first_bad]}")
            lines.append(
                f"last good: {self._good(self.last_good)}"
                if self.last_good is not None
                else "last good: none (the oldest version tested is bad)"
            )
        else:
            lines.append(
                "first bad: one of "
                + ", ".join(self.versions[i] for i in self.candidates)
                + " (the ones before the last are untestable)"
            )
            lines.append(
                f"last good: {self._good(self.last_good)}" if self.last_good is not None else "last good: none"
            )
        lines.append(
            f"tested {t} of {n} versions (assuming good ... good, bad ... bad): "
            + ", ".join(f"{x.label}={x.verdict}" for x in sorted(self.tested, key=lambda x: x.index))
        )
        return "\n".join(lines)

    def _fixed_summary(self) -> str:
        n, t = len(self.versions), len(self.tested)
        if self.first_bad is None:
            lines = [
                f"not fixed: the newest testable version, {self.versions[self.last_good]}, still fails"
                if self.last_good is not None
                else "no version could be tested"
            ]
        elif self.last_good is None and self.candidates == [self.first_bad]:
            lines = [f"no bad version: the oldest testable one, {self.versions[self.first_bad]}, already passes"]
        elif self.found:
            lines = [f"fixed in: {self.versions[self.first_bad]}", f"last bad: {self.versions[self.last_good]}"]
        else:
            lines = [
                "fixed in: one of "
                + ", ".join(self.versions[i] for i in self.candidates)
                + " (the ones before the last are untestable)",
                f"last bad: {self.versions[self.last_good]}" if self.last_good is not None else "last bad: none",
            ]
        lines.append(
            f"tested {t} of {n} versions (assuming bad ... bad, good ... good): "
            + ", ".join(f"{x.label}={x.verdict}" for x in sorted(self.tested, key=lambda x: x.index))
        )
        return "\n".join(lines)


# a fix search runs the same search on flipped roles; a version without the feature says nothing
FIXED_ROLE = {GOOD: BAD, BAD: GOOD, ABSENT: UNTESTABLE, UNTESTABLE: UNTESTABLE}


def search(labels: list[str], test, fixed: bool = False) -> BisectResult:
    """Binary search over versions ordered oldest first; ``test(i)`` -> (verdict, detail)
    of version i. Newest must be bad and oldest good (each stepped inward past untestable
    ones), then the interval between the last good and first bad is halved, stepping
    around untestable versions (nearest to the middle first). ``fixed``: the same search
    for the first good version after bad ones (FIXED_ROLE); the record keeps the real verdicts."""
    res = BisectResult(list(labels), fixed=fixed)
    verdicts: dict[int, str] = {}

    def t(i):
        if i not in verdicts:
            t0 = time.perf_counter()
            verdict, detail = test(i)
            verdicts[i] = FIXED_ROLE[verdict] if fixed else verdict
            res.tested.append(Tested(i, labels[i], verdict, detail, round(time.perf_counter() - t0, 2)))
        return verdicts[i]

    n = len(labels)
    hi = None
    for i in range(n - 1, -1, -1):
        v = t(i)
        if v in (GOOD, ABSENT):
            res.last_good = i
            return res
        if v == BAD:
            hi = i
            break
    if hi is None:
        return res
    lo = -1
    for i in range(hi):
        v = t(i)
        if v in (GOOD, ABSENT):
            lo = i
            break
        if v == BAD:
            hi = i
            break
    while True:
        untested = [i for i in range(lo + 1, hi) if i not in verdicts]
        if not untested:
            break
        mid = (lo + hi) / 2
        i = min(untested, key=lambda j: (abs(j - mid), j))
        v = t(i)
        if v in (GOOD, ABSENT):
            lo = i
        elif v == BAD:
            hi = i
    res.first_bad = hi
    res.last_good = lo if lo >= 0 else None
    res.candidates = list(range(lo + 1, hi + 1))
    return res


# ---------------------------------------------------------------- driving it
def load_reproducer(path, kernel: str | None, allow_import: bool) -> dict:
    """The reproducer's record, checked here before any version runs (the kernel is not
    resolved: it may exist only in the versions)."""
    p = Path(path)
    try:
        spec, _, cfg = reproducer.load(p)
        if kernel is None:
            reproducer.check_spec(p, "kernel", spec, allow_import)
        reproducer.check_spec(p, "config.second_reference", cfg.get("second_reference") or "", allow_import)
    except reproducer.ReproducerError as e:
        raise BisectError(str(e)) from None
    if not (kernel or spec):
        raise BisectError(f"reproducer {str(path)!r}: names no kernel: pass one with --kernel")
    return reproducer.read_json(p)


class Bisector:
    """Prepares each version (unpack, checkout, build) and replays the reproducer there."""

    def __init__(
        self,
        repro: Path,
        work: Path,
        *,
        kernel=None,
        allow_import=False,
        any_failure=False,
        timeout=DEFAULT_TIMEOUT_S,
        build=None,
        build_timeout=DEFAULT_BUILD_TIMEOUT_S,
        subdir=".",
        repo=None,
        out=sys.stdout,
    ):
        self.repro = repro.resolve()
        self.work = work
        self.kernel, self.allow_import, self.any_failure = kernel, allow_import, any_failure
        self.timeout, self.build, self.build_timeout, self.subdir = timeout, build, build_timeout, subdir
        self.repo = repo
        self.documented = documented_failure(load_reproducer(self.repro, kernel, allow_import))
        self.out = out

    def roots(self, v: Version, slot: str) -> tuple[list[Path] | None, str]:
        """The folders to put first on PYTHONPATH, or (None, why untestable)."""
        try:
            if v.commit:
                tree = checkout(self.repo, v.commit, self.work)
                return self.tree_roots(tree, self.work / "logs" / slot)
            roots = [unpack_wheel(p, self.work) if p.suffix == ".whl" and p.is_file() else p for p in v.parts]
            return roots, ""
        except (OSError, zipfile.BadZipFile, BisectError) as e:
            return None, f"could not prepare the version: {e}"

    def tree_roots(self, tree: Path, logdir: Path, reuse: bool = True):
        """``tree``'s import folder after the build (skipped when this version's build
        already succeeded in this work folder and ``reuse``)."""
        if self.build:
            done = logdir / "built"
            if not (reuse and done.exists()):
                logdir.mkdir(parents=True, exist_ok=True)
                why = _run_build(self.build, tree, self.build_timeout, logdir / "build.log")
                if why:
                    return None, why
                done.write_text(self.build + "\n")
        root = (tree / self.subdir).resolve()
        if not root.is_dir():
            return None, f"--path {self.subdir!r}: no such folder in {tree} (after the build)"
        return [root], ""

    def test_roots(self, roots, slot: str) -> tuple[str, str]:
        rec = run_child(self.repro, roots, self.work / "logs" / slot, self.kernel, self.allow_import, self.timeout)
        return classify(rec, self.documented, self.any_failure)

    def test_version(self, v: Version, i: int, n: int) -> tuple[str, str]:
        slot = f"{i:03d}-" + re.sub(r"[^A-Za-z0-9_.-]+", "_", v.label)[:60]
        t0 = time.perf_counter()
        roots, why = self.roots(v, slot)
        verdict, detail = (UNTESTABLE, why) if roots is None else self.test_roots(roots, slot)
        print(
            cell(f"bisect: [{i + 1}/{n}] {v.label}: {verdict} ({detail}) {time.perf_counter() - t0:.1f} s"),
            file=self.out,
            flush=True,
        )
        return verdict, detail

    def bisect(self, versions: list[Version], fixed: bool = False) -> BisectResult:
        return search([v.label for v in versions], lambda i: self.test_version(versions[i], i, len(versions)), fixed)
