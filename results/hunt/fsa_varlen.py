# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
from fsa_run import *


def run_varlen(lq, lk, H, Hk, D, causal, dtype=torch.float16, seed=0, **kw):
    torch.manual_seed(seed)
    cq = torch.tensor([0] + list(torch.tensor(lq).cumsum(0)), dtype=torch.int32)
    ck = torch.tensor([0] + list(torch.tensor(lk).cumsum(0)), dtype=torch.int32)
    q = torch.randn(sum(lq), H, D, dtype=dtype, requires_grad=True)
    k = torch.randn(sum(lk), Hk, D, dtype=dtype, requires_grad=True)
    v = torch.randn(sum(lk), Hk, D, dtype=dtype, requires_grad=True)
    do = torch.randn(sum(lq), H, D, dtype=dtype)
    try:
        o = fsa.flash_dense_attn_varlen_func(q, k, v, cq, ck, max(lq), max(lk), is_causal=causal, **kw)
    except Exception as e:
        return {"fwd_err": repr(e)[:300]}
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    outs = []
    for b in range(len(lq)):
        qs, ks = slice(cq[b], cq[b + 1]), slice(ck[b], ck[b + 1])
        if lq[b] == 0:
            continue
        if lk[b] == 0:
            outs.append((slice(cq[b], cq[b + 1]), torch.zeros(lq[b], H, D, dtype=torch.double)))
            continue
        outs.append((qs, ref(q64[qs][None], k64[ks][None], v64[ks][None], causal)[0]))
    o64 = torch.zeros(sum(lq), H, D, dtype=torch.double)
    o64 = o64 + sum(
        (torch.zeros_like(o64).index_put((torch.arange(s.start, s.stop),), val) for s, val in outs),
        torch.zeros_like(o64),
    )
    res = {"o": (o.double() - o64).abs().max().item()}
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double(), allow_unused=True)
    try:
        g = torch.autograd.grad(o, (q, k, v), do)
        for n, a, b in zip(("dq", "dk", "dv"), g, g64):
            b = torch.zeros_like(a, dtype=torch.double) if b is None else b
            res[n] = (a.double() - b).abs().max().item()
    except Exception as e:
        res["bwd_err"] = repr(e)[:200]
    return {k_: (f"{v_:.2e}" if isinstance(v_, float) else v_) for k_, v_ in res.items()}
