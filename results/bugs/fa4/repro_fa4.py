"""Standalone reproducers for flash-attn-4 4.0.0b36 (flash_attn.cute) SM90 backward findings.
Needs only torch and flash-attn-4 (no difftest). Each case runs in its own process because
some leave a sticky CUDA error:

    for c in d8 d16_8 d8_16 d64_ok gqa_unequal d104 d80_216_gqa d32_120 sink_lse; do
        python3 repro_fa4.py $c; done

Prints one JSON line per case: FA4's max |error| per output against a float64 autograd
reference, next to a plain fp16 PyTorch attention's own error (what rounding to fp16 alone
costs), and their ratio; or the exception FA4 raised. Inputs are seeded normals.
"""
import json
import math
import sys

import torch

CASES = {  # name: (batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, head_dim_v, sink_logit or None)
    "d8": (1, 65, 65, 2, 1, 8, 8, None),
    "d8_tiny": (1, 1, 2, 1, 1, 8, 8, None),
    "d16_8": (1, 65, 65, 2, 2, 16, 8, None),
    "d8_16": (1, 65, 65, 2, 2, 8, 16, None),
    "d64_ok": (1, 65, 65, 2, 1, 64, 64, None),
    "gqa_unequal": (1, 64, 64, 2, 1, 64, 32, None),
    "d104": (1, 3, 129, 1, 1, 104, 104, None),
    "d80_216_gqa": (1, 33, 33, 24, 12, 80, 216, None),
    "d32_120": (1, 65, 65, 2, 2, 32, 120, None),
    "sink_lse": (1, 3, 129, 1, 1, 64, 64, 90.0),
}


def reference(q, k, v, do, sink, scale):
    """O, LSE and grads of softmax(q k^T * scale [+ sink column]) v in the inputs' dtype."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    kk, vv = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if sink is not None:
        col = sink.to(s.dtype).view(1, -1, 1, 1).expand(s.shape[0], -1, s.shape[2], 1)
        s = torch.cat([s, col], dim=-1)
    lse = torch.logsumexp(s.double(), dim=-1)
    p = torch.softmax(s, dim=-1)
    if sink is not None:
        p = p[..., :-1]
    o = torch.einsum("bhqk,bkhd->bqhd", p, vv)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def main(name):
    from flash_attn.cute import flash_attn_func

    b, sq, sk, hq, hkv, d, dv, sink_logit = CASES[name]
    gen = torch.Generator(device="cpu").manual_seed(0)
    mk = lambda *s: torch.randn(*s, generator=gen, dtype=torch.float64)  # noqa: E731
    q64, k64, v64, do64 = mk(b, sq, hq, d), mk(b, sk, hkv, d), mk(b, sk, hkv, dv), mk(b, sq, hq, dv)
    scale = 1 / math.sqrt(d)
    sink64 = None if sink_logit is None else torch.full((hq,), sink_logit, dtype=torch.float64)
    row = {"case": name, "problem": dict(batch=b, seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_kv=hkv, head_dim=d,
                                         head_dim_v=dv, dtype="float16", causal=False, sink=sink_logit),
           "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
    cu = lambda t: t.to("cuda", torch.float16)  # noqa: E731
    truth = reference(q64.cuda(), k64.cuda(), v64.cuda(), do64.cuda(), None if sink64 is None else sink64.cuda(), scale)
    # what fp16 rounding alone costs: the same inputs through fp16 PyTorch ops
    ref16 = reference(*(cu(t) for t in (q64, k64, v64, do64)), None if sink64 is None else sink64.cuda().float(), scale)
    try:
        q, k, v = (cu(t).requires_grad_() for t in (q64, k64, v64))
        sink = None if sink64 is None else sink64.cuda().float().requires_grad_()
        o, lse = flash_attn_func(q, k, v, softmax_scale=scale, learnable_sink=sink, return_lse=True)
        dq, dk, dvv = torch.autograd.grad(o, (q, k, v), cu(do64))
        torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 -- the finding is the exception
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
        print(json.dumps(row), flush=True)
        return
    got = {"o": o, "lse": lse, "dq": dq, "dk": dk, "dv": dvv}  # lse: [b, h, sq], natural log
    for n in ("o", "lse", "dq", "dk", "dv"):
        t = truth[n].double()
        g = got[n].double().reshape(t.shape)
        r = ref16[n].double().reshape(t.shape)
        err = (g - t).abs().max().item() if torch.isfinite(g).all() else float("inf")
        rerr = (r - t).abs().max().item()
        row[n] = {"fa4_err": err, "fp16_ref_err": rerr, "ratio": err / rerr if rerr else None,
                  "nonfinite": int((~torch.isfinite(g)).sum()), "max_abs_truth": t.abs().max().item()}
        if n == "lse" and row[n]["nonfinite"]:
            row[n]["fa4_values"] = sorted({str(x) for x in g[~torch.isfinite(g)].flatten().tolist()})
            row[n]["truth_values"] = t[~torch.isfinite(g)].flatten()[:4].tolist()
    print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
