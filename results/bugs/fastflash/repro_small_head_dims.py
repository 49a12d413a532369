"""fastflash-attention: head dims 1, 2, 4 and 8 pass fast_attention's validation (a power of two <= 128) and
then fail to compile (Triton's tl.dot needs K >= 16). Needs torch, triton and fastflash-attention.
Exits 1 while a head dim below 16 is accepted and then fails."""
import sys
from importlib.metadata import version

import torch
from fastflash_attention import fast_attention

print("fastflash-attention", version("fastflash-attention"), "torch", torch.__version__)
bug = False
for d in (1, 2, 4, 8, 16):  # 16 is the control
    q, k, v = (torch.randn(1, 1, 16, d, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    try:
        fast_attention(q, k, v, is_causal=False).sum().backward()
        torch.cuda.synchronize()
        print(f"head_dim {d}: ok")
    except ValueError as e:  # a clear refusal up front would be the fix
        print(f"head_dim {d}: refused: {e}")
    except Exception as e:  # noqa: BLE001 - accepted, then failed
        print(f"head_dim {d}: {type(e).__name__}: {str(e).splitlines()[0][:160]}")
        bug = True
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
