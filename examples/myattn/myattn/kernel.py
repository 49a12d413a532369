"""The kernel under test: varlen attention forward and backward over packed (THD)
tensors, FlashAttention's calling convention (cu_seqlens offsets, bottom-right causal
mask, GQA by head groups, a float32 log-sum-exp saved by the forward for the backward).

It is plain torch in float32 so the example runs anywhere; a real kernel would be a
CUDA/Triton/TileLang launch behind the same two functions. ``MYATTN_BUG`` plants a bug
for the guide's walk-through: ``gqa-head-map`` maps query head h to key/value head
h % heads_kv instead of h // group; ``causal-offset`` lets every query see one key too many.
"""

import os

import torch


def _kv_head(heads_q: int, heads_kv: int) -> torch.Tensor:
    group = heads_q // heads_kv
    h = torch.arange(heads_q)
    if os.environ.get("MYATTN_BUG") == "gqa-head-map":
        return h % heads_kv  # the planted bug
    return h // group


def _mask(sq: int, sk: int, causal: bool, device) -> torch.Tensor:
    """[sq, sk] bool, True where query i may see key j (bottom-right causal)."""
    if not causal:
        return torch.ones(sq, sk, dtype=torch.bool, device=device)
    extra = 1 if os.environ.get("MYATTN_BUG") == "causal-offset" else 0
    i = torch.arange(sq, device=device).unsqueeze(1) + (sk - sq) + extra
    return torch.arange(sk, device=device).unsqueeze(0) <= i


def _segments(cu_q: torch.Tensor, cu_k: torch.Tensor):
    cq, ck = cu_q.tolist(), cu_k.tolist()
    for b in range(len(cq) - 1):
        yield cq[b], cq[b + 1], ck[b], ck[b + 1]


def attention_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, *, causal=False, softmax_scale=None, out=None, lse=None):
    """q [Tq, Hq, D], k [Tk, Hkv, D], v [Tk, Hkv, Dv] -> (out [Tq, Hq, Dv] in q's dtype,
    lse [Tq, Hq] float32). Writes into ``out``/``lse`` when given; rows past the last
    cu_seqlens offset are never touched."""
    Hq, Hkv, D = q.shape[1], k.shape[1], q.shape[2]
    scale = D ** -0.5 if softmax_scale is None else softmax_scale
    if out is None:
        out = torch.zeros(q.shape[0], Hq, v.shape[2], dtype=q.dtype, device=q.device)
    if lse is None:
        lse = torch.full((q.shape[0], Hq), float("-inf"), dtype=torch.float32, device=q.device)
    kvh = _kv_head(Hq, Hkv).to(q.device)
    for q0, q1, k0, k1 in _segments(cu_seqlens_q, cu_seqlens_k):
        qs = q[q0:q1].float().transpose(0, 1)  # [Hq, sq, D]
        ks = k[k0:k1].float().transpose(0, 1)[kvh]  # [Hq, sk, D]
        vs = v[k0:k1].float().transpose(0, 1)[kvh]
        s = (qs @ ks.transpose(1, 2)) * scale
        s = s.masked_fill(~_mask(q1 - q0, k1 - k0, causal, q.device), float("-inf"))
        m = torch.logsumexp(s, dim=-1) if s.shape[-1] else torch.full(s.shape[:2], float("-inf"), device=q.device)
        p = torch.exp(s - torch.where(torch.isinf(m), 0.0, m).unsqueeze(-1))  # rows seeing no key: all 0
        out[q0:q1] = (p @ vs).transpose(0, 1).to(out.dtype)
        lse[q0:q1] = m.transpose(0, 1)
    return out, lse


def attention_backward(do, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *, causal=False, softmax_scale=None,
                       dq=None, dk=None, dv=None):
    """The FlashAttention-2 backward: P recomputed from the saved LSE, Delta = rowsum(dO * O),
    dS = P * (dP - Delta). Returns (dq, dk, dv) in the input dtype; writes into the given
    buffers (every used row of them)."""
    Hq, Hkv, D = q.shape[1], k.shape[1], q.shape[2]
    scale = D ** -0.5 if softmax_scale is None else softmax_scale
    dq = torch.zeros_like(q) if dq is None else dq
    dk = torch.zeros_like(k) if dk is None else dk
    dv = torch.zeros_like(v) if dv is None else dv
    kvh = _kv_head(Hq, Hkv).to(q.device)
    for q0, q1, k0, k1 in _segments(cu_seqlens_q, cu_seqlens_k):
        qs = q[q0:q1].float().transpose(0, 1)
        ks = k[k0:k1].float().transpose(0, 1)[kvh]
        vs = v[k0:k1].float().transpose(0, 1)[kvh]
        dos = do[q0:q1].float().transpose(0, 1)
        os_ = out[q0:q1].float().transpose(0, 1)
        m = lse[q0:q1].transpose(0, 1)
        s = (qs @ ks.transpose(1, 2)) * scale
        s = s.masked_fill(~_mask(q1 - q0, k1 - k0, causal, q.device), float("-inf"))
        p = torch.exp(s - torch.where(torch.isinf(m), 0.0, m).unsqueeze(-1))
        dp = dos @ vs.transpose(1, 2)
        delta = (dos * os_).sum(-1, keepdim=True)
        ds = p * (dp - delta)
        dq[q0:q1] = ((ds @ ks) * scale).transpose(0, 1).to(dq.dtype)
        dk_h = (ds.transpose(1, 2) @ qs) * scale  # [Hq, sk, D], summed over each group below
        dv_h = p.transpose(1, 2) @ dos
        dk_kv = torch.zeros(Hkv, k1 - k0, D, device=q.device).index_add_(0, kvh, dk_h)
        dv_kv = torch.zeros(Hkv, k1 - k0, v.shape[2], device=q.device).index_add_(0, kvh, dv_h)
        dk[k0:k1] = dk_kv.transpose(0, 1).to(dk.dtype)
        dv[k0:k1] = dv_kv.transpose(0, 1).to(dv.dtype)
    return dq, dk, dv
