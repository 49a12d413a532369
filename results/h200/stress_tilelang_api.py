"""TileLang race stress on the H200 through difftest.judge.stress (the CLI is not in this tree yet):
the atomic-dQ build (claims no determinism: differing repetitions must pass the gates) and the
deterministic one (any differing bit fails), 100 repetitions of each stress problem under 1 load thread."""
import time
from difftest.execute.adapter import get
from difftest.judge.stress import stress_case, stress_problems

for name in ("tilelang", "tilelang-det"):
    k = get(name)
    for p in stress_problems(k.capability, batch=60, heads=8, seqlen=257, head_dim=128, dtype="bfloat16"):
        t0 = time.time()
        r = stress_case(k, p, reps=100, load=1, load_size=4096)
        print(r.line(), flush=True)
        print("  failed gates:", r.case.failed_gates, "differing reps:", {v.output: v.numbers for v in r.case.verdicts
              if str(getattr(v.gate, "value", v.gate)).startswith("determinism")}, f"{time.time()-t0:.1f} s", flush=True)
