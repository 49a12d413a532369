"""The budget's numbers on the problems where correct kernels failed it (results/variants.md).

    python scripts/rounding_regressions.py            # this checkout's engine
    python scripts/rounding_regressions.py --root DIR # another checkout's (e.g. before the design floor)

Kernels are defined here from BlockwiseAttention's hooks that every checkout has, so the same
script measures an engine without kernels/variants.py.
"""

import argparse
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--root", default=None, help="a checkout whose difftest to import instead of the installed one")
args = ap.parse_args()
if args.root:  # the editable install's finder, pointed at another checkout
    import __editable___difftest_0_1_0_finder as finder

    r = args.root
    finder.MAPPING.update({"difftest": f"{r}/difftest", "difftest.kernels": f"{r}/kernels",
                           "difftest.oracles": f"{r}/oracles", "difftest.strategies": f"{r}/strategies"})

import torch  # noqa: E402

from difftest.judge.runner import run_case  # noqa: E402
from difftest.kernels.blockwise import F32, BlockwiseAttention  # noqa: E402
from difftest.model.problem import Problem  # noqa: E402


class PerHeadPartials(BlockwiseAttention):
    """Per-query-head dK/dV stored in fp16 before the group sum."""

    def backward(self, inputs, fwd, ctx, out=None):
        self.low = torch.float16
        return super().backward(inputs, fwd, ctx, out)

    def reduce_group(self, grad_h, idx, heads_kv):
        r = grad_h.to(self.low).to(F32)
        return torch.stack([r[idx == g].sum(dim=0) for g in range(heads_kv)])


FA = dict(batch=3, seqlen_q=(3, 1, 2), seqlen_k=(3, 2, 5), heads_q=2, heads_kv=1, head_dim_qk=32, head_dim_v=32,
          dtype="float16", values="mixed_do", value_scale=1.0, softmax_scale=4.9375)
CASES = [("blockwise o_do", BlockwiseAttention(delta_source="o_do"), Problem(**FA, seed=91)),
         ("blockwise o_do", BlockwiseAttention(delta_source="o_do"), Problem(**FA, seed=160)),
         ("blockwise p_dp", BlockwiseAttention(), Problem(**FA, seed=91)),
         ("blockwise p_dp", BlockwiseAttention(), Problem(seqlen_q=2, seqlen_k=3, heads_q=2, heads_kv=1, head_dim_qk=80,
                                                           head_dim_v=16, dtype="float32", values="negative_lse",
                                                           value_scale=4.0, seed=13)),
         ("per-head fp16 partials", PerHeadPartials(),
          Problem(seqlen_q=256, seqlen_k=1, heads_q=2, heads_kv=1, head_dim_qk=8, head_dim_v=8, dtype="float16",
                  values="large_do", value_scale=4.0, seed=7, layout="kv_broadcast"))]

for name, kernel, p in CASES:
    case = run_case(kernel, p)
    parts = []
    for v in case.verdicts:
        n = v.numbers
        if v.gate == "budget" and v.output in ("o", "dq", "dk", "dv"):
            parts.append(f"{v.output} err {n['err']:.3g} ref {n['ref_err']:.3g} floor {n['floor']:.3g} "
                         f"ratio {n['ratio']:.3g} k_needed {n['k_needed']:.3g}")
            if not v.passed and "source" in n:
                parts.append(f"source {n['source']}")
        if v.gate == "nonfinite" and (not v.passed or n.get("overflow_limited")):
            parts.append(f"{v.output} nonfinite {'ok' if v.passed else 'FAILED'} ({n.get('mismatched')} mismatched, "
                         f"{n.get('overflow_limited', 0)} overflow-limited)")
    print(f"{name}: {p.short()} seed {p.seed}: {case.status} | " + " | ".join(parts), flush=True)
sys.exit(0)
