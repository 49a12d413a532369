"""H200 (2026-12-02, session 3): is cuDNN's FP8 LSE deviation Hopper's FP8 tensor-core accumulator?

(1) Fit: the H200's own FP8 GEMM (torch._scaled_mm, cuBLAS, use_fast_accum True and False) against
    oracles/tensor_core.mma_matmul over (group, frac_bits): the share of elements equal bit for bit,
    and the largest difference relative to the largest term; float64 (exact) for comparison.
(2) cuDNN's LSE against the float64 LSE, the LSE of S from the emulated accumulator (fitted and the
    default), and the LSE of S from cuBLAS's FP8 GEMM, on the problems of results/fp8.md and the
    campaign's shrunk reproducer (sq2 sk1).
(3) The causal mask through the adapter's new keyword (use_causal_mask), judged by run_case.
Prints lines; asserts nothing."""
import dataclasses
import itertools
import sys

import torch

from difftest.judge.runner import run_case
from difftest.kernels.cudnn_fp8 import CAPABILITY, CudnnFp8Adapter
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.tensor_core import mma_matmul

dev = "cuda"
E4, E5 = torch.float8_e4m3fn, torch.float8_e5m2


def pow2(x):
    return 2.0 ** torch.floor(torch.log2(448.0 / x.abs().max())).item()


def fp8_mat(m, k, dt, g):
    mag = torch.exp2(torch.randint(-3, 4, (m, k), generator=g, device=dev).float())
    x = torch.randn(m, k, generator=g, device=dev) * mag
    return x.to(dt)


def hw_gemm(a8, b8t, fast):
    one = torch.ones((), device=dev)
    return torch._scaled_mm(a8, b8t.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)


print("== (1) fit", torch.cuda.get_device_name(), torch.__version__, flush=True)
g = torch.Generator(device=dev).manual_seed(0)
best = {}
for (da, db), kdim in itertools.product(((E4, E4), (E4, E5)), (64, 128, 512)):
    a8, b8t = fp8_mat(256, kdim, da, g), fp8_mat(256, kdim, db, g)
    a, b = a8.double(), b8t.double().t()
    exact = a @ b
    top = (a.abs() @ b.abs()).clamp(min=1e-30)
    for fast in (True, False):
        try:
            hw = hw_gemm(a8, b8t, fast).double()
        except Exception as e:  # noqa: BLE001
            print(f"{da} x {db} K{kdim} fast={fast}: _scaled_mm raised {type(e).__name__}: {e}"[:200])
            continue
        rows_exact = ((hw == exact).double().mean().item(), ((hw - exact).abs() / top).max().item())
        rows = []
        for grp, fb in itertools.product((4, 8, 16, 32, 64, 128), (11, 12, 13, 14, 15, 16, 23)):
            em = mma_matmul(a, b, grp, fb).float().double()
            rows.append((f"g{grp} f{fb}", (hw == em).double().mean().item(), ((hw - em).abs() / top).max().item()))
        rows.sort(key=lambda r: -r[1])
        key = f"{str(da)[-6:]}x{str(db)[-6:]} K{kdim} fast={fast}"
        best[key] = rows[0]
        print(key, f"| hw vs exact: equal {rows_exact[0]:.3f} maxrel {rows_exact[1]:.2e} | best:",
              "; ".join(f"{n} eq {e:.4f} maxrel {m:.2e}" for n, e, m in rows[:4]), flush=True)

print("== (2) cuDNN LSE", flush=True)
k = CudnnFp8Adapter()
print("available:", k.available())


def heads(t, p, s, h):  # [T, H, D] -> [B, H, S, D] float64
    return t.double().view(p.batch, s, h, -1).transpose(1, 2)


for kw in (dict(seqlen_q=128, seqlen_k=128), dict(seqlen_q=128, seqlen_k=128, values="scaled", value_scale=4.0),
           dict(seqlen_q=256, seqlen_k=256, dtype="float8_e5m2"), dict(seqlen_q=2, seqlen_k=1),
           dict(seqlen_q=128, seqlen_k=256, values="massive_keys")):
    p = Problem(**{"head_dim_qk": 128, "head_dim_v": 128, "dtype": "float8_e4m3fn", **kw})
    x = make_inputs(p, dev)
    got = k.run(x).lse.double()
    q = heads(x.q, p, p.seqlen_q, p.heads_q)
    kk = heads(x.k, p, p.seqlen_k, p.heads_kv).repeat_interleave(p.group, 1)
    cands = {"float64": q @ kk.transpose(-1, -2)}
    for grp, fb in ((32, 13), (16, 13), (32, 14), (4, 13)):
        cands[f"mma g{grp} f{fb}"] = mma_matmul(q, kk.transpose(-1, -2), grp, fb)
    try:
        qs, ks = pow2(q), pow2(kk)
        s_hw = torch.stack([torch.stack([hw_gemm((q[b, h] * qs).to(E4 if p.dtype.endswith("fn") else E5),
                                                 (kk[b, h] * ks).to(E4), True).double() / (qs * ks)
                                         for h in range(p.heads_q)]) for b in range(p.batch)])
        cands["cuBLAS fp8 fast"] = s_hw
    except Exception as e:  # noqa: BLE001
        print("cuBLAS S:", type(e).__name__, str(e)[:150])
    lses = {n: torch.logsumexp(s * p.scale, dim=-1).transpose(1, 2).reshape(-1, p.heads_q) for n, s in cands.items()}
    for name, lse in lses.items():
        print(f"{p.short()} | {name:18s} | max|cuDNN LSE - it| {(got - lse).abs().max().item():.3g} "
              f"| max|it - float64| {(lse - lses['float64']).abs().max().item():.3g}", flush=True)

print("== (3) causal through use_causal_mask", flush=True)
k.capability = dataclasses.replace(CAPABILITY, causal=True)
for kw in (dict(seqlen_q=128, seqlen_k=128), dict(seqlen_q=256, seqlen_k=256, heads_q=4, heads_kv=2)):
    p = Problem(head_dim_qk=128, head_dim_v=128, dtype="float8_e4m3fn", causal=True, **kw)
    r = run_case(k, p)
    print(p.short(), r.status, (r.reason or "")[:200])
    for v in r.verdicts:
        print("  ", v.message[:220])
sys.stdout.flush()
