"""fla-core parallel_attn with cu_seqlens and sink_bias: the sink gradient sums every row of the packed buffer,
including the unused tail rows past cu_seqlens[-1], whose o/lse the forward never writes (torch.empty), so
dSink picks up whatever memory held: NaN after the allocator last held NaN. Needs torch and fla-core
(on a CPU: TRITON_INTERPRET=1). Exits 1 while dSink is wrong."""
import json
import sys

import torch
from fla.ops.attn.parallel import parallel_attn

dev = "cuda" if torch.cuda.is_available() else "cpu"
dt = torch.float16 if dev == "cuda" else torch.float32
T, PAD, H, D = 40, 8, 2, 32  # one sequence of T tokens in a buffer of T + PAD rows


def reference(q, k, v, do, sink):  # float64 dSink from the T real rows only
    q, k, v, do = (x.double()[0, :T] for x in (q, k, v, do))
    s = torch.einsum("qhd,khd->hqk", q, k) * D ** -0.5
    s = s.masked_fill(torch.ones(T, T, dtype=torch.bool).triu(1), float("-inf"))
    lse = torch.logsumexp(torch.cat([s, sink.double().view(H, 1, 1).expand(H, T, 1)], -1), -1)
    o = torch.einsum("hqk,khd->qhd", torch.exp(s - lse[..., None]), v)
    return -(torch.exp(sink.double().view(H, 1) - lse) * (o * do).sum(-1).T).sum(-1)


bug = False
for dirty in (False, True):
    g = torch.Generator().manual_seed(0)
    q, k, v, do = (torch.randn(1, T + PAD, H, D, generator=g) for _ in range(4))
    do[0, T:] = 0  # a loss never reads the tail rows
    sink = torch.randn(H, generator=g)
    q_, k_, v_, sink_ = (x.to(dev, dt).requires_grad_(True) for x in (q, k, v, sink))
    if dirty:  # what a training step's freed activations leave behind for the next torch.empty
        junk = [torch.full((n,), float("nan"), device=dev) for n in (64, 256, 1024, 4096) for _ in range(8)]
        del junk
    o = parallel_attn(q_, k_, v_, scale=D ** -0.5, cu_seqlens=torch.tensor([0, T], device=dev), sink_bias=sink_)
    (got,) = torch.autograd.grad(o, sink_, do.to(dev, dt))
    want = reference(q_.detach().cpu(), k_.detach().cpu(), v_.detach().cpu(), do, sink)
    err = (got.double().cpu() - want).abs().max().item()
    print(json.dumps({"allocator_held_nan": dirty, "dsink": got.tolist(), "expected": want.tolist(), "max_err": err}))
    bug |= not err < 0.05  # NaN counts as wrong
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
