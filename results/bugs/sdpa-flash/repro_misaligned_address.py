"""PyTorch SDPA, flash backend: q, k, v and grad_out that start one element into their storage (data pointer
2 bytes past 16-byte alignment) end in "CUDA error: misaligned address". Needs torch only.
Each case runs in a child process (the error is sticky). Exits 1 while a one-element offset fails where the
same call at an aligned offset runs."""
import json
import subprocess
import sys

import torch

CHILD = r"""
import contextlib, sys, torch
from torch.nn.attention import SDPBackend, sdpa_kernel
d, off, pin = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "flash"
torch.manual_seed(0)
def at(h):  # [1, 63, h, d] bf16 memory starting `off` elements into its storage, as [1, h, 63, d]
    flat = torch.empty(off + 63 * h * d, device="cuda", dtype=torch.bfloat16)
    x = flat[off:].view(1, 63, h, d)
    x.copy_(torch.randn(1, 63, h, d))
    return x.transpose(1, 2)
q, k, v, do = at(16), at(2), at(2), at(16)
q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
ctx = sdpa_kernel([SDPBackend.FLASH_ATTENTION]) if pin else contextlib.nullcontext()  # else: default dispatch
stage = "forward"
try:
    with ctx:
        o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        torch.cuda.synchronize()
        stage = "backward"
        torch.autograd.grad(o, (q, k, v), do)
        torch.cuda.synchronize()
except RuntimeError as e:
    sys.exit(f"{stage}: {str(e).splitlines()[0]}")
"""
print(json.dumps({"torch": torch.__version__, "gpu": torch.cuda.get_device_name()}), flush=True)
bug = False
for d in (112, 152, 256, 64, 128):
    for off in (1, 8):  # 8 elements = 16 bytes: the aligned control
        for pin in ("flash", "default"):
            r = subprocess.run([sys.executable, "-c", CHILD, str(d), str(off), pin],
                               capture_output=True, text=True, timeout=300)
            err = (r.stderr.strip().splitlines() or [""])[-1] if r.returncode else ""
            row = {"head_dim": d, "offset_elems": off, "backend": pin, "ok": r.returncode == 0, "error": err}
            print(json.dumps(row), flush=True)
            bug |= off == 1 and r.returncode != 0
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
