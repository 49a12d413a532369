"""flash-sparse-attn: the backward preprocess builds device-side tensor descriptors (TMA on Hopper) on the LSE
rows of each (batch, head): `lse` is float32 [batch, heads, seqlen_q], so for head h the base is
lse + h * seqlen_q * 4 bytes, which is not 16-byte aligned when seqlen_q % 4 != 0. `tl.make_tensor_descriptor`
requires a 16-byte aligned base (Triton's documentation; its CPU interpreter asserts it). Expected: seqlen_q 37
with 2 heads trains like seqlen_q 64. Needs CUDA (the package's kernel cache cannot run under the interpreter).
Exits 1 while the backward fails or is wrong, 0 once it is right."""

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


try:  # first, so that the kernel cache holds nothing compiled for another seqlen_q
    bug = show("seqlen_q 37", errors(37))
except Exception as e:  # a CUDA error (misaligned address, illegal instruction) is the failure too
    bug = True
    print(f"seqlen_q 37: {type(e).__name__}: {str(e)[:200]}")
else:
    show("seqlen_q 64 (control)", errors(64))
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
