"""torch CPU flash attention backward (SDPBackend.FLASH_ATTENTION on the CPU, fp16/bf16): dQ, dK and dV
are accumulated in the INPUT dtype across blocks, so their error grows with the number of query (dK/dV)
and key (dQ) blocks, while a kernel with float32 accumulators stays at one rounding.

Read in aten/src/ATen/native/cpu/FlashAttentionKernel.cpp (cpu_flash_attention_backward, pytorch main
008ec6b1): `grad_v <- grad_v + attn.T @ grad_out`, `grad_k <- grad_k + scale * grad_attn.T @ q` and
`grad_q <- grad_q + scale * grad_attn @ k` are cpublas::gemm calls with beta = 1 whose C operand is
grad_{v,k,q}.data_ptr<scalar_t>(): each query block (qSplitSize 32, 64 or 256) adds its partial sum
into the fp16/bf16 output, rounding the running sum every block.

Standalone (torch only, CPU):  python3 repro_cpu_flash_input_dtype_accumulation.py
One JSON line per seqlen_q: the max |error| of torch's CPU flash dV/dK/dQ against float64 autograd on
the same fp16 inputs, the error of the same attention computed in float32 and rounded once to fp16
(what float32 accumulators give), and their ratio. Exit 1 when the dV ratio at the longest query
length exceeds 2 (the accumulation shows), else 0.
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

D, SK, DTYPE = 64, 128, torch.float16


def grads(q, k, v, do, dtype, flash):
    q, k, v = (t.to(dtype).detach().requires_grad_() for t in (q, k, v))
    if flash:
        with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
            o = F.scaled_dot_product_attention(q, k, v)
    else:
        o = F.scaled_dot_product_attention(q, k, v)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.to(dtype))
    return {"dq": dq, "dk": dk, "dv": dv}


def main():
    rows, worst = [], 0.0
    for sq in (32, 64, 128, 256, 512, 1024):
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(1, 1, n, D, generator=g) for n in (sq, SK, SK))
        do = torch.randn(1, 1, sq, D, generator=g) * 2000.0  # large upstream gradient, far from fp16's max
        q, k, v, do = (t.to(DTYPE) for t in (q, k, v, do))  # the inputs every reference sees
        truth = grads(q, k, v, do, torch.float64, flash=False)
        flash = grads(q, k, v, do, DTYPE, flash=True)
        f32 = {n: t.to(DTYPE) for n, t in grads(q, k, v, do, torch.float32, flash=False).items()}
        row = {"seqlen_q": sq, "seqlen_k": SK, "head_dim": D, "dtype": str(DTYPE), "torch": torch.__version__}
        for n in ("dv", "dk", "dq"):
            e = (flash[n].double() - truth[n]).abs().max().item()
            r = (f32[n].double() - truth[n]).abs().max().item()
            row[n] = {"cpu_flash_err": e, "float32_once_err": r, "ratio": e / r if r else float("inf"),
                      "max_abs_truth": truth[n].abs().max().item()}
        rows.append(row)
        print(json.dumps(row), flush=True)
        worst = row["dv"]["ratio"]
    print(json.dumps({"verdict": "accumulates in the input dtype" if worst > 2 else "no growth seen",
                      "dv_ratio_longest": worst}))
    return 1 if worst > 2 else 0


if __name__ == "__main__":
    sys.exit(main())
