"""Standalone reproducer: flash-attn-4 (flash_attn.cute); difftest kernel spec in KERNEL.

Needs torch and the package only (no difftest). Inputs: the .inputs.pt file beside this
script (the exact tensors difftest drew). Prints one JSON line per output: the package's
max |error| against a float64 reference, what plain PyTorch at the same dtype costs, their
ratio; then a verdict line. Exit 1 on a mismatch (ratio > 8, non-finite values, or a row
that sees no key not left at -inf) or an exception.
"""

import json
import math
import sys
from pathlib import Path

import torch

KERNEL = 'fa4'
P = {'batch': 1,
 'seqlen_q': 1,
 'seqlen_k': 1,
 'heads_q': 1,
 'heads_kv': 1,
 'head_dim_qk': 24,
 'head_dim_v': 24,
 'dtype': 'float16',
 'causal': False,
 'align': 'bottom_right',
 'window_left': None,
 'window_right': None,
 'sinks': True,
 'sink_center': 90.0,
 'softmax_scale': None,
 'values': 'normal',
 'value_scale': 1.0,
 'pad_tail': 0,
 'seed': 0,
 'layout': 'contiguous',
 'input_version': 2}
DETERMINISTIC = True

DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[P["dtype"]]
X = torch.load(Path(__file__).with_suffix(".inputs.pt"), weights_only=True)  # q k v do [T,H,D], sink [H], cu_seqlens
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU serves torch's own backends only
B, HQ, HKV, DQK, DV = P["batch"], P["heads_q"], P["heads_kv"], P["head_dim_qk"], P["head_dim_v"]
VARLEN = isinstance(P["seqlen_q"], list)
SQ = P["seqlen_q"] if VARLEN else [P["seqlen_q"]] * B
SK = P["seqlen_k"] if VARLEN else [P["seqlen_k"]] * B
SCALE = P["softmax_scale"] if P["softmax_scale"] is not None else 1.0 / math.sqrt(DQK)
CQ, CK = X["cu_seqlens_q"].tolist(), X["cu_seqlens_k"].tolist()


def allowed(sq, sk):
    """[sq, sk] bool: query i sees key j (causal / window, aligned top-left or bottom-right)."""
    off = sk - sq if P["align"] == "bottom_right" else 0
    i = torch.arange(sq).unsqueeze(1) + off
    j = torch.arange(sk).unsqueeze(0)
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if P["causal"]:
        ok &= j <= i
    if P["window_right"] is not None:
        ok &= j <= i + P["window_right"]
    if P["window_left"] is not None:
        ok &= j >= i - P["window_left"]
    return ok


def attention(q, k, v, do, sink):
    """Packed [T, H, D] attention per sequence in the inputs' dtype: o, natural-log lse [T, H]
    (-inf for a row that sees nothing and no sink) and the gradients, by autograd."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    sink = None if sink is None else sink.detach().requires_grad_()
    os, lses = [], []
    g = HQ // HKV
    for b in range(B):
        qb, kb, vb = q[CQ[b]:CQ[b + 1]], k[CK[b]:CK[b + 1]], v[CK[b]:CK[b + 1]]
        kx, vx = kb.repeat_interleave(g, dim=1), vb.repeat_interleave(g, dim=1)
        s = torch.einsum("qhd,khd->hqk", qb, kx) * SCALE
        s = s.masked_fill(~allowed(len(qb), len(kb)).to(s.device), float("-inf"))
        if sink is not None:
            s = torch.cat([s, sink.to(s.dtype).view(-1, 1, 1).expand(-1, s.shape[1], 1)], dim=-1)
        lse = torch.logsumexp(s, dim=-1) if s.shape[-1] else torch.full(s.shape[:2], float("-inf"), dtype=s.dtype,
                                                                         device=s.device)
        p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
        if sink is not None:
            p = p[..., :-1]
        os.append(torch.einsum("hqk,khd->qhd", p, vx))
        lses.append(lse.transpose(0, 1))
    o, lse = torch.cat(os), torch.cat(lses)
    wrt = (q, k, v) + ((sink,) if sink is not None else ())
    grads = torch.autograd.grad(o, wrt, do, allow_unused=True)
    out = {"o": o, "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if sink is not None:
        out["dsink"] = grads[3]
    return out


def dense(t, s):
    """Packed [B*S, H, D] as [B, S, H, D] (dense problems)."""
    return t.reshape(B, s, *t.shape[1:])


def packed(t):
    """[B, S, H, D] (or [B, S, H]) back to [B*S, ...]."""
    return t.reshape(-1, *t.shape[2:])


def lse_bhs(lse):
    """A dense kernel's [B, H, S] LSE as packed [B*S, H]."""
    return lse.permute(0, 2, 1).reshape(-1, lse.shape[1])


def driver():
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def kernel(q, k, v, do, sink, truth):
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    sink = None if sink is None else sink.detach().float().requires_grad_()
    kw = dict(softmax_scale=SCALE, causal=P["causal"], window_size=(P["window_left"], P["window_right"]),
              learnable_sink=sink, deterministic=DETERMINISTIC, return_lse=True)
    if VARLEN:
        o, lse = flash_attn_varlen_func(q, k, v, cu_seqlens_q=X["cu_seqlens_q"].to(DEV),
                                        cu_seqlens_k=X["cu_seqlens_k"].to(DEV), max_seqlen_q=max(SQ),
                                        max_seqlen_k=max(SK), **kw)
        lse = lse[:, :q.shape[0]].transpose(0, 1)
        grads = torch.autograd.grad(o, (q, k, v) + ((sink,) if sink is not None else ()), do)
    else:
        q4, k4, v4 = dense(q, SQ[0]), dense(k, SK[0]), dense(v, SK[0])
        o, lse = flash_attn_func(q4, k4, v4, **kw)
        grads = torch.autograd.grad(o, (q, k, v) + ((sink,) if sink is not None else ()), dense(do, SQ[0]))
        o, lse = packed(o), lse_bhs(lse)
    out = {"o": o, "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if sink is not None:
        out["dsink"] = grads[3]
    return out


def main():
    cu = {n: (X[n].to(DEV) if X[n] is not None else None) for n in ("q", "k", "v", "do", "sink")}
    truth = attention(*(None if t is None else t.double() for t in cu.values()))
    low = attention(cu["q"], cu["k"], cu["v"], cu["do"], cu["sink"])  # rounding alone
    row = {"problem": P, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "driver": driver()}
    try:
        got = kernel(cu["q"], cu["k"], cu["v"], cu["do"], cu["sink"], truth)
        if DEV == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 -- the finding may be the exception
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        print(json.dumps(row), flush=True)
        return 1
    bad = False
    for n, g in got.items():
        if g is None:
            continue
        t, r = truth[n].double(), low[n].double()
        g = g.double().reshape(t.shape)
        finite = torch.isfinite(t)
        err = float((g - t).abs()[finite].max()) if finite.any() else 0.0
        ref_err = float((r - t).abs()[finite].max()) if finite.any() else 0.0
        mismatched_inf = int(((g != t) & ~finite).sum())  # -inf rows (no key seen) must stay -inf
        nonfinite = int((~torch.isfinite(g) & finite).sum())
        ratio = err / max(ref_err, 1e-30)
        bad |= ratio > 8 or nonfinite > 0 or mismatched_inf > 0
        print(json.dumps({"output": n, "max_abs_err": err, "plain_torch_err": ref_err, "ratio": round(ratio, 2),
                          "nonfinite": nonfinite, "mismatched_inf": mismatched_inf}), flush=True)
    print(json.dumps({**row, "verdict": "MISMATCH" if bad else "ok"}), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
