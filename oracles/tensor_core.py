"""An FP8 tensor core's accumulator, emulated: the GEMM a Hopper FP8 kernel cannot avoid.

Hopper's FP8 MMA (wgmma with e4m3/e5m2 operands, float32 accumulator) does not add in
float32. Per step it takes ``group`` products, exact, and the accumulator, aligns them to the
largest of their exponents, keeps ``frac_bits`` bits below that leading bit (the rest is cut
off, toward zero), and adds: an accumulator of about 13 fraction bits, not float32's 23
(DeepSeek-V3's report, "about 14 bits"; Khattak and Mikaitis, "Accurate Models of NVIDIA
Tensor Cores", arXiv 2512.07004, an e8m13 accumulator with truncation on the H100). So
every FP8 attention kernel on Hopper that keeps its accumulator in the tensor core across a
K loop (cuDNN's sdpa_fp8 for S = Q K^T, whose K is the head dim) carries a relative error of
order 2^-13 of the largest term per step where the yardstick's float32 GEMM carries 2^-24:
S off by ~|S| 2^-13 moves the LSE by that much and P by that factor, which a float32
yardstick calls a bug (results/fp8.md: cuDNN's LSE 2e-4..2e-2 off, growing with |S|).

``mma_matmul`` is that GEMM on any device, in float64 arithmetic exact for FP8 operands with
power-of-two scales (each product has at most 8 significant bits; a step's aligned terms
fit 53 bits). ``group`` and ``frac_bits`` are parameters because a model is only as good as
its measurement: results/h200 records which values reproduce the H200's own FP8 GEMM bit
for bit (scripts there compare against torch._scaled_mm with fast accumulation).
"""

import torch

F64 = torch.float64
HOPPER_GROUP = 32  # products per step (the K of one m64nNk32 FP8 wgmma)
HOPPER_FRAC_BITS = 13  # bits kept below the leading bit of the step's largest term
MAX_ELEMS = 1 << 25  # float64 elements per chunk of aligned terms (256 MiB)


def _step(acc: torch.Tensor, prods: torch.Tensor, frac_bits: int) -> torch.Tensor:
    """acc [..., M, N] plus prods [..., M, G, N], aligned to the largest exponent and cut."""
    terms = torch.cat([acc.unsqueeze(-2), prods], dim=-2)
    top = terms.abs().amax(dim=-2, keepdim=True)
    _, e = torch.frexp(top)  # top = m 2^e, m in [0.5, 1): the leading bit is 2^(e-1)
    quantum = torch.ldexp(torch.ones_like(top), e - 1 - frac_bits)
    quantum = torch.where(top > 0, quantum, torch.ones_like(top))
    return (torch.trunc(terms / quantum) * quantum).sum(dim=-2)


def mma_matmul(a: torch.Tensor, b: torch.Tensor, group: int = HOPPER_GROUP,
               frac_bits: int = HOPPER_FRAC_BITS) -> torch.Tensor:
    """a [..., M, K] @ b [..., K, N] as an FP8 tensor core's accumulator adds (module
    docstring); float64 out (exactly representable in float32: at most frac_bits + 7 bits).
    Chunked over M so no step holds more than MAX_ELEMS aligned terms."""
    a, b = a.to(F64), b.to(F64)
    batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a, b = a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    out = torch.zeros(*batch, m, n, dtype=F64, device=a.device)
    per_row = max(1, (group + 1) * n * max(1, batch.numel()))
    rows = max(1, MAX_ELEMS // per_row)
    for r0 in range(0, m, rows):
        acc = out[..., r0:r0 + rows, :]
        for k0 in range(0, k, group):
            prods = a[..., r0:r0 + rows, k0:k0 + group].unsqueeze(-1) * b[..., k0:k0 + group, :].unsqueeze(-3)
            acc = _step(acc, prods, frac_bits)
        out[..., r0:r0 + rows, :] = acc
    return out
