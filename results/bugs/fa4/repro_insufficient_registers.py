"""flash-attn-4 (CuTe) SM90: head_dim 80 with head_dim_v 216 (both accepted by the interface) fails to compile:
"PTX assembly failed: (C7602) Insufficient registers". Needs torch and flash-attn-4 only. Separates the forward
from the backward. Other pairs: python repro_insufficient_registers.py D DV HQ HKV [D DV HQ HKV ...].
Exits 1 while an accepted pair fails to compile for lack of registers."""
import json
import sys
from importlib.metadata import version

import torch
from flash_attn.cute import flash_attn_func

args = [int(a) for a in sys.argv[1:]]
CASES = [tuple(args[i:i + 4]) for i in range(0, len(args), 4)] or [
    (80, 216, 24, 12), (80, 216, 2, 2), (80, 216, 2, 1), (80, 192, 2, 2), (80, 256, 2, 2),
    (80, 80, 2, 2), (128, 128, 2, 1)]  # (head_dim, head_dim_v, heads_q, heads_kv); the last two: controls
print(json.dumps({"flash-attn-4": version("flash-attn-4"), "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name()}), flush=True)
bug = False
for d, dv, hq, hk in CASES:
    torch.manual_seed(0)
    q = torch.randn(1, 33, hq, d, device="cuda", dtype=torch.float16, requires_grad=True)
    k = torch.randn(1, 33, hk, d, device="cuda", dtype=torch.float16, requires_grad=True)
    v = torch.randn(1, 33, hk, dv, device="cuda", dtype=torch.float16, requires_grad=True)
    row, stage = {"head_dim": d, "head_dim_v": dv, "heads": f"{hq}/{hk}"}, "forward"
    try:
        out, _ = flash_attn_func(q, k, v)
        torch.cuda.synchronize()
        want = torch.nn.functional.scaled_dot_product_attention(
            q.transpose(1, 2).float(), k.transpose(1, 2).float(), v.transpose(1, 2).float(),
            enable_gqa=hq != hk).transpose(1, 2)
        row["forward_max_err"] = round((out.float() - want).abs().max().item(), 5)
        stage = "backward"
        torch.autograd.grad(out, (q, k, v), torch.randn_like(out))
        torch.cuda.synchronize()
        row["backward"] = "ok"
    except Exception as e:  # noqa: BLE001 - a compile failure is the result
        msg = " ".join(str(e).split())
        row[stage] = f"{type(e).__name__}: {msg[:200]}"
        bug |= "Insufficient registers" in msg
    print(json.dumps(row), flush=True)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
