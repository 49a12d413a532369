"""Our TileLang attention kernels: forward (O, LSE) and backward (Delta preprocess,
main dK/dV/dQ kernel, dQ postprocess, dSink reduction), one source for ``target="c"``
(the CPU, used in CI) and ``target="cuda"`` (the H200).

Layout is always packed THD with ``cu_seqlens`` (a dense problem is the varlen case with
equal lengths). What changes the generated code is a compile argument (dtype, head dims,
sinks, block sizes, dQ strategy, target, mutant); everything else is runtime data so one
build serves many Problems:
  - token counts, batch and head counts are ``T.dynamic``;
  - the longest sequence (grid size) is a scalar ``int32`` argument;
  - the mask is three int32 values ``MP = [window_left, window_right, bottom_right]``
    (causal is window_right = 0; an unbounded side is ``UNBOUNDED``);
  - the softmax scale is ``SC = [scale * log2(e), scale]`` (float32).

Mask rule (problem.py): query i of a sequence sees key j iff
    i + off - window_left <= j <= i + off + window_right,   off = sk - sq (bottom_right) or 0.
Sinks join the softmax denominator: the forward starts its running max at the sink logit
with running sum 1, so the online softmax includes it without a special case.

Target switch (TileLang's CPU backend takes only some GPU forms): on the CPU fragments become
``alloc_local``, shared memory uses scope ``"shared"``, ``T.Parallel`` becomes ``T.grid``
and vectorisation is off; the CUDA build keeps the GPU forms. Both come from the same
function bodies below (closure variables ``frag``, ``SH``, ``Par``).

No ``from __future__ import annotations`` here: TileLang reads the annotations.
"""

import math
from dataclasses import dataclass

import tilelang
import tilelang.language as T

from . import pch
from .tiles import CPU_FLAGS, DQ_MODES, MUTANTS  # noqa: F401  (the names the adapter and the prebuild share)

LOG2E = math.log2(math.e)
LN2 = math.log(2.0)
UNBOUNDED = 1 << 24  # a window side wider than any sequence (keeps int32 index math safe)


@dataclass(frozen=True)
class TargetStyle:
    """The per-target choices that let one kernel body build for the CPU and the GPU."""

    name: str  # "c" or "cuda"

    @property
    def cpu(self) -> bool:
        return self.name == "c"

    @property
    def frag(self):
        return T.alloc_local if self.cpu else T.alloc_fragment

    @property
    def shared_scope(self) -> str:
        return "shared" if self.cpu else "shared.dyn"

    @property
    def par(self):
        return T.grid if self.cpu else T.Parallel

    def loop(self, stages: int):
        """The main loop: software-pipelined on the GPU, a plain loop on the CPU (pipeline
        planning with dynamic trip counts only slows the CPU lowering down)."""
        if self.cpu:
            return lambda *extent: T.serial(*extent)
        return lambda *extent: T.Pipelined(*extent, num_stages=stages)

    def pass_configs(self) -> dict:
        if self.cpu:
            return {"tirx.disable_vectorize": True}
        return {}

    def compile_kwargs(self) -> dict:
        if self.cpu:
            return {
                "target": "c",
                "execution_backend": "cython",
                "compile_flags": [*CPU_FLAGS, *pch.include_flags(CPU_FLAGS)],
                "pass_configs": self.pass_configs(),
            }
        return {"target": "cuda", "pass_configs": self.pass_configs()}


def style(target: str) -> TargetStyle:
    if target not in ("c", "cuda"):
        raise ValueError(f"target={target!r}: allowed 'c' (CPU) or 'cuda'")
    return TargetStyle(target)


# ---------------------------------------------------------------------------- forward
def forward_kernel(
    target: str,
    dtype: str,
    dim_qk: int,
    dim_v: int,
    sinks: bool,
    block_m: int,
    block_n: int,
    threads: int = 128,
    stages: int = 1,
):
    """O [TQ,HQ,Dv] and LSE [TQ,HQ] (float32, natural log, sink included, -inf for a row
    that sees nothing). Rows outside every sequence are left untouched."""
    st = style(target)
    frag, SH, Par = st.frag, st.shared_scope, st.par
    Loop = st.loop(stages)
    acc = "float32"
    BM, BN = block_m, block_n
    TQ, TK, HQ, HKV, NB1 = T.dynamic("TQ TK HQ HKV NB1")
    NEG = -T.infinity(acc)

    @T.prim_func
    def attn_fwd(
        Q: T.Tensor([TQ, HQ, dim_qk], dtype),
        K: T.Tensor([TK, HKV, dim_qk], dtype),
        V: T.Tensor([TK, HKV, dim_v], dtype),
        CUQ: T.Tensor([NB1], "int32"),
        CUK: T.Tensor([NB1], "int32"),
        MP: T.Tensor([3], "int32"),
        SC: T.Tensor([2], "float32"),
        SINK: T.Tensor([HQ], "float32"),
        max_sq: T.int32,
        O: T.Tensor([TQ, HQ, dim_v], dtype),
        LSE: T.Tensor([TQ, HQ], "float32"),
    ):
        with T.Kernel(T.ceildiv(max_sq, BM), HQ, NB1 - 1, threads=threads) as (bx, by, bz):
            Qs = T.alloc_shared([BM, dim_qk], dtype, scope=SH)
            Ks = T.alloc_shared([BN, dim_qk], dtype, scope=SH)
            Vs = T.alloc_shared([BN, dim_v], dtype, scope=SH)
            Ps = T.alloc_shared([BM, BN], dtype, scope=SH)
            s = frag([BM, BN], acc)
            o = frag([BM, dim_v], acc)
            m = frag([BM], acc)
            m_prev = frag([BM], acc)
            m_use = frag([BM], acc)
            alpha = frag([BM], acc)
            l = frag([BM], acc)
            rs = frag([BM], acc)

            # Scalars live in a small int32 buffer: loads from it stay opaque to the
            # index analysis (inlined expressions made some lowering passes explode).
            iv = T.alloc_local([8], "int32")
            iv[0] = CUQ[bz]
            iv[1] = CUQ[bz + 1] - CUQ[bz]
            iv[2] = CUK[bz]
            iv[3] = CUK[bz + 1] - CUK[bz]
            iv[4] = T.if_then_else(MP[2] != 0, iv[3] - iv[1], 0)
            iv[5] = T.max(0, bx * BM + iv[4] - MP[0])  # first visible key of the block
            iv[6] = T.min(iv[3], T.min(iv[1], bx * BM + BM) + iv[4] + MP[1])  # end of visible keys
            iv[7] = by // (HQ // HKV)
            q0 = iv[0]
            sq = iv[1]
            k0 = iv[2]
            sk = iv[3]
            off = iv[4]
            hk = iv[7]
            wl = MP[0]
            wr = MP[1]
            sc2 = SC[0]
            row0 = bx * BM
            kb_lo = iv[5] // BN
            kb_hi = T.if_then_else(row0 < sq and iv[6] > iv[5], T.ceildiv(iv[6], BN), kb_lo)

            for i, d in Par(BM, dim_qk):
                if row0 + i < sq:
                    Qs[i, d] = Q[q0 + row0 + i, by, d]
                else:
                    Qs[i, d] = T.cast(0, dtype)
            T.fill(o, 0)
            if sinks:
                for i in Par(BM):
                    m[i] = SINK[by] * LOG2E
                    l[i] = 1.0
            else:
                for i in Par(BM):
                    m[i] = NEG
                    l[i] = 0.0

            for kb in Loop(kb_lo, kb_hi):
                col0 = kb * BN
                for j, d in Par(BN, dim_qk):
                    if col0 + j < sk:
                        Ks[j, d] = K[k0 + col0 + j, hk, d]
                    else:
                        Ks[j, d] = T.cast(0, dtype)
                for j, d in Par(BN, dim_v):
                    if col0 + j < sk:
                        Vs[j, d] = V[k0 + col0 + j, hk, d]
                    else:
                        Vs[j, d] = T.cast(0, dtype)
                T.clear(s)
                T.gemm(Qs, Ks, s, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for i, j in Par(BM, BN):
                    s[i, j] = T.if_then_else(
                        (row0 + i < sq)
                        and (col0 + j < sk)
                        and (col0 + j >= row0 + i + off - wl)
                        and (col0 + j <= row0 + i + off + wr),
                        s[i, j] * sc2,
                        NEG,
                    )
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in Par(BM):
                    m_use[i] = T.if_then_else(m[i] == NEG, 0.0, m[i])
                    alpha[i] = T.exp2(m_prev[i] - m_use[i])
                for i, j in Par(BM, BN):
                    s[i, j] = T.exp2(s[i, j] - m_use[i])
                T.reduce_sum(s, rs, dim=1)
                for i in Par(BM):
                    l[i] = l[i] * alpha[i] + rs[i]
                for i, d in Par(BM, dim_v):
                    o[i, d] = o[i, d] * alpha[i]
                T.copy(s, Ps)
                T.gemm(Ps, Vs, o, policy=T.GemmWarpPolicy.FullRow)

            for i in Par(BM):
                m_use[i] = T.if_then_else(m[i] == NEG, 0.0, m[i])
            for i, d in Par(BM, dim_v):
                if row0 + i < sq:
                    O[q0 + row0 + i, by, d] = T.cast(T.if_then_else(l[i] > 0, o[i, d] / l[i], 0.0), dtype)
            for i in Par(BM):
                if row0 + i < sq:
                    LSE[q0 + row0 + i, by] = T.if_then_else(l[i] > 0, (T.log2(l[i]) + m_use[i]) * LN2, NEG)

    return attn_fwd


# ---------------------------------------------------------------------------- backward
def preprocess_kernel(
    target: str, dtype: str, dim_v: int, sinks: bool, block_m: int, threads: int = 128, mutant: str = ""
):
    """Delta = rowsum(O * dO) [TQ,HQ] float32; with sinks also the per-row dSink terms
    DSR = -exp(sink - LSE) * Delta (rows outside every sequence untouched)."""
    st = style(target)
    frag, Par = st.frag, st.par
    acc = "float32"
    BM = block_m
    TQ, HQ, NB1 = T.dynamic("TQ HQ NB1")
    sign = 1.0 if mutant == "dsink_sign" else -1.0

    @T.prim_func
    def attn_bwd_pre(
        O: T.Tensor([TQ, HQ, dim_v], dtype),
        dO: T.Tensor([TQ, HQ, dim_v], dtype),
        LSE: T.Tensor([TQ, HQ], "float32"),
        SINK: T.Tensor([HQ], "float32"),
        CUQ: T.Tensor([NB1], "int32"),
        max_sq: T.int32,
        DELTA: T.Tensor([TQ, HQ], "float32"),
        DSR: T.Tensor([TQ, HQ], "float32"),
    ):
        with T.Kernel(T.ceildiv(max_sq, BM), HQ, NB1 - 1, threads=threads) as (bx, by, bz):
            prod = frag([BM, dim_v], acc)
            delta = frag([BM], acc)
            q0 = CUQ[bz]
            sq = CUQ[bz + 1] - q0
            row0 = bx * BM
            for i, d in Par(BM, dim_v):
                if row0 + i < sq:
                    prod[i, d] = T.cast(O[q0 + row0 + i, by, d], acc) * T.cast(dO[q0 + row0 + i, by, d], acc)
                else:
                    prod[i, d] = 0.0
            T.reduce_sum(prod, delta, dim=1)
            for i in Par(BM):
                if row0 + i < sq:
                    DELTA[q0 + row0 + i, by] = delta[i]
            if sinks:
                for i in Par(BM):
                    if row0 + i < sq:
                        DSR[q0 + row0 + i, by] = sign * T.exp(SINK[by] - LSE[q0 + row0 + i, by]) * delta[i]

    return attn_bwd_pre


def dsink_kernel(target: str, chunk: int = 128, threads: int = 128):
    """dSink[h] = sum over all rows of DSR[:, h], in a fixed order (deterministic)."""
    st = style(target)
    frag, Par = st.frag, st.par
    acc = "float32"
    TQ, HQ = T.dynamic("TQ HQ")

    @T.prim_func
    def attn_dsink(
        DSR: T.Tensor([TQ, HQ], "float32"),
        DSINK: T.Tensor([HQ], "float32"),
    ):
        with T.Kernel(HQ, threads=threads) as h:
            part = frag([1, chunk], acc)
            tot = frag([1], acc)
            run = frag([1], acc)
            run[0] = 0.0
            for c in T.serial(T.ceildiv(TQ, chunk)):
                for z, i in Par(1, chunk):
                    if c * chunk + i < TQ:
                        part[z, i] = DSR[c * chunk + i, h]
                    else:
                        part[z, i] = 0.0
                T.reduce_sum(part, tot, dim=1)
                run[0] = run[0] + tot[0]
            DSINK[h] = run[0]

    return attn_dsink


def main_kernel(
    target: str,
    dtype: str,
    dim_qk: int,
    dim_v: int,
    block_m: int,
    block_n: int,
    dq_mode: str,
    threads: int = 256,
    stages: int = 1,
    mutant: str = "",
):
    """One block per (key block, kv head, sequence). It loops over the query heads of its
    group and the query blocks that can see its keys, recomputes P from LSE and writes dK
    (scaled once) and dV directly: no atomics for dK/dV, GQA summed in registers.
    dQ (unscaled, float32): ``atomic`` adds into DQA[TQ,HQ,Dqk]; ``deterministic`` stores
    this key block's partial into DQP[key block, TQ, HQ, Dqk] for an ordered sum later."""
    if dq_mode not in DQ_MODES:
        raise ValueError(f"dq_mode={dq_mode!r}: allowed {DQ_MODES}")
    st = style(target)
    frag, SH, Par = st.frag, st.shared_scope, st.par
    Loop = st.loop(stages)
    acc = "float32"
    BM, BN = block_m, block_n
    TQ, TK, HQ, HKV, NB1, NKB = T.dynamic("TQ TK HQ HKV NB1 NKB")
    det = dq_mode == "deterministic"
    dq_shape = [NKB, TQ, HQ, dim_qk] if det else [TQ, HQ, dim_qk]
    # mutants: faults a campaign must catch (see mutants.py)
    # (plain ints so the kernel body stays free of Python conditionals)
    causal_slack = 1 if mutant == "mask_off_by_one" else 0
    tail_cut = BN if mutant == "tail_block_skipped" else 0  # live block: col0 + cut < sk + (cut > 0)
    tail_one = 1 if mutant == "tail_block_skipped" else 0
    swap = 1 if mutant == "gqa_head_map" else 0  # hq from the wrong (strided) head mapping

    @T.prim_func
    def attn_bwd(
        Q: T.Tensor([TQ, HQ, dim_qk], dtype),
        K: T.Tensor([TK, HKV, dim_qk], dtype),
        V: T.Tensor([TK, HKV, dim_v], dtype),
        dO: T.Tensor([TQ, HQ, dim_v], dtype),
        LSE: T.Tensor([TQ, HQ], "float32"),
        DELTA: T.Tensor([TQ, HQ], "float32"),
        CUQ: T.Tensor([NB1], "int32"),
        CUK: T.Tensor([NB1], "int32"),
        MP: T.Tensor([3], "int32"),
        SC: T.Tensor([2], "float32"),
        max_sk: T.int32,
        DQ: T.Tensor(dq_shape, "float32"),
        dK: T.Tensor([TK, HKV, dim_qk], dtype),
        dV: T.Tensor([TK, HKV, dim_v], dtype),
    ):
        with T.Kernel(T.ceildiv(max_sk, BN), HKV, NB1 - 1, threads=threads) as (bx, by, bz):
            Ks = T.alloc_shared([BN, dim_qk], dtype, scope=SH)
            Vs = T.alloc_shared([BN, dim_v], dtype, scope=SH)
            Qs = T.alloc_shared([BM, dim_qk], dtype, scope=SH)
            dOs = T.alloc_shared([BM, dim_v], dtype, scope=SH)
            Ps = T.alloc_shared([BN, BM], dtype, scope=SH)
            dSs = T.alloc_shared([BN, BM], dtype, scope=SH)
            lse2 = T.alloc_shared([BM], acc, scope=SH)
            dl = T.alloc_shared([BM], acc, scope=SH)
            pT = frag([BN, BM], acc)
            dpT = frag([BN, BM], acc)
            dk = frag([BN, dim_qk], acc)
            dv = frag([BN, dim_v], acc)
            dq = frag([BM, dim_qk], acc)

            iv = T.alloc_local([12], "int32")  # scalars, opaque to index analysis (see fwd)
            iv[0] = CUQ[bz]
            iv[1] = CUQ[bz + 1] - CUQ[bz]
            iv[2] = CUK[bz]
            iv[3] = CUK[bz + 1] - CUK[bz]
            iv[4] = T.if_then_else(MP[2] != 0, iv[3] - iv[1], 0)
            iv[5] = MP[1] + causal_slack
            iv[6] = T.max(0, bx * BN - iv[4] - iv[5])  # first query that sees this key block
            iv[7] = T.min(iv[1], bx * BN + BN - iv[4] + MP[0])  # end of those queries
            iv[8] = iv[6] // BM
            iv[9] = T.if_then_else(
                (bx * BN + tail_cut < iv[3] + tail_one) and iv[7] > iv[6], T.ceildiv(iv[7], BM) - iv[8], 0
            )
            G = HQ // HKV
            q0 = iv[0]
            sq = iv[1]
            k0 = iv[2]
            sk = iv[3]
            off = iv[4]
            wl = MP[0]
            wr = iv[5]
            sc2 = SC[0]
            col0 = bx * BN
            qb_lo = iv[8]
            nq = iv[9]

            for j, d in Par(BN, dim_qk):
                if col0 + j < sk:
                    Ks[j, d] = K[k0 + col0 + j, by, d]
                else:
                    Ks[j, d] = T.cast(0, dtype)
            for j, d in Par(BN, dim_v):
                if col0 + j < sk:
                    Vs[j, d] = V[k0 + col0 + j, by, d]
                else:
                    Vs[j, d] = T.cast(0, dtype)
            T.clear(dk)
            T.clear(dv)

            for it in Loop(G * nq):
                iv[10] = swap * ((it // nq) * HKV + by) + (1 - swap) * (by * G + it // nq)
                iv[11] = (qb_lo + it % nq) * BM
                hq = iv[10]
                row0 = iv[11]
                for i, d in Par(BM, dim_qk):
                    if row0 + i < sq:
                        Qs[i, d] = Q[q0 + row0 + i, hq, d]
                    else:
                        Qs[i, d] = T.cast(0, dtype)
                for i, d in Par(BM, dim_v):
                    if row0 + i < sq:
                        dOs[i, d] = dO[q0 + row0 + i, hq, d]
                    else:
                        dOs[i, d] = T.cast(0, dtype)
                for i in Par(BM):
                    if row0 + i < sq:
                        lse2[i] = LSE[q0 + row0 + i, hq] * LOG2E
                        dl[i] = DELTA[q0 + row0 + i, hq]
                    else:
                        lse2[i] = 0.0
                        dl[i] = 0.0
                T.clear(pT)
                T.gemm(Ks, Qs, pT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                for j, i in Par(BN, BM):
                    pT[j, i] = T.if_then_else(
                        (row0 + i < sq)
                        and (col0 + j < sk)
                        and (col0 + j >= row0 + i + off - wl)
                        and (col0 + j <= row0 + i + off + wr),
                        T.exp2(pT[j, i] * sc2 - lse2[i]),
                        0.0,
                    )
                T.clear(dpT)
                T.gemm(Vs, dOs, dpT, transpose_B=True, policy=T.GemmWarpPolicy.FullRow)
                T.copy(pT, Ps)
                T.gemm(Ps, dOs, dv, policy=T.GemmWarpPolicy.FullRow)
                for j, i in Par(BN, BM):
                    dpT[j, i] = pT[j, i] * (dpT[j, i] - dl[i])
                T.copy(dpT, dSs)
                T.gemm(dSs, Qs, dk, policy=T.GemmWarpPolicy.FullRow)
                T.clear(dq)
                T.gemm(dSs, Ks, dq, transpose_A=True, policy=T.GemmWarpPolicy.FullRow)
                if det:
                    for i, d in Par(BM, dim_qk):
                        if row0 + i < sq:
                            DQ[bx, q0 + row0 + i, hq, d] = dq[i, d]
                else:
                    for i, d in Par(BM, dim_qk):
                        if row0 + i < sq:
                            T.atomic_add(DQ[q0 + row0 + i, hq, d], dq[i, d])

            for j, d in Par(BN, dim_qk):
                if col0 + j < sk:
                    dK[k0 + col0 + j, by, d] = T.cast(dk[j, d] * SC[1], dtype)
            for j, d in Par(BN, dim_v):
                if col0 + j < sk:
                    dV[k0 + col0 + j, by, d] = T.cast(dv[j, d], dtype)

    return attn_bwd


def postprocess_kernel(target: str, dtype: str, dim_qk: int, block: int = 64, threads: int = 128):
    """Atomic dQ: dQ = scale * accumulator, cast to dtype, for every row.
    (Deterministic dQ uses postprocess_det_kernel: per sequence and query block, sum the per-key-block partials in
    key-block order over exactly the key blocks the forward visits for that query block
    (the main kernel writes every one of those, so the partial buffer needs no zero-fill;
    rows outside every sequence are left untouched.)"""
    st = style(target)
    frag, Par = st.frag, st.par
    acc = "float32"
    TQ, HQ = T.dynamic("TQ HQ")

    @T.prim_func
    def attn_bwd_post(
        DQ: T.Tensor([TQ, HQ, dim_qk], "float32"),
        SC: T.Tensor([2], "float32"),
        dQ: T.Tensor([TQ, HQ, dim_qk], dtype),
    ):
        with T.Kernel(T.ceildiv(TQ, block), HQ, threads=threads) as (bx, by):
            a = frag([block, dim_qk], acc)
            for i, d in Par(block, dim_qk):
                if bx * block + i < TQ:
                    a[i, d] = DQ[bx * block + i, by, d]
                else:
                    a[i, d] = 0.0
            for i, d in Par(block, dim_qk):
                if bx * block + i < TQ:
                    dQ[bx * block + i, by, d] = T.cast(a[i, d] * SC[1], dtype)

    return attn_bwd_post


def postprocess_det_kernel(target: str, dtype: str, dim_qk: int, block_m: int, block_n: int, threads: int = 128):
    """The deterministic dQ reduction (see postprocess_kernel); ``block_n`` must be the
    main kernel's key tile, ``block_m`` is free."""
    st = style(target)
    frag, Par = st.frag, st.par
    acc = "float32"
    BM, BN = block_m, block_n
    TQ, HQ, NKB, NB1 = T.dynamic("TQ HQ NKB NB1")

    @T.prim_func
    def attn_bwd_post_det(
        DQ: T.Tensor([NKB, TQ, HQ, dim_qk], "float32"),
        SC: T.Tensor([2], "float32"),
        CUQ: T.Tensor([NB1], "int32"),
        CUK: T.Tensor([NB1], "int32"),
        MP: T.Tensor([3], "int32"),
        max_sq: T.int32,
        dQ: T.Tensor([TQ, HQ, dim_qk], dtype),
    ):
        with T.Kernel(T.ceildiv(max_sq, BM), HQ, NB1 - 1, threads=threads) as (bx, by, bz):
            a = frag([BM, dim_qk], acc)
            iv = T.alloc_local([8], "int32")  # scalars, opaque to index analysis (see fwd)
            iv[0] = CUQ[bz]
            iv[1] = CUQ[bz + 1] - CUQ[bz]
            iv[3] = CUK[bz + 1] - CUK[bz]
            iv[4] = T.if_then_else(MP[2] != 0, iv[3] - iv[1], 0)
            iv[5] = T.max(0, bx * BM + iv[4] - MP[0])  # same key-block range as the forward
            iv[6] = T.min(iv[3], T.min(iv[1], bx * BM + BM) + iv[4] + MP[1])
            iv[2] = iv[5] // BN
            iv[7] = T.if_then_else(bx * BM < iv[1] and iv[6] > iv[5], T.ceildiv(iv[6], BN), iv[2])
            q0 = iv[0]
            sq = iv[1]
            row0 = bx * BM
            T.fill(a, 0)
            for kb in T.serial(iv[7] - iv[2]):
                for i, d in Par(BM, dim_qk):
                    if row0 + i < sq:
                        a[i, d] = a[i, d] + DQ[iv[2] + kb, q0 + row0 + i, by, d]
            for i, d in Par(BM, dim_qk):
                if row0 + i < sq:
                    dQ[q0 + row0 + i, by, d] = T.cast(a[i, d] * SC[1], dtype)

    return attn_bwd_post_det


KERNELS = {
    "fwd": forward_kernel,
    "pre": preprocess_kernel,
    "dsink": dsink_kernel,
    "main": main_kernel,
    "post": postprocess_kernel,
    "post_det": postprocess_det_kernel,
}


def build(kind: str, target: str, **params):
    """Compile one kernel (TileLang's own disk cache applies) and return the JITKernel."""
    func = KERNELS[kind](target, **params)
    return tilelang.compile(func, **style(target).compile_kwargs())


def lower(kind: str, target: str, **params) -> str:
    """Lower one kernel to target source without building or running it (returns the
    generated code); used to check the CUDA side on a machine without a GPU."""
    func = KERNELS[kind](target, **params)
    st = style(target)
    with tilelang.transform.PassContext(opt_level=3, config=st.pass_configs()):
        art = tilelang.lower(func, target=target)
    return getattr(art, "kernel_source", None) or str(art)
