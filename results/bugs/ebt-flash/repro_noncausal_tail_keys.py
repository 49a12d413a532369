"""ebt-flash-attention: non-causal attention without a mask, seq_len not a multiple of BLOCK_N (32 or 64): the
forward's last key block is loaded with zero padding and nothing masks the padded keys, so each adds logit 0 to
the softmax. The original stream (plain softmax attention) shows it against a float64 reference. Exits 1 while O or
a gradient is wrong, 0 once right. Runs on CUDA, or on the CPU under Triton's interpreter without one."""

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
for n in (128, 100):  # 128 is the control
    torch.manual_seed(0)
    q_o, k_o, v_o, q_p, k_p, v_p = (torch.randn(1, 2, n, 32, device=dev).requires_grad_() for _ in range(6))
    do_o = torch.randn(1, 2, n, 32, device=dev)
    out_o, out_p = ebt_attention(q_o, k_o, v_o, q_p, k_p, v_p, causal=False, sm_scale=32**-0.5)
    got = [out_o, *torch.autograd.grad(out_o, (q_o, k_o, v_o), do_o)]
    q, k, v = (t.detach().double().requires_grad_() for t in (q_o, k_o, v_o))
    o64 = torch.softmax(q @ k.transpose(-1, -2) * 32**-0.5, dim=-1) @ v  # the original stream: plain attention
    ref = [o64, *torch.autograd.grad(o64, (q, k, v), do_o.double())]
    errs = [(g.double() - r).abs().max().item() for g, r in zip(got, ref)]
    bad = not all(e <= 2e-2 for e in errs)  # float32 inputs (TF32 dots on a GPU); NaN counts as bad
    bug |= bad
    print(
        f"seq_len {n}, non-causal: max |error| O {errs[0]:.2e} dQ {errs[1]:.2e} dK {errs[2]:.2e} dV {errs[3]:.2e}"
        + ("  WRONG" if bad else "")
    )
print("BUG" if bug else "OK")
sys.exit(1 if bug else 0)
