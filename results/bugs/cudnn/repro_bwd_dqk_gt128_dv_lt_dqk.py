"""cuDNN SDPA backward, sm90: d_qk > 128 with a smaller d_v gives wrong dQ/dK and writes into its inputs.
Needs torch and nvidia-cudnn-frontend. O, Stats: float64 forward; 10 backward runs into fresh buffers."""
import json
import sys

import cudnn
import torch


def case(b, sk, dqk, dv, ragged, h=1, sq=1):
    torch.manual_seed(0)
    io, f32, i64, handle = cudnn.data_type.HALF, cudnn.data_type.FLOAT, cudnn.data_type.INT64, cudnn.create_handle()
    g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
    bshd = lambda s, d: dict(dim=(b, h, s, d), stride=(s * h * d, d, h * d, 1))  # noqa: E731
    dims = dict(q=(sq, dqk), k=(sk, dqk), v=(sk, dv), o=(sq, dv), do=(sq, dv), dq=(sq, dqk), dk=(sk, dqk), dv=(sk, dv))
    t = {n: g.tensor(name=n, data_type=io, **bshd(*dims[n])) for n in ("q", "k", "v", "o", "do")}
    t["st"] = g.tensor(name="st", dim=(b, h, sq, 1), stride=(sq * h, 1, h, 1), data_type=f32)
    extra, pack = {}, {}
    if ragged:  # THD: one sequence per batch entry; offsets in elements
        one = dict(dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32)
        extra = dict(use_padding_mask=True, seq_len_q=g.tensor(name="sq", **one), seq_len_kv=g.tensor(name="sk",
                     **one), max_total_seq_len_q=b * sq, max_total_seq_len_kv=b * sk)
        pack = {extra[n]: torch.full((b, 1, 1, 1), s, dtype=torch.int32, device="cuda")
                for n, s in (("seq_len_q", sq), ("seq_len_kv", sk))}
        for n in ("q", "k", "v", "o", "do", "st", "dq", "dk", "dv"):
            s, d = dims[n] if n != "st" else (sq, 1)
            t["off_" + n] = g.tensor(name="off_" + n, dim=(b + 1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i64)
            pack[t["off_" + n]] = torch.arange(b + 1, device="cuda").view(-1, 1, 1, 1) * s * h * d
            if n in t:
                t[n].set_ragged_offset(t["off_" + n])
    grads = g.sdpa_backward(name="bwd", q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["do"], stats=t["st"],
                            attn_scale=dqk ** -0.5, use_deterministic_algorithm=True, **extra)
    for n, x in zip(("dq", "dk", "dv"), grads):
        t[n] = x.set_output(True).set_dim(bshd(*dims[n])["dim"]).set_stride(bshd(*dims[n])["stride"])
        _ = ragged and x.set_ragged_offset(t["off_" + n])
    for step in (g.validate, g.build_operation_graph, lambda: g.create_execution_plans([cudnn.heur_mode.A]),
                 g.check_support, g.build_plans):
        step()
    x = {n: torch.randn(b, *dims[n][:1], h, dims[n][1], device="cuda").half() for n in ("q", "k", "v", "do")}
    q, k, v = (x[n].double().requires_grad_() for n in "qkv")
    sc = torch.einsum("bqhd,bkhd->bhqk", q, k) * dqk ** -0.5
    o = torch.einsum("bhqk,bkhd->bqhd", sc.softmax(-1), v)
    want = torch.autograd.grad(o, (q, k, v), x["do"].double())
    x["o"], x["st"] = o.detach().half(), sc.detach().logsumexp(-1).float().transpose(1, 2).contiguous()
    before, errs = {n: x[n].clone() for n in x}, []
    ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
    for _ in range(10):
        out = {n: torch.zeros_like(x[n[1]]) for n in ("dq", "dk", "dv")}
        g.execute(pack | {t[n]: x[n] for n in x} | {t[n]: out[n] for n in out}, ws, handle=handle)
        torch.cuda.synchronize()
        errs.append([(out[n].double() - w).abs().max().item() / w.abs().max().item() for n, w in zip(out, want)])
    return {"b": b, "s_kv": sk, "d_qk": dqk, "d_v": dv, "layout": "THD" if ragged else "BSHD", "runs_wrong":
            sum(max(e) > 0.1 for e in errs), "worst_rel_err_dq_dk_dv": [round(max(e[i] for e in errs), 3) for i in
            range(3)], "inputs_overwritten": [n for n in x if not torch.equal(x[n], before[n])]}


print(json.dumps({"torch": torch.__version__, "frontend": cudnn.__version__, "cudnn": cudnn.backend_version()}))
bug = False
for args, control in (((3, 2, 136, 72, False), False), ((3, 2, 160, 120, False), False),
                      ((1, 2, 200, 72, True), False), ((3, 2, 128, 72, False), True), ((1, 2, 200, 64, True), True)):
    r = case(*args) | {"control": control}
    print(json.dumps(r), flush=True)
    bug = bug or not control and (r["runs_wrong"] > 0 or bool(r["inputs_overwritten"]))
sys.exit(print("BUG" if bug else "OK") or int(bug))
