"""How many specialisations of the float64 truth's fused GEMM kernels (oracles/fused_passes.py)
would a campaign's problems compile? Triton compiles one variant per pattern of a kernel's
integer arguments (each 1, divisible by 16, or neither) unless the kernel marks the argument
``do_not_specialize``, and one per value of its compile-time flags. For the problems of a
campaign's cases file, this plans each problem's chunks as the truth does on an H200 (chunk cap
2**31), forms the arguments each kernel would get for the chunks at or above each threshold, and
counts the distinct patterns, reading which arguments are specialised from the kernels
themselves. An upper bound: chunks whose softmax shift is the row maximum take the plain passes.
CPU only. ``python3 scripts/fused_gemm_variants.py CASES.jsonl [--log2 20 24 25 26]``"""

import argparse
import json
import math

from difftest.model.problem import Problem
from difftest.oracles import chunked, fused_passes


def _pattern(v) -> str:
    if isinstance(v, bool) or v is None:
        return str(v)
    return "1" if v == 1 else ("16" if v % 16 == 0 else "x")


def kernel_args(p: Problem, sq: int, sk: int, r0: int, r1: int, lo: int, hi: int) -> dict:
    """{kernel: {argument: value}}: the integer arguments and flags fused_passes passes for one chunk."""
    m, w, g = (r1 - r0) * p.group, hi - lo, p.group
    mask = chunked._mask_spec(p, r0, r1, lo, hi, sq, sk, g)
    base, _, left, right = mask if mask is not None else (0, g, None, None)
    d, dv = p.head_dim_qk, p.head_dim_v
    bn = fused_passes.GEMM_TILES["scores_exp"]["BN"]
    return {
        fused_passes._scores_exp_kernel: dict(M=m, w=w, D=d, G=g, nbn=math.ceil(w / bn), a_bs=m * d, b_bs=sk * d,
                                              base=base, left=left or 0, right=right or 0,
                                              HAS_LEFT=left is not None, HAS_RIGHT=right is not None),
        fused_passes._dp_ds_terms_kernel: dict(M=m, w=w, D=dv, a_bs=m * dv, b_bs=sk * dv, TERMS=True, BF16=True),
    }


def specialisation(kernel, args: dict) -> tuple:
    """The part of a launch's arguments a compiled variant is keyed on: every flag, and the
    pattern of every integer argument the kernel does not mark do_not_specialize."""
    return (kernel.fn.__name__,) + tuple(
        (q.name, _pattern(args[q.name])) for q in kernel.params
        if q.name in args and (q.is_constexpr or not q.do_not_specialize))


def variants(problems, threshold: int, budget: int = 2**31) -> tuple[int, int, int]:
    """(problems with a fused-GEMM chunk, such chunks, distinct kernel specialisations)."""
    keys, chunks, hit = set(), 0, 0
    for p in problems:
        any_chunk = False
        for sq, sk in zip(p.seqlens_q, p.seqlens_k):
            if not sq:
                continue
            for r0, r1, lo, hi in chunked.chunk_plan(p, sq, sk, budget):
                if hi == lo or p.heads_kv * (r1 - r0) * p.group * (hi - lo) < threshold:
                    continue
                any_chunk, chunks = True, chunks + 1
                for kernel, args in kernel_args(p, sq, sk, r0, r1, lo, hi).items():
                    keys.add(specialisation(kernel, args))
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
