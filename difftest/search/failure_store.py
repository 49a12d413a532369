"""The failure store: every shrunk failing Problem (and the first failing Problem it came
from) of a kernel, kept so the kernel's next campaign runs them first, whatever the seed.

One JSON line per Problem in ``<database>/difftest-failures/<spec>.jsonl``, oldest first,
keyed by the kernel's registry spec (the name that rebuilds it). Hypothesis's own example
database in the same folder only serves unseeded searches: a seeded run neither reads
nor writes it, and the quick and ci profiles are seeded, so this store is what makes a
failure found once come back first in every later run.
"""

from pathlib import Path

from difftest.model.problem import Problem, ProblemError

FOLDER = "difftest-failures"


def safe_name(name: str) -> str:
    """``name`` as a file name: characters other than letters, digits and ``-_.`` become ``_``."""
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def store_path(database: str | None, spec: str) -> Path | None:
    """Where ``spec``'s failures live (None: no database, nothing is kept)."""
    return Path(database) / FOLDER / f"{safe_name(spec)}.jsonl" if database else None


def load_failures(database: str | None, spec: str) -> list[Problem]:
    """Problems that failed in earlier campaigns of ``spec`` (shrunk first), oldest first,
    each once; a line that no longer parses as a Problem (an older schema) is skipped."""
    path = store_path(database, spec)
    if path is None or not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            p = Problem.from_json(line)
        except (ValueError, TypeError, ProblemError):
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
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("a") as f:
            for p in new:
                f.write(p.to_json() + "\n")


def keep_current(database: str | None, spec: str, problems, written: set) -> set:
    """Make ``problems`` (in order) this campaign's entries for ``spec``: the entries in
    ``written`` (what it stored before, e.g. a less simple failing Problem of an earlier
    shrink step) are dropped, every other entry (earlier campaigns', another run's) stays
    where it is; the file is replaced atomically. Returns the Problems this call added,
    to pass back as ``written`` at the next step."""
    from difftest.safeio import atomic_write_text

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
        atomic_write_text(path, "".join(p.to_json() + "\n" for p in keep))
    return added
