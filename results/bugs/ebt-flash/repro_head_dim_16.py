"""ebt-flash-attention: head_dim 16 passes EBTAttn.forward's check (HEAD_DIM_K in {16, 32, 64, 128, 256}), but every
forward autotune config has BLOCK_N 32 or 64 and the kernel asserts BLOCK_N <= HEAD_DIM, so no config builds and
the call fails. On a GPU the script makes the call; under Triton's CPU interpreter (no autotuning there) it tries
each of the package's configs in turn. Exits 1 while head_dim 16 is accepted and then fails, 0 once it runs."""

import os
import sys
from importlib.metadata import version

import torch

dev = "cuda" if torch.cuda.is_available() else "cpu"
os.environ["TRITON_INTERPRET"] = "1" if dev == "cpu" else os.environ.get("TRITON_INTERPRET", "0")
import triton  # noqa: E402
import triton.runtime.interpreter as interp  # noqa: E402
from ebt_flash_attention import ebt_forward_kernel as fwd  # noqa: E402
from ebt_flash_attention.ebt_attention import ebt_attention  # noqa: E402

if dev == "cpu":  # numpy >= 2.4 refuses int() of the interpreter's 1-element program ids
    patch, index = interp._patch_lang_tensor, lambda t: int(t.handle.data.reshape(-1)[0])
    interp._patch_lang_tensor = lambda t, s: (patch(t, s), s.set_attr(t, "__index__", index))
gpu = torch.cuda.get_device_name() if dev == "cuda" else "CPU, TRITON_INTERPRET=1"
print(
    f"ebt-flash-attention {version('ebt-flash-attention')} | triton {triton.__version__} | torch {torch.__version__}",
    gpu,
)


def call(d):
    torch.manual_seed(0)
    ts = [torch.randn(1, 2, 64, d, device=dev) for _ in range(6)]
    out_o, out_p = ebt_attention(*ts, causal=True)
    ref = (
        torch.softmax(
            (ts[0] @ ts[1].transpose(-1, -2) * d**-0.5)
            .tril()
            .masked_fill(torch.ones(64, 64, dtype=torch.bool, device=dev).triu(1), -torch.inf),
            dim=-1,
        )
        @ ts[2]
    )
    return (out_o - ref).abs().max().item()


if dev == "cpu":  # every distinct tile of the package's own list (num_warps/num_stages do not matter here)
    configs = list({(c.kwargs["BLOCK_M"], c.kwargs["BLOCK_N"]): c for c in fwd.get_fwd_autotune_configs()}.values())
    fwd._ebt_attn_fwd.configs = [triton.Config({"BLOCK_M": 32, "BLOCK_N": 32})]
else:
    configs = [None]
print(f"head_dim 32 (control): runs, max |O error| {call(32):.1e}")
failed = 0
for cfg in configs:
    if cfg is not None:
        fwd._ebt_attn_fwd.configs = [cfg]
    name = "head_dim 16" + ("" if cfg is None else f" with {cfg.kwargs}")
    try:
        print(f"{name}: runs, max |O error| {call(16):.1e}")
    except Exception as e:  # CompilationError on a GPU, InterpreterError(AssertionError) on the CPU
        failed += 1
        print(f"{name}: {type(e).__name__}: {str(e).strip().splitlines()[-1][-90:]}")
bug = failed == len(configs)
print(f"{failed} of {len(configs)} tiles fail\n" + ("BUG" if bug else "OK"))
sys.exit(1 if bug else 0)
