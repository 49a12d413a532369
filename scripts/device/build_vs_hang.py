"""On the GPU: a TileOPs build longer than --timeout is not a hang, and the real hang still is
(issue 10, verdict trust; difftest/execute/isolation.py's compile_timeout_s, kernels/tileops.py's
build notices).

    source scripts/device/setup.sh   # DIFFTEST_TILEOPS_SITE
    python3 scripts/device/build_vs_hang.py --out DIR [--kernel tileops-gqa] [--timeout 5]
                                            [--hang-timeout 30] [--compile-timeout 600]

With an empty TileLang cache (a fresh TILELANG_CACHE_DIR under DIR), runs isolated cases:
  build  b1 sq128 sk128 h1/1 d128 fp16: a new shape, its builds (11-41 s each on the H200)
         far past --timeout; expected "passed", the build charged to "compile";
  hang   b1 sq64 sk64 h1/1 d128 fp16 (results/bugs/tileops/REPORT-bwd-hang-seqlen64.md): built,
         then the backward never returns; expected "hang" whose reason gives the build and
         kernel seconds (not "build timeout").
Writes DIR/build_vs_hang.json (per case: status, triage, reason, the worker's phase seconds)
and prints one line per case. Exit 0 when both are as expected, 1 otherwise.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from difftest import Problem


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="tileops-gqa", choices=("tileops-gqa", "tileops-mha", "tileops-gqa-bwd"))
    ap.add_argument("--timeout", type=float, default=5.0, help="timeout_s of the build case (below its build time)")
    ap.add_argument("--hang-timeout", type=float, default=30.0, help="timeout_s of the hang case")
    ap.add_argument("--compile-timeout", type=float, default=600.0)
    a = ap.parse_args(argv)
    for name in ("timeout", "hang_timeout", "compile_timeout"):
        if not getattr(a, name) > 0:
            ap.error(f"--{name.replace('_', '-')}={getattr(a, name)}: allowed a number of seconds > 0")
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    # an empty cache, set before the isolation worker (and its TileOPs process) starts
    os.environ["TILELANG_CACHE_DIR"] = tempfile.mkdtemp(prefix="tlc-", dir=out)

    from difftest.execute import adapter as registry
    from difftest.execute.isolation import close_all, shared_worker
    from difftest.judge.runner import RunConfig, run_case
    from difftest.judge.triage import classify

    kernel = registry.get(a.kernel)
    why = kernel.available()
    if why:
        print(f"{a.kernel}: unavailable: {why}", file=sys.stderr)
        return 1
    base = dict(batch=1, heads_q=1, heads_kv=1, head_dim_qk=128, head_dim_v=128, dtype="float16", seed=0)
    cases = {"build": (Problem(seqlen_q=128, seqlen_k=128, **base).validate(), a.timeout, "passed"),
             "hang": (Problem(seqlen_q=64, seqlen_k=64, **base).validate(), a.hang_timeout, "hang")}
    rows, ok = {}, True
    try:
        for name, (p, timeout, expected) in cases.items():
            r = run_case(kernel, p, RunConfig(isolate=True, timeout_s=timeout, compile_timeout_s=a.compile_timeout))
            kind = str(classify(r))
            w = shared_worker()
            rows[name] = {"problem": p.to_dict(), "timeout_s": timeout, "status": str(r.status), "triage": kind,
                          "expected": expected, "reason": r.reason, "seconds": round(r.seconds, 2),
                          "worker_phases_s": {k: round(v, 2) for k, v in w.last_seconds.items()}
                          if kind == "passed" else None}  # a killed worker sent none
            ok &= kind == expected
            print(f"{name}: {p.short()} timeout {timeout:g} s -> {kind} (expected {expected}) in {r.seconds:.1f} s; "
                  f"{(r.reason.splitlines() or [''])[0][:200]} {rows[name]['worker_phases_s'] or ''}",
                  flush=True)
    finally:
        close_all()
    (out / "build_vs_hang.json").write_text(json.dumps({"kernel": a.kernel, "ok": ok, "cases": rows}, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
