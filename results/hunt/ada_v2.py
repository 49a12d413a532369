# ruff: noqa: E401, E402, F401, F403, F405, I001  (CPU harness: TRITON_INTERPRET and stand-ins must precede the imports; star imports re-export)
from ada_run import *
import triton, triton.language as tl, importlib

V2 = importlib.import_module("adasplash.adasplash_v2")


@triton.jit
def _float2int_rd(x):
    return tl.floor(x).to(tl.int32)


@triton.jit
def _popc(x):
    c = x * 0
    for i in tl.static_range(32):
        c += (x >> i) & 1
    return c


@triton.jit
def _get_next_block(bmask, n_blk):
    cnt = bmask * 0
    pos = bmask * 0 - 1
    for i in tl.static_range(32):
        bit = (bmask >> i) & 1
        cnt += bit
        pos = tl.where((bit == 1) & (cnt == n_blk + 1) & (pos < 0), i, pos)
    return pos


V2.float2int_rd = _float2int_rd
V2.popc = _popc
V2.get_next_block = _get_next_block
