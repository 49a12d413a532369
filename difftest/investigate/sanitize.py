"""``difftest sanitize REPRO.json``: a reproducer replayed under NVIDIA's compute-sanitizer.

Each tool (``--tools``; default memcheck, racecheck, initcheck, synccheck) runs the JSON
reproducer in its own child, ``compute-sanitizer --tool T python -P -m difftest repro
REPRO.json``: the same replay as ``difftest repro`` (data only; the ``.py`` is never run,
and a ``module:attr`` kernel named by the file needs ``--allow-import``, checked here
before any child starts). Per tool the result is the sanitizer's ``ERROR SUMMARY: N
errors``, its first error blocks, the exit code, the seconds, and how the replay ended
(its ``[FAILED]``/``[PASSED]`` line), or ``not run: why``: not a CUDA problem, no
sanitizer found, a timeout, or a sanitizer that printed no summary (a tool the kernel
cannot run under, the process ending before its first CUDA call). It is written beside the
reproducer as ``REPRO.sanitizer.json`` and printed as a table.

**0 errors means the sanitizer saw nothing, not that there is no bug.** memcheck sees an
access outside every allocation, not one inside a memory pool the framework owns
(flash-attn3-jax's backward writes past its scratch buffer inside XLA's pool: wrong results,
0 errors). The children therefore run with the pools off where a variable can do it
(``PYTORCH_NO_CUDA_MEMORY_CACHING=1``, ``XLA_PYTHON_CLIENT_ALLOCATOR=platform``;
``--keep-pools`` leaves them on), and racecheck sees shared memory only, not global atomics.

``--run-dir DIR`` sanitizes every finding of a run (the reproducers its ``report.json``
names, inside DIR) and attaches each result to its finding: ``sanitizer`` in the
campaign's and the finding's records of ``report.json`` and ``findings.json``, and a
section of ``summary.md``. CPU findings are recorded as ``not run: not a CUDA problem``.

The sanitizer comes from ``--sanitizer PATH`` or ``compute-sanitizer`` on PATH, nothing
else. Exit 0 when no tool reported an error, 1 when one did, 2 for bad input (a malformed
reproducer or report, an unknown kernel, a missing ``--sanitizer``), 3 when a CUDA
reproducer was given and no tool ran on it (no sanitizer, every tool timed out).
"""

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from difftest.errors import UsageError
from difftest.execute import adapter as registry
from difftest.report.read import load_report_doc
from difftest.safeio import atomic_write_text, json_text, parse_json, read_capped, unsafe_component
from difftest.search.reproducer import MAX_BYTES, ReproducerError, check_spec, load, reject

TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")
DEFAULT_TIMEOUT_S = 1800.0  # per tool: racecheck and initcheck slow a kernel 10-100x
SIDECAR = ".sanitizer.json"
NOTE = "0 errors means the sanitizer saw nothing, not that there is no bug"
NO_POOLS = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"}
MAX_OUTPUT = 8 << 20  # bytes of a child's output read back
FIRST_BLOCKS, BLOCK_LINES = 3, 12  # error blocks kept per tool, lines kept per block
SUMMARY = re.compile(r"^=+ ERROR SUMMARY: (\d+) errors?", re.M)
# racecheck's own summary (its ERROR SUMMARY can be absent): "N hazards displayed (E errors, W warnings)"
RACE_SUMMARY = re.compile(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, \d+ warnings?\)")
TAIL = 256 << 10  # bytes of a long output's end kept beside its head (the summaries are printed last)
# Host-side CUDA API return codes (a framework probing cuGetProcAddress for entry points the
# driver lacks) are not kernel errors: on the H200 they were all memcheck reported for cuDNN.
SANITIZER_FLAGS = ("--report-api-errors", "no")
CASE = re.compile(r"^\[(PASSED|FAILED|ERROR|SKIPPED)\] .*$", re.M)
MARK = "<!-- difftest sanitize -->"  # the summary.md section's bounds (a rerun replaces it)
CLEAN, ERRORS, NOT_RUN = "clean", "errors", "not run"


@dataclass
class ToolResult:
    tool: str
    status: str  # clean | errors | not run
    errors: int | None = None  # the ERROR SUMMARY count
    first: list = field(default_factory=list)  # the first error blocks, as lines
    exit_code: int | None = None
    seconds: float = 0.0
    why: str = ""  # status 'not run': why
    case: str = ""  # the replay's verdict line ([FAILED] ...), '' when it printed none

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}

    def cell(self) -> str:
        if self.status == NOT_RUN:
            return f"not run: {self.why}"
        return f"{self.errors} error{'s' * (self.errors != 1)}" + (" (saw nothing)" if not self.errors else "")


def find_sanitizer(given: str | None) -> tuple[str | None, str]:
    """(path, '') of the sanitizer: ``--sanitizer`` (must be an executable file; else a
    UsageError) or ``compute-sanitizer`` on PATH; (None, why) when there is none."""
    if given is not None:
        p = Path(given)
        if not p.is_file() or not os.access(p, os.X_OK):
            raise UsageError(f"--sanitizer {given!r}: not an executable file: allowed the path of compute-sanitizer")
        return str(p.resolve()), ""
    found = shutil.which("compute-sanitizer")
    return (found, "") if found else (None, "compute-sanitizer not found on PATH (pass --sanitizer PATH)")


def error_blocks(text: str) -> list[list[str]]:
    """The sanitizer's error reports: a block starts at an unindented ``========= X`` line
    that is not the banner or a summary, and takes the indented lines after it."""
    blocks, cur = [], None
    for line in text.splitlines():
        m = re.match(r"^=+( *)(.*)$", line)
        if not m:
            cur = None
            continue
        indent, body = m.group(1), m.group(2).rstrip()
        if not body:
            cur = None
        elif len(indent) <= 1 and not body.startswith(
            ("COMPUTE-SANITIZER", "ERROR SUMMARY", "RACECHECK SUMMARY", "LEAK SUMMARY")
        ):
            cur = [body]
            blocks.append(cur)
        elif cur is not None and len(cur) < BLOCK_LINES:
            cur.append(body.strip())
    return blocks


def parse(tool: str, text: str, code: int | None, seconds: float) -> ToolResult:
    """A tool's result from its child's output and exit code."""
    case = CASE.search(text)
    case_line = case.group(0)[:300] if case else ""
    counts = [int(n) for n in SUMMARY.findall(text)] or [int(n) for n in RACE_SUMMARY.findall(text)]
    if not counts:
        lines = [x.strip("= ").strip() for x in text.splitlines() if x.strip("= ").strip()]
        said = next((x for x in lines if "error" in x.lower() and x.startswith(("Error", "ERROR"))), None) or (
            lines[-1] if lines else "no output"
        )
        return ToolResult(
            tool,
            NOT_RUN,
            None,
            [],
            code,
            round(seconds, 2),
            f"the sanitizer printed no ERROR SUMMARY (exit {code}): {said[:300]}",
            case_line,
        )
    n = max(counts)
    first = [line for b in error_blocks(text)[:FIRST_BLOCKS] for line in b + [""]][:-1] if n else []
    return ToolResult(tool, ERRORS if n else CLEAN, n, first, code, round(seconds, 2), "", case_line)


def _run_tool(sanitizer: str, tool: str, repro: Path, extra: list, env: dict, timeout: float) -> ToolResult:
    """One tool on the reproducer, in its own process group (ended whole on a timeout)."""
    cmd = [
        sanitizer,
        "--tool",
        tool,
        *SANITIZER_FLAGS,
        sys.executable,
        "-P",
        "-m",
        "difftest",
        "repro",
        str(repro),
        *extra,
    ]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as log:
        try:
            proc = subprocess.Popen(
                cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env, start_new_session=True
            )
        except OSError as e:
            return ToolResult(tool, NOT_RUN, why=f"the sanitizer could not start: {e.strerror or e}")
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _end_group(proc)
            return ToolResult(
                tool,
                NOT_RUN,
                exit_code=None,
                seconds=round(time.perf_counter() - t0, 2),
                why=f"timed out after {timeout:g} s (--timeout)",
            )
        size = log.seek(0, os.SEEK_END)
        log.seek(0)
        head = log.read(MAX_OUTPUT)
        if size > MAX_OUTPUT:  # racecheck can print a line per hazard: keep the end, where the summaries are
            log.seek(max(MAX_OUTPUT, size - TAIL))
            head += b"\n" + log.read(TAIL)
        text = head.decode("utf-8", "replace")
    return parse(tool, text, code, time.perf_counter() - t0)


def _end_group(proc) -> None:
    """Kill the sanitizer we started and its children (its own session's process group)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()


def is_cuda(spec: str, cfg: dict, kernel_override: str | None) -> bool:
    """Whether the reproducer runs on CUDA: its config's device, else its kernel's."""
    device = cfg.get("device")
    if device is None:
        device = registry.get(kernel_override or spec).capability.device
    return str(device).startswith("cuda")


def check_reproducer(path, a) -> tuple[str, object, dict]:
    """(spec, Problem, config) of a reproducer, refused as ``difftest repro`` refuses it."""
    spec, problem, cfg = load(path)
    if a.kernel is None:
        check_spec(path, "kernel", spec, a.allow_import)
    check_spec(path, "config.second_reference", cfg.get("second_reference") or "", a.allow_import)
    if not (a.kernel or spec):
        reject(path, "names no kernel: pass one with --kernel")
    try:
        registry.get(a.kernel or spec)
    except registry.KernelSpecError as e:
        raise ReproducerError(f"reproducer {str(path)!r}: {e}") from None
    return spec, problem, cfg


def sanitize(path, a, tools, sanitizer: str | None, missing: str) -> dict:
    """Every tool on one reproducer: the sidecar's record (also written)."""
    path = Path(path)
    spec, problem, cfg = check_reproducer(path, a)
    cuda = is_cuda(spec, cfg, a.kernel)
    env = {**os.environ, "PYTHONSAFEPATH": "1", **({} if a.keep_pools else NO_POOLS)}
    extra = (
        (["--kernel", a.kernel] if a.kernel else [])
        + (["--allow-import"] if a.allow_import else [])
        + (["--profile", a.profile] if a.profile else [])
    )
    results = []
    for tool in tools:
        if not cuda:
            results.append(ToolResult(tool, NOT_RUN, why="not a CUDA problem"))
        elif sanitizer is None:
            results.append(ToolResult(tool, NOT_RUN, why=missing))
        else:
            results.append(_run_tool(sanitizer, tool, path.resolve(), extra, env, a.timeout))
    record = {
        "difftest_sanitizer": 1,
        "reproducer": str(path),
        "kernel": a.kernel or spec,
        "problem": problem.short(),
        "cuda": cuda,
        "sanitizer": sanitizer if cuda else None,
        "env": {k: env[k] for k in NO_POOLS} if cuda and not a.keep_pools else {},
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "note": NOTE,
        "tools": {r.tool: r.to_dict() for r in results},
    }
    atomic_write_text(sidecar(path), json_text(record, indent=1))
    return record


def sidecar(path) -> Path:
    path = Path(path)
    return path.with_name(path.name[: -len(".json")] + SIDECAR if path.name.endswith(".json") else path.name + SIDECAR)


def brief(record: dict) -> dict:
    """What a finding carries: the sidecar's path and per tool status and error count."""
    return {
        "file": str(sidecar(record["reproducer"])),
        "note": NOTE,
        "tools": {
            t: {"status": r["status"], "errors": r["errors"], "why": r["why"]} for t, r in record["tools"].items()
        },
    }


# ---------------------------------------------------------------- a run's findings
def run_reproducers(run_dir: Path) -> tuple[dict, list]:
    """(the run's report, [(where, reproducer path)]): every reproducer its campaigns and
    findings name that resolves inside ``run_dir`` (a report is read as hostile input: a
    path elsewhere is listed as skipped, never replayed)."""
    report_path = run_dir / "report.json"
    if not os.path.lexists(report_path):
        raise UsageError(
            f"--run-dir {str(run_dir)!r}: no report.json there: allowed a run's output folder "
            "(--out of difftest run, or its runs/<run id>)"
        )
    doc = load_report_doc(report_path, root=run_dir)  # a file of the folder: no link followed
    out = []
    for c in doc["campaigns"]:
        recs = [("campaign", c)] + [("finding", f) for f in c.get("findings") or () if isinstance(f, dict)]
        for kind, rec in recs:
            repro = rec.get("reproducer")
            path = repro.get("json") if isinstance(repro, dict) else None
            if isinstance(path, str) and path:
                out.append((c.get("kernel", ""), kind, rec.get("id", ""), path))
    return doc, out


def inside_run(run_dir: Path, path: str) -> Path | None:
    """``path`` (as recorded: relative to where the run started, or absolute) resolved
    inside ``run_dir``; else the same file name under a ``repro`` folder of ``run_dir``; else None.
    A path reached through a link (the file or a folder on its way below ``run_dir``) is
    not taken: a run folder's files are read as its own, never as a link's target."""
    root = run_dir.resolve()

    def linked(p: Path, base: Path) -> bool:
        return p.is_symlink() or unsafe_component(p.parent, base) is not None

    for cand in (Path(path), run_dir / path):
        try:
            r = cand.resolve()
        except (OSError, RuntimeError):
            continue
        if r.is_file() and r.is_relative_to(root) and not linked(cand, run_dir):
            return r
    name = Path(path).name
    for r in sorted(root.glob(f"**/repro/{name}")) if name.endswith(".json") else ():
        if r.is_file() and not linked(r, root) and r.resolve().is_relative_to(root):
            return r.resolve()
    return None


def run_files(run_dir: Path) -> dict:
    """The run folder's findings.json (parsed) and summary.md (text) that ``attach`` rewrites,
    read before any tool runs: each as a file of the folder (a link, a FIFO, an oversized or
    malformed file is one line and exit 2, nothing written); absent ones are left out."""

    def error(msg):
        return ReproducerError(f"run folder file {msg}")

    out = {}
    fpath, spath = run_dir / "findings.json", run_dir / "summary.md"
    if os.path.lexists(fpath):
        out["findings"] = parse_json(
            read_capped(fpath, 4 * MAX_BYTES, error, "findings JSON", root=run_dir), repr(str(fpath)), error
        )
    if os.path.lexists(spath):
        out["summary"] = read_capped(spath, 4 * MAX_BYTES, error, "summary.md", root=run_dir).decode("utf-8", "replace")
    return out


def attach(run_dir: Path, doc: dict, done: dict, files: dict) -> list[str]:
    """Add each sanitized reproducer's ``brief`` to the records naming it in report.json and
    findings.json, and a section to summary.md (``files``: ``run_files``); returns the files changed."""

    def mark(d):
        for c in d.get("campaigns") or ():
            if not isinstance(c, dict):
                continue
            for rec in [c] + [f for f in c.get("findings") or () if isinstance(f, dict)]:
                repro = rec.get("reproducer")
                p = repro.get("json") if isinstance(repro, dict) else None
                if isinstance(p, str) and p in done:
                    rec["sanitizer"] = brief(done[p])

    changed = []
    mark(doc)
    atomic_write_text(run_dir / "report.json", json_text(doc, indent=1))
    changed.append(str(run_dir / "report.json"))
    fdoc = files.get("findings")
    if isinstance(fdoc, dict) and fdoc.get("difftest_findings") == 1:
        mark(fdoc)
        atomic_write_text(run_dir / "findings.json", json_text(fdoc, indent=1))
        changed.append(str(run_dir / "findings.json"))
    if "summary" in files:
        text = files["summary"]
        if MARK in text:
            text = text[: text.index(MARK)].rstrip("\n")
        atomic_write_text(run_dir / "summary.md", text + "\n\n" + markdown(done.values()))
        changed.append(str(run_dir / "summary.md"))
    return changed


# ---------------------------------------------------------------- output
HEAD = ("reproducer", "problem", "tool", "result", "exit", "seconds", "replay", "first error")


def rows(records) -> list[tuple]:
    out = []
    for rec in records:
        for t, r in rec["tools"].items():
            first = next((x for x in r["first"] if x), "")
            out.append(
                (
                    Path(rec["reproducer"]).name,
                    rec["problem"],
                    t,
                    ToolResult(**r).cell(),
                    "" if r["exit_code"] is None else str(r["exit_code"]),
                    f"{r['seconds']:.1f}",
                    r["case"].split(" on ")[0],
                    first[:100],
                )
            )
    return out


def markdown(records) -> str:
    out = [
        MARK,
        "## Sanitizers (difftest sanitize)",
        "",
        f"*{NOTE}.*",
        "",
        "| " + " | ".join(HEAD) + " |",
        "|" + "---|" * len(HEAD),
    ]
    out += ["| " + " | ".join(x.replace("|", "\\|") for x in row) + " |" for row in rows(records)]
    return "\n".join(out) + "\n"
