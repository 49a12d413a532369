"""flash-attn-4 (CuTe) SM90: head_dim 32 with head_dim_v 120 (both accepted by the interface) ends in
"CUDA error: an illegal memory access" inside forward + backward. Needs torch and flash-attn-4 only.
Each case runs in a child process (the error leaves the CUDA context unusable). Exits 1 while it fails."""
import json
import subprocess
import sys

CHILD = """
import sys, torch
from flash_attn.cute import flash_attn_func
d, dv = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
q, k = (torch.randn(1, 65, 2, d, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(2))
v = torch.randn(1, 65, 2, dv, device="cuda", dtype=torch.float16, requires_grad=True)
out, _ = flash_attn_func(q, k, v)
torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
torch.cuda.synchronize()
"""
bug = False
for d, dv in ((32, 120), (32, 128), (120, 120)):  # the last two are controls
    r = subprocess.run([sys.executable, "-c", CHILD, str(d), str(dv)], capture_output=True, text=True, timeout=300)
    err = [ln for ln in r.stderr.splitlines() if "Error" in ln or "error" in ln][-1:] if r.returncode else []
    print(json.dumps({"head_dim": d, "head_dim_v": dv, "returncode": r.returncode, "error": err}), flush=True)
    bug |= (d, dv) == (32, 120) and r.returncode != 0
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
