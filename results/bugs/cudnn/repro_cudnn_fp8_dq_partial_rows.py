#!/usr/bin/env python
"""cuDNN FP8 SDPA backward (sdpa_fp8_backward) on Hopper: dQ of the query rows past the last whole
block is wrong in every second group of 16 head-dim columns. Needs only torch (CUDA) and
nvidia-cudnn-frontend; no difftest.

The backward alone is called, on inputs made exactly: Q, K, V, dO are FP8 values (power-of-two
per-tensor scales); O is the float64 attention output of those values stored in FP8, and Stats the
float64 log-sum-exp in float32. The expected dQ is the float64 backward from exactly those O and
Stats (Delta = rowsum(dO * O)), so nothing of cuDNN's own forward is involved. Output scales come
from the float64 gradients with 2x headroom (nothing saturates).

    python repro_cudnn_fp8_dq_partial_rows.py            # the sweep below, one line a problem
    python repro_cudnn_fp8_dq_partial_rows.py 2 2        # one problem: seqlen_q seqlen_kv
    python repro_cudnn_fp8_dq_partial_rows.py 33 128 4   # ... with 4 heads, and each row's dQ error
    python repro_cudnn_fp8_dq_partial_rows.py --inputs x.pt   # given FP8 Q, K, V, dO (see run's ``stored``)

A line: the problem; max |dQ - expected| against max |expected| (an FP8 dQ is good to ~1/8 of it);
the wrong rows (|err| > 1/4 of max |expected| anywhere in the row) and the 16-column groups they sit in.
"""
import math
import sys

import cudnn
import torch

D = 128
F64 = torch.float64
FMT = {"e4m3": (torch.float8_e4m3fn, 448.0, 256.0), "e5m2": (torch.float8_e5m2, 57344.0, 32768.0)}  # max, P scale


def pow2_scale(amax: float, fmax: float, headroom: float = 1.0) -> float:
    return 2.0 ** math.floor(math.log2(fmax / headroom / max(amax, 1e-30)))


def quant(x: torch.Tensor, fmt: str, headroom: float = 1.0):
    """x stored in FP8 with a power-of-two scale: (bytes, descale, the stored value in float64)."""
    dt, fmax, _ = FMT[fmt]
    s = pow2_scale(x.abs().max().item(), fmax, headroom)
    x8 = (x * s).to(dt).contiguous()  # BSHD memory, as the graph's strides say
    return x8, 1.0 / s, x8.to(F64) / s


def graph(b, hq, hk, sq, sk, fmt, scale, causal):
    io = {"e4m3": cudnn.data_type.FP8_E4M3, "e5m2": cudnn.data_type.FP8_E5M2}[fmt]
    f32 = cudnn.data_type.FLOAT
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32)

    def bhsd(h, s):  # [B, H, S, D] over BSHD memory
        return dict(dim=(b, h, s, D), stride=(s * h * D, D, h * D, 1))

    t = {n: g.tensor(name=n, data_type=io, **bhsd(h, s))
         for n, h, s in (("q", hq, sq), ("k", hk, sk), ("v", hk, sk), ("o", hq, sq), ("do", hq, sq))}
    t["stats"] = g.tensor(name="stats", data_type=f32, dim=(b, hq, sq, 1), stride=(hq * sq, sq, 1, 1))
    names = ("descale_q", "descale_k", "descale_v", "descale_o", "descale_dO", "descale_s", "descale_dP",
             "scale_s", "scale_dQ", "scale_dK", "scale_dV", "scale_dP")
    for n in names:
        t[n] = g.tensor(name=n, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=f32)
    dq, dk, dv, *amaxes = g.sdpa_fp8_backward(
        name="bwd", q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["do"], stats=t["stats"],
        **{n: t[n] for n in names}, attn_scale=scale, **({"use_causal_mask": True} if causal else {}))
    for x, h, s in ((dq, hq, sq), (dk, hk, sk), (dv, hk, sk)):
        x.set_output(True).set_data_type(io).set_dim(bhsd(h, s)["dim"]).set_stride(bhsd(h, s)["stride"])
    for a in amaxes:
        a.set_output(True).set_data_type(f32).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
    g.validate()
    g.build_operation_graph()
    g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
    g.check_support()
    g.build_plans()
    return g, t, (dq, dk, dv), amaxes


def expected(q, k, v, do, o, lse, scale, causal, hq, hk):
    """float64 dQ, dK, dV [B, S, H, D] from the given O and LSE (FlashAttention's backward)."""
    rep = hq // hk
    qh, doh, oh = (x.transpose(1, 2) for x in (q, do, o))
    kh, vh = (x.transpose(1, 2).repeat_interleave(rep, 1) for x in (k, v))
    s = qh @ kh.transpose(-1, -2) * scale
    if causal:
        sq, sk = s.shape[-2:]
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
    p = torch.exp(s - lse.unsqueeze(-1))
    dp = doh @ vh.transpose(-1, -2)
    ds = p * (dp - (doh * oh).sum(-1, keepdim=True))
    dq = ds @ kh * scale
    dk = (ds.transpose(-1, -2) @ qh * scale).unflatten(1, (hk, rep)).sum(2)
    dv = (p.transpose(-1, -2) @ doh).unflatten(1, (hk, rep)).sum(2)
    return dq.transpose(1, 2), dk.transpose(1, 2), dv.transpose(1, 2), ds


def run(sq, sk, hq=1, hk=1, b=1, fmt="e4m3", causal=False, seed=0, per_row=False, neg=0.0, stored=None):
    """One problem. ``neg``: every logit shifted down by about ``neg`` (a column of Q and of K offset:
    a softmax is shift invariant, so only the kernel's numerics see it). ``stored``: the FP8 Q, K, V,
    dO to use ({name: (bytes [b, s, h, 128], descale)}, e.g. those difftest drew: --inputs)."""
    gen = torch.Generator().manual_seed(seed)
    scale = D ** -0.5
    if stored is None:
        raw = {n: torch.randn(b, s, h, D, generator=gen, dtype=F64)
               for n, s, h in (("q", sq, hq), ("k", sk, hk), ("v", sk, hk), ("do", sq, hq))}
        a = math.sqrt(neg / scale)
        raw["q"][..., 0] += a
        raw["k"][..., 0] -= a
        st = {n: quant(x, fmt) for n, x in raw.items()}
    else:
        st = {n: (x8.contiguous(), d, x8.to(F64) * d) for n, (x8, d) in stored.items()}
    q, k, v, do = (st[n][2] for n in ("q", "k", "v", "do"))
    # O and LSE of the stored inputs, in float64; O stored in FP8, LSE in float32
    rep = hq // hk
    s = q.transpose(1, 2) @ k.transpose(1, 2).repeat_interleave(rep, 1).transpose(-1, -2) * scale
    if causal:
        s = s.masked_fill(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(s, -1).float()
    o = (torch.softmax(s, -1) @ v.transpose(1, 2).repeat_interleave(rep, 1)).transpose(1, 2)
    o8, o_descale, o_stored = quant(o, fmt)
    dq, dk, dv, ds = expected(q, k, v, do, o_stored, lse.double(), scale, causal, hq, hk)
    _, fmax, p_scale = FMT[fmt]
    sc = {"dQ": pow2_scale(dq.abs().max().item(), fmax, 2), "dK": pow2_scale(dk.abs().max().item(), fmax, 2),
          "dV": pow2_scale(dv.abs().max().item(), fmax, 2), "dP": pow2_scale(ds.abs().max().item(), fmax, 2)}
    g, t, outs, amaxes = graph(b, hq, hk, sq, sk, fmt, scale, causal)
    dev = "cuda"
    grads = {"dq": torch.empty_like(st["q"][0]).cuda(), "dk": torch.empty_like(st["k"][0]).cuda(),
             "dv": torch.empty_like(st["v"][0]).cuda()}
    amax_t = [torch.zeros(1, 1, 1, 1, device=dev) for _ in amaxes]
    scalars = {"descale_q": st["q"][1], "descale_k": st["k"][1], "descale_v": st["v"][1], "descale_o": o_descale,
               "descale_dO": st["do"][1], "descale_s": 1 / p_scale, "scale_s": p_scale,
               "descale_dP": 1 / sc["dP"], "scale_dP": sc["dP"], "scale_dQ": sc["dQ"], "scale_dK": sc["dK"],
               "scale_dV": sc["dV"]}
    pack = {t["q"]: st["q"][0].cuda(), t["k"]: st["k"][0].cuda(), t["v"]: st["v"][0].cuda(), t["o"]: o8.cuda(),
            t["do"]: st["do"][0].cuda(), t["stats"]: lse.unsqueeze(-1).contiguous().cuda(),
            outs[0]: grads["dq"], outs[1]: grads["dk"], outs[2]: grads["dv"],
            **{a: x for a, x in zip(amaxes, amax_t)},
            **{t[n]: torch.full((1, 1, 1, 1), float(x), device=dev) for n, x in scalars.items()}}
    assert all(x.is_contiguous() for x in pack.values())
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device=dev)
    g.execute(pack, ws)
    torch.cuda.synchronize()
    got = {n: grads[n].cpu().to(F64) / sc[n[0] + n[1].upper()] for n in grads}
    line = f"b{b} sq{sq} sk{sk} h{hq}/{hk} {fmt}{' causal' if causal else ''}{f' logits-{neg:g}' if neg else ''}:"
    for name, want in (("dq", dq), ("dk", dk), ("dv", dv)):
        err = (got[name] - want).abs()
        big = want.abs().max().item()
        bad = (err > big / 4).any(-1)  # [B, S, H]: a wrong row
        line += f" | {name} err {err.max().item():.3g} of {big:.3g}"
        if bad.any():
            rows = sorted({int(r) for r in bad.nonzero()[:, 1]})
            cols = (err > big / 4)[bad].any(0)  # [D]
            groups = "".join("x" if cols[i:i + 16].any() else "." for i in range(0, D, 16))
            zero = int(((got[name] == 0) & (want.abs() > big / 10)).sum())
            line += f" WRONG rows {rows[0]}..{rows[-1]} ({len(rows)}) 16-col groups {groups} exact zeros {zero}"
    print(line, flush=True)
    if per_row:  # max |dQ error| of each (row, head), in units of max |expected|
        rel = (got["dq"] - dq).abs().amax(-1)[0] / dq.abs().max().item()  # [S, H]
        for h in range(hq):
            print(f"  head {h} dq row errors:", " ".join(f"{r}:{x:.2f}" for r, x in enumerate(rel[:, h].tolist())),
                  flush=True)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--inputs":  # a .pt of {name: (fp8 bytes [b, s, h, d], descale)}
        stored = torch.load(sys.argv[2], weights_only=True)  # tensors and floats only: no pickled code
        (b, sq, hq, _), (_, sk, hk, _) = stored["q"][0].shape, stored["k"][0].shape
        fmt = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}[stored["q"][0].dtype]
        run(sq, sk, hq, hk, b, fmt, stored=stored)
        return
    if len(sys.argv) in (3, 4):
        h = int(sys.argv[3]) if len(sys.argv) == 4 else 1
        run(int(sys.argv[1]), int(sys.argv[2]), hq=h, hk=h, per_row=len(sys.argv) == 4)
        return
    print("torch", torch.__version__, "cudnn backend", cudnn.backend_version(), "frontend", cudnn.__version__,
          torch.cuda.get_device_name(), flush=True)
    problems = [dict(sq=sq, sk=128) for sq in (2, 8, 15, 16, 17, 24, 31, 32, 33, 40, 48, 63, 64, 65, 80, 96, 100,
                                                 112, 127, 128, 129, 160, 192, 200, 255, 256)]
    problems += [dict(sq=128, sk=sk) for sk in (2, 33, 127, 200)]
    problems += [dict(sq=2, sk=2), dict(sq=33, sk=127, hq=4, hk=4), dict(sq=33, sk=128, hq=4, hk=1),
                 dict(sq=33, sk=128, fmt="e5m2"), dict(sq=33, sk=128, b=2), dict(sq=200, sk=200, causal=True),
                 dict(sq=1000, sk=1000), dict(sq=1030, sk=1030)]
    problems += [dict(sq=sq, sk=sk, neg=18.0) for sq, sk in ((2, 2), (16, 16), (33, 33), (64, 64), (128, 128), (16, 2))]
    for p in problems:
        try:
            run(**p)
        except Exception as e:  # noqa: BLE001 - one line a problem, then the next
            print(p, "ERROR", type(e).__name__, str(e)[:200], flush=True)


if __name__ == "__main__":
    main()
