"""adasplash: grouped-query K/V (fewer heads than Q), which AdaSplash-2 supports, are silently wrong when
`adasplash()` routes the call to the v1 kernel (is_causal=False or alpha != 1.5). v1 checks neither K's nor V's
head count and indexes them with Q's head stride, so query head h reads K/V rows of "head" h: past the end of K
and V for h >= n_kv_heads. Expected: the same output as with K/V repeated to n_heads (or a refusal). K and V here
are the start of larger buffers, so the reads past them stay in memory we own. Exits 1 while the output differs.
Runs on CUDA, or on the CPU under Triton's interpreter without one."""

import os
import sys
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402
from adasplash import adasplash  # noqa: E402

if dev == "cpu":  # numpy >= 2.4 refuses int() of the interpreter's 1-element program ids; no CUDA tensors
    import functools
    import importlib

    patch, index = interp._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])
    interp._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))
    bm = importlib.import_module("adasplash.adasplash_block_mask")
    bm.compute_bidxs_and_cubcounts = functools.partial(bm.compute_bidxs_and_cubcounts, device="cpu")
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(f"adasplash {version('adasplash')} | triton {triton.__version__} | torch {torch.__version__} | {gpu}")

B, H, H_KV, N, D = 1, 4, 2, 128, 32
torch.manual_seed(0)
q = torch.randn(B, H, N, D, device=dev)
k = torch.randn(B * H * N * D, device=dev)[: B * H_KV * N * D].view(B, H_KV, N, D)
v = torch.randn(B * H * N * D, device=dev)[: B * H_KV * N * D].view(B, H_KV, N, D)
bug = False
for kw in (dict(is_causal=False), dict(is_causal=True, alpha=2.0)):
    try:
        got = adasplash(q, k, v, **kw)
    except (AssertionError, ValueError) as e:  # a clear refusal is a fix too
        print(f"{kw}: refused: {e}")
        continue
    ref = adasplash(q, k.repeat_interleave(H // H_KV, 1), v.repeat_interleave(H // H_KV, 1), **kw)
    err = [f"{(got[:, h] - ref[:, h]).abs().max().item():.2e}" for h in range(H)]
    bad = not torch.allclose(got, ref, atol=1e-3)
    bug |= bad
    print(f"{kw}: max |GQA output - output with K/V repeated| per query head: {err}" + ("  WRONG" if bad else ""))
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
