"""jvp-flash-attention: head_dim 16 passes JVPAttn.forward's check (HEAD_DIM_K in {16, 32, 64, 128, 256}), then
the forward kernel fails to compile: BLOCK_N is fixed at 32 and the kernel asserts BLOCK_N <= HEAD_DIM.
Needs torch, triton and jvp-flash-attention. Exits 1 while head_dim 16 is accepted and then fails to build."""

import sys
from importlib.metadata import version

import torch
import triton
from jvp_flash_attention.jvp_attention import attention
from triton.compiler.errors import CompilationError  # CompileTimeAssertionFailure is one

print(
    "jvp-flash-attention", version("jvp-flash-attention"), "| triton", triton.__version__, "| torch", torch.__version__
)
print("GPU", torch.cuda.get_device_name(), "sm_%d%d" % torch.cuda.get_device_capability(), "| CUDA", torch.version.cuda)


def reference(q, k, v):  # float64, non-causal
    s = (q.double() @ k.double().transpose(-1, -2)) * q.shape[-1] ** -0.5
    return torch.softmax(s, dim=-1) @ v.double()


bug = False
tol = 5e-2  # loose: bf16 output rounding, and the kernel's float32 matmuls run in TF32 (Triton's default)
# head_dim 32 in bfloat16 is the control
for dtype, d in [(torch.bfloat16, 32)] + [(t, 16) for t in (torch.float16, torch.bfloat16, torch.float32)]:
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 64, d, dtype=dtype).cuda().requires_grad_() for _ in range(3))
    name = f"{str(dtype)[6:]:8s} head_dim {d}"
    try:
        o = attention(q, k, v)
        o.float().sum().backward()
        torch.cuda.synchronize()
    except CompilationError as e:  # accepted by the check, then the kernel cannot be built
        lines = [x.strip() for x in str(e).splitlines() if x.strip() and x.strip() != "^"]
        print(f"{name}: {type(e).__name__}: {lines[-1][:120] if lines else ''}")
        bug = bug or d == 16
        continue
    except (AssertionError, ValueError, NotImplementedError) as e:  # a clear refusal up front would be a fix
        print(f"{name}: refused: {str(e)[:120]}")
        continue
    with torch.no_grad():
        err = (o.double() - reference(q, k, v)).abs().max().item()
    finite = all(t.grad is not None and bool(t.grad.isfinite().all()) for t in (q, k, v))
    print(f"{name}: ran; max |O - float64 reference| = {err:.2e} (tolerance {tol}), finite gradients: {finite}")
    bug = bug or (d == 16 and not (err <= tol and finite))
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
