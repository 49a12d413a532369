"""The float64 truth's score-sized elementwise passes, fused into two Triton kernels.

On an H200 the eager truth (chunked.py) spent ~44% of a 16k causal call in elementwise
passes over the [heads, rows, keys] float64 scores (results/h200/phase8.md, R13's profile):
the exponential, the row sum, then dS = E (dP - Delta) and the error-budget terms
(P = E / rowsum and P |dP|, in float32), each a separate read and write of the score tensor
(72 bytes per score element for the second group alone). Two kernels do the same arithmetic
in one pass each:

- ``exp_rowsum_``: E = exp(S - shift) in place of S and each row's sum (16 bytes per score
  element instead of 24);
- ``ds_and_terms_``: dS = (dP - Delta) E in place of dP and, when the terms are wanted,
  P = E * inv and P (|dP| + |Delta|) in the terms' dtype (32 bytes instead of 72). Eager,
  that sum took three passes, so CUDA split it into P |dP| and |Delta| P at the price of
  two more GEMMs (chunked.SPLIT_TERMS); fused it is free, and the four magnitude GEMMs of
  the unsplit form read 16 bytes per score instead of the split form's six reading 24.

Same operations in the same order as the eager code, element by element, so dS and the
terms (of the unsplit form) are the eager values bit for bit; E may differ from torch's exp
in the last bit where the two libraries' exp differ (numpy's under the interpreter), and
the row sums by summation order (tests/test_fused_passes.py: the truth with and without
them within 1e-14 relative, and both equal to the dense float64 autograd reference).

chunked.py imports this module (and with it Triton) only when it uses it: the CPU path and
machines without Triton never need it. With ``TRITON_INTERPRET=1`` set before this module is
imported, the kernels run on CPU tensors, which is how CI tests them.
"""

import torch
import triton
import triton.language as tl

BLOCK = 1024  # columns of one row per program (a row's sum: one partial sum per block, then torch)


@triton.jit
def _add(a, b):
    return a + b


# Only core builtins and this module's own jit functions, and no loop over a runtime bound: the
# interpreter (tests) runs a jit function only if it was decorated with TRITON_INTERPRET set
# (triton.language's own tl.zeros, tl.sum were decorated when Triton was first imported), and
# Triton 3.6's interpreter cannot take a runtime scalar as a range() bound under numpy 2.4.
@triton.jit(do_not_specialize=["w", "nblocks"])  # one compiled kernel for every chunk width
def _exp_rowsum_kernel(s_ptr, shift_ptr, part_ptr, w, nblocks, HAS_SHIFT: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    blk = tl.program_id(1).to(tl.int64)
    offs = blk * BLOCK + tl.arange(0, BLOCK)
    ok = offs < w
    at = row * w + offs
    x = tl.load(s_ptr + at, mask=ok, other=float("-inf"))
    if HAS_SHIFT:
        x = x - tl.load(shift_ptr + row)
    e = tl.exp(x)
    tl.store(s_ptr + at, e, mask=ok)
    tl.store(part_ptr + row * nblocks + blk, tl.reduce(tl.where(ok, e, 0.0), 0, _add))


@triton.jit(do_not_specialize=["w"])
def _ds_terms_kernel(dp_ptr, e_ptr, delta_ptr, inv_ptr, pm_ptr, g_ptr, w, TERMS: tl.constexpr,
                     BLOCK: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < w
    at = row * w + offs
    dp = tl.load(dp_ptr + at, mask=ok, other=0.0)
    e = tl.load(e_ptr + at, mask=ok, other=0.0)
    d = tl.load(delta_ptr + row)
    tl.store(dp_ptr + at, (dp - d) * e, mask=ok)
    if TERMS:
        tdt = pm_ptr.dtype.element_ty
        pm = (e * tl.load(inv_ptr + row)).to(tdt)  # P, rounded as stored
        tl.store(pm_ptr + at, pm, mask=ok)
        tl.store(g_ptr + at, (tl.abs(dp).to(tdt) + tl.abs(d).to(tdt)) * pm, mask=ok)  # P (|dP| + |Delta|)


def _rows(t: torch.Tensor) -> tuple[int, int]:
    if not t.is_contiguous():
        raise ValueError("fused passes: contiguous score tensors only")
    w = t.shape[-1]
    return t.numel() // max(1, w), w


def exp_rowsum_(s: torch.Tensor, shift: torch.Tensor | None = None) -> torch.Tensor:
    """E = exp(S - shift) in place of the float64 scores ``s`` (rows along the last dim;
    ``shift``: one value per row, None for none) and the row sums, shaped s.shape[:-1]."""
    n, w = _rows(s)
    if n == 0 or w == 0:
        return torch.zeros(s.shape[:-1], dtype=s.dtype, device=s.device)
    nb = triton.cdiv(w, BLOCK)
    part = torch.empty(n, nb, dtype=s.dtype, device=s.device)
    sh = part if shift is None else shift.contiguous()
    _exp_rowsum_kernel[(n, nb)](s, sh, part, w, nb, HAS_SHIFT=shift is not None, BLOCK=BLOCK)
    return part.sum(dim=-1).view(s.shape[:-1])


def ds_and_terms_(dp: torch.Tensor, e: torch.Tensor, delta: torch.Tensor, inv: torch.Tensor | None = None,
                  terms_dtype: torch.dtype | None = None) -> tuple[torch.Tensor, torch.Tensor] | None:
    """dS = (dP - Delta) E in place of ``dp`` (``delta``: one value per row). With
    ``terms_dtype``: also P = E * inv (``inv``: 1 / rowsum per row) and the error-budget
    terms P (|dP| + |Delta|), both in that dtype (computed in it, as chunked.py's eager
    form does), returned as (P, terms)."""
    n, w = _rows(dp)
    if e.shape != dp.shape or not e.is_contiguous():
        raise ValueError("fused passes: E must be contiguous and shaped like dP")
    terms = terms_dtype is not None
    pm = torch.empty(dp.shape, dtype=terms_dtype, device=dp.device) if terms else dp
    g = torch.empty(dp.shape, dtype=terms_dtype, device=dp.device) if terms else dp
    if n and w:
        iv = inv.contiguous() if terms else delta
        _ds_terms_kernel[(n, triton.cdiv(w, BLOCK))](dp, e, delta.contiguous(), iv, pm, g, w, TERMS=terms,
                                                     BLOCK=BLOCK)
    return (pm, g) if terms else None
