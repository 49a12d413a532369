"""Check the flex adapters' compile key on the GPU, where the real cost is (issue 10.7).

    python3 scripts/device/flex_recompiles.py --out DIR [--kernel flex|flex-gqa] [--profile ci]
                                              [--new-compile-p 0.3] [--warm-configs 4] [--seed N] N

Draws N problems with the compile-aware strategy (a mix of repeated and new compile
configurations) and runs each through the adapter in this process (forward and backward,
the Inductor/Triton path a campaign runs, without the isolation worker so dynamo's counters
are visible), recording whether dynamo compiled a new graph for it and how long the case
took. The CPU test (tests/test_flex_compile_key.py) checks dynamo's guards with a counting
backend; this checks the same on CUDA with Inductor, requires_grad and the backward.

Writes DIR/KERNEL.recompiles.json: every case (problem, signature new?, compiled?, seconds,
error), the key's violations (a recompile under an already seen signature: must be []),
those of the key flex declared before issue 10.7 (expected non-empty), and the median case
seconds with and without a compile. Prints a one-line summary.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hseed

from difftest.execute import adapter as registry
from difftest.model.inputs import lay_out, make_inputs
from difftest.strategies import problems
from difftest.strategies.compile import key_violations

OLD_KEY = ("dtype", "head_dim_qk", "head_dim_v", "heads_q", "heads_kv")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--kernel", default="flex", choices=("flex", "flex-gqa"))
    ap.add_argument("--profile", default="ci")
    ap.add_argument("--new-compile-p", type=float, default=0.3)
    ap.add_argument("--warm-configs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("n", type=int)
    a = ap.parse_args(argv)
    if not 0.0 <= a.new_compile_p <= 1.0 or a.warm_configs < 1 or a.n < 1:
        ap.error(f"--new-compile-p={a.new_compile_p} / --warm-configs={a.warm_configs} / N={a.n}: allowed a "
                 "probability in [0, 1] and integers >= 1")
    import torch
    import torch._dynamo.utils

    kernel = registry.get(a.kernel)
    why = kernel.available()
    if why:
        print(f"{a.kernel}: unavailable: {why}", flush=True)
        return 0
    cap = kernel.capability
    drawn = []

    @settings(max_examples=a.n, database=None, deadline=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck), derandomize=False)
    @given(problems(cap, a.profile, new_compile_p=a.new_compile_p, warm_configs=a.warm_configs))
    def draw(p):
        drawn.append(p)

    if a.seed is not None:
        draw = hseed(a.seed)(draw)
    draw()

    stats = torch._dynamo.utils.counters["stats"]
    rows, events, seen = [], [], set()
    for p in drawn[:a.n]:
        before = stats["unique_graphs"]
        t0 = time.perf_counter()
        error = None
        try:
            x = lay_out(make_inputs(p, "cuda"))
            fwd, ctx = kernel.forward(x)
            kernel.backward(x, fwd, ctx)
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 -- a failing case is recorded, the check goes on
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
        compiled = stats["unique_graphs"] > before
        sig = cap.compile_signature(p)
        rows.append({"problem": p.to_dict(), "short": p.short(), "new_signature": sig not in seen,
                     "compiled": compiled, "seconds": round(time.perf_counter() - t0, 3), "error": error})
        seen.add(sig)
        events.append((p, compiled))

    def median(xs):
        return round(statistics.median(xs), 3) if xs else None

    summary = {
        "kernel": a.kernel, "cases": len(rows), "signatures": len(seen),
        "compiles": sum(r["compiled"] for r in rows), "errors": sum(r["error"] is not None for r in rows),
        "violations": key_violations(events, cap.compile_key),
        "old_key_violations": len(key_violations(events, OLD_KEY)),
        "median_seconds_compiled": median([r["seconds"] for r in rows if r["compiled"]]),
        "median_seconds_reused": median([r["seconds"] for r in rows if not r["compiled"]]),
        "compile_key": list(cap.compile_key), "torch": torch.__version__,
    }
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{a.kernel}.recompiles.json").write_text(json.dumps({**summary, "rows": rows}, indent=1, default=str))
    print(json.dumps({**summary, "violations": summary["violations"][:5]}, default=str), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
