"""A campaign's case log: one JSON line per finished case, flushed as it is written, so
the cases survive a campaign that is killed or crashes (``--resume`` reads them back and
never runs them again; ``OUT/runs/<run id>/<kernel>.cases.jsonl``). A hunt also logs when
it starts shrinking a failure (``"event": "hunt"``) and each finding it keeps
(``"event": "finding"``), so a resumed hunt keeps its findings as they were and finishes
the shrink the kill cut short."""

import json
import os
from pathlib import Path

from difftest.errors import FileFormatError
from difftest.execute.interrupt import OutputFailed
from difftest.safeio import open_append, parse_json, read_lines

MAX_LINE_BYTES = 16 * 2**20  # a case line is a few kB (its verdicts' numbers, a long kernel message)
MAX_LOG_BYTES = 4 * 2**30  # a nightly campaign's log is tens of MB


class CaseLogError(FileFormatError):
    """A case log that cannot be read back (a link, not a regular file, a line or a file too long)."""


class CaseLog:
    """Appends one JSON line per finished case and flushes it, so the results survive
    a campaign that is killed or crashes. Every line carries the ``run_id``; a case line
    has ``"event": "case"`` and the case's fields, and ``started(problem)`` (used when
    kernels run in this process, where a crash leaves nothing else) writes an
    ``"event": "started"`` line naming the Problem about to run.

    A line is whole or absent: opening the log cuts a last line left incomplete (a kill
    mid-write, a full disk) so a resumed run never appends onto it, and a write that fails
    (ENOSPC) is undone and raises ``OutputFailed``: the run stops like an interrupted one,
    with a partial report and ``--resume``. The log is never opened through a link
    (``safeio.open_append``): a link planted in its place, before the run or while it runs,
    stops the run the same way."""

    def __init__(self, path, run_id: str | None = None):
        self.path = Path(path)
        self.run_id = run_id
        self._fd: int | None = None  # None once closed
        try:
            self._fd = open_append(self.path, root=self.path.parent.parent)
        except OSError as e:
            raise OutputFailed(e.filename or self.path, e) from None
        _cut_incomplete_line(self._fd)

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def _line(self, d: dict) -> None:
        data = (json.dumps(d, default=str) + "\n").encode("utf-8", "backslashreplace")
        assert self._fd is not None
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

    def event(self, event: str, record: dict) -> None:
        """A line of another kind (``hunt``, ``finding``): ``record``'s fields."""
        self._line({"run_id": self.run_id, "event": event, **record})

    def close(self):
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _cut_incomplete_line(fd: int) -> None:
    """Truncate the file open at ``fd`` after its last newline (nothing when it ends in one)."""
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
    existed count as cases), of ``run_id`` when given; a line cut by a kill is skipped. The
    log is read as a file of its run folder (no link followed, a line and the file bounded:
    ``CaseLogError``, one line)."""
    path = Path(path)
    out = []
    for _, line in read_lines(
        path, CaseLogError, "case log difftest wrote", MAX_LINE_BYTES, MAX_LOG_BYTES, root=path.parent
    ):
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


def logged_events(log_path, run_id: str, events: tuple) -> list[dict]:
    """The lines of ``run_id`` whose event is in ``events`` (no log: none)."""
    path = Path(log_path)
    return read_case_log(path, events=events, run_id=run_id) if os.path.lexists(path) else []


def logged_cases(log_path, run_id: str) -> list:
    """The finished cases of ``run_id`` in a case log, as CaseResults, in order."""
    # lazy: keeps torch off --help
    from difftest.judge.runner import CaseResult  # loads torch: not at `difftest --help`'s start

    path = Path(log_path)
    if not os.path.lexists(path):
        return []
    out = []
    for d in read_case_log(path, run_id=run_id):
        try:
            out.append(CaseResult.from_dict(d))
        except (KeyError, TypeError, ValueError):  # a line from an older schema: run that case again
            continue
    return out
