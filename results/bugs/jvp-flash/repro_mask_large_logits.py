"""jvp-flash-attention: with causal=True or a boolean attn_mask, a masked key whose logit is far above the visible
ones zeroes the row's output: masked logits get MASK_CONST = -100 added instead of -inf, still set the running
row maximum, and every visible probability underflows. Row 0 of causal attention sees key 0 only, so its output
must be V[0], whatever key 1 holds. Needs torch, triton and jvp-flash-attention. Exits 1 while O or dV is wrong."""

import sys
from importlib.metadata import version

import torch
import triton
from jvp_flash_attention.jvp_attention import attention

print(
    "jvp-flash-attention", version("jvp-flash-attention"), "| triton", triton.__version__, "| torch", torch.__version__
)
print("GPU", torch.cuda.get_device_name(), "sm_%d%d" % torch.cuda.get_device_capability(), "| CUDA", torch.version.cuda)

N, D = 64, 64
torch.manual_seed(0)
q, k, v, do = (torch.randn(1, 1, N, D) for _ in range(4))
k[:, :, 1] = 40 * q[:, :, 0]  # key 1: a large logit for query 0, which must not see it
causal = torch.ones(N, N, dtype=torch.bool).tril()  # True = attend


def reference(q, k, v, do):  # float64 on the same (rounded) inputs; masked logits are -inf
    s = (q.double() @ k.double().transpose(-1, -2)) * D**-0.5
    p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
    return s, p @ v.double(), p.transpose(-1, -2) @ do.double()


bug = False
for dtype in (torch.bfloat16, torch.float16):
    s, o_ref, dv_ref = reference(*(t.to(dtype) for t in (q, k, v, do)))
    print(
        f"{str(dtype)[6:]}: query 0, scaled logit of key 0 (visible) {s[0, 0, 0, 0]:.1f}, of key 1 (masked) "
        f"{s[0, 0, 0, 1]:.1f}; max |O| {o_ref.abs().max():.3g}, max |dV| {dv_ref.abs().max():.3g}"
    )
    for how in ("causal=True", "boolean attn_mask"):
        qc, kc, vc = (t.to(dtype).cuda().requires_grad_() for t in (q, k, v))
        mask = None if how == "causal=True" else causal.expand(1, 1, N, N).contiguous().cuda()
        o = attention(qc, kc, vc, attn_mask=mask, causal=mask is None)
        o.backward(do.to(dtype).cuda())
        torch.cuda.synchronize()
        o, dv = o.detach().double().cpu(), vc.grad.double().cpu()
        err_o, err_dv = (o - o_ref).abs().max().item(), (dv - dv_ref).abs().max().item()
        bad = not (err_o <= 0.05 * o_ref.abs().max().item() and err_dv <= 0.05 * dv_ref.abs().max().item())  # NaN: bad
        bug |= bad
        print(
            f"  {how:17s}: O[0, :3] expected {[round(x, 3) for x in o_ref[0, 0, 0, :3].tolist()]}, got "
            f"{[round(x, 3) for x in o[0, 0, 0, :3].tolist()]}; max |O - ref| {err_o:.3g}, max |dV - ref| "
            f"{err_dv:.3g}" + ("  WRONG" if bad else "")
        )
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
