"""The counter-based generator's device path (counter_rng.py) as one Triton kernel, on CUDA.

The torch path hashes an element index with ~35 int64 elementwise operations and maps it to a
normal with ~8 more, each a pass over the tensor: ~800 bytes of memory traffic per float64
value drawn. A ``gpu`` campaign's large Problems draw 10^8 values twice a case (the runner's
references, the worker's kernel), tens of milliseconds of the GPU's time each. This kernel
computes the same function in one pass (8 bytes written per value, the quantile table read
from the cache), for several streams at once (a case's q, k, v and dO):

- the hash in uint32 arithmetic, where a product wraps modulo 2^32 exactly as ``lowbias32``
  defines it (the torch path splits each product to keep it below 2^63 in int64);
- the normal from the quantile table: x = T[j] + (T[j+1] - T[j]) * (2m + 1) / 2^17, every
  operand a multiple of 2^-47 below 2^3, so every product and sum is exact in float64, with or
  without a fused multiply-add: the same bytes as the torch and numpy paths.

tests/test_counter_rng.py runs it under Triton's interpreter on CPU tensors against the numpy
path; the GPU test there compares a CUDA draw with a CPU draw byte for byte. counter_rng.py
imports this module only on CUDA (and where Triton imports), as chunked.py does fused_passes.py.
"""

import torch
import triton
import triton.language as tl

from difftest.errors import InputError

BLOCK = 1024
MAX_STREAMS = 8  # streams one launch draws (make_inputs asks for four)


@triton.jit
def _lowbias32(x):
    x ^= x >> 16
    x = x * 0x7FEB352D
    x ^= x >> 15
    x = x * 0x846CA68B
    x ^= x >> 16
    return x


# the stream of an element: the last whose start is at or before it (an empty stream's start
# equals the next one's and is passed over), unrolled over the streams (no runtime loop bound)
@triton.jit(do_not_specialize=["total"])
def _normal_kernel(out_ptr, meta_ptr, t_ptr, d_ptr, total, NSTREAMS: tl.constexpr, BLOCK: tl.constexpr):
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < total
    start = i * 0  # not tl.zeros: a jit function of Triton's own, which its interpreter (tests) runs
    k0 = start + tl.load(meta_ptr + NSTREAMS)  # only if Triton was first imported with TRITON_INTERPRET set
    k1 = start + tl.load(meta_ptr + 2 * NSTREAMS)
    for s in tl.static_range(1, NSTREAMS):
        at = tl.load(meta_ptr + s)
        hit = i >= at
        start = tl.where(hit, at, start)
        k0 = tl.where(hit, tl.load(meta_ptr + NSTREAMS + s), k0)
        k1 = tl.where(hit, tl.load(meta_ptr + 2 * NSTREAMS + s), k1)
    x = ((i - start).to(tl.uint32)) ^ k0.to(tl.uint32)
    x = _lowbias32(x)
    x = _lowbias32(x ^ k1.to(tl.uint32))
    j = (x >> 16).to(tl.int64)
    f = ((x & 0xFFFF).to(tl.float64) * 2.0 + 1.0) * (2.0**-17)
    val = tl.load(d_ptr + j, mask=ok, other=0.0) * f + tl.load(t_ptr + j, mask=ok, other=0.0)
    tl.store(out_ptr + i, val, mask=ok)


def fill_normals(keys: list, sizes: list, table: tuple, device) -> torch.Tensor:
    """Normals of several streams, concatenated (counter_rng._fill_many_t's result): stream s
    holds sizes[s] values (each below 2^32) under its keys[s] = (k0, k1); ``table``: the
    quantile table and cell widths on ``device`` (counter_rng._table)."""
    if len(sizes) > MAX_STREAMS:
        raise InputError(f"{len(sizes)} streams in one launch: allowed at most {MAX_STREAMS}")
    n = len(sizes)
    starts, acc = [], 0
    for size in sizes:
        starts.append(acc)
        acc += size
    meta = torch.tensor(starts + [k for k, _ in keys] + [k for _, k in keys], dtype=torch.int64, device=device)
    out = torch.empty(acc, dtype=torch.float64, device=device)
    if acc:
        t, d = table
        _normal_kernel[(triton.cdiv(acc, BLOCK),)](out, meta, t, d, acc, NSTREAMS=n, BLOCK=BLOCK)
    return out
