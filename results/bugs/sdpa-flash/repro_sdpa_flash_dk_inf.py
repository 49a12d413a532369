"""torch SDPA flash backend: dK = -inf where the true value is -63997 (finite in fp16, max 65504).
Needs only torch and inputs.pt beside this file (fp16 q, k, v, dO in [B, S, H, D]; the
attention problem: B1 S28, 8 query heads sharing 1 K/V head (GQA through enable_gqa),
head dim 99, no mask, scale 0.5406, dO with mixed magnitudes).

    python3 repro_sdpa_flash_dk_inf.py

Prints, per backend, the number of non-finite dK elements and dK at (token 17, kv head 0,
dim 58), next to the float64 math-backend value.
"""
import json
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

d = torch.load(Path(__file__).with_name("inputs.pt"), weights_only=True)
scale = d["scale"]


def grads(dtype, backend):
    q, k, v, do = (d[n].cuda().to(dtype).transpose(1, 2) for n in ("q", "k", "v", "do"))  # [B, H, S, D]
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    with sdpa_kernel(backend):
        o = F.scaled_dot_product_attention(q, k, v, scale=scale, enable_gqa=True)
    return torch.autograd.grad(o, (q, k, v), do)


truth = grads(torch.float64, SDPBackend.MATH)[1].transpose(1, 2)  # dK [B, S, Hkv, D]
rows = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
        "truth_dk[17,0,58]": truth[0, 17, 0, 58].item(), "truth_max_abs_dk": truth.abs().max().item()}
for name, be in (("flash", SDPBackend.FLASH_ATTENTION), ("efficient", SDPBackend.EFFICIENT_ATTENTION),
                 ("math_fp16", SDPBackend.MATH)):
    try:
        dk = grads(torch.float16, be)[1].transpose(1, 2).double()
        fin = torch.isfinite(dk)
        rows[name] = {"nonfinite_dk": int((~fin).sum()), "dk[17,0,58]": dk[0, 17, 0, 58].item(),
                      "max_abs_err_finite": (dk - truth)[fin].abs().max().item(),
                      "nonfinite_where_truth_below_65504": int((~fin & (truth.abs() < 65504)).sum())}
    except RuntimeError as e:
        rows[name] = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
print(json.dumps(rows, indent=1))
