"""cuDNN FP8 triage on the H200 (2026-12-02, session 2): (1) which keyword arguments sdpa_fp8 takes
for a causal mask (the adapter's raised TypeError), (2) what cuDNN's FP8 LSE matches: the float64
LSE of the dequantised inputs, or one whose logits S passed through fp16 / bf16 / tf32, or whose
statistics were stored in fp16. Prints one line per candidate; nothing is asserted."""
import torch

from difftest.kernels.cudnn_fp8 import CudnnFp8Adapter
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem


def lse_of(s):
    return torch.logsumexp(s, dim=-1)


def candidates(x, p):
    q, k = x.q.double(), x.k.double()  # [T, H, D] dequantised
    B, S = p.batch, p.seqlen_q
    qh = q.view(B, S, p.heads_q, -1).transpose(1, 2)
    kh = k.view(B, p.seqlen_k, p.heads_kv, -1).transpose(1, 2).repeat_interleave(p.heads_q // p.heads_kv, 1)
    s64 = qh @ kh.transpose(-1, -2) * p.scale
    raw = qh @ kh.transpose(-1, -2)  # before the scale
    out = {"float64": lse_of(s64)}
    for name, dt in (("S fp16", torch.float16), ("S bf16", torch.bfloat16)):
        out[name] = lse_of(s64.to(dt).double())
        out[name + " (unscaled QK^T rounded, then scaled)"] = lse_of(raw.to(dt).double() * p.scale)
    out["LSE stored fp16"] = lse_of(s64).to(torch.float16).double()
    out["log2 units in fp16"] = (lse_of(s64) / torch.log(torch.tensor(2.0, dtype=torch.float64))).to(
        torch.float16).double() * torch.log(torch.tensor(2.0, dtype=torch.float64))
    return {n: v.transpose(1, 2).reshape(-1, p.heads_q) for n, v in out.items()}


k = CudnnFp8Adapter()
print("available:", k.available())
for kw in (dict(seqlen_q=128, seqlen_k=128), dict(seqlen_q=128, seqlen_k=128, values="scaled", value_scale=4.0),
           dict(seqlen_q=256, seqlen_k=256, dtype="float8_e5m2")):
    p = Problem(**{"head_dim_qk": 128, "head_dim_v": 128, "dtype": "float8_e4m3fn", **kw})
    x = make_inputs(p, "cuda")
    got = k.run(x).lse.double().cpu()
    for name, c in candidates(x, p).items():
        print(f"{p.short()} | {name:45s} | max|cuDNN LSE - candidate| {(got - c.cpu()).abs().max().item():.3g}")

# (1) the causal keyword arguments
cudnn = __import__("cudnn")
g = cudnn.pygraph(io_data_type=cudnn.data_type.FP8_E4M3, intermediate_data_type=cudnn.data_type.FLOAT,
                  compute_data_type=cudnn.data_type.FLOAT, handle=cudnn.create_handle())
print("sdpa_fp8 doc:", (g.sdpa_fp8.__doc__ or "")[:3000])
print("sdpa_fp8_backward doc:", (g.sdpa_fp8_backward.__doc__ or "")[:3000])
