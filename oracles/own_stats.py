"""The backward a correct kernel makes from GIVEN forward statistics (float64).

Seed 001's golden recomputes the backward from the kernel's own LSE and Delta to tell a
wrong forward from a wrong backward; difftest/judge/attribution.py does the same with this
oracle. From a kernel's packed O [total_q, Hq, Dv] and LSE [total_q, Hq] it computes, with
the FlashAttention formulas (oracles/chunked.py) in float64,

    P = exp(S - LSE_given)   (0 on rows whose LSE is -inf)
    Delta_i = sum_d dO_id * O_given_id
    dV = P^T dO,  dS = P * (dO V^T - Delta),  dQ = scale * dS K,  dK = scale * dS^T Q
    dSink_h = -sum_i exp(sink_h - LSE_given_i) * Delta_i

so a backward that is right about the statistics it was handed matches it, whatever
those statistics are. Memory-bounded: query rows in chunks of ``chunk_rows`` (GQA groups
expanded per sequence). O and LSE come back as given.
"""

import torch

from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs

from .chunked import DEFAULT_MAX_CHUNK_ELEMENTS, chunk_rows
from .reference import allowed_mask, score_bias


@torch.no_grad()
def own_stats_backward(
    inputs: Inputs, o: torch.Tensor, lse: torch.Tensor, *, max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS
) -> Outputs:
    """dQ, dK, dV (and dSink) in float64 from the given forward statistics ``o``, ``lse``."""
    p = inputs.problem
    dt = torch.float64
    x = inputs.upcast(dt)
    dev = x.q.device
    Hq, Hkv, G = p.heads_q, p.heads_kv, p.group
    o_given, lse_given = o.to(dev, dt), lse.to(dev, dt)
    dq = torch.zeros(p.total_q, Hq, p.head_dim_qk, dtype=dt, device=dev)
    dk = torch.zeros(p.total_k, Hkv, p.head_dim_qk, dtype=dt, device=dev)
    dv = torch.zeros(p.total_k, Hkv, p.head_dim_v, dtype=dt, device=dev)
    sink = None if x.sink is None else x.sink.to(dt).view(Hq, 1)
    dsink = None if sink is None else torch.zeros(Hq, dtype=dt, device=dev)
    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0:
            continue  # (sk == 0 with sq > 0 is a sequence of queries that see no key: sized views, never -1)
        kx = x.k[k0 : k0 + sk].repeat_interleave(G, dim=1)  # [sk, Hq, D]
        vx = x.v[k0 : k0 + sk].repeat_interleave(G, dim=1)
        rows = chunk_rows(p, sk, max_chunk_elements)
        for r0 in range(0, sq, rows):
            r1 = min(sq, r0 + rows)
            sl = slice(q0 + r0, q0 + r1)
            qc, doc = x.q[sl], x.do[sl]
            s = torch.einsum("chd,khd->hck", qc, kx) * p.scale
            dcap = None
            if p.softcap is not None:  # capped before the mask; dS through the cap's 1 - tanh^2
                t = torch.tanh(s / p.softcap)
                s, dcap = t * p.softcap, 1 - t * t
            if (
                p.biased
            ):  # the score bias (ALiBi, relative position) after the cap, before the mask (no gradient: dS unchanged)
                s = s + score_bias(p, sq, sk, dev, dt, rows=(r0, r1))
            s = s.masked_fill(~allowed_mask(p, sq, sk, dev, rows=(r0, r1)), float("-inf"))
            lse_h = lse_given[sl].transpose(0, 1)  # [Hq, c]
            seen = ~torch.isneginf(lse_h)
            pr = torch.exp(s - torch.where(seen, lse_h, torch.full_like(lse_h, float("inf"))).unsqueeze(-1))
            delta = (doc * o_given[sl]).sum(dim=-1).transpose(0, 1)  # [Hq, c]
            ds = pr * (torch.einsum("chd,khd->hck", doc, vx) - delta.unsqueeze(-1))
            if dcap is not None:
                ds = ds * dcap
            dq[sl] = torch.einsum("hck,khd->chd", ds, kx) * p.scale
            dk_c = torch.einsum("hck,chd->khd", ds, qc) * p.scale
            dk[k0 : k0 + sk] += dk_c.view(sk, Hkv, G, p.head_dim_qk).sum(dim=2)
            dv[k0 : k0 + sk] += torch.einsum("hck,chd->khd", pr, doc).view(sk, Hkv, G, p.head_dim_v).sum(dim=2)
            if sink is not None:
                p_sink = torch.where(
                    seen, torch.exp(sink - torch.where(seen, lse_h, torch.zeros_like(lse_h))), torch.zeros_like(lse_h)
                )
                dsink -= (p_sink * delta).sum(dim=-1)
    return Outputs(o=o, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
