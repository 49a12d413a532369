"""float32 GEMMs in the summation orders GPU kernels use, as plain torch on any device.

The correct-variant catalogue (``kernels/variants.py``) swaps one of these in for the blockwise
kernel's ``gemm`` hook. Each is ``a @ b`` over the last two dimensions (batched over the rest),
float32 in and out, and differs from ``torch.matmul`` only in where it rounds:

- ``sequential_gemm``: each output element accumulates its K products one at a time, in order,
  in one float32 register (a thread's FFMA loop of an SGEMM);
- ``splitk_gemm``: K split into slices, each slice's GEMM summed separately, the slices' float32
  partials then added in order (cuBLAS/CUTLASS split-K: a reduction after the slices);
- ``fast_f32_gemm``: CUTLASS's ``OpMultiplyAddFastF32`` (3xTF32), the float32 path of PyTorch's
  memory-efficient attention on sm80 and later (mem_eff_attention/gemm_kernel_utils.h,
  "Specialization for tensorcores with f32"): each operand split into a TF32 big part (rounded
  toward zero) and a TF32 small part (the rest, rounded half an ulp up and truncated), and per
  MMA k-step of 8 the products small*big, big*small, big*big added into the float32
  accumulator in that order (cutlass/gemm/warp/mma_tensor_op_fast_f32.h; small*small is
  dropped). A TF32 product is exact in float32, so each step is a float32 GEMM of 8 exact
  products; how the tensor core adds those 8 inside one MMA is not modelled (a float32 sum).
"""

import torch

F32 = torch.float32
TF32_DROPPED_BITS = 13  # float32 keeps 23 fraction bits, TF32 10
MMA_K_TF32 = 8  # K of one TF32 MMA instruction (m16n8k8)


def _out(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.zeros(
        *torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), a.shape[-2], b.shape[-1], dtype=F32, device=a.device
    )


def sequential_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b in float32 with a GPU GEMM's summation order: each output element accumulates
    its K products one at a time, in order, into one float32 register (a thread's FFMA loop of
    an SGEMM), instead of the CPU BLAS's blocked/pairwise tree. Each step is one rounded
    product and one rounded add over the whole output (broadcast, not a K=1 matmul: the same
    bits, without BLAS's per-call cost on the many small tiles of a case)."""
    acc = _out(a, b)
    cols, rows = a.to(F32).unsqueeze(-1), b.to(F32).unsqueeze(-3)  # (..., M, K, 1), (..., 1, K, N)
    for k in range(a.shape[-1]):
        acc += cols[..., k, :] * rows[..., k, :]
    return acc


def splitk_bounds(k: int, slices: int) -> list[tuple[int, int]]:
    """[k0, k1) of each of ``slices`` near-equal K slices (fewer when K is shorter)."""
    n = max(1, min(slices, k))
    edges = [round(i * k / n) for i in range(n + 1)]
    return [(edges[i], edges[i + 1]) for i in range(n)]


def splitk_gemm(a: torch.Tensor, b: torch.Tensor, slices: int = 4) -> torch.Tensor:
    """a @ b with K split into ``slices`` slices: each slice one GEMM on the device (its own
    order), the float32 partials then added left to right into a zeroed output."""
    a, b = a.to(F32), b.to(F32)
    acc = _out(a, b)
    for k0, k1 in splitk_bounds(a.shape[-1], slices):
        acc += torch.matmul(a[..., k0:k1], b[..., k0:k1, :])
    return acc


def _tf32_bits(t: torch.Tensor, add: int) -> torch.Tensor:
    """float32 ``t`` cut to TF32 after adding ``add`` to its bit pattern (0: toward zero; half
    the dropped range: half an ulp up, then truncated, i.e. ties away from zero)."""
    bits = t.contiguous().view(torch.int32)
    mask = -(1 << TF32_DROPPED_BITS)  # ...111110000000000000: sign, exponent, 10 fraction bits
    return ((bits + add) & mask).view(F32) if add else (bits & mask).view(F32)


def tf32_split(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(big, small) with big = t rounded toward zero to TF32 and small = (t - big) rounded half an
    ulp up and truncated to TF32 (CUTLASS's NumericConverterFastF32 with the rounding styles
    MmaTensorOpFastF32 picks). t - big is exact: big keeps a prefix of t's bits."""
    t = t.to(F32)
    big = _tf32_bits(t, 0)
    small = _tf32_bits(t - big, 1 << (TF32_DROPPED_BITS - 1))
    return big, small


def fast_f32_gemm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b as CUTLASS's 3xTF32 ``OpMultiplyAddFastF32`` adds it (module docstring): per k-step
    of 8, acc += a_small b_big, acc += a_big b_small, acc += a_big b_big."""
    (ab, as_), (bb, bs) = tf32_split(a), tf32_split(b)
    acc = _out(a, b)
    for k0 in range(0, a.shape[-1], MMA_K_TF32):
        k1 = k0 + MMA_K_TF32
        acc += torch.matmul(as_[..., k0:k1], bb[..., k0:k1, :])
        acc += torch.matmul(ab[..., k0:k1], bs[..., k0:k1, :])
        acc += torch.matmul(ab[..., k0:k1], bb[..., k0:k1, :])
    return acc
