"""flash-attn-4 (CuTe) SM90 with q, k, v, grad_out that start one element into their storage (data pointer 2
bytes past 16-byte alignment). 4.0.0b25 raised "Tensor data pointer is not aligned" (its maybe_contiguous only
looked at the last stride); from 4.0.0b26 on, cute_dsl_utils.maybe_contiguous copies such inputs, so later
releases should give the right O and gradients. Needs torch and flash-attn-4 only.
Exits 1 while a misaligned call raises or is wrong; 0 once it matches the aligned call."""
import json
import sys
from importlib.metadata import version

import torch
from flash_attn.cute import flash_attn_func

print(json.dumps({"flash-attn-4": version("flash-attn-4"), "torch": torch.__version__,
                  "gpu": torch.cuda.get_device_name()}), flush=True)


def at(x, off):  # the same values in memory that starts `off` elements into its storage
    flat = torch.empty(off + x.numel(), device="cuda", dtype=x.dtype)
    y = flat[off:].view(x.shape)
    y.copy_(x)
    return y


bug = False
for d in (64, 96, 128):  # multiples of 32: clear of the head-dim rounding issue
    torch.manual_seed(0)
    base = [torch.randn(1, 63, h, d, device="cuda", dtype=torch.bfloat16) for h in (16, 2, 2, 16)]
    res = {}
    for off in (8, 1):  # 8 elements = 16 bytes (aligned), 1 element = 2 bytes
        q, k, v, do = (at(t, off) for t in base)
        q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
        try:
            out, _ = flash_attn_func(q, k, v, causal=True, deterministic=True)
            res[off] = [out.detach().float(), *(g.float() for g in torch.autograd.grad(out, (q, k, v), do))]
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - the refusal is the result
            res[off] = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"
    row = {"head_dim": d}
    for off, r in res.items():
        row[f"offset_{off}"] = r if isinstance(r, str) else "ok"
    if all(not isinstance(r, str) for r in res.values()):
        row["max_diff_misaligned_vs_aligned"] = max((a - b).abs().max().item() for a, b in zip(res[1], res[8]))
    bug |= isinstance(res[1], str) or row.get("max_diff_misaligned_vs_aligned", 0) > 0
    print(json.dumps(row), flush=True)
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
