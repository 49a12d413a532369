"""Standalone check of a difftest finding on flash-attn-4 4.0.0b36 (flash_attn.cute), SM90
backward: dV far off (sign flips, 50-90x a plain fp16 PyTorch attention's error) for head dims
48 and 80, causal (bottom-right), seqlen_q 1216 / seqlen_k 1217, GQA 2:1, fp16, keys and values
nearly constant (K = base + 5e-4 * noise, V likewise), while head dim 184 on the same shape
passed. Needs only torch and flash-attn-4 (no difftest):

    python3 repro_fa4_dv.py            # every case below, one JSON line each

Each line: FA4's max |error| per gradient against a float64 autograd reference, a plain fp16
PyTorch attention's own error on the same fp16 inputs, and their ratio. The finding is
confirmed if the d48/d80 near-constant lines show dv ratios >> 1 while the controls (d64,
d184, normal values) stay near or below 1.
"""
import json
import math

import torch

SHAPE = dict(batch=1, seqlen_q=1216, seqlen_k=1217, heads_q=4, heads_kv=2)
CASES = [(d, values, det) for d in (48, 80, 64, 184) for values in ("near_constant", "normal")
         for det in (False, True)]


def inputs(d, values, seed=0):
    b, sq, sk, hq, hkv = (SHAPE[n] for n in ("batch", "seqlen_q", "seqlen_k", "heads_q", "heads_kv"))
    g = torch.Generator(device="cpu").manual_seed(seed)
    mk = lambda *s: torch.randn(*s, generator=g, dtype=torch.float64)  # noqa: E731
    q, k, v, do = mk(b, sq, hq, d), mk(b, sk, hkv, d), mk(b, sk, hkv, d), mk(b, sq, hq, d)
    if values == "near_constant":  # every key and value row ~ one base row per head
        k = mk(b, 1, hkv, d) + 5e-4 * k
        v = mk(b, 1, hkv, d) + 5e-4 * v
    return q, k, v, do


def reference(q, k, v, do, scale):
    """Causal (bottom-right) attention gradients in the inputs' dtype, by autograd."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    kk, vv = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    sq, sk = s.shape[-2:]
    keep = torch.arange(sk, device=s.device)[None, :] <= torch.arange(sq, device=s.device)[:, None] + (sk - sq)
    s = s.masked_fill(~keep, float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vv)
    return dict(zip(("dq", "dk", "dv"), torch.autograd.grad(o, (q, k, v), do)))


def main():
    from flash_attn.cute import flash_attn_func

    for d, values, det in CASES:
        q64, k64, v64, do64 = (t.cuda() for t in inputs(d, values))
        scale = 1 / math.sqrt(d)
        row = {"head_dim": d, "values": values, "deterministic": det, **SHAPE, "dtype": "float16",
               "causal": "bottom_right", "torch": torch.__version__, "gpu": torch.cuda.get_device_name()}
        truth = reference(q64, k64, v64, do64, scale)
        h = lambda t: t.half()  # noqa: E731
        ref16 = reference(h(q64), h(k64), h(v64), h(do64), scale)
        try:
            q, k, v = (h(t).requires_grad_() for t in (q64, k64, v64))
            o, _ = flash_attn_func(q, k, v, softmax_scale=scale, causal=True, deterministic=det, return_lse=True)
            got = dict(zip(("dq", "dk", "dv"), torch.autograd.grad(o, (q, k, v), h(do64))))
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 -- the finding would be the exception
            row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
            print(json.dumps(row), flush=True)
            continue
        for n in ("dq", "dk", "dv"):
            t, g, r = truth[n], got[n].double(), ref16[n].double()
            err = (g - t).abs().max().item() if torch.isfinite(g).all() else float("inf")
            rerr = (r - t).abs().max().item()
            row[n] = {"fa4_err": err, "fp16_ref_err": rerr, "ratio": err / rerr if rerr else None,
                      "max_abs_truth": t.abs().max().item()}
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
