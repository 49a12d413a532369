# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import torch


class Entmax64(torch.autograd.Function):
    """alpha-entmax over the last dim in float64, exact threshold by bisection; -inf entries get 0."""

    @staticmethod
    def forward(ctx, z, alpha):
        a1 = alpha - 1
        x = z * a1
        mx = x.max(-1, keepdim=True).values
        lo, hi = mx - 1.0, mx.clone()
        for _ in range(200):
            tau = (lo + hi) / 2
            s = ((x - tau).clamp_min(0) ** (1 / a1)).sum(-1, keepdim=True)
            lo = torch.where(s >= 1, tau, lo)
            hi = torch.where(s < 1, tau, hi)
        p = (x - (lo + hi) / 2).clamp_min(0) ** (1 / a1)
        p = p / p.sum(-1, keepdim=True)
        ctx.save_for_backward(p)
        ctx.alpha = alpha
        return p

    @staticmethod
    def backward(ctx, dp):
        (p,) = ctx.saved_tensors
        g = torch.where(p > 0, p ** (2 - ctx.alpha), torch.zeros_like(p))
        dz = dp * g
        q = dz.sum(-1, keepdim=True) / g.sum(-1, keepdim=True)
        return dz - q * g, None


def entmax_attn(q, k, v, alpha=1.5, causal=True, varlen=None):
    """q [B,H,N,D], k,v [B,Hk,N,D] (float64). causal top-left (square)."""
    H, Hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // Hk, 1)
    v = v.repeat_interleave(H // Hk, 1)
    N, M = q.shape[2], k.shape[2]
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if causal:
        s = s.masked_fill(torch.ones(N, M, dtype=torch.bool).tril(M - N).logical_not(), float("-inf"))
    if varlen is not None:
        km = torch.arange(M)[None] < varlen[:, None]
        s = s.masked_fill(~km[:, None, None, :], float("-inf"))
        qm = torch.arange(N)[None] < varlen[:, None]
        s = s.masked_fill(~qm[:, None, :, None], 0.0)
    o = Entmax64.apply(s, alpha) @ v
    if varlen is not None:
        o = o.masked_fill(~qm[:, None, :, None], 0)
    return o
