"""fla-core parallel_nsa backward, varlen: the dK/dV CSR build keeps block_indices slots that lie after the
query in its own sequence (past a short sequence's end: in the last sequence, past csr_offsets).

Needs torch and fla-core only. GPU: python3 repro_fla_nsa_csr_oob.py
CPU: TRITON_INTERPRET=1 python3 repro_fla_nsa_csr_oob.py (Triton 3.6's interpreter needs numpy < 2.4).
1. prepare_block_csr called as parallel_nsa_bwd calls it (parallel.py:715-731), cu_seqlens [0, 35, 45, 80],
   every token naming blocks [0, 1, 2, -1] (the forward skips a block after the query, parallel.py:262):
   lists (query, block) pairs whose block is in another sequence or after the query.
2. parallel_nsa forward + backward with cu_seqlens [0, 256, 257] (the last sequence, 1 token, names
   blocks 0..15) in a child process: its exit code (the write past csr_offsets; CPU: usually a crash).
Exit 1 while either shows, 0 once fixed."""
import os
import subprocess
import sys

import torch

os.environ.setdefault("TRITON_INTERPRET", "0" if torch.cuda.is_available() else "1")
import triton  # noqa: E402
from fla.ops.nsa import parallel_nsa  # noqa: E402
from fla.ops.utils import prepare_block_csr, prepare_chunk_indices  # noqa: E402

dev, BS = ("cuda" if torch.cuda.is_available() else "cpu"), 16
if dev == "cpu":  # the interpreter cannot time autotune configs: take the first
    import fla.ops.nsa.parallel as P
    import fla.ops.utils.pooling as PO
    from triton.runtime.autotuner import Autotuner
    for obj in [*vars(P).values(), *vars(PO).values()]:
        while not isinstance(obj, Autotuner) and hasattr(obj, "fn"):
            obj = obj.fn
        if isinstance(obj, Autotuner):
            obj._do_bench = lambda fn, quantiles=None, **kw: [1.0, 1.0, 1.0]


def block_indices(T, row):  # every token names the same blocks; -1 pads
    return torch.tensor(row, device=dev).expand(1, T, 1, len(row)).contiguous()


if sys.argv[1:] == ["child"]:
    T = 257
    x = [torch.randn(1, T, h, 16, device=dev, requires_grad=True) for h in (16, 1, 1)]
    o = parallel_nsa(*x, block_indices=block_indices(T, list(range(16))), block_counts=16, block_size=BS,
                     cu_seqlens=torch.tensor([0, 256, T], device=dev))
    o.sum().backward()
    torch.cuda.synchronize() if dev == "cuda" else None
    sys.exit(0)
cu = torch.tensor([0, 35, 45, 80], device=dev)
chunks = prepare_chunk_indices(cu, BS)  # [(sequence, block within it)] per global block
M = triton.cdiv(int((cu[1:] - cu[:-1]).max()), BS)  # blocks of the longest sequence, as parallel.py:718
idx, off = prepare_block_csr(block_indices(80, [0, 1, 2, -1]), 4, cu, chunks, M, BS)
seq_of = torch.bucketize(torch.arange(80, device=dev), cu[1:], right=True)
wrong = []
for b, (n, j) in enumerate(chunks.tolist()):
    for t in idx[off[b]:off[b + 1]].tolist():
        if seq_of[t] != n or j * BS > t - cu[n]:
            wrong.append((t, n, j))
print(f"1. {len(wrong)} of {int(off[-1])} CSR pairs name a block of another sequence or after the query;",
      f"e.g. (token, sequence, block) {wrong[:3]}")
try:  # a corrupted heap may also hang the child
    r = subprocess.run([sys.executable, __file__, "child"], capture_output=True, text=True, timeout=300)
    err = [x for x in r.stderr.splitlines() if x.strip() and "_cpu_device" not in x]
    rc, tail = r.returncode, err[-1:] if r.returncode else []
except subprocess.TimeoutExpired:
    rc, tail = "none (hung, killed after 300 s)", []
print(f"2. last sequence forward+backward: exit code {rc}", *tail)
sys.exit(1 if wrong or rc else 0)
