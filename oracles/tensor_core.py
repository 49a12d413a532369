"""An FP8 tensor core's accumulator, emulated: the GEMM a Hopper FP8 kernel cannot avoid.

Hopper's FP8 MMA (wgmma with e4m3/e5m2 operands, float32 accumulator) does not add in
float32. Per step it takes ``group`` products, exact, and the accumulator, aligns them to the
largest of their exponents (a product's is the sum of its operands' exponents: its significand
lies in [1, 4)), keeps ``frac_bits`` bits below that bit (the rest is cut off, toward zero),
and adds: an accumulator of about 13 fraction bits, not float32's 23
(DeepSeek-V3's report, "about 14 bits"; Khattak and Mikaitis, "Accurate Models of NVIDIA
Tensor Cores", arXiv 2512.07004, an e8m13 accumulator with truncation on the H100). So
every FP8 attention kernel on Hopper that keeps its accumulator in the tensor core across a
K loop (cuDNN's sdpa_fp8 for S = Q K^T, whose K is the head dim) carries a relative error of
order 2^-13 of the largest term per step where the yardstick's float32 GEMM carries 2^-24:
S off by ~|S| 2^-13 moves the LSE by that much and P by that factor, which a float32
yardstick calls a bug (results/fp8.md: cuDNN's LSE 2e-4..2e-2 off, growing with |S|).

``mma_matmul`` is that GEMM on any device. It adds in the operands' own float type, which is
exact wherever each product is (float32: operands of at most 12 significant bits each, as FP8
values times power-of-two scales are; a step's aligned terms are integers below 2^(frac_bits+1)
in units of the step's quantum, so their sum of group + 1 fits float32's 24 bits). ``group``
and ``frac_bits`` are parameters because a model is only as good as its measurement:
results/fp8.md records how often this one reproduces the H200's own FP8 GEMM bit for bit
(compared there with torch._scaled_mm).
"""

import torch

F64 = torch.float64
HOPPER_GROUP = 32  # products per step (the K of one m64nNk32 FP8 wgmma)
HOPPER_FRAC_BITS = 13  # bits kept below the leading bit of the step's largest term
MAX_ELEMS = 1 << 25  # aligned terms per chunk of rows (128 MiB in float32)
NO_EXPONENT = -(1 << 20)  # a zero's exponent: below every other, never the step's largest


def _exponent(x: torch.Tensor) -> torch.Tensor:
    """The exponent of each element's leading bit (2^e <= |x| < 2^(e+1)); very negative for 0."""
    e = torch.frexp(x)[1] - 1
    return torch.where(x != 0, e, torch.full_like(e, NO_EXPONENT))


def _pow2(e: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """2^e for integer e in [-126, 126], built from its bits (exact, unlike a library exp2)."""
    if dtype == F64:
        return ((e.to(torch.int64) + 1023) << 52).view(F64)
    return ((e.to(torch.int32) + 127) << 23).view(torch.float32)


def _step(acc, a, b, ea, eb, frac_bits: int, cut):
    """acc [..., M, N] (None: nothing added yet) plus the products of a [..., M, 1, G] and
    b [..., 1, N, G], whose exponent sums are ea + eb: every term cut toward zero to the quantum
    2^(E - frac_bits), E the largest of the products' exponent sums and the accumulator's
    exponent, then added exactly. (Zeros' exponents sum below every other: never the largest.)
    ``cut`` cuts the aligned terms toward zero (see ``_cutter``)."""
    top = (ea + eb).amax(dim=-1)
    if acc is not None:
        top = torch.maximum(top, _exponent(acc))
    # 1 / quantum, a power of two, at most 2^126 (float32's range: a quantum below float32's
    # smallest normal number cuts what is below it to 0, as a flush-to-zero accumulator would)
    inv = _pow2((frac_bits - top).clamp(min=-126, max=126), a.dtype)
    total = cut((a * b).mul_(inv.unsqueeze(-1))).sum(dim=-1)
    if acc is not None:
        total += cut(acc * inv)
    return total.to(a.dtype).div_(inv)


def _cutter(a, b, ea, eb, group: int, frac_bits: int):
    """How a step cuts its aligned terms toward zero: by converting them to integers where that
    is exact (every term finite and below 2^(frac_bits + 2) in quanta, their sum within the float
    type's significand: the same bits as torch.trunc, several times faster on a CPU), else trunc."""
    digits = 24 if a.dtype == torch.float32 else 53
    small = frac_bits + 2 + (group + 1).bit_length() <= digits and frac_bits + 2 <= 31
    # products below 2^126 are finite and never meet the quantum's lower clamp
    if (
        small
        and a.numel()
        and b.numel()
        and int(ea.max()) + int(eb.max()) <= 124
        and bool(torch.isfinite(a).all())
        and bool(torch.isfinite(b).all())
    ):
        return lambda t: t.to(torch.int32)
    return torch.trunc


def mma_matmul(
    a: torch.Tensor, b: torch.Tensor, group: int = HOPPER_GROUP, frac_bits: int = HOPPER_FRAC_BITS
) -> torch.Tensor:
    """a [..., M, K] @ b [..., K, N] as an FP8 tensor core's accumulator adds (module
    docstring), in float64 if either operand is, else float32 (exact for FP8 operands).
    Chunked over M so no step holds more than MAX_ELEMS aligned terms."""
    dt = F64 if F64 in (a.dtype, b.dtype) else torch.float32
    a, b = a.to(dt), b.to(dt)
    if a.shape[:-2] != b.shape[:-2]:
        batch = torch.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        a, b = a.expand(*batch, *a.shape[-2:]), b.expand(*batch, *b.shape[-2:])
    batch = a.shape[:-2]
    bt = b.transpose(-1, -2)  # [..., N, K]
    m, k, n = a.shape[-2], a.shape[-1], bt.shape[-2]
    out = torch.empty(*batch, m, n, dtype=dt, device=a.device)
    ea, eb = _exponent(a), _exponent(bt)
    cut = _cutter(a, bt, ea, eb, group, frac_bits)
    # [..., M, 1, K] against [..., 1, N, K]
    a, bt, ea, eb = a.unsqueeze(-2), bt.unsqueeze(-3), ea.unsqueeze(-2), eb.unsqueeze(-3)
    rows = max(1, MAX_ELEMS // max(1, group * n * max(1, batch.numel())))
    for r0 in range(0, m, rows):
        acc = None
        r = slice(r0, r0 + rows)
        for k0 in range(0, k, group):
            g = slice(k0, k0 + group)
            acc = _step(acc, a[..., r, :, g], bt[..., g], ea[..., r, :, g], eb[..., g], frac_bits, cut)
        out[..., r, :] = 0 if acc is None else acc
    return out
