"""TileOPs GQADenseBwdOp (SM90, head dim 128): the backward never returns at seq_len 64, while 63, 65 and 128
return in seconds. Needs torch and tileops. Each length runs in a child process with a time limit; O and LSE
given to the backward come from a float64 forward. Exits 1 while seq_len 64 does not return."""
import json
import subprocess
import sys
import time

CHILD = """
import sys, torch
from tileops.attention import GQADenseBwdOp
s, d = int(sys.argv[1]), 128
torch.manual_seed(0)
q, k, v, do = (torch.randn(1, s, 1, d, device="cuda", dtype=torch.float16) for _ in range(4))
qq, kk, vv = (t.double().requires_grad_() for t in (q, k, v))
sc = torch.einsum("bqhd,bkhd->bhqk", qq, kk) * d ** -0.5
o = torch.einsum("bhqk,bkhd->bqhd", sc.softmax(-1), vv)
o.backward(do.double())
op = GQADenseBwdOp(is_causal=False)
print("built", flush=True)
dq, dk, dv = op.forward(do, q, k, v, o.detach().half().contiguous(), sc.detach().logsumexp(-1).float().contiguous())
torch.cuda.synchronize()
print("returned, dq max err", (dq.double() - qq.grad).abs().max().item(), flush=True)
"""
LIMIT_S = float(sys.argv[1]) if len(sys.argv) > 1 else 90.0  # the controls take 10-20 s, build included
hung = False
for s in (64, 63, 65, 128):  # 63, 65, 128: controls
    t0 = time.time()
    try:
        r = subprocess.run([sys.executable, "-c", CHILD, str(s)], capture_output=True, text=True, timeout=LIMIT_S)
        last, timed_out = (r.stdout.strip().splitlines() or [r.stderr.strip()[-200:]])[-1], False
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        last, timed_out = (out.strip().splitlines() or ["(nothing)"])[-1], True
    print(json.dumps({"seq_len": s, "timed_out": timed_out, "seconds": round(time.time() - t0, 1), "last": last}))
    hung |= s == 64 and timed_out
print("BUG" if hung else "OK")
sys.exit(1 if hung else 0)
