# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import os, sys

os.environ["TRITON_INTERPRET"] = "true"
os.environ["ADASPLASH_TEST_FAST_AUTOTUNE"] = "1"
sys.path.insert(0, "/tmp/site-adasplash")
import triton.runtime.interpreter as _I

_orig = _I._patch_lang_tensor


def _patch(t, s):
    _orig(t, s)
    s.set_attr(t, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_I._patch_lang_tensor = _patch
import torch, time
from entmax_ref import entmax_attn
import adasplash


def run(fn, B, H, Hk, N, D, causal=True, alpha=1.5, varlen=None, dtype=torch.float32, seed=0, scale=1.0, **kw):
    torch.manual_seed(seed)
    q = (torch.randn(B, H, N, D) * scale).to(dtype).requires_grad_()
    k = (torch.randn(B, Hk, N, D) * scale).to(dtype).requires_grad_()
    v = torch.randn(B, Hk, N, D).to(dtype).requires_grad_()
    do = torch.randn(B, H, N, D).to(dtype)
    t = time.time()
    res = {}
    try:
        o = fn(q, k, v, varlen=varlen, **kw)
        g = torch.autograd.grad(o, (q, k, v), do)
    except Exception as e:
        return {"err": repr(e)[:300]}
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = entmax_attn(q64, k64, v64, alpha, causal, varlen)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    res["o"] = (o.double() - o64).abs().max().item()
    for n, a, b in zip(("dq", "dk", "dv"), g, g64):
        res[n] = (a.double() - b).abs().max().item()
    res["t"] = round(time.time() - t, 1)
    return {k_: (f"{v_:.2e}" if isinstance(v_, float) else v_) for k_, v_ in res.items()}


import functools
from adasplash import adasplash_block_mask as _bm, adasplash_no_block_mask as _nbm

_bm.compute_bidxs_and_cubcounts = functools.partial(_bm.compute_bidxs_and_cubcounts, device="cpu")
