"""TileOPs GQADenseWithLSEFwdOp (SM90): head dims 160..288 pass the op's checks, then the launch fails with
"Failed to set the allowed dynamic shared memory size" (1536 x head_dim bytes > 227 KiB). Needs torch and
tileops. Exits 1 while head dim 160 fails this way."""
import json
import sys

import torch
from tileops.attention import GQADenseWithLSEFwdOp

bug = False
for d in (144, 160, 256):  # 144 is a control
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 3, 1, d, device="cuda", dtype=torch.float16) for _ in range(3))
    row = {"head_dim": d}
    try:
        o, lse = GQADenseWithLSEFwdOp(is_causal=False).forward(q, k, v)
        torch.cuda.synchronize()
        sc = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * d ** -0.5
        row["o_max_err"] = (o.double() - torch.einsum("bhqk,bkhd->bqhd", sc.softmax(-1), v.double())).abs().max().item()
    except Exception as e:  # noqa: BLE001 - the failure is the result
        row["raised"] = f"{type(e).__name__}: {str(e).strip().splitlines()[-1][:160]}"
        bug |= d >= 160 and "shared memory" in str(e)
    print(json.dumps(row), flush=True)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
