"""Is sdpa-math's fp32 near-constant O error (H200: 3.7e-6 against a yardstick of 1.05e-7 at
~650 keys, head dims 2-20) the summation order of a GPU GEMM? Runs the blockwise kernel with the
CPU BLAS's order and with a sequential float32 accumulation (a GPU SGEMM thread's FFMA loop),
in one tile and in 32x16 tiles, on that shape, and prints their O errors next to the yardstick's
and the design floor's gamma_n T (results/variants.md).

    python scripts/gpu_sum_order_triage.py
"""

import json

from difftest.judge.gates import design_floor, gamma
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.kernels.variants import SequentialFp32GemmOneTile
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import references

KERNELS = (("blas", lambda: BlockwiseAttention(block_m=650, block_n=650)),
           ("seq", lambda: SequentialFp32GemmOneTile(block_m=650, block_n=650)),
           ("blas-tiled", BlockwiseAttention),
           ("seq-tiled", lambda: SequentialFp32GemmOneTile(block_m=32, block_n=16)))
for d in (8, 16):
    for seed in range(3):
        p = Problem(seqlen_q=650, seqlen_k=650, head_dim_qk=d, head_dim_v=d, dtype="float32",
                    values="near_constant", seed=seed)
        x = make_inputs(p, "cpu")
        refs = references(x)
        t = refs.truth
        res = {name: (make().run(x).o.double() - t.o).abs().max().item() for name, make in KERNELS}
        ref_err = max((y.o.double() - t.o).abs().max().item() for y in refs.yardsticks)
        T = t.magnitude["o"]
        print(json.dumps(dict(d=d, seed=seed, max_abs_o=t.o.abs().max().item(), T_o=T, ref_err=ref_err,
                              gamma_n_T=gamma(650) * T, design=design_floor(p, "o", t.magnitude), **res)), flush=True)
