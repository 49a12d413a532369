"""fla-core parallel_attn on Hopper (H100/H200): head dims above 128 pass the forward's check (K <= 256) and
then fail at launch with Triton OutOfResources (shared memory): the Hopper tile sizes do not shrink with K or
V. Needs torch and fla-core. One line per (K, V); exits 1 while an accepted pair fails."""
import json
import sys

import torch
from fla.ops.attn.parallel import parallel_attn

bug = False
for kd, vd in ((64, 64), (128, 128), (128, 256), (136, 136), (192, 128), (256, 256), (256, 64)):
    torch.manual_seed(0)
    q, k = (torch.randn(1, 64, 2, kd, device="cuda", dtype=torch.float16, requires_grad=True) for _ in range(2))
    v = torch.randn(1, 64, 2, vd, device="cuda", dtype=torch.float16, requires_grad=True)
    row, part = {"K": kd, "V": vd}, "forward"
    try:
        o = parallel_attn(q, k, v)
        part = "backward"
        o.backward(torch.randn_like(o))
        torch.cuda.synchronize()
        row["result"] = "ok"
    except Exception as e:  # noqa: BLE001 - the failure is the result
        row["result"] = f"{part}: {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        bug |= "OutOfResources" in type(e).__name__
    print(json.dumps(row), flush=True)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
