"""The issue-27 FA problem (FA3/FA4 failed it with identical outputs) on each named kernel."""
import sys

from difftest.execute import adapter
from difftest.judge.runner import run_case
from difftest.model.problem import Problem

FA_SHAPE = dict(batch=3, seqlen_q=(3, 1, 2), seqlen_k=(3, 2, 5), heads_q=2, heads_kv=1, head_dim_qk=32,
                head_dim_v=32, dtype="float16", values="mixed_do", value_scale=1.0, softmax_scale=4.9375)
for name in sys.argv[1:]:
    k = adapter.get(name)
    for seed in (91, 160):
        c = run_case(k, Problem(**FA_SHAPE, seed=seed))
        for v in c.verdicts:
            if v.output in ("dq", "dk") and v.gate == "budget":
                print(name, seed, c.status, v.output, "passed" if v.passed else "FAILED", v.reference,
                      "ratio %.3g truth_ratio %s source %s" % (v.numbers.get("ratio"), v.numbers.get("truth_ratio"),
                                                               v.numbers.get("source")), flush=True)
        if c.status != "passed":
            print("  ", c.status, (c.reason or "")[:300], [v.message[:200] for v in c.verdicts if not v.passed])
