"""Compile cache for our TileLang kernels.

Two levels: TileLang's own disk cache (``TILELANG_CACHE_DIR``; we default it to
``<repo>/build/tilelang-cache`` when unset, an ignored folder) and an in-process dict
keyed by everything that forces a new build (kernel kind, target and the compile
parameters). ``stats()`` counts builds (first use in this process: a fresh compile or a
disk-cache load) and hits, so a campaign can report how many compiles it paid for.

Whether TileLang's disk cache already holds a kernel cannot be asked without lowering it
(seconds), so every successful build also leaves a marker file named by a hash of
(kind, target, params, TileLang's version, source.py's text) under
``<TILELANG_CACHE_DIR>/difftest-built/``: ``is_built`` is one ``stat``, which lets a
prebuild (warm.prebuild) skip what is there without starting a process. Editing source.py
changes every hash, so a stale marker never hides a needed build. A build inside
``get_kernel`` is charged to the "compile" phase of difftest's timer (difftest/execute/timing.py).
"""

import hashlib
import os
import threading
import time
from dataclasses import dataclass, field
from importlib.metadata import version
from pathlib import Path

from difftest.execute import timing

_REPO = Path(__file__).resolve().parents[2]
DEFAULT_CACHE_DIR = _REPO / "build" / "tilelang-cache"
os.environ.setdefault("TILELANG_CACHE_DIR", str(DEFAULT_CACHE_DIR))
os.environ.setdefault("TILELANG_PRINT_ON_COMPILATION", "0")


@dataclass
class CacheStats:
    builds: int = 0  # kernels built in this process (fresh compile or disk-cache load)
    hits: int = 0  # requests answered from the in-process cache
    build_seconds: float = 0.0
    keys: list = field(default_factory=list)  # the keys built, in order

    def as_dict(self) -> dict:
        return {
            "builds": self.builds,
            "hits": self.hits,
            "build_seconds": round(self.build_seconds, 3),
            "keys": [repr(k) for k in self.keys],
        }


_LOCK = threading.Lock()
_KERNELS: dict = {}
_STATS = CacheStats()


def cache_key(kind: str, target: str, **params) -> tuple:
    return (kind, target) + tuple(sorted(params.items()))


def cache_dir() -> Path:
    return Path(os.environ.get("TILELANG_CACHE_DIR") or DEFAULT_CACHE_DIR)


_SOURCE_DIGEST: list = []


def _source_digest() -> str:
    if not _SOURCE_DIGEST:
        try:
            tl = version("tilelang")
        except Exception:  # not installed: no build will succeed anyway
            tl = "none"
        text = (Path(__file__).with_name("source.py")).read_bytes()
        _SOURCE_DIGEST.append(hashlib.sha256(tl.encode() + b"\0" + text).hexdigest()[:16])
    return _SOURCE_DIGEST[0]


def built_marker(kind: str, target: str, **params) -> Path:
    """The marker file of one kernel build (see the module docstring)."""
    key = repr(cache_key(kind, target, **params)) + _source_digest()
    return cache_dir() / "difftest-built" / (hashlib.sha256(key.encode()).hexdigest()[:32] + ".ok")


def is_built(kind: str, target: str, **params) -> bool:
    return built_marker(kind, target, **params).exists()


def mark_built(kind: str, target: str, **params) -> None:
    m = built_marker(kind, target, **params)
    m.parent.mkdir(parents=True, exist_ok=True)
    m.write_text(repr(cache_key(kind, target, **params)) + "\n")


def get_kernel(kind: str, target: str, **params):
    """The compiled kernel for (kind, target, params), built once per process."""
    from . import source  # lazy: source.py imports tilelang (optional, seconds to load)

    key = cache_key(kind, target, **params)
    with _LOCK:
        k = _KERNELS.get(key)
        if k is not None:
            _STATS.hits += 1
            return k
        t0 = time.perf_counter()
        with timing.phase("compile"):
            k = source.build(kind, target, **params)
        _STATS.build_seconds += time.perf_counter() - t0
        mark_built(kind, target, **params)
        _STATS.builds += 1
        _STATS.keys.append(key)
        _KERNELS[key] = k
        return k


def stats() -> CacheStats:
    return _STATS


def reset_stats() -> None:
    """Zero the counters (compiled kernels stay cached)."""
    global _STATS
    _STATS = CacheStats()


def clear() -> None:
    """Forget every in-process kernel (the disk cache stays) and zero the counters."""
    with _LOCK:
        _KERNELS.clear()
    reset_stats()
