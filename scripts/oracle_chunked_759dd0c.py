"""Memory-bounded reference for long sequences (float64 or float32, CPU or CUDA).

The dense reference (reference.py) keeps an autograd graph over the whole
[heads, seqlen_q, seqlen_k] score matrix, several copies of it: a 16k x 16k float64
problem with 8 heads needs ~80 GiB. This oracle has the same semantics (every mask,
alignment, window, sink, GQA/MQA, varlen with empty sequences, unused tail tokens) but
walks each sequence in query chunks and writes the backward out explicitly with the
FlashAttention formulas:

    S = scale * Q K^T (+ mask)          LSE_i = log(sum_j exp(S_ij) + exp(sink_h))
    P = exp(S - LSE)                    O = P V
    Delta_i = sum_d dO_id * O_id        dV = P^T dO
    dP = dO V^T                         dS = P * (dP - Delta)
    dQ = scale * dS K                   dK = scale * dS^T Q
    dSink_h = -sum_i P_sink_i * Delta_i,   P_sink_i = exp(sink_h - LSE_i)

Each chunk holds complete key rows, so LSE is exact for the chunk's rows and no online
rescaling is needed; dK, dV and dSink accumulate over chunks. Rows that see no key and
have no sink get LSE = -inf, O = 0 and zero gradients.

Speed: a chunk of rows r0..r1 only reads the keys some row of it may see
(``Problem.key_range`` is monotone in the row, so that is one contiguous band
[lo(r0), hi(r1-1)) ): the fully masked blocks of causal and windowed problems are never
computed. A masked key contributes an exact 0 (P = exp(-inf) = 0) to every sum, so
skipping it changes no value; it can change the order in which a GEMM adds the rest, i.e.
the last bit (tests/test_oracles.py: equal to the unskipped walk within 1e-15 relative).
Rows per chunk are chosen so that heads x rows x band width fills an element budget sized
to the device (``auto_chunk_elements``: free CUDA memory from ``torch.cuda.mem_get_info``),
so causal chunks grow as their band narrows. Every head is in one batched GEMM per step
(tensors laid out [heads_kv, rows x group, dim] once per sequence), the softmax and dS are
computed in place, and the term magnitudes stay on the device until the end (no host
synchronisation inside the loop).
"""

import torch

from difftest.model.inputs import Inputs
from difftest.model.outputs import Outputs
from difftest.model.problem import Problem

from .reference import allowed_mask

CHUNK_PRECISIONS = ("float64", "float32")
# Score elements (heads_q x chunk x band width) one chunk may hold on the CPU: 2**24 float64
# scores are 128 MiB, and a chunk keeps about LIVE_SCORE_TENSORS such tensors alive.
DEFAULT_MAX_CHUNK_ELEMENTS = 2**24
LIVE_SCORE_TENSORS = 4  # P, dP/dS, the magnitudes' |terms|, one elementwise temporary
# On CUDA: at most this share of the free memory, and at most this many elements (larger
# chunks no longer make the GEMMs faster, and leave room for the kernel under test).
CUDA_FREE_SHARE = 0.5
CUDA_MAX_CHUNK_ELEMENTS = 2**28
# A masked problem is cut into at least this many chunks per sequence (a causal walk in n
# chunks computes (n + 1) / 2n of the score square), of at least MIN_SKIP_ROWS rows each
# (smaller GEMMs lose more to overhead than the skipped blocks save).
SKIP_CHUNKS = 16
MIN_SKIP_ROWS = 64


def rows_allowed(problem: Problem, r0: int, r1: int, sq: int, sk: int, device) -> torch.Tensor:
    """[r1 - r0, sk] bool: rows r0..r1-1 of ``allowed_mask(problem, sq, sk)``."""
    return allowed_mask(problem, sq, sk, device, rows=(r0, r1))


def chunk_rows(problem: Problem, sk: int, max_chunk_elements: int = DEFAULT_MAX_CHUNK_ELEMENTS) -> int:
    """Query rows per chunk so that heads_q x rows x sk stays within the budget (>= 1):
    the rows of a chunk that sees every key."""
    if max_chunk_elements < 1:
        raise ValueError(f"max_chunk_elements={max_chunk_elements!r}: allowed an int >= 1")
    return max(1, max_chunk_elements // max(1, problem.heads_q * sk))


def auto_chunk_elements(device, dtype=torch.float64) -> int:
    """The element budget of one chunk on ``device``: DEFAULT_MAX_CHUNK_ELEMENTS on the CPU;
    on CUDA, CUDA_FREE_SHARE of the free memory over LIVE_SCORE_TENSORS score tensors of
    ``dtype``, at most CUDA_MAX_CHUNK_ELEMENTS."""
    device = torch.device(device)
    if device.type != "cuda":
        return DEFAULT_MAX_CHUNK_ELEMENTS
    free, _ = torch.cuda.mem_get_info(device)
    size = torch.empty((), dtype=dtype).element_size()
    return max(2**16, min(CUDA_MAX_CHUNK_ELEMENTS, int(free * CUDA_FREE_SHARE) // (size * LIVE_SCORE_TENSORS)))


def key_band(problem: Problem, r0: int, r1: int, sq: int, sk: int) -> tuple[int, int]:
    """[lo, hi): the keys some query row r0..r1-1 of a (sq, sk) sequence may see (every
    key outside is masked for all of them); lo == hi when none sees any."""
    lo = min(sk, problem.key_range(r0, sq, sk)[0])
    hi = max(lo, min(sk, problem.key_range(r1 - 1, sq, sk)[1]))  # a top-left row past the keys starts beyond sk
    return lo, hi


def chunk_plan(problem: Problem, sq: int, sk: int, budget: int, rows: int | None = None,
               skip_masked: bool = True) -> list[tuple[int, int, int, int]]:
    """(r0, r1, lo, hi) per chunk: query rows [r0, r1) against keys [lo, hi). ``rows``
    fixes the rows per chunk; otherwise each chunk takes the most rows whose
    heads_q x rows x band width stays within ``budget`` (at least one row), and a masked
    problem's chunks at most max(MIN_SKIP_ROWS, sq / SKIP_CHUNKS) rows, so that its band
    follows the mask."""
    h = problem.heads_q
    band = (lambda a, b: key_band(problem, a, b, sq, sk)) if skip_masked else (lambda a, b: (0, sk))
    cap = max(MIN_SKIP_ROWS, -(-sq // SKIP_CHUNKS)) if skip_masked and problem.masked else sq
    plan, r0 = [], 0
    while r0 < sq:
        if rows is not None:
            r1 = min(sq, r0 + rows)
        else:  # the band only widens with more rows: binary search the largest that fits
            lo_n, hi_n = 1, min(cap, sq - r0)
            while lo_n < hi_n:
                mid = (lo_n + hi_n + 1) // 2
                a, b = band(r0, r0 + mid)
                if h * mid * max(1, b - a) <= budget:
                    lo_n = mid
                else:
                    hi_n = mid - 1
            r1 = r0 + lo_n
        plan.append((r0, r1, *band(r0, r1)))
        r0 = r1
    return plan


def _fully_allowed(problem: Problem, r0: int, r1: int, lo: int, hi: int, sq: int, sk: int) -> bool:
    """Every row r0..r1-1 sees every key lo..hi-1 (no mask needed for this block)."""
    first, last = problem.key_range(r0, sq, sk), problem.key_range(r1 - 1, sq, sk)
    return last[0] <= lo and first[1] >= hi


@torch.no_grad()
def chunked_reference(inputs: Inputs, precision: str = "float64", *,
                      max_chunk_elements: int | None = None,
                      chunk: int | None = None, magnitudes: bool = False,
                      flash_rounding: bool = False, skip_masked: bool = True) -> Outputs:
    """O, LSE, dQ, dK, dV (and dSink) for ``inputs`` in ``precision``, computed in query
    chunks. ``chunk`` fixes the rows per chunk (tests use it to force many chunks);
    otherwise they follow ``max_chunk_elements`` (None: ``auto_chunk_elements``).
    ``skip_masked=False`` walks every key of every row (the masked blocks computed and
    discarded), for comparison. ``magnitudes``: also record, per output, the largest sum of
    absolute terms that forms one element (e.g. for dQ, scale * sum_j P_ij (|dP_ij| +
    |Delta_i|) |K_j|): the size of what a kernel rounds while computing it, which can be
    far above the result's own size when terms cancel (see gates.budget_gate); the sums of
    dK, dV and dSink run over every query row, accumulated across chunks. ``flash_rounding`` (float32
    only): round where a correct flash kernel must (oracles/flash_style.py): P and dS to
    the input dtype before the GEMMs that consume them, O to the input dtype before
    Delta = rowsum(O * dO) (the stored O), and every output to the input dtype."""
    if precision not in CHUNK_PRECISIONS:
        raise ValueError(f"precision={precision!r}: allowed {CHUNK_PRECISIONS}")
    if chunk is not None and (not isinstance(chunk, int) or chunk < 1):
        raise ValueError(f"chunk={chunk!r}: allowed None or an int >= 1")
    if max_chunk_elements is not None and (not isinstance(max_chunk_elements, int) or max_chunk_elements < 1):
        raise ValueError(f"max_chunk_elements={max_chunk_elements!r}: allowed None or an int >= 1")
    if flash_rounding and precision != "float32":
        raise ValueError(f"flash_rounding with precision={precision!r}: allowed only 'float32'")
    p = inputs.problem
    dt = getattr(torch, precision)
    low = inputs.q.dtype

    def rnd(t):  # what a flash kernel stores or feeds to the MMA in the input dtype
        return t.to(low).to(dt) if flash_rounding else t

    x = inputs.upcast(dt)
    dev = x.q.device
    Hq, Hkv, G, D, Dv = p.heads_q, p.heads_kv, p.group, p.head_dim_qk, p.head_dim_v
    scale = p.scale
    budget = max_chunk_elements if max_chunk_elements is not None else auto_chunk_elements(dev, dt)

    o = torch.zeros(p.total_q, Hq, Dv, dtype=dt, device=dev)
    lse = torch.full((p.total_q, Hq), float("-inf"), dtype=torch.float32, device=dev)
    dq = torch.zeros(p.total_q, Hq, D, dtype=dt, device=dev)
    dk = torch.zeros(p.total_k, Hkv, D, dtype=dt, device=dev)
    dv = torch.zeros(p.total_k, Hkv, Dv, dtype=dt, device=dev)
    sink = None if x.sink is None else x.sink.to(dt).view(Hkv, 1, G)  # [Hkv, 1, G]
    dsink = None if sink is None else torch.zeros(Hkv, G, dtype=dt, device=dev)
    zero = torch.zeros((), dtype=dt, device=dev)
    mag = {n: zero for n in ("o", "dq", "dk", "dv", "dsink")} if magnitudes else None
    dsink_terms = None if sink is None or mag is None else torch.zeros(Hkv, G, dtype=dt, device=dev)

    for b, (sq, sk) in enumerate(zip(p.seqlens_q, p.seqlens_k)):
        q0, k0 = p.cu_seqlens_q[b], p.cu_seqlens_k[b]
        if sq == 0:
            continue
        # [Hkv, rows, G, dim]: a chunk of rows is then a [Hkv, rows x G, dim] view
        qh = x.q[q0:q0 + sq].view(sq, Hkv, G, D).permute(1, 0, 2, 3).contiguous()
        doh = x.do[q0:q0 + sq].view(sq, Hkv, G, Dv).permute(1, 0, 2, 3).contiguous()
        kh = x.k[k0:k0 + sk].permute(1, 0, 2).contiguous()  # [Hkv, sk, D]
        vh = x.v[k0:k0 + sk].permute(1, 0, 2).contiguous()  # [Hkv, sk, Dv]
        dkh = torch.zeros_like(kh)
        dvh = torch.zeros_like(vh)
        if mag is not None:
            kabs, vabs, qabs, doabs = kh.abs(), vh.abs(), qh.abs(), doh.abs()
            dk_terms, dv_terms = torch.zeros_like(kh), torch.zeros_like(vh)
        for r0, r1, lo, hi in chunk_plan(p, sq, sk, budget, chunk, skip_masked):
            c, w = r1 - r0, hi - lo
            qc = qh[:, r0:r1].reshape(Hkv, c * G, D)
            doc = doh[:, r0:r1].reshape(Hkv, c * G, Dv)
            kb, vb = kh[:, lo:hi], vh[:, lo:hi]
            if w:
                s = torch.bmm(qc, kb.transpose(1, 2)).mul_(scale).view(Hkv, c, G, w)
                if not _fully_allowed(p, r0, r1, lo, hi, sq, sk):
                    allowed = allowed_mask(p, sq, sk, dev, rows=(r0, r1))[:, lo:hi]
                    s.masked_fill_(~allowed.view(1, c, 1, w), float("-inf"))
                m = s.amax(dim=-1)  # [Hkv, c, G]
            else:
                s = torch.empty(Hkv, c, G, 0, dtype=dt, device=dev)
                m = torch.full((Hkv, c, G), float("-inf"), dtype=dt, device=dev)
            if sink is not None:
                m = torch.maximum(m, sink)
            m_safe = torch.where(torch.isinf(m), torch.zeros_like(m), m)
            pr = s.sub_(m_safe.unsqueeze(-1)).exp_()  # unnormalised, in place of S
            del s
            total = pr.sum(dim=-1)
            if sink is not None:
                total = total + torch.exp(sink - m_safe)
            row_lse = m_safe + torch.log(total)  # -inf where the row sees nothing
            seen = torch.isfinite(row_lse)
            pr.div_(torch.where(seen, total, torch.ones_like(total)).unsqueeze(-1))  # P
            pr2 = pr.view(Hkv, c * G, w)
            pr_mma = rnd(pr2)  # P as the PV and dV GEMMs consume it
            oc = rnd(torch.bmm(pr_mma, vb))  # [Hkv, c*G, Dv]
            delta = (doc * oc).sum(dim=-1)  # [Hkv, c*G]
            dvh[:, lo:hi].baddbmm_(pr_mma.transpose(1, 2), doc)
            del pr_mma
            dp = torch.bmm(doc, vb.transpose(1, 2))  # [Hkv, c*G, w]
            if mag is not None:
                terms = dp.abs().add_(delta.abs().unsqueeze(-1)).mul_(pr2)  # P (|dP| + |Delta|)
                mag["o"] = torch.maximum(mag["o"], _top(torch.bmm(pr2, vabs[:, lo:hi])))
                dv_terms[:, lo:hi].baddbmm_(pr2.transpose(1, 2), doabs[:, r0:r1].reshape(Hkv, c * G, Dv))
                mag["dq"] = torch.maximum(mag["dq"], _top(torch.bmm(terms, kabs[:, lo:hi])) * scale)
                dk_terms[:, lo:hi].baddbmm_(terms.transpose(1, 2), qabs[:, r0:r1].reshape(Hkv, c * G, D))
                del terms
            ds = rnd(dp.sub_(delta.unsqueeze(-1)).mul_(pr2))  # dS
            del pr, pr2, dp
            dqc = torch.bmm(ds, kb).mul_(scale)  # [Hkv, c*G, D]
            dkh[:, lo:hi].baddbmm_(ds.transpose(1, 2), qc, alpha=scale)
            del ds
            if sink is not None:
                lse_safe = torch.where(seen, row_lse, torch.zeros_like(row_lse))
                p_sink = torch.where(seen, torch.exp(sink - lse_safe), torch.zeros_like(lse_safe))
                d3 = delta.view(Hkv, c, G)
                dsink -= (p_sink * d3).sum(dim=1)
                if mag is not None:
                    dsink_terms += (p_sink * d3.abs()).sum(dim=1)
            o[q0 + r0:q0 + r1] = oc.view(Hkv, c, G, Dv).permute(1, 0, 2, 3).reshape(c, Hq, Dv)
            dq[q0 + r0:q0 + r1] = dqc.view(Hkv, c, G, D).permute(1, 0, 2, 3).reshape(c, Hq, D)
            lse[q0 + r0:q0 + r1] = row_lse.permute(1, 0, 2).reshape(c, Hq).float()
        dk[k0:k0 + sk] = dkh.permute(1, 0, 2)
        dv[k0:k0 + sk] = dvh.permute(1, 0, 2)
        if mag is not None:
            mag["dk"] = torch.maximum(mag["dk"], _top(dk_terms) * scale)
            mag["dv"] = torch.maximum(mag["dv"], _top(dv_terms))
    if dsink_terms is not None:
        mag["dsink"] = _top(dsink_terms)
    dsink = None if dsink is None else dsink.reshape(Hq).float()
    if flash_rounding:  # the kernel's outputs are stored in the input dtype
        o, dq, dk, dv = (t.to(low) for t in (o, dq, dk, dv))
    out = Outputs(o=o, lse=lse, dq=dq, dk=dk, dv=dv, dsink=dsink)
    out.magnitude = None if mag is None else {n: float(t) for n, t in mag.items()}  # one sync, at the end
    return out


def _top(t: torch.Tensor) -> torch.Tensor:
    """max(t) as a 0-d tensor on t's device (0 for an empty t), without a host sync."""
    return t.amax() if t.numel() else torch.zeros((), dtype=t.dtype, device=t.device)
