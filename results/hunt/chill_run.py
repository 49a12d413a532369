# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import os, sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, "/tmp/site-chillsrc")
import triton.runtime.interpreter as _I

_orig = _I._patch_lang_tensor


def _patch(t, s):
    _orig(t, s)
    s.set_attr(t, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_I._patch_lang_tensor = _patch
import torch, time
import chill_attention as ca


def allowed(kind, args, T):
    q = torch.arange(T)[:, None]
    k = torch.arange(T)[None]
    if kind == "full":
        return torch.ones(T, T, dtype=torch.bool)
    if kind == "causal":
        return q >= k
    if kind == "sliding":
        l, r = args
        return (k <= q + r) & (k >= q - l)
    if kind == "chunk":
        c, b = args
        d = q // c - k // c
        return (d >= 0) & (d <= b)
    if kind == "prefix":
        (p,) = args
        return (k < p) | (k <= q)


def ref(q, k, v, kind, args, lens=None, scale=None):
    B, H, T, D = q.shape
    Hk = k.shape[1]
    k = k.repeat_interleave(H // Hk, 1)
    v = v.repeat_interleave(H // Hk, 1)
    s = q @ k.transpose(-1, -2) * (scale or D**-0.5)
    a = allowed(kind, args, T)[None, None].expand(B, H, T, T)
    if lens is not None:
        kp = torch.arange(T)[None] < lens[:, None]
        a = a & kp[:, None, None, :] & kp[:, None, :, None]
    p = s.masked_fill(~a, float("-inf")).softmax(-1).nan_to_num(0.0)
    o = p @ v
    if lens is not None:
        o = o * kp[:, None, :, None]
    return o


MASKS = {
    "full": ca.FullChillMask,
    "causal": ca.CausalChillMask,
    "sliding": ca.SlidingWindowChillMask,
    "chunk": ca.ChunkwiseChillMask,
    "prefix": ca.PrefixLMChillMask,
}


def run(B, H, Hk, T, D, kind, args=(), dtype=torch.float32, lens=None, seed=0, **kw):
    torch.manual_seed(seed)
    q = torch.randn(B, H, T, D).to(dtype).requires_grad_()
    k = torch.randn(B, Hk, T, D).to(dtype).requires_grad_()
    v = torch.randn(B, Hk, T, D).to(dtype).requires_grad_()
    do = torch.randn(B, H, T, D).to(dtype)
    t = time.time()
    res = {}
    try:
        o = ca.chill_attention(q, k, v, mask=MASKS[kind](*args), lens=lens, **kw)
    except Exception as e:
        return {"fwd_err": repr(e)[:300]}
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = ref(q64, k64, v64, kind, args, lens)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    res["o"] = (o.double() - o64).abs().max().item()
    try:
        g = torch.autograd.grad(o, (q, k, v), do)
        for n, a, b in zip(("dq", "dk", "dv"), g, g64):
            res[n] = (a.double() - b).abs().max().item()
    except Exception as e:
        res["bwd_err"] = repr(e)[:300]
    res["t"] = round(time.time() - t, 1)
    return {k_: (f"{v_:.1e}" if isinstance(v_, float) else v_) for k_, v_ in res.items()}
