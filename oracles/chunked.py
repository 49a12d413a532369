"""Memory-bounded reference for long sequences (float64 or float32, CPU or CUDA).

The dense reference (reference.py) keeps an autograd graph over the whole
[heads, seqlen_q, seqlen_k] score matrix, several copies of it: a 16k x 16k float64
problem with 8 heads needs ~80 GiB. This oracle has the same semantics (every mask,
alignment, window, sink, GQA/MQA, varlen with empty sequences, unused tail tokens) but
walks each sequence in query chunks and writes the backward out explicitly with the
FlashAttention formulas, so the peak extra memory is a few [heads_q, chunk, seqlen_k]
tensors:

    S = scale * Q K^T (+ mask)          LSE_i = log(sum_j exp(S_ij) + exp(sink_h))
    P = exp(S - LSE)                    O = P V
    Delta_i = sum_d dO_id * O_id        dV = P^T dO
    dP = dO V^T                         dS = P * (dP - Delta)
    dQ = scale * dS K                   dK = scale * dS^T Q
    dSink_h = -sum_i P_sink_i * Delta_i,   P_sink_i = exp(sink_h - LSE_i)

Each chunk holds complete key rows, so LSE is exact for the chunk's rows and no online
rescaling is needed; dK, dV and dSink accumulate over chunks. Rows that see no key and
have no sink get LSE = -inf, O = 0 and zero gradients.

Measured on the H200 (2026-11-29, torch 2.11.0+cu130, float64, B1 H8 D128 causal, default
budget): S=4096 0.27 s / 0.9 GiB peak (dense autograd: 3.2 s / 6.4 GiB, max difference
2e-14); S=16384 0.22 s / 1.6 GiB; S=32768 with H8/1 (MQA) 0.94 s / 1.75 GiB, no NaN.
The masked-out part of a causal problem is computed and discarded (no block skipping).
"""

import torch

from difftest.inputs import Inputs
from difftest.outputs import Outputs
from difftest.problem import Problem

from .reference import allowed_mask

CHUNK_PRECISIONS = ("float64", "float32")
# Score elements (heads_q x chunk x seqlen_k) one chunk may hold: 2**24 float64 scores
# are 128 MiB, and a chunk keeps about four such tensors alive (S/P, dP, dS, mask).
DEFAULT_MAX_CHUNK_ELEMENTS = 2**24


def rows_allowed(problem: Problem, r0: int, r1: int, sq: int, sk: int, device) -> torch.Tensor:
    """[r1 - r0, sk] bool: rows r0..r1-1 of ``allowed_mask(problem, sq, sk)``."""
    return allowed_mask(problem, sq, sk, device, rows=(r0, r1))


def chunk_rows(problem: Problem, sk: int, max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS) -> int:
    """Query rows per chunk so that heads_q x rows x sk stays within the budget (>= 1)."""
    if max_chunk_elements < 1:
        raise ValueError(f"max_chunk_elements={max_chunk_elements!r}: allowed an int >= 1")
    return max(1, max_chunk_elements // max(1, problem.heads_q * sk))


@torch.no_grad()
def chunked_reference(inputs: Inputs, precision: str = "float64", *,
                      max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS,
                      chunk: int | None = None, magnitudes: bool = False,
                      flash_rounding: bool = False) -> Outputs:
    """O, LSE, dQ, dK, dV (and dSink) for ``inputs`` in ``precision``, computed in query
    chunks. ``chunk`` fixes the rows per chunk (tests use it to force many chunks);
    otherwise it follows ``max_chunk_elements``. ``magnitudes``: also record, per output,
    the largest sum of absolute terms that forms one element (e.g. for dQ,
    scale * sum_j P_ij (|dP_ij| + |Delta_i|) |K_j|): the size of what a kernel rounds
    while computing it, which can be far above the result's own size when terms cancel
    (see gates.budget_gate). ``flash_rounding`` (float32 only): round where a correct flash
    kernel must (oracles/flash_style.py): P and dS to the input dtype before the GEMMs that
    consume them, O to the input dtype before Delta = rowsum(O * dO) (the stored O), and
    every output to the input dtype."""
    if precision not in CHUNK_PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed {CHUNK_PRECISIONS}")
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk={chunk!r}: allowed None or an int >= 1")
    if flash_rounding and precision != "float32":
        raise ValueError(f"flash_rounding with precision={precision!r}: allowed only 'float32'")
    p = inputs.problem
    dt = getattr(torch, precision)
    low = inputs.q.dtype

    def rnd(t):  # what a flash kernel stores or feeds to the MMA in the input dtype
        return t.to(low).to(dt) if flash_rounding else t

    x = inputs.upcast(dt)
    dev = x.q.device
    Hq, Hkv, G = p.heads_q, p.heads_kv, p.group
    scale = p.scale

    o = torch.zeros(p.total_q, Hq, p.head_dim_v, dtype=dt, device=dev)
    lse = torch.full((p.total_q, Hq), float("-inf"), dtype=torch.float32, device=dev)
    dq = torch.zeros(p.total_q, Hq, p.head_dim_qk, dtype=dt, device=dev)
    dk = torch.zeros(p.total_k, Hkv, p.head_dim_qk, dtype=dt, device=dev)
    dv = torch.zeros(p.total_k, Hkv, p.head_dim_v, dtype=dt, device=dev)
    sink = None if x.sink is None else x.sink.to(dt).view(Hkv, G, 1)  # [Hkv, G, 1]
    dsink = None if sink is None else torch.zeros(Hkv, G, dtype=dt, device=dev)
    mag = {n: 0.0 for n in ("o", "dq", "dk", "dv", "dsink")} if magnitudes else None

    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0:
            continue
        kb = x.k[k0:k0 + sk]  # [sk, Hkv, D]
        vb = x.v[k0:k0 + sk]  # [sk, Hkv, Dv]
        rows = chunk if chunk is not None else chunk_rows(p, sk, max_chunk_elements)
        for r0 in range(0, sq, rows):
            r1 = min(sq, r0 + rows)
            c = r1 - r0
            qc = x.q[q0 + r0:q0 + r1].view(c, Hkv, G, p.head_dim_qk)
            doc = x.do[q0 + r0:q0 + r1].view(c, Hkv, G, p.head_dim_v)
            allowed = rows_allowed(p, r0, r1, sq, sk, dev)  # [c, sk]
            s = torch.einsum("chgd,khd->hgck", qc, kb) * scale
            s = s.masked_fill(~allowed, float("-inf"))  # [Hkv, G, c, sk]
            if sk:
                m = s.amax(dim=-1)  # [Hkv, G, c]
            else:
                m = torch.full((Hkv, G, c), float("-inf"), dtype=dt, device=dev)
            if sink is not None:
                m = torch.maximum(m, sink)
            m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            e = torch.exp(s - m_safe.unsqueeze(-1))
            total = e.sum(dim=-1)
            if sink is not None:
                total = total + torch.exp(sink - m_safe)
            row_lse = m_safe + torch.log(total)  # -inf where the row sees nothing
            seen = torch.isfinite(row_lse)
            lse_safe = torch.where(seen, row_lse, torch.zeros_like(row_lse))
            pr = e / torch.where(seen, total, torch.ones_like(total)).unsqueeze(-1)  # P
            del e
            pr_mma = rnd(pr)  # P as the PV and dV GEMMs consume it
            oc = rnd(torch.einsum("hgck,khd->chgd", pr_mma, vb))  # [c, Hkv, G, Dv]
            delta = torch.einsum("chgd,chgd->hgc", doc, oc)  # [Hkv, G, c]
            dv[k0:k0 + sk] += torch.einsum("hgck,chgd->khd", pr_mma, doc)
            del pr_mma
            ds = torch.einsum("chgd,khd->hgck", doc, vb)  # dP
            if mag is not None:
                _record_magnitudes(mag, pr, ds, delta, qc, kb, vb, doc, scale, sk)
            ds = rnd(pr * (ds - delta.unsqueeze(-1)))  # dS
            del pr
            dq[q0 + r0:q0 + r1] = (torch.einsum("hgck,khd->chgd", ds, kb) * scale).reshape(c, Hq, -1)
            dk[k0:k0 + sk] += torch.einsum("hgck,chgd->khd", ds, qc) * scale
            del ds
            if sink is not None:
                p_sink = torch.where(seen, torch.exp(sink - lse_safe), torch.zeros_like(lse_safe))
                dsink -= (p_sink * delta).sum(dim=-1)
                if mag is not None:
                    mag["dsink"] = max(mag["dsink"], float((p_sink * delta.abs()).sum(dim=-1).max()))
            o[q0 + r0:q0 + r1] = oc.reshape(c, Hq, -1)
            lse[q0 + r0:q0 + r1] = row_lse.reshape(Hq, c).transpose(0, 1).float()
    dsink = None if dsink is None else dsink.reshape(Hq).float()
    if flash_rounding:  # the kernel's outputs are stored in the input dtype
        o, dq, dk, dv = (t.to(low) for t in (o, dq, dk, dv))
    out = Outputs(o=o, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
    out.magnitude = mag
    return out


def _record_magnitudes(mag, pr, dp, delta, qc, kb, vb, doc, scale, sk):
    """Largest sums of absolute terms per output element, for one chunk (see above).
    dK/dV sums run over all query rows; a chunk's share is a lower bound that the
    largest chunk dominates in practice, and the rows of dq/o are complete."""
    if sk == 0:
        return
    ads = pr * (dp.abs() + delta.abs().unsqueeze(-1))  # [Hkv, G, c, sk]

    def top(t):
        return float(t.max()) if t.numel() else 0.0

    mag["o"] = max(mag["o"], top(torch.einsum("hgck,khd->chgd", pr, vb.abs())))
    mag["dv"] = max(mag["dv"], top(torch.einsum("hgck,chgd->khd", pr, doc.abs())))
    mag["dq"] = max(mag["dq"], scale * top(torch.einsum("hgck,khd->chgd", ads, kb.abs())))
    mag["dk"] = max(mag["dk"], scale * top(torch.einsum("hgck,chgd->khd", ads, qc.abs())))
