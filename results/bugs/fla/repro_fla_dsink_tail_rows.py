"""fla-core parallel_attn: the sink gradient sums the unused tail rows of a packed varlen buffer.

Needs torch and fla-core only (no difftest). On a GPU: python3 repro_fla_dsink_tail_rows.py
On the CPU: TRITON_INTERPRET=1 python3 repro_fla_dsink_tail_rows.py (Triton 3.6's interpreter needs
numpy < 2.4). One varlen sequence of T tokens in a packed buffer of T + PAD rows (cu_seqlens = [0, T],
as FlashAttention's varlen API allows), sinks on; dO is zero on the tail rows (a loss never reads
them). Prints dSink against a float64 reference built from the T real rows, for tail rows holding
(a) zeros and (b) other data, twice each, then (c) after the caching allocator last held NaN
(a training step's freed activations): on a GPU a fresh process's ``torch.empty`` memory is
usually benign, so (a)/(b) alone may not show what the interpreter shows."""
import json
import os

import torch
from fla.ops.attn.parallel import parallel_attn

dev = "cuda" if torch.cuda.is_available() else "cpu"
dt = torch.float16 if dev == "cuda" else torch.float32
T, PAD, H, D = 40, 8, 2, 32


def reference(q, k, v, do, sink, scale):
    q, k, v, do = (x.double()[0, :T] for x in (q, k, v, do))
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(torch.cat([s, sink.double().view(H, 1, 1).expand(H, T, 1)], -1), -1)
    p = torch.exp(s - lse[..., None])
    o = torch.einsum("hqk,khd->qhd", p, v)
    delta = (o * do).sum(-1).T  # [H, T]
    return -(torch.exp(sink.double().view(H, 1) - lse) * delta).sum(-1)


def dirty_allocator():
    """Leave NaN in the blocks the next small allocations reuse (the forward's torch.empty o and lse)."""
    junk = [torch.full((n,), float("nan"), device=dev) for n in (64, 128, 256, 512, 1024, 2048, 4096)
            for _ in range(8)]
    del junk


def run(tail, seed, dirty=False):
    g = torch.Generator().manual_seed(seed)
    q, k, v, do = (torch.randn(1, T + PAD, H, D, generator=g) for _ in range(4))
    if tail == "zeros":
        for x in (q, k, v):
            x[0, T:] = 0
    do[0, T:] = 0
    sink = torch.randn(H, generator=g)
    q, k, v, sink_t = (x.to(dev, dt).requires_grad_(True) for x in (q, k, v, sink))
    cu = torch.tensor([0, T], dtype=torch.long, device=dev)
    scale = D ** -0.5
    if dirty:
        dirty_allocator()
    o = parallel_attn(q, k, v, scale=scale, cu_seqlens=cu, sink_bias=sink_t)
    (grad,) = torch.autograd.grad(o, sink_t, do.to(dev, dt))
    ref = reference(q.detach().cpu(), k.detach().cpu(), v.detach().cpu(), do, sink_t.detach().cpu(), scale)
    return {"tail": tail, "seed": seed, "allocator": "NaN-dirty" if dirty else "as is",
            "dsink": [float(x) for x in grad.double().cpu()],
            "reference": [round(float(x), 6) for x in ref], "max_err": float((grad.double().cpu() - ref).abs().max())}


if __name__ == "__main__":
    import fla
    print(json.dumps({"fla": getattr(fla, "__version__", "?"), "torch": torch.__version__, "device": dev,
                      "interpret": os.environ.get("TRITON_INTERPRET", "")}))
    for tail in ("zeros", "data"):
        for seed in (0, 0):
            print(json.dumps(run(tail, seed)))
    for tail in ("zeros", "data"):
        print(json.dumps(run(tail, 0, dirty=True)))
