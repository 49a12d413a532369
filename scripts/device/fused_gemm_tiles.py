"""The tiles of the float64 truth's fused GEMM kernels (oracles/fused_passes.py, GEMM_TILES) on
this GPU. Each kernel alone, per tile config, at the chunk shapes the truth of B1 H8 D128 causal
runs (16k: 1024 rows x ~8k keys; 64k: 2048 rows x ~32k keys; 8 heads), CUDA events, best of
``--repeats``, next to what it replaces (cuBLAS's float64 bmm, then the unfused pass); then the
whole truth at 16k and 64k with the best tile of each kernel against the committed ones.
One JSON line per measurement. ``python3 scripts/device/fused_gemm_tiles.py``"""

import argparse
import itertools
import json

import torch
from cuda_events import best_seconds  # scripts/device/, the script's own folder

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles import fused_passes as fz
from difftest.oracles.chunked import chunked_reference

SHAPES = {"16k": (8, 1024, 8192), "64k": (8, 2048, 32768)}  # heads, rows, keys of one chunk


def tiles(bks=(8, 16)) -> list[dict]:
    """The swept configs with the head dim taken BK at a time (R23, R29: 8 and 16)."""
    extra = [dict(BM=64, BN=64, BK=16, num_warps=8, num_stages=3)] if 16 in bks else []
    return [dict(BM=bm, BN=bn, BK=bk, num_warps=wp, num_stages=st)
            for bm, bn, bk, wp, st in itertools.product((32, 64), (32, 64), bks, (2, 4), (2, 3))
            if not (bm == 64 and bn == 64 and wp == 2)] + extra


def _operands(h, m, w, d=128):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(h, m, d, dtype=torch.float64, device="cuda", generator=g) * 0.1
    k = torch.randn(h, w, d, dtype=torch.float64, device="cuda", generator=g) * 0.1
    shift = q.norm(dim=-1) * k.norm(dim=-1).amax(-1, keepdim=True)
    delta = torch.randn(h, m, dtype=torch.float64, device="cuda", generator=g)
    inv = torch.full((h, m, 1), 1.0 / w, dtype=torch.float64, device="cuda")
    return q, k, shift, delta, inv


def kernels(repeats, bks=(8, 16), shapes=tuple(SHAPES), names=("scores_exp", "dp_ds")):
    best = {}
    for label in shapes:
        h, m, w = SHAPES[label]
        q, k, shift, delta, inv = _operands(h, m, w)
        mask = (w - m, 1, None, 1)  # the causal diagonal at the band's end
        e, _ = fz.scores_exp(q, k, shift, mask)
        base = {"shape": label, "kernel": "baseline",
                "bmm_s": best_seconds(lambda: torch.bmm(q, k.transpose(1, 2)), repeats)}
        s = torch.bmm(q, k.transpose(1, 2))
        copy = best_seconds(lambda: s.clone(), repeats)  # each pass runs on a copy: its time is taken off
        base["exp_rowsum_s"] = best_seconds(lambda: fz.exp_rowsum_(s.clone()), repeats) - copy
        base["ds_and_terms_s"] = best_seconds(lambda: fz.ds_and_terms_(s.clone(), e, delta, inv, torch.bfloat16),
                                              repeats) - copy
        s = None  # freed before the kernels run
        print(json.dumps(base), flush=True)
        for name in names:
            committed = dict(fz.GEMM_TILES[name])
            for tile in tiles(bks):
                fz.GEMM_TILES[name] = tile
                row = {"shape": label, "kernel": name, "tile": tile}
                try:
                    if name == "scores_exp":
                        row["s"] = best_seconds(lambda: fz.scores_exp(q, k, shift, mask), repeats)
                    else:
                        ee = e.clone()
                        row["s"] = best_seconds(lambda: fz.dp_ds_and_terms_(q, k, ee, delta, inv, torch.bfloat16),
                                                repeats)
                        del ee
                except Exception as ex:  # a tile that does not compile is a row, not a crash
                    row["error"] = f"{type(ex).__name__}: {ex}"[:200]
                print(json.dumps(row), flush=True)
                if "s" in row and label == "64k" and row["s"] < best.get(name, ({}, 9e9))[1]:
                    best[name] = (tile, row["s"])
            fz.GEMM_TILES[name] = committed
        q = k = e = None
        torch.cuda.empty_cache()
    return {n: t for n, (t, _) in best.items()}


def truths(best, repeats, seqlens=(16384, 65536)):
    committed = {n: dict(t) for n, t in fz.GEMM_TILES.items()}
    for s in seqlens:
        p = Problem(seqlen_q=s, seqlen_k=s, heads_q=8, heads_kv=8, head_dim_qk=128, head_dim_v=128,
                    dtype="bfloat16", causal=True).validate()
        x = make_inputs(p, "cuda")
        for which, tiles in (("committed", committed), ("best", {**committed, **best})):
            fz.GEMM_TILES.update({n: dict(t) for n, t in tiles.items()})
            torch.cuda.empty_cache()
            t = best_seconds(lambda: chunked_reference(x, "float64", magnitudes=True), repeats)
            print(json.dumps({"truth_seqlen": s, "tiles": which, "s": t, "gemm_tiles": tiles}), flush=True)
        fz.GEMM_TILES.update(committed)
        x = None
        torch.cuda.empty_cache()


def fastest(path: str, top: int) -> None:
    """The ``top`` fastest tiles per shape and kernel of a sweep's JSON lines (no GPU needed)."""
    rows = [r for r in map(json.loads, open(path)) if "tile" in r and "s" in r]
    for shape in SHAPES:
        for kernel in ("scores_exp", "dp_ds"):
            mine = sorted((r for r in rows if r["shape"] == shape and r["kernel"] == kernel), key=lambda r: r["s"])
            for r in mine[:top]:
                print(shape, kernel, round(r["s"] * 1e3, 2), "ms", r["tile"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fastest", metavar="JSONL", help="only print the fastest tiles of an earlier sweep's output")
    ap.add_argument("--top", type=int, default=3, help="with --fastest: how many per shape and kernel")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bk", type=int, action="append", help="the head dim's step (default: 8 and 16)")
    ap.add_argument("--shape", action="append", choices=tuple(SHAPES), help="default: all")
    ap.add_argument("--kernel", action="append", choices=("scores_exp", "dp_ds"), help="default: both")
    ap.add_argument("--no-truth", action="store_true", help="the kernels alone, not the whole truth after them")
    ap.add_argument("--truth-seqlen", type=int, action="append", help="the whole truth's lengths (16k and 64k)")
    a = ap.parse_args()
    if a.fastest:
        fastest(a.fastest, a.top)
        return
    names = tuple(a.kernel or ("scores_exp", "dp_ds"))
    best = kernels(a.repeats, tuple(a.bk or (8, 16)), tuple(a.shape or SHAPES), names)
    if not a.no_truth:
        truths(best, a.repeats, tuple(a.truth_seqlen or (16384, 65536)))


if __name__ == "__main__":
    main()
