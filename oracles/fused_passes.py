"""The float64 truth's score-sized elementwise passes, fused into Triton kernels.

On an H200 the eager truth (chunked.py) spent ~44% of a 16k causal call in elementwise
passes over the [heads, rows, keys] float64 scores (a torch profile of that call):
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

Where the softmax shift is chunked.py's bound, two more kernels also compute the GEMM whose
output the pass reads (``scores_exp``: S = Q K^T, then exp and the row sums; ``dp_ds_and_terms_``:
dP = dO V^T, then dS in place of E and the terms), so neither product is ever stored; the
products' summation order then differs from cuBLAS's in the last bits (tests: the same 1e-14).
bfloat16 terms (chunked.MAGNITUDES_DTYPE on CUDA) are computed in float64 and rounded once.

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

from difftest.execute import timing

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


@triton.jit
def _bf16_bits(x):
    """float32 x rounded to bfloat16 (to nearest, ties to even), as int16 bits: Triton's
    interpreter stores no bfloat16 (numpy has none), so the terms are stored as their bits."""
    u = x.to(tl.uint32, bitcast=True)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).to(tl.uint16).to(tl.int16, bitcast=True)


@triton.jit
def _store_terms(pm_ptr, g_ptr, at, ok, e, inv, dp, d, BF16: tl.constexpr):
    """P = E inv and the terms P (|dP| + |Delta|), stored in the terms' dtype: float32 (or
    float64) computed in it, as chunked.py's eager form does; bfloat16 computed in float64
    and rounded once (through float32, whose rounding the bfloat16 one swamps)."""
    if BF16:
        p = e * inv
        tl.store(pm_ptr + at, _bf16_bits(p.to(tl.float32)), mask=ok)
        tl.store(g_ptr + at, _bf16_bits(((tl.abs(dp) + tl.abs(d)) * p).to(tl.float32)), mask=ok)
    else:
        tdt = pm_ptr.dtype.element_ty
        pm = (e * inv).to(tdt)  # P, rounded as stored
        tl.store(pm_ptr + at, pm, mask=ok)
        tl.store(g_ptr + at, (tl.abs(dp).to(tdt) + tl.abs(d).to(tdt)) * pm, mask=ok)  # P (|dP| + |Delta|)


@triton.jit(do_not_specialize=["w"])
def _ds_terms_kernel(
    dp_ptr, e_ptr, delta_ptr, inv_ptr, pm_ptr, g_ptr, w, TERMS: tl.constexpr, BF16: tl.constexpr, BLOCK: tl.constexpr
):
    row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < w
    at = row * w + offs
    dp = tl.load(dp_ptr + at, mask=ok, other=0.0)
    e = tl.load(e_ptr + at, mask=ok, other=0.0)
    d = tl.load(delta_ptr + row)
    tl.store(dp_ptr + at, (dp - d) * e, mask=ok)
    if TERMS:
        _store_terms(pm_ptr, g_ptr, at, ok, e, tl.load(inv_ptr + row), dp, d, BF16)


# The two score-sized float64 GEMMs with K = head dim (S = Q K^T and dP = dO V^T) fused with the
# passes that consume their output, so the product never goes to memory: one tile of BM query
# rows x BN keys per program, the head dim in steps of BK (a compile-time loop), float64 tl.dot
# (float64 tensor cores on sm90: 94% of cuBLAS's speed at these shapes, measured on the H200).
# On the H200 (the 64k chunk shape) they take 4.30 and 5.94 ms where
# cuBLAS's GEMM and the unfused pass take 3.37 + 2.53 and 3.37 + 4.09 ms; the truth at 64k is 16%
# faster than with the passes alone, and neither score-sized product is allocated (128k: 41 GiB
# peak against 57).
# Tiles from sweeps on the H200 (29 configs, each kernel alone at the 64k truth's chunk shape):
# 32 x 64 x 16 is the fastest or within 2% of it for both kernels; 64 x 128 and 128 x 64 ran 3x
# slower (the float64 accumulators spill).
GEMM_TILES = {
    "scores_exp": {"BM": 32, "BN": 64, "BK": 16, "num_warps": 2, "num_stages": 3},
    "dp_ds": {"BM": 32, "BN": 64, "BK": 16, "num_warps": 4, "num_stages": 3},
}


@triton.jit
def _qk_tile(a_ptr, b_ptr, rows, cols, M, w, D, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, BD: tl.constexpr):
    """[BM, BN] float64: rows of A [M, D] times rows of B [w, D], transposed (row stride D)."""
    rk = tl.arange(0, BK)
    acc = tl.full([BM, BN], 0.0, tl.float64)
    for k0 in range(0, BD, BK):
        a = tl.load(
            a_ptr + rows[:, None].to(tl.int64) * D + (k0 + rk)[None, :],
            mask=(rows[:, None] < M) & ((k0 + rk)[None, :] < D),
            other=0.0,
        )
        b = tl.load(
            b_ptr + cols[None, :].to(tl.int64) * D + (k0 + rk)[:, None],
            mask=(cols[None, :] < w) & ((k0 + rk)[:, None] < D),
            other=0.0,
        )
        acc = tl.dot(a, b, acc, out_dtype=tl.float64)
    return acc


# The sizes and strides that address memory (D, w, a_bs, b_bs, nbn) are left to Triton's
# specialisation, which compiles one variant per "divisible by 16" pattern and so knows when rows
# are aligned enough for vector loads and stores. With them unspecialised this kernel took 5.42 ms
# at the 64k chunk shape, 4.30 ms specialised (dp_ds 7.7 -> 5.9 ms; H200). Row counts and mask
# offsets vary with every chunk and never address memory alone: one variant for all of them. A
# campaign's varied problems still meet many patterns, so chunked.FUSED_GEMM_MIN_SCORES keeps these
# kernels to chunks large enough to pay for their compiles.
@triton.jit(do_not_specialize=["M", "G", "base", "left", "right"])
def _scores_exp_kernel(
    a_ptr,
    b_ptr,
    shift_ptr,
    e_ptr,
    part_ptr,
    M,
    w,
    D,
    G,
    nbn,
    a_bs,
    b_bs,
    base,
    left,
    right,
    HAS_LEFT: tl.constexpr,
    HAS_RIGHT: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    BD: tl.constexpr,
):
    h = tl.program_id(2).to(tl.int64)
    pn = tl.program_id(1)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = pn * BN + tl.arange(0, BN)
    x = _qk_tile(a_ptr + h * a_bs, b_ptr + h * b_bs, rows, cols, M, w, D, BM, BN, BK, BD)
    x = x - tl.load(shift_ptr + h * M + rows, mask=rows < M, other=0.0)[:, None]
    inside = (rows[:, None] < M) & (cols[None, :] < w)
    ok = inside
    if HAS_LEFT or HAS_RIGHT:  # key col against query row base + row // G (scores_exp)
        rel = cols[None, :] - (base + rows // G)[:, None]
        if HAS_RIGHT:
            ok = ok & (rel < right)
        if HAS_LEFT:
            ok = ok & (rel >= -left)
    e = tl.where(ok, tl.exp(x), 0.0)  # a masked score is exp(-inf) = 0, as the eager -inf fill gives
    at = (h * M + rows)[:, None].to(tl.int64) * w + cols[None, :]
    tl.store(e_ptr + at, e, mask=inside)
    tl.store(part_ptr + (h * M + rows).to(tl.int64) * nbn + pn, tl.reduce(e, 1, _add), mask=rows < M)


@triton.jit(do_not_specialize=["M"])  # as _scores_exp_kernel
def _dp_ds_terms_kernel(
    a_ptr,
    b_ptr,
    e_ptr,
    delta_ptr,
    inv_ptr,
    pm_ptr,
    g_ptr,
    M,
    w,
    D,
    a_bs,
    b_bs,
    TERMS: tl.constexpr,
    BF16: tl.constexpr,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    BD: tl.constexpr,
):
    h = tl.program_id(2).to(tl.int64)
    rows = tl.program_id(0) * BM + tl.arange(0, BM)
    cols = tl.program_id(1) * BN + tl.arange(0, BN)
    inside = (rows[:, None] < M) & (cols[None, :] < w)
    at = (h * M + rows)[:, None].to(tl.int64) * w + cols[None, :]
    e = tl.load(e_ptr + at, mask=inside, other=0.0)  # issued before the product, so its latency can overlap it
    dp = _qk_tile(a_ptr + h * a_bs, b_ptr + h * b_bs, rows, cols, M, w, D, BM, BN, BK, BD)
    d = tl.load(delta_ptr + h * M + rows, mask=rows < M, other=0.0)[:, None]
    tl.store(e_ptr + at, (dp - d) * e, mask=inside)  # dS in place of E
    if TERMS:
        inv = tl.load(inv_ptr + h * M + rows, mask=rows < M, other=0.0)[:, None]
        _store_terms(pm_ptr, g_ptr, at, inside, e, inv, dp, d, BF16)


def _start(kernel, grid, *args, **kwargs) -> None:
    """Launch ``kernel`` on ``grid``. A specialisation it has not met in this process is first
    compiled (or loaded from Triton's disk cache: seconds) by ``warmup``, in the campaign's
    "truth_compile" phase, so a time split tells the truth's one-time builds from its work; for a
    known one ``warmup`` only finds it (microseconds). The interpreter's ``warmup`` does nothing."""
    with timing.phase("truth_compile"):
        kernel.warmup(*args, grid=grid, **kwargs)
    kernel[grid](*args, **kwargs)


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
    _start(_exp_rowsum_kernel, (n, nb), s, sh, part, w, nb, HAS_SHIFT=shift is not None, BLOCK=BLOCK)
    return part.sum(dim=-1).view(s.shape[:-1])


def ds_and_terms_(
    dp: torch.Tensor,
    e: torch.Tensor,
    delta: torch.Tensor,
    inv: torch.Tensor | None = None,
    terms_dtype: torch.dtype | None = None,
) -> tuple[torch.Tensor, torch.Tensor] | None:
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
        _start(
            _ds_terms_kernel,
            (n, triton.cdiv(w, BLOCK)),
            dp,
            e,
            delta.contiguous(),
            iv,
            *_terms_out(pm, g),
            w,
            TERMS=terms,
            BF16=terms_dtype == torch.bfloat16,
            BLOCK=BLOCK,
        )
    return (pm, g) if terms else None


def _terms_out(pm: torch.Tensor, g: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The terms' outputs as the kernels write them: bfloat16 ones as their int16 bits."""
    return (pm.view(torch.int16), g.view(torch.int16)) if pm.dtype == torch.bfloat16 else (pm, g)


def _heads_rows_dim(t: torch.Tensor, what: str) -> tuple[int, int, int, int]:
    """(heads, rows, dim, head stride) of a [heads, rows, dim] operand whose rows are dense."""
    if t.dim() != 3 or t.stride(2) != 1 or t.stride(1) != t.shape[2]:
        raise ValueError(f"fused GEMMs: {what} must be [heads, rows, dim] with dense rows")
    return t.shape[0], t.shape[1], t.shape[2], t.stride(0)


def _launch(kernel, tile: dict, h: int, m: int, w: int, *args, BD: int, **const):
    grid = (triton.cdiv(m, tile["BM"]), triton.cdiv(w, tile["BN"]), h)
    _start(
        kernel,
        grid,
        *args,
        **const,
        BM=tile["BM"],
        BN=tile["BN"],
        BK=tile["BK"],
        BD=max(BD, tile["BK"]),
        num_warps=tile["num_warps"],
        num_stages=tile["num_stages"],
    )


def scores_exp(q: torch.Tensor, k: torch.Tensor, shift: torch.Tensor, mask=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(E, row sums): E = exp(q k^T - shift) [heads, rows, keys] float64, each masked score 0,
    without the scores S = q k^T ever stored. ``q`` [heads, rows, dim] (the softmax scale
    already applied), ``k`` [heads, keys, dim], ``shift`` one value per (head, row) with
    S - shift <= 0 (chunked.py's bound). ``mask``: None (every score seen) or
    (base, group, left, right): row r (query base + r // group) sees key j (0-based in ``k``)
    iff -left <= j - (base + r // group) < right, a bound None for none."""
    h, m, d, q_bs = _heads_rows_dim(q, "q")
    hk, w, dk, k_bs = _heads_rows_dim(k, "k")
    if (hk, dk) != (h, d) or shift.numel() != h * m:
        raise ValueError("fused GEMMs: q, k and shift disagree on heads, rows or dim")
    e = torch.empty(h, m, w, dtype=torch.float64, device=q.device)
    tile = GEMM_TILES["scores_exp"]
    nbn = triton.cdiv(w, tile["BN"])
    part = torch.empty(h, m, nbn, dtype=torch.float64, device=q.device)
    if h and m and w:
        base, group, left, right = mask if mask is not None else (0, 1, None, None)
        _launch(
            _scores_exp_kernel,
            tile,
            h,
            m,
            w,
            q,
            k,
            shift.contiguous(),
            e,
            part,
            m,
            w,
            d,
            group,
            nbn,
            q_bs,
            k_bs,
            base,
            left or 0,
            right or 0,
            BD=triton.next_power_of_2(d),
            HAS_LEFT=left is not None,
            HAS_RIGHT=right is not None,
        )
    return e, part.sum(dim=-1)


def dp_ds_and_terms_(
    do: torch.Tensor,
    v: torch.Tensor,
    e: torch.Tensor,
    delta: torch.Tensor,
    inv: torch.Tensor | None = None,
    terms_dtype: torch.dtype | None = None,
):
    """dS = (dP - Delta) E in place of ``e`` [heads, rows, keys] float64, with dP = do v^T
    (``do`` [heads, rows, dim], ``v`` [heads, keys, dim]) never stored; with ``terms_dtype``
    also (P, P (|dP| + |Delta|)) as ds_and_terms_ returns them."""
    h, m, d, do_bs = _heads_rows_dim(do, "dO")
    hv, w, dv, v_bs = _heads_rows_dim(v, "V")
    if (hv, dv) != (h, d) or e.shape != (h, m, w) or not e.is_contiguous():
        raise ValueError("fused GEMMs: dO, V and E disagree, or E is not contiguous")
    terms = terms_dtype is not None
    pm = torch.empty(e.shape, dtype=terms_dtype, device=e.device) if terms else e
    g = torch.empty(e.shape, dtype=terms_dtype, device=e.device) if terms else e
    if h and m and w:
        iv = inv.contiguous() if terms else delta
        _launch(
            _dp_ds_terms_kernel,
            GEMM_TILES["dp_ds"],
            h,
            m,
            w,
            do,
            v,
            e,
            delta.contiguous(),
            iv,
            *_terms_out(pm, g),
            m,
            w,
            d,
            do_bs,
            v_bs,
            BD=triton.next_power_of_2(d),
            TERMS=terms,
            BF16=terms_dtype == torch.bfloat16,
        )
    return (pm, g) if terms else None
