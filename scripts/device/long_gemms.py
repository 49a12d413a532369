"""The float64 truth's four long GEMMs (oracles/chunked.py: O = P V and dQ = dS K, K = the band's
keys; dV += P^T dO and dK += dS^T Q, K = the chunk's rows) in other orientations and BLAS
libraries, each alone at the chunk shapes of B1 H8 D128 causal (8 heads x 2048 rows x w keys), to
see whether cuBLAS's choice for the committed form leaves float64 tensor-core time unused (R33's
128k profile: the four at ~51 TFLOP/s, 46% of the truth). CUDA events, best of ``--repeats``; one
JSON line per measurement with its TFLOP/s; ``--truth N``: then the whole truth at length N under each
library. ``python3 scripts/device/long_gemms.py [--truth N]``"""

import argparse
import json

import torch
from cuda_events import best_seconds  # scripts/device/, the script's own folder

from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.chunked import chunked_reference


def variants(h, m, w, d, sk):
    g = torch.Generator(device="cuda").manual_seed(0)
    e = torch.rand(h, m, w, dtype=torch.float64, device="cuda", generator=g)  # E or dS [heads, rows, keys]
    v = torch.randn(h, sk, d, dtype=torch.float64, device="cuda", generator=g)[:, :w]  # a band of V (K)
    b = torch.randn(h, m, d, dtype=torch.float64, device="cuda", generator=g)  # dO or Q [heads, rows, d]
    acc = torch.zeros(h, sk, d, dtype=torch.float64, device="cuda")  # dV (dK) [heads, keys, d]
    acc_t = torch.zeros(h, d, sk, dtype=torch.float64, device="cuda")  # the same, transposed
    return {
        "PV bmm(E, V) [committed]": lambda: torch.bmm(e, v),
        "PV bmm(V^T, E^T)^T": lambda: torch.bmm(v.transpose(1, 2), e.transpose(1, 2)).transpose(1, 2),
        "dV acc.baddbmm_(E^T, dO) [committed]": lambda: acc[:, :w].baddbmm_(e.transpose(1, 2), b),
        "dV acc^T.baddbmm_(dO^T, E)": lambda: acc_t[:, :, :w].baddbmm_(b.transpose(1, 2), e),
        "dV acc += bmm(E^T, dO)": lambda: acc[:, :w].add_(torch.bmm(e.transpose(1, 2), b)),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--keys", type=int, action="append", help="band widths (default 32768 and 65536)")
    ap.add_argument("--truth", type=int, action="append", help="also the whole truth at this length, per library")
    a = ap.parse_args()
    h, m, d = 8, 2048, 128
    for w in a.keys or (32768, 65536):
        for lib in ("cublas", "cublaslt"):
            torch.backends.cuda.preferred_blas_library(lib)
            for name, fn in variants(h, m, w, d, 2 * w).items():
                row = {"keys": w, "blas": lib, "variant": name}
                try:
                    s = best_seconds(fn, a.repeats)
                    row.update(ms=round(s * 1e3, 3), tflops=round(2 * h * m * w * d / s / 1e12, 1))
                except Exception as ex:
                    row["error"] = f"{type(ex).__name__}: {ex}"[:200]
                print(json.dumps(row), flush=True)
            torch.cuda.empty_cache()
    torch.backends.cuda.preferred_blas_library("cublas")
    for s in a.truth or ():  # the whole truth under each library, called alternately
        p = Problem(seqlen_q=s, seqlen_k=s, heads_q=8, heads_kv=8, head_dim_qk=128, head_dim_v=128,
                    dtype="bfloat16", causal=True).validate()
        x = make_inputs(p, "cuda")
        times = {"cublas": [], "cublaslt": []}
        for _ in range(a.repeats):
            for lib, t in times.items():
                torch.backends.cuda.preferred_blas_library(lib)
                t.append(best_seconds(lambda: chunked_reference(x, "float64", magnitudes=True), 1))
        torch.backends.cuda.preferred_blas_library("cublas")
        print(json.dumps({"truth_seqlen": s, **{f"{k}_best_s": min(v) for k, v in times.items()}, "times": times}),
              flush=True)


if __name__ == "__main__":
    main()
