"""A same-dtype reference that rounds where a correct flash kernel rounds.

The naive same-dtype reference (autograd of softmax(QK^T)V in the Problem's dtype) is
FlashAttention's yardstick, but it does not round where a flash kernel must: a flash
backward takes Delta = rowsum(O * dO) from the *stored, rounded* O, feeds P and dS to
the tensor cores in the input dtype, and accumulates in float32. With a saturated
softmax (large logits) those rounding points make a correct kernel's dQ/dK error far
larger than the naive reference's, so the error budget uses the larger of the two
references' errors. Float32 problems round nowhere extra, as on the GPU's FP32 path.
"""

import torch

from difftest.inputs import Inputs
from difftest.outputs import Outputs

from .reference import allowed_mask


def flash_style_reference(inputs: Inputs) -> Outputs:
    p = inputs.problem
    dt = inputs.q.dtype
    f32 = torch.float32
    dev = inputs.q.device

    def rnd(t):  # what a kernel stores or feeds to the MMA in the input dtype
        return t.to(dt).to(f32)

    q, k, v, do = (t.to(f32) for t in (inputs.q, inputs.k, inputs.v, inputs.do))
    out = Outputs(o=torch.zeros(p.total_q, p.heads_q, p.head_dim_v, dtype=dt, device=dev),
                  lse=torch.full((p.total_q, p.heads_q), float("-inf"), dtype=f32, device=dev),
                  dq=torch.zeros(p.total_q, p.heads_q, p.head_dim_qk, dtype=dt, device=dev),
                  dk=torch.zeros(p.total_k, p.heads_kv, p.head_dim_qk, dtype=dt, device=dev),
                  dv=torch.zeros(p.total_k, p.heads_kv, p.head_dim_v, dtype=dt, device=dev),
                  dsink=torch.zeros(p.heads_q, dtype=f32, device=dev) if p.sinks else None)
    sink = inputs.sink.to(f32).view(-1, 1) if p.sinks else None
    g = p.group
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0:
            continue
        qb = q[q0:q0 + sq].transpose(0, 1)  # [Hq, sq, d]
        kb = k[k0:k0 + sk].transpose(0, 1).repeat_interleave(g, 0)  # [Hq, sk, d]
        vb = v[k0:k0 + sk].transpose(0, 1).repeat_interleave(g, 0)
        dob = do[q0:q0 + sq].transpose(0, 1)
        s = (qb @ kb.transpose(1, 2)) * p.scale
        s = s.masked_fill(~allowed_mask(p, sq, sk, dev).unsqueeze(0), float("-inf"))
        cols = s if sink is None else torch.cat([s, sink.view(-1, 1, 1).expand(-1, sq, 1)], dim=-1)
        lse = torch.logsumexp(cols, dim=-1) if cols.shape[-1] else torch.full((p.heads_q, sq), float("-inf"),
                                                                               device=dev)
        safe = torch.where(torch.isinf(lse), torch.zeros_like(lse), lse).unsqueeze(-1)
        pr = torch.exp(s - safe)  # masked -> 0; empty rows -> 0
        o = rnd(pr) @ vb
        o_st = rnd(o)  # the stored output
        delta = (o_st * dob).sum(-1, keepdim=True)
        dv = (rnd(pr).transpose(1, 2) @ dob).view(p.heads_kv, g, sk, p.head_dim_v).sum(1)
        dp = dob @ vb.transpose(1, 2)
        ds = pr * (dp - delta)
        dq = (rnd(ds) @ kb) * p.scale
        dk = ((rnd(ds).transpose(1, 2) @ qb) * p.scale).view(p.heads_kv, g, sk, p.head_dim_qk).sum(1)
        out.o[q0:q0 + sq] = o_st.transpose(0, 1).to(dt)
        out.lse[q0:q0 + sq] = lse.transpose(0, 1)
        out.dq[q0:q0 + sq] = dq.transpose(0, 1).to(dt)
        out.dk[k0:k0 + sk] = dk.transpose(0, 1).to(dt)
        out.dv[k0:k0 + sk] = dv.transpose(0, 1).to(dt)
        if sink is not None:
            p_sink = torch.exp(sink - safe.squeeze(-1))  # [Hq, sq]
            p_sink = torch.where(torch.isinf(lse), torch.zeros_like(p_sink), p_sink)
            out.dsink -= (p_sink * delta.squeeze(-1)).sum(-1)
    return out
