"""adasplash: the backward's _bwd_preprocess runs 128-row blocks (PRE_BLOCK = 128) with unmasked loads and stores
when varlen is None, but the length checks accept seq_len 64 (AdaSplash-2, the default `adasplash(q, k, v)` path)
and 16/32/64 (v1, `adasplash_v1` / non-causal calls). The last (batch, head) then writes seq_len..127 entries past
the end of `delta` (and reads past O and dO). The script launches each file's kernel exactly as its backward does,
with `delta` a view into a larger buffer whose tail is a canary. Exits 1 while the canary is overwritten.
Runs on CUDA, or on the CPU under Triton's interpreter without one."""

import os
import sys
from importlib import import_module
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402

v1, v2 = import_module("adasplash.adasplash_block_mask"), import_module("adasplash.adasplash_v2")  # the modules

if dev == "cpu":  # numpy >= 2.4 refuses int() of the interpreter's 1-element program ids
    patch, index = interp._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])
    interp._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(f"adasplash {version('adasplash')} | triton {triton.__version__} | torch {torch.__version__} | {gpu}")


def view(buf, shape):  # a contiguous tensor of `shape` at the start of a larger buffer
    n = torch.Size(shape).numel()
    return buf[:n].view(shape), buf[n:]


bug = False
for name, n_ctx in (("v2", 128), ("v2", 64), ("v1", 64), ("v1", 32)):  # the first is the control
    B, H, D, PRE_BLOCK = 1, 2, 32, 128  # as in both backward() methods
    torch.manual_seed(0)
    o, _ = view(torch.randn(B * H * (n_ctx + PRE_BLOCK) * D, device=dev), (B, H, n_ctx, D))
    do, _ = view(torch.randn(B * H * (n_ctx + PRE_BLOCK) * D, device=dev), (B, H, n_ctx, D))
    delta, canary = view(torch.full((B * H * n_ctx + PRE_BLOCK,), 7.0, device=dev), (B, H, n_ctx))
    grid = (triton.cdiv(n_ctx, PRE_BLOCK), H, B)
    if name == "v2":  # adasplash_v2.py backward, the _bwd_preprocess launch
        args = (o, do, delta, None, o.stride(1), delta.stride(1), H, D, n_ctx, False, PRE_BLOCK)
        v2._bwd_preprocess[grid](*args, num_warps=16, num_stages=1)
    else:  # adasplash_block_mask.py backward (MAX_CTX = N_CTX without varlen)
        args = (o, do, delta, None, o.stride(1), delta.stride(1), False, H, D, n_ctx, PRE_BLOCK)
        v1._bwd_preprocess[grid](*args, num_warps=16, num_stages=1)
    if dev == "cuda":
        torch.cuda.synchronize()
    hit = int((canary != 7.0).sum())
    ok_delta = torch.allclose(delta, (o * do).sum(-1), atol=1e-4)
    bug |= hit > 0
    print(f"{name} seq_len {n_ctx}: delta correct {ok_delta}, {hit} of {canary.numel()} floats past delta overwritten")
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
