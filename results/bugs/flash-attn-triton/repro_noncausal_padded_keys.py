"""flash-attn-triton: non-causal attention with seqlen_q a multiple of 128 but seqlen_k not. flash_attn_func checks
only seqlen_q % 128, pads K and V with zero rows up to 128, and the kernel never masks them: each padded key gets
logit 0 and takes part in the softmax, so O, dQ, dK and dV are wrong. Exits 1 while they are, 0 once fixed.
Runs on CUDA, or on the CPU under Triton's interpreter without one."""

import os
import sys
import types
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

try:  # imported but unused by 0.1.1, and gone from Triton >= 3.4 (reported separately): a stand-in lets it load
    import triton.tools.experimental_descriptor  # noqa: F401
except ModuleNotFoundError:
    sys.modules["triton.tools.experimental_descriptor"] = types.ModuleType("triton.tools.experimental_descriptor")
from flash_attn_triton import flash_attn_func  # noqa: E402
from flash_attn_triton.triton_kernel import attention_kernel  # noqa: E402

if dev == "cpu":  # the interpreter cannot autotune, and numpy >= 2.4 refuses int() of its 1-element program ids
    attention_kernel._attn_fwd.configs = [triton.Config({"BLOCK_M": 64, "BLOCK_N": 32})]
    patch, index = interp._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])
    interp._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(
    f"flash-attn-triton {version('flash-attn-triton')} | triton {triton.__version__} | torch {torch.__version__}", gpu
)

bug = False
for sk in (128, 100):  # 128 is the control
    torch.manual_seed(0)
    q, do = torch.randn(1, 128, 2, 64, device=dev, dtype=torch.float16), torch.randn(1, 128, 2, 64, device=dev)
    k, v = (torch.randn(1, sk, 2, 64, device=dev, dtype=torch.float16) for _ in range(2))
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    o = flash_attn_func(q, k, v, causal=False)
    got = [o, *torch.autograd.grad(o, (q, k, v), do.half())]
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))  # float64 on the same fp16 inputs
    s = torch.einsum("bqhd,bkhd->bhqk", q64, k64) * 64**-0.5
    o64 = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v64)
    ref = [o64, *torch.autograd.grad(o64, (q64, k64, v64), do.double())]
    errs = [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]
    bad = not all(e <= 2e-2 for e in errs)  # fp16 kernels are within ~2e-3 here; NaN counts as bad
    bug |= bad
    print(
        f"seqlen_q 128, seqlen_k {sk}: max |error| O {errs[0]:.2e} dQ {errs[1]:.2e} dK {errs[2]:.2e} dV {errs[3]:.2e}"
        + ("  WRONG" if bad else "")
    )
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
