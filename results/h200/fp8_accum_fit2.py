"""H200 (2026-12-02, session 3), follow-up of fp8_accum_triage.py: which alignment rule makes the FP8
accumulator model bit-exact? oracles/tensor_core.py aligns to the largest term's *value*; hardware
adders align to the *sum of the operands' exponents* (a product's significand is in [1, 4)). Compares
both rules, frac_bits 12..15, group 16/32, against torch._scaled_mm (fast accumulation), e4m3 x e4m3,
K 64/128/512. Prints the share of equal elements; asserts nothing."""
import itertools

import torch

dev = "cuda"


def model(a, b, group, frac_bits, rule):
    a, bt = a.double(), b.double().t().contiguous()
    acc = torch.zeros(a.shape[0], bt.shape[0], dtype=torch.float64, device=dev)
    ea, eb = torch.frexp(a)[1] - 1, torch.frexp(bt)[1] - 1
    for k0 in range(0, a.shape[1], group):
        prods = a[:, None, k0:k0 + group] * bt[None, :, k0:k0 + group]
        if rule == "value":
            ep = torch.frexp(prods.abs().amax(-1))[1] - 1
        else:  # exponent sum of the operands (zero operands do not count)
            es = (ea[:, None, k0:k0 + group] + eb[None, :, k0:k0 + group]).masked_fill(prods == 0, -10000)
            ep = es.amax(-1) + (1 if rule == "sum+1" else 0)
        eacc = torch.where(acc != 0, torch.frexp(acc)[1] - 1, torch.full_like(ep, -10000))
        e = torch.maximum(ep, eacc)
        inv = torch.ldexp(torch.ones_like(acc), (frac_bits - e).clamp(-1000, 1000))
        acc = (torch.trunc(prods * inv[..., None]).sum(-1) + torch.trunc(acc * inv)) / inv
    return acc


g = torch.Generator(device=dev).manual_seed(1)
one = torch.ones((), device=dev)
for kdim in (64, 128, 512):
    mag = torch.exp2(torch.randint(-3, 4, (256, kdim), generator=g, device=dev).float())
    a8 = (torch.randn(256, kdim, generator=g, device=dev) * mag).to(torch.float8_e4m3fn)
    b8t = (torch.randn(256, kdim, generator=g, device=dev) * mag).to(torch.float8_e4m3fn)
    hw = torch._scaled_mm(a8, b8t.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=True).double()
    rows = []
    for rule, grp, fb in itertools.product(("value", "sum", "sum+1"), (16, 32), (12, 13, 14, 15)):
        em = model(a8.float(), b8t.float().t(), grp, fb, rule).float().double()
        rows.append((f"{rule} g{grp} f{fb}", (hw == em).double().mean().item()))
    rows.sort(key=lambda r: -r[1])
    print(f"K{kdim}:", "; ".join(f"{n} {e:.4f}" for n, e in rows[:6]), flush=True)
