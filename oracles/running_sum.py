"""The yardstick of a correct design that accumulates dK and dV in the input dtype.

torch's CPU flash attention backward (aten/src/ATen/native/cpu/FlashAttentionKernel.cpp) adds
each query block's product into ``grad_k``/``grad_v`` with beta = 1 GEMMs whose C is the output
tensor itself: in float16/bfloat16 the running sum is rounded once per (query head, query
block), and under GQA every query head of a group adds into the same rows, head after head.
That is about one ulp of the largest element above a single rounding, with no growth in the
sequence length (results/bugs/sdpa-cpu-flash/NOTE-input-dtype-accumulation.md), but more than
the flash-style and naive yardsticks' one rounding: on one large-dO GQA 9/1 problem the kernel
erred 0.0171 where they erred 0.0034, and this model errs 0.0212.

``input_dtype_running_sum(inputs, block_m, base)``: dK and dV as that design computes them,
from exact (float64) partials, one per query head and query block of ``block_m`` rows, added
in that order (heads of a group in turn, blocks in turn) into an accumulator rounded to the
input dtype after every addition. The other outputs are ``base``'s (a yardstick of the same
inputs): the design rounds them as a flash kernel does. A kernel declares the design
(``Capability.designs``); the judge builds this yardstick only when a budget gate fails.
"""

import torch

from difftest.model.inputs import Inputs, torch_dtype
from difftest.model.outputs import Outputs

from .reference import allowed_mask, probabilities, score_bias

F64 = torch.float64


def _sequence_partials(q, k, v, do, sink, allowed, scale, group, softcap, bias=None):
    """One sequence, float64: P [Hq, sq, sk] and dS [Hq, sq, sk], the gradient of the raw (scaled,
    uncapped) logits: through the cap's 1 - tanh^2 where there is one."""
    kx, vx = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)
    p, _, _ = probabilities(q, kx, sink, allowed, scale, softcap, bias=bias)
    dp = torch.einsum("qhd,khd->hqk", do, vx)
    ds = p * (dp - (p * dp).sum(dim=-1, keepdim=True))
    if softcap is not None:
        ds = ds * (1 - torch.tanh(torch.einsum("qhd,khd->hqk", q, kx) * scale / softcap) ** 2)
    return p, ds


def input_dtype_running_sum(inputs: Inputs, block_m: int, base: Outputs) -> Outputs:
    """``base`` with dK and dV accumulated in the input dtype, per (query head, query block)."""
    p = inputs.problem
    low = torch_dtype(p.dtype)
    x = inputs.upcast(F64)
    sink = x.sink.to(F64) if x.sink is not None else None
    block = max(1, int(block_m))
    dk = torch.zeros(x.k.shape, dtype=low, device=x.k.device)
    dv = torch.zeros(x.v.shape, dtype=low, device=x.v.device)
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0 or sk == 0:
            continue
        q, do = x.q[q0 : q0 + sq], x.do[q0 : q0 + sq]
        probs, ds = _sequence_partials(
            q,
            x.k[k0 : k0 + sk],
            x.v[k0 : k0 + sk],
            do,
            sink,
            allowed_mask(p, sq, sk, q.device),
            p.scale,
            p.group,
            p.softcap,
            score_bias(p, sq, sk, q.device),
        )
        for h in range(p.heads_q):
            g = h // p.group
            for i0 in range(0, sq, block):
                i1 = min(sq, i0 + block)
                part_v = probs[h, i0:i1].T @ do[i0:i1, h]
                part_k = (ds[h, i0:i1].T @ q[i0:i1, h]) * p.scale
                dv[k0 : k0 + sk, g] = (dv[k0 : k0 + sk, g].to(F64) + part_v).to(low)
                dk[k0 : k0 + sk, g] = (dk[k0 : k0 + sk, g].to(F64) + part_k).to(low)
    return Outputs(o=base.o, lse=base.lse, dq=base.dq, dk=dk, dv=dv, dsink=base.dsink)


__all__ = ["input_dtype_running_sum"]
