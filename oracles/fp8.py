"""The FP8 yardstick: attention forward and backward that quantises where a correct FP8
kernel must, and nowhere else.

An FP8 attention kernel (cuDNN's ``sdpa_fp8`` / ``sdpa_fp8_backward``, whose test reference
``compute_ref_backward`` has the same shape) feeds every GEMM FP8 operands and accumulates
in float32. So, with Q, K, V and dO the stored FP8 inputs (dequantised exactly: their
scales are powers of two, difftest/model/fp8.py):

    S   = Q K^T * softmax_scale                        float32
    P   = exp(S - LSE)                                 float32 (the softmax itself)
    Pq  = fp8(P * P_SCALE) / P_SCALE                   before P V and P^T dO
    O   = store(Pq V)                                  O out in FP8, current scaling
    dP  = dO V^T                                       float32
    D   = rowsum(O * dO)                               from the *stored* O and dO
    dS  = P * (dP - D)                                 float32
    dSq = fp8(dS * s) / s,  s = pow2_scale(amax dS)    before dS K and dS^T Q
    dV  = store(Pq^T dO),  dK = store(dSq^T Q * scale),  dQ = store(dSq K * scale)

``store`` is the output's current scaling (amax of the float32 result, power-of-two
scale, FP8, read back). LSE and dSink (= -sum_i P_sink,i D_i) stay float32. GQA sums dK
and dV over each group in float32 before the store. The result is dense per sequence
(chunked over heads so no chunk holds more than ``MAX_CHUNK`` scores), exact to what
torch's float32 GEMMs give; its error against the float64 truth is what FP8 storage alone
costs, and the budget is k times that (difftest/judge/gates.py).

``accumulator="tensor-core"`` builds the same yardstick with every one of those six GEMMs
added as Hopper's FP8 tensor core adds (oracles/tensor_core.py: about 13 fraction bits, cut
toward zero, per 32 products), not in float32: a second correct design, because an FP8 kernel
that keeps its accumulator in the tensor core (cuDNN's sdpa_fp8 on the H200) cannot do
better. Its S is off by ~|S| 2^-13, which moves the float32 LSE by as much and dS = P (dP - D)
where dP and D cancel (results/fp8.md: on the H200 cuBLAS's own FP8 GEMM reproduces cuDNN's
LSE to 6e-7 where the float32 yardstick is 2e-4 away). The budget takes the larger of the two
yardsticks' errors (oracles/__init__.py builds this one only where a verdict fails without it).

The Outputs carry ``amax`` (the amax of each stored tensor before quantisation: o, dq, dk,
dv, ds) and ``scales`` (the scale each was stored with), what a kernel's amax outputs are
compared with.
"""

import torch

from difftest.errors import InputError
from difftest.model import fp8
from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from .reference import allowed_mask
from .tensor_core import mma_matmul

F32 = torch.float32
MAX_CHUNK = 1 << 24  # scores (heads x sq x sk) per chunk
ACCUMULATORS = ("float32", "tensor-core")


class _Sequence:
    """One sequence's float32 operands, query heads expanded over their GQA group."""

    def __init__(self, inputs: Inputs, b: int):
        p = inputs.problem
        self.q0, self.sq = p.cu_seqlens_q[b], p.seqlens_q[b]
        self.k0, self.sk = p.cu_seqlens_k[b], p.seqlens_k[b]
        idx = torch.arange(p.heads_q, device=inputs.device) // p.group
        rows_q, rows_k = slice(self.q0, self.q0 + self.sq), slice(self.k0, self.k0 + self.sk)
        self.q = inputs.q[rows_q].to(F32).transpose(0, 1)  # [Hq, sq, D]
        self.do = inputs.do[rows_q].to(F32).transpose(0, 1)
        self.k = inputs.k[rows_k].to(F32)[:, idx].transpose(0, 1)  # [Hq, sk, D]
        self.v = inputs.v[rows_k].to(F32)[:, idx].transpose(0, 1)
        self.allowed = allowed_mask(p, self.sq, self.sk, inputs.device)
        heads = max(1, MAX_CHUNK // max(1, self.sq * self.sk))
        self.chunks = [(h, min(p.heads_q, h + heads)) for h in range(0, p.heads_q, heads)]


def _softmax(p, seq: _Sequence, h0, h1, sink, mm=torch.matmul):
    """(P [h, sq, sk], LSE [h, sq], P_sink [h, sq] or None), float32."""
    s = mm(seq.q[h0:h1], seq.k[h0:h1].transpose(1, 2)) * p.scale
    s = s.masked_fill(~seq.allowed, float("-inf"))
    m = s.amax(dim=-1) if seq.sk else torch.full(s.shape[:2], float("-inf"), dtype=F32, device=s.device)
    if sink is not None:
        m = torch.maximum(m, sink[h0:h1].view(-1, 1))
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    denom = torch.exp(s - m.unsqueeze(-1)).sum(dim=-1)
    if sink is not None:
        denom = denom + torch.exp(sink[h0:h1].view(-1, 1) - m)
    lse = torch.where(denom > 0, m + torch.log(denom), torch.full_like(m, float("-inf")))
    safe = torch.where(torch.isinf(lse), torch.full_like(lse, float("inf")), lse)  # empty rows: P = 0
    prob = torch.exp(s - safe.unsqueeze(-1))
    p_sink = None if sink is None else torch.exp(sink[h0:h1].view(-1, 1) - safe)
    return prob, lse, p_sink


def fp8_reference(inputs: Inputs, accumulator: str = "float32") -> Outputs:
    """O, LSE, dQ, dK, dV (and dSink) of an FP8 Problem, quantised where a correct FP8
    kernel must (module docstring), as float32 dequantised values. ``accumulator``: how its
    FP8 GEMMs add ("float32", or "tensor-core": Hopper's FP8 MMA, module docstring)."""
    if accumulator not in ACCUMULATORS:
        raise InputError(f"accumulator={accumulator!r}: allowed {ACCUMULATORS}")
    # float32 operands holding FP8 values: the tensor-core model adds them exactly (oracles/tensor_core.py)
    mm = torch.matmul if accumulator == "float32" else mma_matmul
    p = inputs.problem
    f = fp8.fmt(p.dtype)
    dev = inputs.device
    hq = p.heads_q
    sink = None if inputs.sink is None else inputs.sink.to(F32)
    o = torch.zeros(p.total_q, hq, p.head_dim_v, dtype=F32, device=dev)
    lse = torch.full((p.total_q, hq), float("-inf"), dtype=F32, device=dev)
    seqs = [_Sequence(inputs, b) for b in range(p.batch) if p.seqlens_q[b]]
    for seq in seqs:  # forward
        for h0, h1 in seq.chunks:
            prob, l, _ = _softmax(p, seq, h0, h1, sink, mm)
            pq = fp8.round_trip(prob, f.p_scale, p.dtype)
            o[seq.q0 : seq.q0 + seq.sq, h0:h1] = mm(pq, seq.v[h0:h1]).transpose(0, 1)
            lse[seq.q0 : seq.q0 + seq.sq, h0:h1] = l.transpose(0, 1)
    o, o_scale, o_amax = fp8.store_current(o, p.dtype)
    delta = (o * inputs.do.to(F32)).sum(dim=-1)  # [total_q, Hq], from the stored O

    def ds_of(seq, h0, h1):
        prob, _, p_sink = _softmax(p, seq, h0, h1, sink, mm)
        dp = mm(seq.do[h0:h1], seq.v[h0:h1].transpose(1, 2))
        d = delta[seq.q0 : seq.q0 + seq.sq, h0:h1].transpose(0, 1).unsqueeze(-1)
        return prob, prob * (dp - d), p_sink

    ds_amax = 0.0  # pass 1: dS's amax over the whole problem, the scale its FP8 store needs
    for seq in seqs:
        for h0, h1 in seq.chunks:
            ds_amax = max(ds_amax, fp8.amax(ds_of(seq, h0, h1)[1]))
    ds_scale = fp8.pow2_scale(ds_amax, p.dtype)
    dq = torch.zeros(p.total_q, hq, p.head_dim_qk, dtype=F32, device=dev)
    dk_h = torch.zeros(p.total_k, hq, p.head_dim_qk, dtype=F32, device=dev)
    dv_h = torch.zeros(p.total_k, hq, p.head_dim_v, dtype=F32, device=dev)
    dsink = torch.zeros(hq, dtype=F32, device=dev) if sink is not None else None
    for seq in seqs:  # pass 2: the gradients
        rq, rk = slice(seq.q0, seq.q0 + seq.sq), slice(seq.k0, seq.k0 + seq.sk)
        for h0, h1 in seq.chunks:
            prob, ds, p_sink = ds_of(seq, h0, h1)
            pq = fp8.round_trip(prob, f.p_scale, p.dtype)
            dsq = fp8.round_trip(ds, ds_scale, p.dtype)
            dv_h[rk, h0:h1] = mm(pq.transpose(1, 2), seq.do[h0:h1]).transpose(0, 1)
            dk_h[rk, h0:h1] = (mm(dsq.transpose(1, 2), seq.q[h0:h1]) * p.scale).transpose(0, 1)
            dq[rq, h0:h1] = (mm(dsq, seq.k[h0:h1]) * p.scale).transpose(0, 1)
            if dsink is not None:
                dsink[h0:h1] -= (p_sink * delta[rq, h0:h1].transpose(0, 1)).sum(dim=-1)
    dk = dk_h.view(p.total_k, p.heads_kv, p.group, p.head_dim_qk).sum(dim=2)
    dv = dv_h.view(p.total_k, p.heads_kv, p.group, p.head_dim_v).sum(dim=2)
    stored = {n: fp8.store_current(t, p.dtype) for n, t in (("dq", dq), ("dk", dk), ("dv", dv))}
    out = Outputs(o=o, lse=lse, dq=stored["dq"][0], dk=stored["dk"][0], dv=stored["dv"][0], dsink=dsink)
    out.amax = {"o": o_amax, "ds": ds_amax, **{n: s[2] for n, s in stored.items()}}
    out.scales = {"o": o_scale, "ds": ds_scale, "p": f.p_scale, **{n: s[1] for n, s in stored.items()}}
    return out
