# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import os, sys, types

os.environ.setdefault("TRITON_INTERPRET", "1")
import triton.tools
import triton.runtime.interpreter as _I

_orig_patch = _I._patch_lang_tensor


def _patch(tensor, scope):  # numpy >= 2.4: int() of a 1-element 1-D array raises (interpreter-only issue)
    _orig_patch(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_I._patch_lang_tensor = _patch
if "triton.tools.experimental_descriptor" not in sys.modules:
    try:
        import triton.tools.experimental_descriptor  # noqa
    except ModuleNotFoundError:
        m = types.ModuleType("triton.tools.experimental_descriptor")
        sys.modules[m.__name__] = m
        triton.tools.experimental_descriptor = m
sys.path.insert(0, "/tmp/site-flash_attn_triton")
import torch
from flash_attn_triton import flash_attn_func


def ref(q, k, v, causal, align="br", scale=None):
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    hq, hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(hq // hk, 1)
    v = v.repeat_interleave(hq // hk, 1)
    s = (q @ k.transpose(-1, -2)) * (scale or q.shape[-1] ** -0.5)
    if causal:
        sq, sk = s.shape[-2:]
        i = torch.arange(sq)[:, None]
        j = torch.arange(sk)[None]
        off = sk - sq if align == "br" else 0
        s = s.masked_fill(j > i + off, float("-inf"))
    return (s.softmax(-1) @ v).transpose(1, 2)


def run(B, sq, sk, hq, hk, d, causal, dtype=torch.float16, align="br", seed=0):
    torch.manual_seed(seed)
    q = torch.randn(B, sq, hq, d, dtype=dtype, requires_grad=True)
    k = torch.randn(B, sk, hk, d, dtype=dtype, requires_grad=True)
    v = torch.randn(B, sk, hk, d, dtype=dtype, requires_grad=True)
    do = torch.randn(B, sq, hq, d, dtype=dtype)
    res = {}
    try:
        o = flash_attn_func(q, k, v, causal=causal)
    except Exception as e:
        return {"fwd_err": repr(e)[:200]}
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    o64 = ref(q64, k64, v64, causal, align)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    # same-dtype plain torch
    qd, kd, vd = (t.detach().clone().requires_grad_() for t in (q, k, v))
    res["o"] = (o.double() - o64).abs().max().item()
    try:
        g = torch.autograd.grad(o, (q, k, v), do)
        for n, a, b in zip("qkv", g, g64):
            res["d" + n] = (a.double() - b).abs().max().item()
    except Exception as e:
        res["bwd_err"] = repr(e)[:200]
    return res


import triton
from flash_attn_triton.triton_kernel import attention_kernel as AK

if not torch.cuda.is_available():
    AK._attn_fwd.configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 32})]
