"""ebt-flash-attention: a float (additive) attn_mask is added to the logits after they are scaled to base 2
(qk * sm_scale * log2(e) + mask), so the kernel computes softmax(q k^T * sm_scale + ln(2) * mask): every mask
value other than 0 and the -1e9 block value is off by a factor ln 2 = 0.693. The original stream (plain softmax
attention with mask[:-1, :-1]) shows it against a float64 reference. Exits 1 while O or a gradient is wrong, 0 once
right. Runs on CUDA, or on the CPU under Triton's interpreter without one."""

import os
import sys
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402
from ebt_flash_attention import ebt_backward_kernel as bwd  # noqa: E402
from ebt_flash_attention import ebt_forward_kernel as fwd  # noqa: E402
from ebt_flash_attention.ebt_attention import ebt_attention  # noqa: E402

if dev == "cpu":  # the interpreter cannot autotune, and numpy >= 2.4 refuses int() of its 1-element program ids
    for kern in (fwd._ebt_attn_fwd, bwd._ebt_attn_bwd_dkdv, bwd._ebt_attn_bwd_dq):
        kern.configs = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32})]
    bwd._ebt_attn_bwd_dkdv_superdiag.configs = [triton.Config({"BLOCK_M": 32})]
    patch, index = interp._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])
    interp._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(
    f"ebt-flash-attention {version('ebt-flash-attention')} | triton {triton.__version__} | torch {torch.__version__}",
    gpu,
)

bug = False
n = 64
torch.manual_seed(0)
q_o, k_o, v_o, q_p, k_p, v_p = (torch.randn(1, 2, n, 32, device=dev).requires_grad_() for _ in range(6))
do_o = torch.randn(1, 2, n, 32, device=dev)
for name, mask in (
    ("0 / -1e9 (block)", torch.ones(n + 1, n + 1, device=dev).triu(1) * -1e9),  # the control
    ("bias 0 / -2", torch.where(torch.rand(n + 1, n + 1, device=dev) < 0.5, 0.0, -2.0)),
):
    out_o, out_p = ebt_attention(q_o, k_o, v_o, q_p, k_p, v_p, attn_mask=mask, causal=False, sm_scale=32**-0.5)
    got = [out_o, *torch.autograd.grad(out_o, (q_o, k_o, v_o), do_o)]
    q, k, v = (t.detach().double().requires_grad_() for t in (q_o, k_o, v_o))
    s = q @ k.transpose(-1, -2) * 32**-0.5 + mask[:-1, :-1].double()  # the mask is added to the scores
    o64 = torch.softmax(s, dim=-1) @ v
    ref = [o64, *torch.autograd.grad(o64, (q, k, v), do_o.double())]
    errs = [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]
    bad = not all(e <= 2e-2 for e in errs)  # float32 inputs (TF32 dots on a GPU); NaN counts as bad
    bug |= bad
    print(
        f"additive mask {name}: max |error| O {errs[0]:.2e} dQ {errs[1]:.2e} dK {errs[2]:.2e} dV {errs[3]:.2e}"
        + ("  WRONG" if bad else "")
    )
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
