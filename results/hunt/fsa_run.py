# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
import os, sys

os.environ["TRITON_INTERPRET"] = "1"
sys.path.insert(0, "/tmp/site-flash_sparse_attn")
import triton.runtime.interpreter as _I

_orig = _I._patch_lang_tensor


def _patch(t, s):
    _orig(t, s)
    s.set_attr(t, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


_I._patch_lang_tensor = _patch
import torch, time, types
import triton.language.core as _core
from triton.runtime.interpreter import InterpretedFunction as _IF

_core.JITCallable = (_core.JITCallable, _IF)
import functools as _ft
import numpy as _np


def _desc_reduce(self, kind, desc, value, indices):  # interpreter lacks TMA reduce: sequential load-add-store
    assert "ADD" in str(kind), kind
    ptrs, mask = desc.materialize_pointers(indices)
    dt = ptrs.get_element_ty()
    other = _I.TensorHandle(_np.zeros_like(ptrs.data, dtype=_I._get_np_dtype(dt)), dt)
    cur = self.create_masked_load(ptrs, mask, other, None, None, False)
    new = _I.TensorHandle((cur.data + value.data).astype(cur.data.dtype), dt)
    return self.create_masked_store(ptrs, new, mask, None, None)


_I.InterpreterBuilder.create_descriptor_reduce = _desc_reduce
_IF.__get__ = lambda self, obj, objtype=None: (
    self if obj is None else _ft.partial(self, obj)
)  # interpreter: let @aggregate keep its @triton.jit staticmethods
for _m in ("triton_kernels", "triton_kernels.matmul_ogs", "triton_kernels.numerics"):
    _mod = types.ModuleType(_m)
    for _n in ("matmul_ogs", "PrecisionConfig", "FlexCtx", "InFlexData", "OutFlexData"):
        setattr(_mod, _n, None)
    sys.modules[_m] = _mod
from flash_sparse_attn.ops.triton import cache_utils

cache_utils.get_device_num_sms = lambda device: 8
cache_utils.CachedKernel.__getitem__ = lambda self, grid: self._kernel[grid]  # interpreter: no warmup/compile
import flash_sparse_attn as fsa
from flash_sparse_attn.ops.triton import launch_template as _lt

_lt.get_fwd_combine_launch_config = lambda tile_k, device, arch: (
    8 if tile_k % 128 == 0 else (16 if tile_k % 64 == 0 else 32),
    4,
    1,
    1,
)
_lt.get_dec_combine_launch_config = lambda tile_k, device, arch: (4, max(min(8, 512 // tile_k), 1), 1)


def ref(q, k, v, causal, window=None, scale=None):
    # q [B,S,H,D]; bottom-right causal
    q, k, v = (t.double().transpose(1, 2) for t in (q, k, v))
    H, Hk = q.shape[1], k.shape[1]
    k = k.repeat_interleave(H // Hk, 1)
    v = v.repeat_interleave(H // Hk, 1)
    s = q @ k.transpose(-1, -2) * (scale or q.shape[-1] ** -0.5)
    sq, sk = s.shape[-2:]
    i = torch.arange(sq)[:, None] + sk - sq
    j = torch.arange(sk)[None]
    if causal:
        s = s.masked_fill(j > i, float("-inf"))
    return (s.softmax(-1).nan_to_num(0.0) @ v).transpose(1, 2)


def run(fn, B, sq, sk, H, Hk, D, causal, dtype=torch.float16, seed=0, reffn=ref, **kw):
    torch.manual_seed(seed)
    q = torch.randn(B, sq, H, D, dtype=dtype, requires_grad=True)
    k = torch.randn(B, sk, Hk, D, dtype=dtype, requires_grad=True)
    v = torch.randn(B, sk, Hk, D, dtype=dtype, requires_grad=True)
    do = torch.randn(B, sq, H, D, dtype=dtype)
    t = time.time()
    res = {}
    try:
        o = fn(q, k, v, is_causal=causal, **kw)
    except Exception as e:
        import traceback

        traceback.print_exc(limit=-3)
        return {"fwd_err": repr(e)[:300]}
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    o64 = reffn(q64, k64, v64, causal)
    g64 = torch.autograd.grad(o64, (q64, k64, v64), do.double())
    res["o"] = (o.double() - o64).abs().max().item()
    try:
        g = torch.autograd.grad(o, (q, k, v), do)
        for n, a, b in zip(("dq", "dk", "dv"), g, g64):
            res[n] = (a.double() - b).abs().max().item()
    except Exception as e:
        import traceback

        traceback.print_exc(limit=-3)
        res["bwd_err"] = repr(e)[:300]
    res["t"] = round(time.time() - t, 1)
    return {k_: (f"{v_:.2e}" if isinstance(v_, float) else v_) for k_, v_ in res.items()}
