"""Where a fused GEMM kernel's time goes (oracles/fused_passes.py): at the 64k truth's chunk
shape (8 heads x 2048 rows x 32,768 keys, D = 128) and the committed tile, the float64 product
alone (stored, no epilogue), then with each part of ``scores_exp``'s epilogue added (the shift,
exp, the mask, the row sums), against cuBLAS's bmm of the same product and the kernel itself.
Splits the kernel's cost into the product and its epilogue. CUDA events, best of ``--repeats``.
``python3 scripts/device/fused_gemm_split.py``"""

import argparse
import json

import torch
import triton
import triton.language as tl
from cuda_events import best_seconds  # scripts/device/, the script's own folder

from difftest.oracles import fused_passes as fz
from difftest.oracles.fused_passes import _add, _qk_tile


@triton.jit
def _product(a_ptr, b_ptr, shift_ptr, out_ptr, part_ptr, M, w, D, a_bs, b_bs, base, STAGE: tl.constexpr,
             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr):
    """STAGE 0: the product stored; 1: minus the shift; 2: exp of it; 3: masked; 4: with row sums."""
    h = tl.program_id(2).to(tl.int64)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    x = _qk_tile(a_ptr + h * a_bs, b_ptr + h * b_bs, rows, cols, M, w, D, BM, BN, BK, BD)
    if STAGE >= 1:
        x = x - tl.load(shift_ptr + h * M + rows, mask=rows < M, other=0.0)[:, None]
    if STAGE >= 2:
        x = tl.exp(x)
    inside = (rows[:, None] < M) & (cols[None, :] < w)
    if STAGE >= 3:
        x = tl.where(inside & (cols[None, :] - (base + rows)[:, None] < 1), x, 0.0)
    tl.store(out_ptr + (h * M + rows)[:, None].to(tl.int64) * w + cols[None, :], x, mask=inside)
    if STAGE >= 4:
        tl.store(part_ptr + (h * M + rows).to(tl.int64) * tl.num_programs(1) + tl.program_id(1),
                 tl.reduce(x, 1, _add), mask=rows < M)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    a = ap.parse_args()
    h, m, w, d = 8, 2048, 32768, 128
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(h, m, d, dtype=torch.float64, device="cuda", generator=g) * 0.1
    k = torch.randn(h, w, d, dtype=torch.float64, device="cuda", generator=g) * 0.1
    shift = q.norm(dim=-1) * k.norm(dim=-1).amax(-1, keepdim=True)
    out = torch.empty(h, m, w, dtype=torch.float64, device="cuda")
    tile = dict(fz.GEMM_TILES["scores_exp"])
    part = torch.empty(h, m, triton.cdiv(w, tile["BN"]), dtype=torch.float64, device="cuda")
    rows = {"shape": [h, m, w, d], "tile": tile,
            "cublas_bmm_s": best_seconds(lambda: torch.bmm(q, k.transpose(1, 2), out=out), a.repeats),
            "scores_exp_s": best_seconds(lambda: fz.scores_exp(q, k, shift, (w - m, 1, None, 1)), a.repeats)}
    grid = (triton.cdiv(m, tile["BM"]), triton.cdiv(w, tile["BN"]), h)
    for stage, name in enumerate(("product", "shift", "exp", "mask", "rowsum")):
        rows[f"{name}_s"] = best_seconds(lambda: _product[grid](
            q, k, shift, out, part, m, w, d, q.stride(0), k.stride(0), w - m, STAGE=stage, BM=tile["BM"],
            BN=tile["BN"], BK=tile["BK"], BD=d, num_warps=tile["num_warps"], num_stages=tile["num_stages"]),
            a.repeats)
    rows["store_only_s"] = best_seconds(lambda: out.fill_(1.0), a.repeats)
    delta = torch.randn(h, m, dtype=torch.float64, device="cuda", generator=g)
    inv = torch.full((h, m, 1), 1.0 / w, dtype=torch.float64, device="cuda")
    e, _ = fz.scores_exp(q, k, shift, (w - m, 1, None, 1))
    rows["dp_ds_and_terms_s"] = best_seconds(lambda: fz.dp_ds_and_terms_(q, k, e, delta, inv, torch.bfloat16),
                                             a.repeats)
    print(json.dumps(rows), flush=True)


if __name__ == "__main__":
    main()
