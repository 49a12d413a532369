"""The failure store: every shrunk failing Problem (and the first failing Problem it came
from) of a kernel, kept so the kernel's next campaign runs them first, whatever the seed.

One JSON line per Problem in ``<database>/difftest-failures/<spec>.jsonl``, oldest first,
keyed by the kernel's registry spec (the name that rebuilds it). Hypothesis's own example
database in the same folder only serves unseeded searches: a seeded run neither reads
nor writes it, and the quick and ci profiles are seeded, so this store is what makes a
failure found once come back first in every later run.
"""

import os
import sys
from pathlib import Path

from difftest.errors import FileFormatError, InputError, one_line
from difftest.model.problem import Problem, ProblemError
from difftest.safeio import atomic_write_text, ensure_dir, open_append, open_regular, parse_json
from difftest.search.limits import check_problem_size

FOLDER = "difftest-failures"


def safe_name(name: str) -> str:
    """``name`` as a file name: characters other than letters, digits and ``-_.`` become ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def store_path(database: str | None, spec: str) -> Path | None:
    """Where ``spec``'s failures live (None: no database, nothing is kept)."""
    return Path(database) / FOLDER / f"{safe_name(spec)}.jsonl" if database else None


MAX_STORE_BYTES = 16 * 2**20  # a Problem line is ~300 bytes: tens of thousands of failures
MAX_LINE_BYTES = 64 * 2**10
_WARNED: set = set()


def _warn(path, lineno: int, why: str) -> None:
    """One warning per bad line and process (the store is read at each shrink step)."""
    key = (str(path), lineno, why)
    if key not in _WARNED:
        _WARNED.add(key)
        print(f"difftest: warning: {path}:{lineno}: failure-store line skipped: {one_line(why)}", file=sys.stderr)


def load_failures(database: str | None, spec: str, profile=None) -> list[Problem]:
    """Problems that failed in earlier campaigns of ``spec`` (shrunk first), oldest first,
    each once. The store is a file others may have written (a cached CI folder): a line
    that is not a valid Problem (an older schema, an edit, a cut line, deep nesting, a
    huge integer, a lone surrogate) is skipped with a warning naming the file and line,
    so one bad line never breaks the kernel's later runs; a store larger than
    MAX_STORE_BYTES is read up to that size. The file is read as one of the database's
    (no link followed: a link or a FIFO is skipped with a warning). With ``profile`` (a
    name or Profile) a Problem beyond its size limits (``search/limits.py``) is skipped with
    a warning too: a gigabyte Problem stored by a nightly run is not replayed under ``quick``."""
    path = store_path(database, spec)
    if path is None or not os.path.lexists(path):
        return []
    try:
        with open_regular(path, FileFormatError, "failure-store file", root=database) as f:
            data = f.read(MAX_STORE_BYTES + 1)
    except (OSError, FileFormatError) as e:
        _warn(path, 0, f"cannot read ({getattr(e, 'strerror', None) or e})")
        return []
    if len(data) > MAX_STORE_BYTES:
        _warn(path, 0, f"larger than {MAX_STORE_BYTES} bytes: only the first {MAX_STORE_BYTES} are read")
        data = data[:MAX_STORE_BYTES]
    out = []
    lines = data.split(b"\n")
    for n, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        if len(raw) > MAX_LINE_BYTES:
            _warn(path, n, f"{len(raw)} bytes: allowed at most {MAX_LINE_BYTES} (one Problem)")
            continue
        try:
            d = parse_json(raw, "line", ValueError, max_depth=8)
            if not isinstance(d, dict):
                raise InputError(f"a JSON {type(d).__name__}: allowed a Problem object")
            p = Problem.from_dict(d)
        except (ValueError, TypeError, KeyError, AttributeError, ProblemError, RecursionError) as e:
            _warn(path, n, str(e))
            continue
        why = check_problem_size(p, profile) if profile is not None else None
        if why:
            _warn(path, n, why)
            continue
        if p not in out:
            out.append(p)
    return out


def save_failures(database: str | None, spec: str, problems) -> None:
    """Append the Problems not yet stored for ``spec`` (None entries are ignored)."""
    path = store_path(database, spec)
    if path is None:
        return
    known = load_failures(database, spec)
    new = [p for p in dict.fromkeys(problems) if p is not None and p not in known]
    if new:
        ensure_dir(path.parent, root=database)
        fd = open_append(path, root=database)  # never through a link
        with os.fdopen(fd, "r+b") as f:  # a cut last line (a full disk, a kill) stays apart from the new ones
            end = f.seek(0, 2)
            head = b"\n" if end and os.pread(fd, 1, end - 1) != b"\n" else b""
            f.write(head + "".join(p.to_json() + "\n" for p in new).encode())


def keep_current(database: str | None, spec: str, problems, written: set) -> set:
    """Make ``problems`` (in order) this campaign's entries for ``spec``: the entries in
    ``written`` (what it stored before, e.g. a less simple failing Problem of an earlier
    shrink step) are dropped, every other entry (earlier campaigns', another run's) stays
    where it is; the file is replaced atomically. Returns the Problems this call added,
    to pass back as ``written`` at the next step."""
    path = store_path(database, spec)
    if path is None:
        return set()
    known = load_failures(database, spec)
    keep = [p for p in known if p not in written]
    added = set()
    for p in problems:
        if p is not None and p not in keep:
            keep.append(p)
            added.add(p)
    if keep != known:
        atomic_write_text(path, "".join(p.to_json() + "\n" for p in keep), root=database)
    return added
