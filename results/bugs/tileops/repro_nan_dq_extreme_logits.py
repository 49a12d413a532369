"""TileOPs GQADenseBwdOp (SM90), non-causal, seq_len % 128 != 0: dQ is NaN in every query row whose LSE is
very negative (below about -11 in fp16), because the padded key rows of the last 128-key tile are not masked.
Needs torch and tileops. O and LSE come from a float64 forward. Exits 1 while dQ has NaN."""
import json
import sys

import torch
from tileops.attention import GQADenseBwdOp

bug = False
for s, causal in ((9, False), (200, False), (9, True), (256, False)):  # causal and s % 128 == 0: controls
    torch.manual_seed(0)
    d = 128
    u = torch.randint(0, 2, (d,)).double() * 2 - 1  # q = 16 u + noise, k = -16 u + noise: every logit ~ -2900
    q = (16 * u + 0.1 * torch.randn(1, s, 1, d, dtype=torch.float64)).half().cuda()
    k = (-16 * u + 0.1 * torch.randn(1, s, 1, d, dtype=torch.float64)).half().cuda()
    v, do = (torch.randn(1, s, 1, d, device="cuda", dtype=torch.float16) for _ in range(2))
    qq, kk, vv = (t.double().requires_grad_() for t in (q, k, v))
    sc = torch.einsum("bqhd,bkhd->bhqk", qq, kk) * d ** -0.5
    if causal:
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", sc.softmax(-1), vv)
    o.backward(do.double())
    lse = sc.detach().logsumexp(-1)
    dq, dk, dv = GQADenseBwdOp(is_causal=causal).forward(do, q, k, v, o.detach().half().contiguous(),
                                                          lse.float().contiguous())
    torch.cuda.synchronize()
    row = {"seq_len": s, "causal": causal, "max_lse": lse.max().item(), "dq_nan_rows": int(dq.isnan().any(-1).sum()),
           "dq_max_err_finite": (dq.double() - qq.grad).nan_to_num(0).abs().max().item(),
           "dk_max_err": (dk.double() - kk.grad).abs().max().item(), "truth_finite": bool(qq.grad.isfinite().all())}
    print(json.dumps(row), flush=True)
    bug |= not causal and s % 128 != 0 and row["dq_nan_rows"] > 0
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
