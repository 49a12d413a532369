"""How many specialisations of the float64 truth's fused GEMM kernels (oracles/fused_passes.py)
would a campaign's problems compile? Triton compiles one variant per pattern of its integer
arguments (each 1, divisible by 16, or neither) unless told not to specialise them; the fused
GEMM kernels specialise their sizes and strides. For the problems of a campaign's cases file, this
plans each problem's chunks as the truth does on an H200 (chunk cap 2**31) and counts the
distinct patterns of the chunks at or above each threshold (an upper bound: chunks whose softmax
shift is the row maximum take the plain passes). CPU only, no GPU needed.
``python3 scripts/fused_gemm_variants.py CASES.jsonl [--log2 20 24 25 26]``"""

import argparse
import json

from difftest.oracles import chunked
from difftest.problem import Problem


def _key(v: int) -> str:
    return "1" if v == 1 else ("16" if v % 16 == 0 else "x")


def variants(problems, threshold: int, budget: int = 2**31) -> tuple[int, int, int]:
    """(problems with a fused-GEMM chunk, such chunks, distinct kernel specialisations)."""
    keys, chunks, hit = set(), 0, 0
    for p in problems:
        any_chunk = False
        for sq, sk in zip(p.seqlens_q, p.seqlens_k):
            if not sq:
                continue
            for r0, r1, lo, hi in chunked.chunk_plan(p, sq, sk, budget):
                m, w = (r1 - r0) * p.group, hi - lo
                if w == 0 or p.heads_kv * m * w < threshold:
                    continue
                any_chunk, chunks = True, chunks + 1
                d, dv = p.head_dim_qk, p.head_dim_v
                keys.add(("scores_exp", _key(w), _key(d), _key(-(-w // 64)), _key(m * d), _key(sk * d)))
                keys.add(("dp_ds", _key(w), _key(dv), _key(m * dv), _key(sk * dv)))
        hit += any_chunk
    return hit, chunks, len(keys)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cases", help="a campaign's <kernel>.cases.jsonl")
    ap.add_argument("--log2", type=int, nargs="+", default=[20, 24, 25, 26])
    a = ap.parse_args()
    seen = {}
    with open(a.cases) as f:
        for line in f:
            row = json.loads(line)
            if row.get("event") == "case":
                seen[json.dumps(row["problem"], sort_keys=True)] = Problem.from_dict(row["problem"])
    for t in a.log2:
        hit, chunks, n = variants(seen.values(), 2**t)
        print(f"threshold 2^{t}: {hit}/{len(seen)} problems with a fused-GEMM chunk, {chunks} chunks, "
              f"{n} kernel specialisations")


if __name__ == "__main__":
    main()
