"""TileLang examples/flash_attention/example_gqa_bwd.py: make_dq_layout addresses ceil(seq_len/8)*8 rows of
the caller's seq_len-row dQ, so for seq_len % 8 != 0 the backward's atomicAdds and the postprocess's reads run
past the end of dQ. Needs torch, tilelang and the example file:  python3 THIS.py PATH/example_gqa_bwd.py
dQ is the front of a larger buffer whose tail holds 1000.0; LSE and Delta come from a float64 forward."""
import importlib.util
import json
import math
import sys

import torch

spec = importlib.util.spec_from_file_location("example_gqa_bwd", sys.argv[1])
ex = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ex)
bug = False
for b, s, h, hk, d in ((2, 65, 2, 1, 64), (2, 64, 2, 1, 64)):  # the second is a control (s % 8 == 0)
    kb = ex.flashattn_bwd(b, h, s, d, d, False, 64, 32, h // hk)  # the tiles _attention.backward uses
    kp = ex.flashattn_bwd_postprocess(b, h, s, d)
    torch.manual_seed(0)
    q, do = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16) for _ in range(2))
    k, v = (torch.randn(b, s, hk, d, device="cuda", dtype=torch.float16) for _ in range(2))
    q64, k64, v64 = (t.double().requires_grad_() for t in (q, k, v))
    logits = torch.einsum("bqhd,bkhd->bhqk", q64, k64.repeat_interleave(h // hk, 2)) / math.sqrt(d)
    o = torch.einsum("bhqk,bkhd->bqhd", logits.softmax(-1), v64.repeat_interleave(h // hk, 2))
    o.backward(do.double())
    lse2 = (logits.detach().logsumexp(-1) / math.log(2.0)).float().contiguous()  # base-2 LSE [b, h, s]
    delta = (o.detach().half().float() * do.float()).sum(-1).transpose(1, 2).contiguous()
    n = b * s * h * d
    arena = torch.full((n + (1 << 16),), 1000.0, device="cuda")
    arena[:n] = 0.0
    dk, dv = (torch.zeros(b, s, hk, d, device="cuda", dtype=torch.float16) for _ in range(2))
    kb(q, k, v, do, lse2, delta, arena[:n].view(b, s, h, d), dk, dv)
    torch.cuda.synchronize()
    overwritten = int((arena[n:] != 1000.0).sum())
    dq = kp(arena[:n].view(b, s, h, d))
    wrong = (dq.double() - q64.grad).abs() > 1.0
    row = {"batch": b, "seq_len": s, "heads": f"{h}/{hk}", "head_dim": d, "floats_past_dq_overwritten": overwritten,
           "dq_wrong_elements": int(wrong.sum()), "dq_wrong_rows": sorted({tuple(i[:2].tolist()) for i in
                                                                          wrong.nonzero()})[:8],
           "dq_max_err": (dq.double() - q64.grad).abs().max().item(),
           "dk_max_err": (dk.double() - k64.grad).abs().max().item()}
    print(json.dumps(row), flush=True)
    bug |= s % 8 != 0 and (overwritten > 0 or row["dq_wrong_elements"] > 0)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
