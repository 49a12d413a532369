"""flash-attn-4 (CuTe) with learnable_sink: the returned LSE is +inf when a sink logit exceeds the row's
largest score by more than ~88.7 (exp overflows float32). Needs torch and flash-attn-4 only.
Exits 1 while the bug shows."""
import json
import sys
from importlib.metadata import version

import torch
from flash_attn.cute import flash_attn_func

print(json.dumps({"flash-attn-4": version("flash-attn-4"), "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name()}))
bug = False
for sink_logit in (60.0, 100.0, 120.0):  # 60 is a control: exp(60) fits in float32
    torch.manual_seed(0)
    b, s, h, d = 1, 3, 2, 64
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(3))
    sink = torch.full((h,), sink_logit, device="cuda", dtype=torch.float32)
    out, lse = flash_attn_func(q, k, v, learnable_sink=sink, return_lse=True)  # lse: [b, h, s]
    scores = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) * d ** -0.5
    col = sink.double().view(1, h, 1, 1).expand(b, h, s, 1)
    want = torch.logsumexp(torch.cat([scores, col], -1), -1)  # float64, the sink as one more column
    row = {"sink_logit": sink_logit, "max_score": round(scores.max().item(), 3),
           "lse_got": lse[0, 0].tolist(), "lse_expected": [round(x, 4) for x in want[0, 0].tolist()],
           "nonfinite_lse": int((~torch.isfinite(lse)).sum()), "max_abs_out": out.abs().max().item()}
    print(json.dumps(row), flush=True)
    bug |= row["nonfinite_lse"] > 0
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
