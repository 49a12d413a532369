"""Pre-build our TileLang kernels in parallel into TileLang's disk cache.

A campaign builds one kernel set per compile key (dtype, head dims, sinks) in its own
process, one at a time; on the H200 each GPU build takes 10-20 s, which would eat a
campaign's time budget. Building every configuration the GPU capability allows first,
spread over the machine's cores, makes each later build a cache load (~0.1-0.5 s).

    python -m difftest.kernels.tilelang.warm --target cuda --jobs 14     # on the H200, before campaigns
    python -m difftest.kernels.tilelang.warm --target c --jobs 2         # CPU (CI) configurations

Kernels land in ``TILELANG_CACHE_DIR`` (cache.py's default when unset), which the
campaign process must share.

``prebuild(target, requests, jobs)`` is the same for the kernels a campaign is about to
need (the adapter's ``prepare``, called by ``difftest run`` before the campaigns start):
it skips what cache.is_built finds, and builds the rest on every core. On the CPU the
build workers are forked (no second import of torch); on CUDA they are spawned.
"""

import argparse
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed

from difftest.safeio import safe_child_path

from . import (
    cache,  # (also sets TILELANG_CACHE_DIR before a build worker imports tilelang)
    pch,
)
from .tiles import CPU_FLAGS, TILES


def configs(target: str, dtypes=None, dims=None) -> list[tuple[str, dict]]:
    """Every (kind, params) the adapter can ask for on ``target`` (clean kernels only)."""
    device = "cpu" if target == "c" else "cuda"
    t = TILES[device]
    if dtypes is None:
        dtypes = ("float32", "float16") if device == "cpu" else ("float16", "bfloat16")
    if dims is None:
        qk, v = ((16, 32, 64), (16, 32, 64)) if device == "cpu" else ((64, 128, 192), (64, 128))
        dims = [(a, b) for a in qk for b in v]
    out = []
    for dt in dtypes:
        for dqk, dv in dims:
            for sinks in (False, True):
                out.append(
                    (
                        "fwd",
                        dict(
                            dtype=dt,
                            dim_qk=dqk,
                            dim_v=dv,
                            sinks=sinks,
                            block_m=t["block_m"],
                            block_n=t["block_n"],
                            threads=t["fwd_threads"],
                            stages=t["stages"],
                        ),
                    )
                )
            for mode in ("atomic", "deterministic"):
                out.append(
                    (
                        "main",
                        dict(
                            dtype=dt,
                            dim_qk=dqk,
                            dim_v=dv,
                            block_m=t["block_m"],
                            block_n=t["block_n"],
                            dq_mode=mode,
                            threads=t["bwd_threads"],
                            stages=t["stages"],
                            mutant="",
                        ),
                    )
                )
        for dv in sorted({b for _, b in dims}):
            for sinks in (False, True):
                out.append(("pre", dict(dtype=dt, dim_v=dv, sinks=sinks, block_m=t["block_m"], mutant="")))
        for dqk in sorted({a for a, _ in dims}):
            out.append(("post", dict(dtype=dt, dim_qk=dqk)))
            out.append(("post_det", dict(dtype=dt, dim_qk=dqk, block_m=t["block_m"], block_n=t["block_n"])))
    out.append(("dsink", {}))
    return out


def _build(kind: str, target: str, params: dict) -> tuple[float, str]:
    t0 = time.perf_counter()
    try:
        from . import source  # lazy: source.py imports tilelang (optional, seconds to load)

        source.build(kind, target, **params)
        cache.mark_built(kind, target, **params)
        return time.perf_counter() - t0, ""
    except Exception as e:
        last = str(e).strip().splitlines()[-1][:300] if str(e).strip() else ""
        return time.perf_counter() - t0, f"{type(e).__name__}: {last}"


def warm(target: str, jobs: int, dtypes=None, dims=None, log=print) -> list[dict]:
    todo = configs(target, dtypes, dims)
    if target == "c":
        log(f"precompiled header: {pch.build(CPU_FLAGS)}")
    rows = []
    t0 = time.perf_counter()
    ctx = mp.get_context("spawn")  # fresh interpreters: no inherited tilelang/CUDA state
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as ex:
        with safe_child_path():  # workers start at submit: none puts the cwd on its sys.path
            futs = {ex.submit(_build, kind, target, params): (kind, params) for kind, params in todo}
        for f in as_completed(futs):
            kind, params = futs[f]
            secs, err = f.result()
            rows.append({"kind": kind, **params, "seconds": round(secs, 2), "error": err})
            log(f"{kind:5s} {params} {secs:6.1f}s {'ok' if not err else 'FAIL ' + err}")
    bad = [r for r in rows if r["error"]]
    log(
        f"built {len(rows) - len(bad)}/{len(rows)} kernels for target={target} in "
        f"{time.perf_counter() - t0:.0f} s with {jobs} jobs"
    )
    return rows


class Prebuild:
    """Builds under way in a process pool; ``wait()`` collects them (counts and seconds)."""

    def __init__(self, target: str, requests, jobs: int | None = None, log=None):
        self.t0 = time.perf_counter()
        self.log = log
        todo = [(k, p) for k, p in requests if not cache.is_built(k, target, **p)]
        self.result = {
            "requested": len(requests),
            "cached": len(requests) - len(todo),
            "built": 0,
            "failed": 0,
            "seconds": 0.0,
            "jobs": 0,
        }
        self.futures, self.ex = [], None
        if todo and target == "c":  # before the pool: every build it runs reads the header (pch.py)
            self.result["pch"] = pch.build(CPU_FLAGS)
        if todo:
            jobs = max(1, min(len(todo), jobs or os.cpu_count() or 1))
            self.result["jobs"] = jobs
            # the CPU target forks (no CUDA state to inherit, no second torch import); the
            # pool forks all its workers here, on the calling thread, before any work runs
            torch = sys.modules.get("torch")
            cuda_up = torch is not None and torch.cuda.is_initialized()  # a forked child must not inherit it
            ctx = mp.get_context("fork" if target == "c" and sys.platform == "linux" and not cuda_up else "spawn")
            self.ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx)
            # the largest first: fwd and main take longest, so every core stays busy to the end
            with safe_child_path():  # spawned workers start at submit: none puts the cwd on its sys.path
                for kind, params in sorted(todo, key=lambda kp: kp[0] not in ("fwd", "main")):
                    self.futures.append((kind, params, self.ex.submit(_build, kind, target, params)))

    def wait(self) -> dict:
        for kind, params, f in self.futures:
            secs, err = f.result()
            self.result["failed" if err else "built"] += 1
            if self.log:
                self.log(f"prebuild {kind:8s} {params} {secs:6.1f}s {'ok' if not err else 'FAIL ' + err}")
        self.futures = []
        if self.ex is not None:
            self.ex.shutdown()
            self.ex = None
            self.result["seconds"] = round(time.perf_counter() - self.t0, 2)
        return self.result


def prebuild(target: str, requests, jobs: int | None = None, log=None, wait: bool = True):
    """Build the (kind, params) ``requests`` that are not built yet, ``jobs`` at a time
    (default: every core). A failed build is only counted here: the campaign meets it
    again as the kernel's own error on the case that needs it. ``wait=False`` returns the
    ``Prebuild`` under way (its ``wait()`` gives the counts) instead of the counts."""
    job = Prebuild(target, requests, jobs, log)
    return job.wait() if wait else job


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--target", choices=("c", "cuda"), default="cuda")
    ap.add_argument("--jobs", type=int, default=max(1, (mp.cpu_count() or 2) - 2))
    ap.add_argument("--dtype", action="append", help="restrict dtypes (default: the target's)")
    ap.add_argument("--dims", action="append", metavar="QKxV", help="restrict head dims, e.g. 64x64 (repeatable)")
    a = ap.parse_args(argv)
    try:
        dims = [tuple(int(x) for x in d.lower().split("x")) for d in a.dims] if a.dims else None
    except ValueError:
        ap.error("--dims: allowed QKxV integers, e.g. 64x64")
    if dims and any(len(d) != 2 for d in dims):
        ap.error("--dims: allowed QKxV integers, e.g. 64x64")
    rows = warm(a.target, a.jobs, tuple(a.dtype) if a.dtype else None, dims)
    return 1 if any(r["error"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
