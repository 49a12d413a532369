"""flash-attn-4 (CuTe) SM90 backward: wrong dQ (and dK, dV under GQA) when head_dim % 32 is 8 or 16.
Needs torch and flash-attn-4 only. One line per case; exits 1 while any non-control case is wrong."""
import json
import sys
from importlib.metadata import version

import torch
from flash_attn.cute import flash_attn_func


def grads(q, k, v, do):  # plain attention through autograd in the inputs' dtype; [batch, seq, heads, dim]
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    s = torch.einsum("bqhd,bkhd->bhqk", q, k.repeat_interleave(g, 2)) * q.shape[-1] ** -0.5
    o = torch.einsum("bhqk,bkhd->bqhd", s.softmax(-1), v.repeat_interleave(g, 2))
    return torch.autograd.grad(o, (q, k, v), do)


# (head_dim, head_dim_v, heads_q, heads_kv); the last two are controls (head_dim % 32 == 0)
CASES = [(8, 8, 2, 1), (16, 8, 2, 2), (40, 40, 2, 2), (48, 48, 4, 2), (72, 72, 2, 2), (80, 80, 2, 1),
         (112, 112, 1, 1), (64, 64, 2, 1), (96, 96, 2, 2)]
print(json.dumps({"flash-attn-4": version("flash-attn-4"), "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name()}))
bug = False
for d, dv, hq, hk in CASES:
    torch.manual_seed(0)
    S = 200  # several 64-row tiles
    x = [torch.randn(1, S, h, e, device="cuda", dtype=torch.float64) for h, e in ((hq, d), (hk, d), (hk, dv), (hq, dv))]
    truth = grads(*x)
    plain = grads(*(t.half() for t in x))
    row = {"head_dim": d, "head_dim_v": dv, "heads": f"{hq}/{hk}"}
    try:
        q, k, v = (t.half().requires_grad_() for t in x[:3])
        out, _ = flash_attn_func(q, k, v)
        got = torch.autograd.grad(out, (q, k, v), x[3].half())
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a build failure is a result too
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
        bug |= d % 32 != 0
        print(json.dumps(row), flush=True)
        continue
    for n, g, p, t in zip(("dq", "dk", "dv"), got, plain, truth):
        err, ref = ((a.double() - t).abs().max().item() for a in (g, p))
        row[n] = {"err": round(err, 5), "plain_fp16_err": round(ref, 5), "ratio": round(err / ref, 1)}
        bug |= d % 32 != 0 and err > 10 * ref
    print(json.dumps(row), flush=True)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
