"""fla-core parallel_nsa (selection branch): an empty sequence in cu_seqlens gives wrong O, dQ, dK, dV.

Needs torch and fla-core only. GPU: python3 repro_fla_nsa_empty_seq.py
CPU: TRITON_INTERPRET=1 python3 repro_fla_nsa_empty_seq.py (Triton 3.6's interpreter needs numpy < 2.4).
The same 45 tokens, the same block_indices, once with cu_seqlens [0, 10, 10, 45] (sequence 1 empty)
and once with [0, 10, 45]: an empty sequence holds no token, so both calls must agree.
Exit 1 while they differ, 0 once fixed."""
import os
import sys

import torch

os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")
from fla.ops.nsa import parallel_nsa  # noqa: E402

dev = "cuda" if torch.cuda.is_available() else "cpu"
if dev == "cpu":  # the interpreter cannot time autotune configs: take the first
    import fla.ops.nsa.parallel as P
    import fla.ops.utils.pooling as PO
    from triton.runtime.autotuner import Autotuner
    for obj in [*vars(P).values(), *vars(PO).values()]:
        while not isinstance(obj, Autotuner) and hasattr(obj, "fn"):
            obj = obj.fn
        if isinstance(obj, Autotuner):
            obj._do_bench = lambda fn, quantiles=None, **kw: [1.0, 1.0, 1.0]
dt = torch.bfloat16 if dev == "cuda" else torch.float32
HQ, H, D, BS = 16, 1, 16, 16  # group size 16 (the minimum), head dim 16, block_size 16

g = torch.Generator().manual_seed(0)
q, k, v, do = (torch.randn(1, 45, h, D, generator=g) for h in (HQ, H, H, HQ))
# sequence 0 (10 tokens) selects block 0; sequence 2 (35 tokens) blocks 0, 1, 2; -1 pads
rows = [[0, -1, -1, -1]] * 10 + [[0, 1, 2, -1]] * 35
block_indices = torch.tensor(rows, device=dev).view(1, 45, 1, 4)


def run(cu_seqlens):
    x = [t.to(dev, dt).requires_grad_() for t in (q, k, v)]
    o = parallel_nsa(*x, block_indices=block_indices, block_counts=4, block_size=BS,
                     cu_seqlens=torch.tensor(cu_seqlens, device=dev))
    grads = torch.autograd.grad(o, x, do.to(dev, dt))
    return [t.detach().float().cpu() for t in (o, *grads)]


with_empty, without = run([0, 10, 10, 45]), run([0, 10, 45])
bad = False
for name, a, b in zip(("o", "dq", "dk", "dv"), with_empty, without):
    err, ref = (a - b).abs().max().item(), b.abs().max().item()
    rows_off = sorted({int(t) for t in ((a - b).abs().amax((0, 2, 3)) > 0.01 * ref).nonzero().flatten()})
    print(f"{name}: max |[0,10,10,45] - [0,10,45]| = {err:.3g} (max |value| {ref:.3g}); "
          f"tokens off: {rows_off[:3]}..{rows_off[-3:]} ({len(rows_off)})" if rows_off else f"{name}: agree")
    bad |= err > 0.01 * ref
print("FAIL: the empty sequence changes the result" if bad else "OK")
sys.exit(1 if bad else 0)
