"""cuDNN SDPA forward, THD (ragged) with GQA and one query token per sequence: Stats (LSE) are written for
some query heads only. Needs torch and nvidia-cudnn-frontend. Stats starts at a sentinel; exits 1 while
heads are left unwritten or wrong."""
import json
import sys

import cudnn
import torch


def run(hq, hk, d=8, sq=1, sk=2, b=1, sentinel=-12345.0):
    torch.manual_seed(0)
    io, f32, i64 = cudnn.data_type.HALF, cudnn.data_type.FLOAT, cudnn.data_type.INT64
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32)
    bshd = lambda h, s, e: dict(dim=(b, h, s, e), stride=(s * h * e, e, h * e, 1))  # noqa: E731
    shapes = (("q", hq, sq), ("k", hk, sk), ("v", hk, sk))
    t = {n: g.tensor(name=n, data_type=io, **bshd(h, s, d)) for n, h, s in shapes}
    one = dict(dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32)
    t["sq"], t["sk"] = g.tensor(name="sq", **one), g.tensor(name="sk", **one)
    offs = dict(q=sq * hq * d, k=sk * hk * d, v=sk * hk * d, o=sq * hq * d, st=sq * hq)
    for n in offs:
        t["off_" + n] = g.tensor(name="off_" + n, dim=(b + 1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i64)
    for n in ("q", "k", "v"):
        t[n].set_ragged_offset(t["off_" + n])
    o, st = g.sdpa(name="fwd", q=t["q"], k=t["k"], v=t["v"], generate_stats=True, attn_scale=d ** -0.5,
                   use_padding_mask=True, seq_len_q=t["sq"], seq_len_kv=t["sk"])
    o.set_output(True).set_dim(bshd(hq, sq, d)["dim"]).set_stride(bshd(hq, sq, d)["stride"])
    o.set_ragged_offset(t["off_o"])
    st.set_output(True).set_data_type(f32).set_dim((b, hq, sq, 1)).set_stride((sq * hq, 1, hq, 1))
    st.set_ragged_offset(t["off_st"])
    for step in (g.validate, g.build_operation_graph, lambda: g.create_execution_plans([cudnn.heur_mode.A]),
                 g.check_support, g.build_plans):
        step()
    x = {n: torch.randn(b * s, h, d, device="cuda").half() for n, h, s in shapes}
    out, stats = torch.zeros(b * sq, hq, d, device="cuda").half(), torch.full((b * sq, hq), sentinel, device="cuda")
    pack = {t[n]: x[n] for n in x} | {o: out, st: stats}
    pack |= {t["sq"]: torch.full((b, 1, 1, 1), sq, dtype=torch.int32, device="cuda"),
             t["sk"]: torch.full((b, 1, 1, 1), sk, dtype=torch.int32, device="cuda")}
    pack |= {t["off_" + n]: torch.arange(b + 1, device="cuda").view(-1, 1, 1, 1) * size for n, size in offs.items()}
    g.execute(pack, torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda"))
    torch.cuda.synchronize()
    k = x["k"].double().repeat_interleave(hq // hk, 1)  # [tokens, heads, d]
    want = (torch.einsum("qhd,khd->hqk", x["q"].double(), k) * d ** -0.5).logsumexp(-1).T  # [tokens_q, heads]
    wrong = ((stats.double() - want).abs() > 1e-3)[0]
    return {"heads": f"{hq}/{hk}", "lse_wrong_heads": wrong.nonzero().flatten().tolist(),
            "lse_unwritten_heads": (stats[0] == sentinel).nonzero().flatten().tolist()}


print(json.dumps({"torch": torch.__version__, "frontend": cudnn.__version__, "cudnn": cudnn.backend_version()}))
gqa, mha = run(22, 1), run(22, 22)  # MHA is the control
print(json.dumps(gqa), json.dumps(mha), sep="\n")
sys.exit(1 if gqa["lse_wrong_heads"] else 0)
