"""Where the float64 truth's GPU time goes: one ``chunked_reference(..., "float64",
magnitudes=True)`` call (as the runner makes it) on B1 H8 D128 causal bf16 at ``--seqlen``
(default 16384) under torch.profiler, after one untimed call; prints the CUDA kernels by
total GPU time (GEMMs vs elementwise passes vs reductions), so the next speed step is chosen
from a measurement (issue 12 part 3). ``python3 scripts/device/oracle_profile.py [--seqlen N]``
"""

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.chunked import chunked_reference


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, default=16384)
    ap.add_argument("--rows", type=int, default=25, help="kernels listed")
    a = ap.parse_args()
    p = Problem(seqlen_q=a.seqlen, seqlen_k=a.seqlen, heads_q=8, heads_kv=8, head_dim_qk=128, head_dim_v=128,
                dtype="bfloat16", causal=True).validate()
    x = make_inputs(p, "cuda")
    chunked_reference(x, "float64", magnitudes=True)
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        chunked_reference(x, "float64", magnitudes=True)
        torch.cuda.synchronize()
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=a.rows, max_name_column_width=70))


if __name__ == "__main__":
    main()
