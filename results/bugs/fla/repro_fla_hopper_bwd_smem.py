"""fla-core parallel_attn backward on Hopper: head dims above 128 ask for more shared memory than the GPU has.

Needs torch and fla-core only (no difftest); a Hopper GPU (H100/H200). For each (K, V) head-dim pair,
runs parallel_attn forward and backward on one fp16 sequence and prints one JSON line: ok, or the
exception. fla's forward accepts K <= 256 ("The key dimension can not be larger than 256"); its Hopper
backward tiles BT = 128, BS = 64, BK = next_power_of_2(K), BV = next_power_of_2(V) with no fallback
(fla/ops/attn/parallel.py, parallel_attn_bwd), where the Ampere branch lowers BT for K > 64."""
import json

import torch
from fla.ops.attn.parallel import parallel_attn


def one(k_dim, v_dim, t=64):
    g = torch.Generator(device="cuda").manual_seed(0)
    q = torch.randn(1, t, 2, k_dim, device="cuda", dtype=torch.float16, generator=g).requires_grad_()
    k = torch.randn(1, t, 2, k_dim, device="cuda", dtype=torch.float16, generator=g).requires_grad_()
    v = torch.randn(1, t, 2, v_dim, device="cuda", dtype=torch.float16, generator=g).requires_grad_()
    try:
        o = parallel_attn(q, k, v)
    except Exception as e:  # noqa: BLE001
        return {"K": k_dim, "V": v_dim, "forward": f"{type(e).__name__}: {str(e)[:160]}"}
    try:
        o.backward(torch.randn_like(o))
        torch.cuda.synchronize()
        return {"K": k_dim, "V": v_dim, "forward": "ok", "backward": "ok",
                "finite": bool(torch.isfinite(q.grad).all() and torch.isfinite(k.grad).all())}
    except Exception as e:  # noqa: BLE001
        return {"K": k_dim, "V": v_dim, "forward": "ok", "backward": f"{type(e).__name__}: {str(e)[:160]}"}


if __name__ == "__main__":
    import fla
    print(json.dumps({"fla": getattr(fla, "__version__", "?"), "torch": torch.__version__,
                      "gpu": torch.cuda.get_device_name()}))
    for kd, vd in ((64, 64), (128, 128), (128, 256), (136, 136), (136, 64), (192, 128), (256, 256), (256, 64)):
        print(json.dumps(one(kd, vd)), flush=True)
