"""Reports: a JSON-lines stream of cases (durable while a campaign runs), the JSON
report (one record per case with the numbers), a terminal summary table per
kernel x output, and a markdown summary."""

import json
import math
import sys
import time
from pathlib import Path

from difftest.judge import triage
from difftest.model.problem import OUTPUTS
from difftest.vocab import Gate, Status


class CaseLog:
    """Appends one JSON line per finished case and flushes it, so the results survive
    a campaign that is killed or crashes. Every line carries the ``run_id``; a case line
    has ``"event": "case"`` and the case's fields, and ``started(problem)`` (used when
    kernels run in this process, where a crash leaves nothing else) writes an
    ``"event": "started"`` line naming the Problem about to run.

    A line is whole or absent: opening the log cuts a last line left incomplete (a kill
    mid-write, a full disk) so a resumed run never appends onto it, and a write that fails
    (ENOSPC) is undone and raises ``OutputFailed``: the run stops like an interrupted one,
    with a partial report and ``--resume``."""

    def __init__(self, path, run_id: str | None = None):
        import os

        self.path = Path(path)
        self.run_id = run_id
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        _cut_incomplete_line(self._fd)

    def _write_all(self, data: bytes) -> None:
        import os

        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view):]

    def _line(self, d: dict) -> None:
        import os

        from difftest.execute.interrupt import OutputFailed

        data = (json.dumps(d, default=str) + "\n").encode("utf-8", "backslashreplace")
        end = os.lseek(self._fd, 0, os.SEEK_END)
        try:
            self._write_all(data)
        except OSError as e:
            try:
                os.ftruncate(self._fd, end)  # no cut line left behind
            except OSError:
                pass
            raise OutputFailed(self.path, e) from None

    def started(self, problem, kernel: str | None = None) -> None:
        self._line({"run_id": self.run_id, "event": "started", "kernel": kernel, "problem": problem.to_dict()})

    def write(self, case) -> None:
        self._line({"run_id": self.run_id, "event": "case", **case.to_dict()})

    def close(self):
        import os

        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _cut_incomplete_line(fd: int) -> None:
    """Truncate the file open at ``fd`` after its last newline (nothing when it ends in one)."""
    import os

    size = os.fstat(fd).st_size
    if size == 0 or os.pread(fd, 1, size - 1) == b"\n":
        return
    pos = size
    while pos > 0:
        start = max(0, pos - 65536)
        chunk = os.pread(fd, pos - start, start)
        i = chunk.rfind(b"\n")
        if i >= 0:
            os.ftruncate(fd, start + i + 1)
            return
        pos = start
    os.ftruncate(fd, 0)


def read_case_log(path, events=("case",), run_id: str | None = None) -> list[dict]:
    """The lines of a case log whose event is in ``events`` (lines written before events
    existed count as cases), of ``run_id`` when given; a line cut by a kill is skipped."""
    from difftest.safeio import parse_json

    out = []
    for line in Path(path).read_bytes().splitlines():
        line = line.strip()
        if line:
            try:
                d = parse_json(line, "line", ValueError)
            except ValueError:  # a line cut by a kill (or not difftest's): keep the rest
                continue
            if not isinstance(d, dict) or d.get("event", "case") not in events:
                continue
            if run_id is not None and d.get("run_id") != run_id:
                continue
            out.append(d)
    return out


def output_stats(cases) -> dict:
    """Per output: cases checked, passed, failed, worst budget ratio."""
    stats = {}
    for c in cases:
        if c.status == Status.SKIPPED:
            continue
        for name in OUTPUTS:
            vs = [v for v in c.verdicts if v.output == name]
            if not vs:
                continue
            s = stats.setdefault(name, {"cases": 0, "passed": 0, "failed": 0, "worst_ratio": 0.0})
            s["cases"] += 1
            if all(v.passed for v in vs):
                s["passed"] += 1
            else:
                s["failed"] += 1
            r = max((v.numbers.get("ratio", 0.0) for v in vs if v.gate == Gate.BUDGET), default=0.0)
            s["worst_ratio"] = max(s["worst_ratio"], r if math.isfinite(r) else 1e6)
    return stats


def campaign_record(res) -> dict:
    counts = {s: sum(1 for c in res.cases if c.status == s) for s in Status}
    return {
        "kernel": res.kernel, "profile": res.profile, "status": res.status, "reason": res.reason,
        "examples": len(res.cases), "counts": counts, "elapsed_s": round(res.elapsed, 3),
        "examples_to_fail": res.examples_to_fail, "seconds_to_fail": res.seconds_to_fail,
        "unrun": getattr(res, "unrun", 0), "compile_keys": res.compile_keys, "compile_stats": res.compile_stats,
        "coverage": res.coverage,
        "outputs": output_stats(res.cases),
        "triage": triage.summarize(res.cases), "declaration": getattr(res, "declaration", []),
        "timing": getattr(res, "timing", None), "compile_reuse": getattr(res, "compile_reuse", None),
        "failure": res.failure.to_dict() if res.failure else None, "reproducer": res.reproducer,
        "settings": res.settings, "cases": [c.to_dict() for c in res.cases],
    }


def write_json(results, path, extra: dict | None = None, records: dict | None = None) -> Path:
    """report.json of ``results``; ``records``: campaign_record(r) already made, by id(r)."""
    import platform

    import torch

    from difftest.safeio import atomic_write_text, json_text

    path = Path(path)
    doc = {"difftest_report": 1, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "host": platform.node(), "python": platform.python_version(), "torch": torch.__version__,
           "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
           "campaigns": [(records or {}).get(id(r)) or campaign_record(r) for r in results]}
    if extra:
        doc.update(extra)
    return atomic_write_text(path, json_text(doc, indent=1))  # strict JSON: no Infinity/NaN


def _rows(results):
    rows = []
    for r in results:
        counts = {s: sum(1 for c in r.cases if c.status == s) for s in Status}
        rows.append((r.kernel, "(all)", len(r.cases), counts["passed"], counts["failed"] + counts["error"],
                     counts["skipped"],
                     max((c.worst_ratio for c in r.cases if c.status != Status.SKIPPED), default=0.0),
                     r.status, triage.describe(triage.summarize(r.cases))))
        limited = triage.summarize(r.cases)["overflow_limited"]
        for name, s in output_stats(r.cases).items():
            note = f"overflow-limited {limited[name]} elems" if name in limited else ""
            rows.append((r.kernel, name, s["cases"], s["passed"], s["failed"], 0, s["worst_ratio"], "", note))
    return rows


HEAD = ("kernel", "output", "cases", "passed", "failed", "skipped", "worst ratio", "verdict", "triage")


def summary_table(results) -> str:
    return text_table([HEAD] + [(k, o, str(n), str(p), str(f), str(s), f"{w:.3g}", v, t)
                                for k, o, n, p, f, s, w, v, t in _rows(results)])


def text_table(rows) -> str:
    """Left-aligned columns of strings, the first row a header underlined with dashes."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for j, r in enumerate(rows):
        lines.append("  ".join(x.ljust(widths[i]) for i, x in enumerate(r)).rstrip())
        if j == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def markdown_summary(results) -> str:
    out = ["| " + " | ".join(HEAD) + " |", "|" + "---|" * len(HEAD)]
    for k, o, n, p, f, s, w, v, t in _rows(results):
        out.append(f"| {k} | {o} | {n} | {p} | {f} | {s} | {w:.3g} | {v} | {t} |")
    out += ["", "Triage per kernel (cases): " + "; ".join(
        f"**{r.kernel}** " + (", ".join(f"{kind} {n}" for kind, n in triage.summarize(r.cases)["kinds"].items()) or "-")
        for r in results)]
    out += ["", "Coverage: features the capability makes reachable that no case exercised:"]
    out += [f"- **{r.kernel}**: " + (", ".join(f"`{f}`" for f in r.coverage.get("missing") or ()) or "none")
            for r in results if r.status != "unavailable"]
    for r in results:
        if r.failure is not None:
            out.append("")
            out.append(f"**{r.kernel}** failed on `{r.failure.problem.short()}` "
                       f"after {r.examples_to_fail} examples ({r.seconds_to_fail:.1f} s); "
                       f"reproducer: `{(r.reproducer or {}).get('py', '-')}`")
            out.append("```")
            out.append(r.failure.render())
            out.extend(f"  {d}" for d in getattr(r, "declaration", []))
            out.append("```")
    return "\n".join(out)


class Progress:
    """A one-line progress display on stderr (a terminal only), shown once a campaign
    runs longer than ``after`` seconds."""

    def __init__(self, label: str, total: int, enabled: bool, after: float = 3.0, stream=None):
        self.stream = stream or sys.stderr
        self.label, self.total, self.after = label, total, after
        self.enabled = enabled and (stream is not None or self.stream.isatty())
        self.t0 = time.perf_counter()
        self.shown = False

    def update(self, done: int, failed: int, worst: float, phase: str = ""):
        if not self.enabled:
            return
        dt = time.perf_counter() - self.t0
        if dt < self.after:
            return
        width = 24
        frac = min(1.0, done / max(1, self.total))
        bar = "#" * int(frac * width) + "." * (width - int(frac * width))
        self.stream.write(f"\r{self.label} [{bar}] {done}/{self.total} failed={failed} "
                          f"worst={worst:.3g} {dt:.0f}s {phase}   ")
        self.stream.flush()
        self.shown = True

    def close(self):
        if self.shown:
            self.stream.write("\n")
            self.stream.flush()
