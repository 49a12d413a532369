"""fastflash-attention 0.2.0: head dims 1, 2, 4 and 8 pass fast_attention's own validation
(a power of two <= 128, __init__.py `_POW2_LE_128`, lines 47 and 76-78) and then fail to compile:
Triton's tl.dot needs K >= 16 (`Input shapes should have M >= 1, N >= 1 and K >= 16`,
_kernel.py forward loop `qk = tl.dot(q, kt, ...)`). Needs only torch, triton and the package.

    python3 repro_fastflash_small_hdim.py
"""
import torch
from fastflash_attention import fast_attention

for d in (1, 2, 4, 8, 16):
    q, k, v = (torch.randn(1, 1, 16, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    try:
        fast_attention(q, k, v, is_causal=False).sum().backward()
        torch.cuda.synchronize()
        print(f"head_dim {d}: ok")
    except Exception as e:  # noqa: BLE001 -- the finding is the exception
        print(f"head_dim {d}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
