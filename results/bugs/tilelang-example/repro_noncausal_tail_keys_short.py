"""TileLang examples/flash_attention/example_gqa_bwd.py before PR #1222: the non-causal forward lets the
zero-filled keys of the last 64-key tile into the softmax (seq_len % 64 != 0). Needs torch, tilelang and the
example file:  python3 THIS.py PATH/example_gqa_bwd.py   (exits 1 while O/LSE are wrong)."""
import importlib.util
import json
import math
import sys

import torch

spec = importlib.util.spec_from_file_location("example_gqa_bwd", sys.argv[1])
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
bug = False
for s, causal in ((1, False), (65, False), (100, False), (128, False), (65, True)):  # the last two: controls
    d = 16
    kern = ex.flashattn_fwd(1, 1, s, d, d, causal, 128, 64, 1)  # the tiles _attention.forward uses
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, s, 1, d, device="cuda", dtype=torch.float16) for _ in range(3))
    o, lse2 = kern(q, k, v)
    torch.cuda.synchronize()
    sc = torch.einsum("bqhd,bkhd->bhqk", q.double(), k.double()) / math.sqrt(d)
    if causal:
        sc = sc.masked_fill(torch.ones(s, s, dtype=torch.bool, device="cuda").triu(1), float("-inf"))
    lse = sc.logsumexp(-1)
    want = torch.einsum("bhqk,bkhd->bqhd", sc.softmax(-1), v.double())
    row = {"seq_len": s, "causal": causal, "o_err": (o.double() - want).abs().max().item(),
           "lse_err": (lse2.double() * math.log(2) - lse).abs().max().item(),  # the kernel's LSE is base 2
           "lse_got_row0": lse2.flatten()[0].item() * math.log(2), "lse_expected_row0": lse.flatten()[0].item()}
    print(json.dumps(row), flush=True)
    bug |= row["o_err"] > 0.05 or row["lse_err"] > 0.05
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
