"""flash-sparse-attn: the backward's pre/postprocess kernels are launched through cache_utils.CachedKernel, whose
cache key holds only tensor dtypes/devices and the keyword (constexpr) arguments. seqlen_q is passed positionally,
and Triton compiles an int argument equal to 1 as the constant 1. So after one backward with seqlen_q == 1, later
backwards with the same dtype and tiles reuse that kernel: dpsum, lse_log2 and dq_accum are prepared for row 0
only, and dQ, dK, dV come out wrong. Needs CUDA (the cache needs compiled kernels; Triton's CPU interpreter cannot
run it). Exits 1 while a seqlen_q 64 backward run after a seqlen_q 1 backward is wrong, 0 once it is right."""

import sys
import types
from importlib.metadata import version

import torch
import triton

print(f"flash-sparse-attn {version('flash-sparse-attn')} | triton {triton.__version__} | torch {torch.__version__}")
if not torch.cuda.is_available():
    print("needs a CUDA GPU")
    sys.exit(2)
print("GPU", torch.cuda.get_device_name(), "sm_%d%d" % torch.cuda.get_device_capability(), "| CUDA", torch.version.cuda)
try:  # the README installs triton_kernels from Triton's repository; only flash_proj_* use it, not this script
    import triton_kernels.matmul_ogs  # noqa: F401
except ModuleNotFoundError:
    for m in ("triton_kernels", "triton_kernels.matmul_ogs", "triton_kernels.numerics"):
        sys.modules[m] = types.SimpleNamespace(
            **dict.fromkeys(("matmul_ogs", "PrecisionConfig", "FlexCtx", "InFlexData", "OutFlexData"))
        )
from flash_sparse_attn import flash_dense_attn_func  # noqa: E402
from flash_sparse_attn.ops.triton import flash_bwd_postprocess, flash_bwd_preprocess  # noqa: E402


def errors(seqlen_q, seqlen_k=64, heads=2, d=64):
    torch.manual_seed(0)
    q = torch.randn(1, seqlen_q, heads, d, device="cuda", dtype=torch.float16, requires_grad=True)
    k, v = (torch.randn(1, seqlen_k, heads, d, device="cuda", dtype=torch.float16, requires_grad=True) for _ in "kv")
    do = torch.randn(1, seqlen_q, heads, d, device="cuda", dtype=torch.float16)
    o = flash_dense_attn_func(q, k, v, is_autotune=False, tile_mn=(64, 64))  # documented fixed tiles
    got = [o, *torch.autograd.grad(o, (q, k, v), do)]
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q64, k64) * d**-0.5
    o64 = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v64)
    ref = [o64, *torch.autograd.grad(o64, (q64, k64, v64), do.double())]
    return [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]


def show(name, e):
    bad = not all(x <= 2e-2 for x in e)  # fp16 kernels are within ~2e-3 here; NaN counts as bad
    print(f"{name}: max |error| O {e[0]:.2e} dQ {e[1]:.2e} dK {e[2]:.2e} dV {e[3]:.2e}" + ("  WRONG" if bad else ""))
    return bad


show("seqlen_q 64 (fresh cache, control)", errors(64))
for kern in (flash_bwd_preprocess._bwd_preprocess_kernel, flash_bwd_postprocess._bwd_postprocess_kernel):
    kern._cache.clear()  # start again with empty caches
show("seqlen_q 1 (fresh cache, one head: its LSE row is 16-byte aligned)", errors(1, heads=1))
bug = show("seqlen_q 64 (after the seqlen_q 1 call)", errors(64))
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
