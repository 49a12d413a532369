"""Phase 2 on the H200: a property campaign per kernel (profile gpu, bounded by examples
and seconds so a whole device call fits its limit), then a determinism check (N repeated
calls, bitwise) on a few problems for each kernel, all through difftest's engine.

    python3 scripts/device/campaigns.py --out DIR [--det-runs 20] SPEC [SPEC ...]
    SPEC = NAME[:EXAMPLES[:SECONDS[:SECOND_REFERENCE]]][@FIELD=VALUES[+FIELD=VALUES...]]
           e.g. tilelang:200:240:fa3   fa4:200:150@head_dims_qk=32,64,96,128,192
    (@...: narrow the capability, as `difftest run --narrow`, e.g. around a known failure)

Writes DIR/report.json and DIR/summary.md (difftest.report.write), DIR/determinism.json, the
engine's case logs and shrunk reproducers under DIR.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from difftest.execute import adapter as registry
from difftest.judge.runner import RunConfig, run_case
from difftest.model.capability import parse_narrowing
from difftest.model.problem import Problem
from difftest.report.write import markdown_summary, summary_table, write_json
from difftest.search.campaign import run_campaign

DET_PROBLEMS = [
    Problem(batch=2, seqlen_q=256, seqlen_k=256, heads_q=8, heads_kv=8, head_dim_qk=64, head_dim_v=64,
            dtype="float16", causal=True),
    Problem(batch=2, seqlen_q=333, seqlen_k=333, heads_q=8, heads_kv=2, head_dim_qk=128, head_dim_v=128,
            dtype="bfloat16"),
    Problem(batch=3, seqlen_q=(200, 0, 77), seqlen_k=(150, 64, 0), heads_q=4, heads_kv=4, head_dim_qk=64,
            head_dim_v=64, dtype="float16", causal=True),
    Problem(batch=2, seqlen_q=192, seqlen_k=192, heads_q=8, heads_kv=2, head_dim_qk=64, head_dim_v=64,
            dtype="bfloat16", causal=True, sinks=True),
    # bf16 MHA d128 square: the one shape bf16-only MHA kernels (fastflash) and d128-only MHA
    # calls (tileops-mha) take
    Problem(batch=2, seqlen_q=256, seqlen_k=256, heads_q=8, heads_kv=8, head_dim_qk=128, head_dim_v=128,
            dtype="bfloat16", causal=True),
]


def determinism(kernel, runs: int) -> list[dict]:
    """``runs`` calls on each of DET_PROBLEMS through run_case: bitwise comparison, and every
    call that differs from the first judged by the gates (a wrong rerun fails the row)."""
    rows = []
    for p in DET_PROBLEMS:
        why = kernel.capability.excludes(p) or kernel.available()
        if why:
            continue
        r = run_case(kernel, p, RunConfig(determinism_runs=runs, device=kernel.capability.device))
        if r.status == "error":
            rows.append({"kernel": kernel.name, "problem": p.short(), "error": (r.reason or "")[:300]})
            continue
        vs = [v for v in r.verdicts if v.gate in ("determinism", "determinism_info")]
        wrong = [v.label for v in r.verdicts if not v.passed and v.gate not in ("determinism", "determinism_info")]
        rows.append({"kernel": kernel.name, "problem": p.short(), "runs": runs,
                     "claims_deterministic": kernel.capability.deterministic,
                     "bitwise_equal": all(v.numbers.get("differing", 0) == 0 for v in vs),
                     "per_output": {v.output: v.numbers for v in vs},
                     "status": getattr(r.status, "value", r.status), "failed_gates": wrong})
        per = [f"{v.output}:{v.numbers['differing']} differ" if v.numbers.get("differing") else f"{v.output}:ok"
               for v in vs]
        print(f"determinism {kernel.name} {p.short()}: " + ", ".join(per) + (f"; WRONG: {wrong}" if wrong else ""),
              flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--det-runs", type=int, default=20)
    ap.add_argument("--shrink", type=float, default=45.0, help="seconds of shrinking after a failure")
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("specs", nargs="+")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    results, det = [], []
    t0 = time.perf_counter()
    for spec in a.specs:
        spec, _, narrowing = spec.partition("@")
        parts = spec.split(":")
        if parts[0] == "mutant" and len(parts) > 1:  # registry names "mutant:NAME"
            parts = [parts[0] + ":" + parts[1]] + parts[2:]
        name = parts[0]
        examples = int(parts[1]) if len(parts) > 1 and parts[1] else 200
        seconds = float(parts[2]) if len(parts) > 2 and parts[2] else 60.0
        second = parts[3] if len(parts) > 3 and parts[3] else None
        config = RunConfig(isolate=True, second_reference=second, timeout_s=300.0)
        try:
            k = registry.narrow(registry.get(name), **parse_narrowing(narrowing.split("+") if narrowing else []))
        except (KeyError, ValueError) as e:
            print(f"{name}: {e}", flush=True)
            continue
        r = run_campaign(k, "gpu", max_examples=examples, time_budget=seconds, shrink_budget=a.shrink,
                         out_dir=out, config=config, progress=False, database=None, seed=a.seed)
        results.append(r)
        st = {s: sum(c.status == s for c in r.cases) for s in ("passed", "failed", "error", "skipped")}
        print(f"{name}{' narrowed ' + narrowing if narrowing else ''}: {r.status} {len(r.cases)} cases {st} "
              f"in {r.elapsed:.0f} s "
              f"({r.compile_keys} compile keys){' second reference ' + second if second else ''}", flush=True)
        if r.failure is not None:
            print(r.failure.render(), flush=True)
            print(f"  first failure after {r.examples_to_fail} examples; reproducer {r.reproducer}", flush=True)
        if a.det_runs > 1 and r.status != "unavailable":
            from difftest.execute.isolation import close_all

            close_all()  # free the worker's GPU memory before the in-process determinism runs
            det += determinism(k, a.det_runs)
        torch.cuda.empty_cache()
    from difftest.execute.isolation import close_all

    close_all()
    env = {"gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu", "torch": torch.__version__,
           "argv": sys.argv, "seconds": round(time.perf_counter() - t0, 1)}
    write_json(results, out / "report.json", extra=env)
    (out / "summary.md").write_text(markdown_summary(results) + "\n")
    (out / "determinism.json").write_text(json.dumps(det, indent=1, default=str))
    print(summary_table(results), flush=True)


if __name__ == "__main__":
    main()
