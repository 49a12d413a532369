"""Would the float64 truth gain from running two chunks at once on two CUDA streams (one chunk's
memory-bound epilogues beside the other's float64 GEMMs)? Measured without changing the truth:
two independent truths of B1 H4 D128 causal bf16 (the two halves of the bench's H8 problem), one
after the other on one stream, then at once, each in its own thread on its own stream. Prints
JSON lines. ``python3 scripts/device/truth_streams.py [--seqlen N ...]``"""

import argparse
import json
import threading
import time

import torch

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.chunked import chunked_reference

BUDGET = 2**30  # the same chunks in both modes (the automatic budget would give each half of free memory)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seqlen", type=int, action="append")
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    for s in a.seqlen or [16384, 65536]:
        xs = [make_inputs(Problem(seqlen_q=s, seqlen_k=s, heads_q=4, heads_kv=4, head_dim_qk=128, head_dim_v=128,
                                  dtype="bfloat16", causal=True, seed=seed).validate(), "cuda") for seed in (1, 2)]

        def truth(x):
            return chunked_reference(x, "float64", magnitudes=True, max_chunk_elements=BUDGET)

        for x in xs:
            truth(x)
        torch.cuda.synchronize()
        seq, par = [], []
        for _ in range(a.repeats):
            t0 = time.perf_counter()
            for x in xs:
                truth(x)
            torch.cuda.synchronize()
            seq.append(time.perf_counter() - t0)
            streams = [torch.cuda.Stream() for _ in xs]

            def run(x, st):
                with torch.cuda.stream(st):
                    truth(x)
                st.synchronize()

            threads = [threading.Thread(target=run, args=(x, st)) for x, st in zip(xs, streams)]
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            torch.cuda.synchronize()
            par.append(time.perf_counter() - t0)
        print(json.dumps({"seqlen": s, "heads_each": 4, "sequential_s": min(seq), "two_streams_s": min(par),
                          "all_sequential": seq, "all_two_streams": par}), flush=True)
        del xs
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
