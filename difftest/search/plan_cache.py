"""The coverage phase's plans, remembered between runs of the same campaign.

A plan (``strategies.configurations.plan``: covertable's greedy covering array) is a pure
function of its inputs: the dimensions and their values, the strength, the illegal tuples,
the configurations already run and the salt. A seeded campaign (``ci``) asks for the same
plans every run, and covertable spends most of a plan's time pruning pairs against the
illegal tuples before its first row (0.3-0.9 s a campaign on this project's CPU, a fifth of a
warm ``ci`` campaign). ``PlanCache`` keeps the rows a campaign took from each plan, keyed by a
hash of every input, in a folder of the output root (``<out>/plans``); the next run replays
them and asks covertable only for rows past those (it regenerates the plan then and skips the
replayed prefix, so the rows are the plan's either way).

A cached file is read as hostile: from a folder owned by this user that no one else can write,
no link followed, at most ``MAX_BYTES``; it is used only when it names this plan's key, each row
gives one in-range value index per dimension, and no row holds an illegal tuple or repeats a
configuration already run. Anything else is a miss (the plan is generated as without a cache).
A cached row is at worst a legal configuration the plan did not choose: the stage that takes it
still plans until every tuple it targets is covered. A plan with ``avoid`` predicates (a
finding's needs) is never cached: its inputs are functions."""

import hashlib
import json
import os
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from itertools import combinations, islice
from pathlib import Path

from difftest.errors import FileFormatError
from difftest.safeio import (
    atomic_write_text,
    check_private_dir,
    ensure_dir,
    parse_json,
    read_capped,
    unsafe_component,
)

FORMAT = 1
MAX_BYTES = 4 * 2**20  # a plan's rows: a few hundred rows of a dozen small integers
MAX_FILES = 256  # plans kept; the oldest go first


@lru_cache(maxsize=1)
def _covertable() -> str:
    try:
        return version("covertable")
    except PackageNotFoundError:
        return "unknown"


def plan_key(dims, strength: int, covered, illegal, salt: str) -> str:
    """The hash of everything a plan depends on (values by ``repr``: 1 and True differ)."""
    names = [d.name for d in dims]
    body = [
        FORMAT,
        _covertable(),
        [[d.name, [repr(v) for v in d.values]] for d in dims],
        strength,
        sorted(repr(tuple(t)) for t in illegal),
        [[repr(row.get(n)) for n in names] for row in covered],
        salt,
    ]
    return hashlib.sha256(json.dumps(body).encode()).hexdigest()


class CachedPlan:
    """The rows of one plan: the cached prefix first, then the generator's rows past it.
    ``save()`` stores what was taken when it is more than the cache held."""

    def __init__(self, cache: "PlanCache | None", key: str | None, dims, cached: list, make):
        self.cache, self.key, self.dims, self.make = cache, key, dims, make
        self.cached = cached
        self.taken: list = []
        self.exhausted = False

    def __iter__(self):
        for row in self.cached:
            self.taken.append(row)
            yield row
        if self.cache is not None and self.cache.complete.get(self.key):
            self.exhausted = True
            return
        for row in islice(self.make(), len(self.cached), None):
            self.taken.append(row)
            yield row
        self.exhausted = True

    def save(self) -> None:
        if self.cache is not None and self.key is not None:
            if len(self.taken) > len(self.cached) or (self.exhausted and not self.cache.complete.get(self.key)):
                self.cache.store(self.key, self.dims, self.taken, self.exhausted)


class PlanCache:
    """Plans kept in ``folder`` (None: no cache; every plan generated)."""

    def __init__(self, folder: Path | str | None):
        self.folder = Path(folder) if folder is not None else None
        self.complete: dict = {}  # key -> the cached rows are the whole plan

    def plan(self, dims, *, strength: int, covered, illegal, avoid, salt: str, make) -> CachedPlan:
        """``make()``: the plan's generator (``strategies.configurations.plan`` with these
        inputs). ``covered`` rows and ``illegal`` tuples as the plan takes them."""
        covered, illegal = list(covered), list(illegal)
        if self.folder is None or avoid:
            return CachedPlan(None, None, dims, [], make)
        key = plan_key(dims, strength, covered, illegal, salt)
        return CachedPlan(self, key, dims, self._load(key, dims, covered, illegal), make)

    def _private(self) -> bool:
        """The folder is a real one (no link, itself or below the output root), this user's
        alone."""
        assert self.folder is not None
        return (
            not self.folder.is_symlink()
            and unsafe_component(self.folder, self.folder.parent) is None
            and self.folder.is_dir()
            and check_private_dir(self.folder) is None
        )

    def _load(self, key: str, dims, covered, illegal) -> list:
        assert self.folder is not None
        if not self._private():
            return []
        try:
            data = parse_json(
                read_capped(self.folder / f"{key}.json", MAX_BYTES, FileFormatError, "plan", root=self.folder.parent),
                f"plan {key}",
                FileFormatError,
            )
        except (FileFormatError, OSError):
            return []
        rows = _rows(data, key, dims)
        if rows is None or not _legal(rows, dims, covered, illegal):
            return []
        self.complete[key] = data.get("complete") is True
        return rows

    def store(self, key: str, dims, rows: list, complete: bool) -> None:
        assert self.folder is not None
        names = [d.name for d in dims]
        index = [{repr(v): i for i, v in enumerate(d.values)} for d in dims]
        body = {
            "format": FORMAT,
            "key": key,
            "complete": complete,
            "rows": [[index[j][repr(row[n])] for j, n in enumerate(names)] for row in rows],
        }
        try:
            ensure_dir(self.folder, self.folder.parent)
            os.chmod(self.folder, 0o700)
            if not self._private():
                return
            atomic_write_text(self.folder / f"{key}.json", json.dumps(body), root=self.folder.parent)
            self._prune()
        except OSError:
            return  # a plan not kept costs the next run its planning time, nothing else
        self.complete[key] = complete

    def _prune(self) -> None:
        assert self.folder is not None
        files = [e for e in os.scandir(self.folder) if e.name.endswith(".json") and e.is_file(follow_symlinks=False)]
        if len(files) <= MAX_FILES:
            return
        files.sort(key=lambda e: e.stat(follow_symlinks=False).st_mtime)
        for e in files[: len(files) - MAX_FILES]:
            try:
                os.unlink(e.path)
            except OSError:
                pass


def _rows(data, key: str, dims) -> list | None:
    """The rows a cached plan holds, or None unless it is this plan's, well formed."""
    if not isinstance(data, dict) or data.get("format") != FORMAT or data.get("key") != key:
        return None
    raw = data.get("rows")
    if not isinstance(raw, list):
        return None
    rows = []
    for r in raw:
        if not isinstance(r, list) or len(r) != len(dims):
            return None
        if not all(type(i) is int and 0 <= i < len(d.values) for i, d in zip(r, dims)):
            return None
        rows.append({d.name: d.values[i] for i, d in zip(r, dims)})
    return rows


def _legal(rows: list, dims, covered, illegal) -> bool:
    """No row holds an illegal tuple or repeats a configuration run before."""
    names = {d.name for d in dims}
    seen = [{n: v for n, v in row.items() if n in names} for row in covered]
    bad = {frozenset(t) for t in illegal}
    sizes = sorted({len(t) for t in bad})
    for row in rows:
        if row in seen:
            return False
        items = sorted(row.items(), key=lambda kv: kv[0])
        for k in sizes:
            if any(frozenset(c) in bad for c in combinations(items, k)):
                return False
    return True
