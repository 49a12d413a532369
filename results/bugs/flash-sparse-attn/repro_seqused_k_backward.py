"""flash-sparse-attn: flash_dense_attn_func(..., seqused_k=...) uses only the first seqused_k[b] keys in the forward,
but FlashDenseAttnFunc.backward never passes seqused_k on (_flash_dense_attn_backward has no such argument), so
the backward treats all seqlen_k keys as valid: dQ, dK and dV are wrong. Exits 1 while they differ from float64, 0
once right. Runs on CUDA, or on the CPU under Triton's interpreter with stand-ins for what it lacks."""

import os
import sys
import types
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402

try:  # the README installs triton_kernels from Triton's repository; only flash_proj_* use it
    import triton_kernels.matmul_ogs  # noqa: F401
except ModuleNotFoundError:
    stub = types.SimpleNamespace(matmul_ogs=0, PrecisionConfig=0, FlexCtx=0, InFlexData=0, OutFlexData=0)
    sys.modules.update(dict.fromkeys(("triton_kernels", "triton_kernels.matmul_ogs", "triton_kernels.numerics"), stub))
if dev == "cpu":  # interpreter stand-ins: nothing here changes what the kernels compute
    import numpy as np
    import triton.language.core as core
    import triton.runtime.interpreter as I  # noqa: E741

    core.JITCallable = (core.JITCallable, I.InterpretedFunction)  # @aggregate keeps its @triton.jit methods
    I.InterpretedFunction.__get__ = lambda f, obj, t=None: f if obj is None else (lambda *a, **k: f(obj, *a, **k))
    patch, index = I._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])  # numpy >= 2.4
    I._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))

    def reduce_add(self, kind, desc, value, idx):  # TMA atomic add, done sequentially
        ptrs, mask = desc.materialize_pointers(idx)
        zero = I.TensorHandle(np.zeros_like(ptrs.data, dtype=I._get_np_dtype(ptrs.get_element_ty())), value.dtype)
        cur = self.create_masked_load(ptrs, mask, zero, None, None, False)
        return self.create_masked_store(ptrs, I.TensorHandle(cur.data + value.data, cur.dtype), mask, None, None)

    I.InterpreterBuilder.create_descriptor_reduce = reduce_add
from flash_sparse_attn import flash_dense_attn_func  # noqa: E402
from flash_sparse_attn.ops.triton import cache_utils as cu  # noqa: E402

if dev == "cpu":  # the kernel cache needs compiled kernels (the interpreter launches directly); no SM count
    cu.CachedKernel.__getitem__, cu.get_device_num_sms = (lambda self, grid: self._kernel[grid]), (lambda d: 8)
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(
    f"flash-sparse-attn {version('flash-sparse-attn')} | triton {triton.__version__} | torch {torch.__version__}|", gpu
)

B, SQ, SK, H, D, used = 2, 32, 100, 2, 64, torch.tensor([100, 37], dtype=torch.int32, device=dev)
torch.manual_seed(0)
q, k, v = (torch.randn(B, s, H, D, device=dev, dtype=torch.float16).requires_grad_() for s in (SQ, SK, SK))
do, bug = torch.randn(B, SQ, H, D, device=dev, dtype=torch.float16), False
for causal in (False, True):  # tiles fixed (a documented option) so the run does not depend on autotuning
    o = flash_dense_attn_func(q, k, v, is_causal=causal, seqused_k=used, is_autotune=False, tile_mn=(64, 64))
    got = [o, *torch.autograd.grad(o, (q, k, v), do)]
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    i, j = torch.arange(SQ, device=dev)[:, None], torch.arange(SK, device=dev)[None, :]
    keep = (j < used[:, None, None]) & ((j <= i + used[:, None, None] - SQ) | (not causal))  # causal: bottom-right
    s = torch.einsum("bqhd,bkhd->bhqk", q64, k64) * D**-0.5  # of the used keys
    o64 = torch.einsum("bhqk,bkhd->bqhd", s.masked_fill(~keep[:, None], -torch.inf).softmax(-1), v64)
    ref = [o64, *torch.autograd.grad(o64, (q64, k64, v64), do.double())]
    e = [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]
    bug |= (bad := not all(x <= 2e-2 for x in e))  # fp16 kernels are within ~2e-3 here; NaN counts as bad
    print(f"causal={causal}: max |error| O {e[0]:.2e} dQ {e[1]:.2e} dK {e[2]:.2e} dV {e[3]:.2e}" + "  WRONG" * bad)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
