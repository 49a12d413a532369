"""Is a fused float64 flash-style truth worth writing in Triton? The float64 GEMM rate of
Triton's tl.dot next to cuBLAS (torch.mm) on this GPU, at a large square GEMM and at the
shapes a flash backward's tiles multiply (a [rows, 128] by [128, keys] product accumulated
over many key blocks). ``python3 scripts/device/f64_dot.py`` prints TFLOP/s per row."""

import torch
import triton
import triton.language as tl
from cuda_events import best_seconds  # scripts/device/, the script's own folder


@triton.jit
def _mm(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, IEEE: tl.constexpr):
    pm, pn = tl.program_id(0), tl.program_id(1)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.full([BM, BN], 0.0, tl.float64)
    for k0 in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=(rm[:, None] < M) & (k0 + rk[None, :] < K),
                    other=0.0)
        b = tl.load(b_ptr + (k0 + rk)[:, None] * N + rn[None, :], mask=(k0 + rk[:, None] < K) & (rn[None, :] < N),
                    other=0.0)
        if IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee", out_dtype=tl.float64)
        else:
            acc = tl.dot(a, b, acc, out_dtype=tl.float64)  # the default out_dtype, float32, is refused
    tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


FULL_ERROR_SHOWN = []


def _row(M, N, K):
    a = torch.randn(M, K, dtype=torch.float64, device="cuda")
    b = torch.randn(K, N, dtype=torch.float64, device="cuda")
    c = torch.empty(M, N, dtype=torch.float64, device="cuda")
    flop = 2 * M * N * K
    t = best_seconds(lambda: torch.mm(a, b, out=c))
    ref = c.clone()
    print(f"M{M} N{N} K{K} cublas {flop / t / 1e12:6.1f} TFLOP/s")
    for ieee in (False, True):
        for bm, bn, bk, warps, stages in ((64, 64, 16, 4, 3), (128, 64, 16, 4, 3), (64, 128, 32, 8, 3),
                                          (128, 128, 16, 8, 2)):
            tag = f"M{M} N{N} K{K} triton {bm}x{bn}x{bk} w{warps} s{stages} ieee={ieee}"
            try:
                grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
                t = best_seconds(lambda: _mm[grid](a, b, c, M, N, K, BM=bm, BN=bn, BK=bk, IEEE=ieee, num_warps=warps,
                                             num_stages=stages))
                err = ((c - ref).abs().max() / ref.abs().max()).item()
                print(f"{tag} {flop / t / 1e12:6.1f} TFLOP/s rel err {err:.1e}")
            except Exception as e:  # a configuration that does not compile is a line, not a crash
                msg = " | ".join(line.strip() for line in str(e).splitlines() if line.strip())
                print(f"{tag}: {type(e).__name__}: ...{msg[-300:]}")
                if not FULL_ERROR_SHOWN:
                    FULL_ERROR_SHOWN.append(1)
                    print(str(e), "\ncause:", repr(e.__cause__))


def main():
    print(torch.cuda.get_device_name(), "torch", torch.__version__, "triton", triton.__version__)
    for M, N, K in ((8192, 8192, 8192), (16384, 16384, 128), (16384, 128, 16384)):
        _row(M, N, K)
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
