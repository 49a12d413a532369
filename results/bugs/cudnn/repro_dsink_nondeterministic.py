"""cuDNN SDPA backward with a sink token (sm90, nvidia-cudnn-frontend graph): with
use_deterministic_algorithm=True dSink still differs bitwise between identical runs (dQ, dK, dV do not).
Needs torch and nvidia-cudnn-frontend. O and Stats come from a float64 forward. Exits 1 while it differs."""
import json
import sys

import cudnn
import torch

b, h, sq, sk, d = 3, 26, 353, 2753, 104
torch.manual_seed(0)
io, f32, handle = cudnn.data_type.HALF, cudnn.data_type.FLOAT, cudnn.create_handle()
g = cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32, handle=handle)
bshd = lambda s: dict(dim=(b, h, s, d), stride=(s * h * d, d, h * d, 1))  # noqa: E731
t = {n: g.tensor(name=n, data_type=io, **bshd(s)) for n, s in (("q", sq), ("k", sk), ("v", sk), ("o", sq), ("do", sq))}
t["st"] = g.tensor(name="st", dim=(b, h, sq, 1), stride=(h * sq, sq, 1, 1), data_type=f32)
for n in ("sink", "dsink"):
    t[n] = g.tensor(name=n, dim=(1, h, 1, 1), stride=(h, 1, 1, 1), data_type=f32)
grads = g.sdpa_backward(name="bwd", q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["do"], stats=t["st"],
                        attn_scale=d ** -0.5, use_deterministic_algorithm=True, sink_token=t["sink"],
                        dSink_token=t["dsink"])
for n, x, s in zip(("dq", "dk", "dv"), grads, (sq, sk, sk)):
    t[n] = x.set_output(True).set_dim(bshd(s)["dim"]).set_stride(bshd(s)["stride"])
t["dsink"].set_output(True)
for step in (g.validate, g.build_operation_graph, lambda: g.create_execution_plans([cudnn.heur_mode.A]),
             g.check_support, g.build_plans):
    step()
x = {n: torch.randn(b, s, h, d, device="cuda").half() for n, s in (("q", sq), ("k", sk), ("v", sk), ("do", sq))}
sink = torch.randn(h, device="cuda")
sc = torch.einsum("bqhd,bkhd->bhqk", x["q"].double(), x["k"].double()) * d ** -0.5
sc = torch.cat([sc, sink.double().view(1, h, 1, 1).expand(b, h, sq, 1)], -1)  # the sink is one more column
lse = sc.logsumexp(-1)
x["o"] = torch.einsum("bhqk,bkhd->bqhd", (sc - lse[..., None]).exp()[..., :sk], x["v"].double()).half()
x["st"], x["sink"] = lse.float().unsqueeze(-1).contiguous(), sink.view(1, h, 1, 1)
ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, device="cuda")
runs = []
for _ in range(10):
    out = {"dq": torch.empty_like(x["q"]), "dk": torch.empty_like(x["k"]), "dv": torch.empty_like(x["v"]),
           "dsink": torch.zeros(1, h, 1, 1, device="cuda")}
    g.execute({t[n]: x[n] for n in x} | {t[n]: out[n] for n in out}, ws, handle=handle)
    torch.cuda.synchronize()
    runs.append(out)
differ = {n: sum(not torch.equal(r[n], runs[0][n]) for r in runs[1:]) for n in runs[0]}
spread = max((r["dsink"] - runs[0]["dsink"]).abs().max().item() for r in runs)
print(json.dumps({"torch": torch.__version__, "frontend": cudnn.__version__, "cudnn": cudnn.backend_version(),
                  "runs_differing_from_the_first_of_9": differ, "dsink_max_diff": spread,
                  "max_abs_dsink": runs[0]["dsink"].abs().max().item()}))
sys.exit(1 if differ["dsink"] else 0)
