"""cuDNN SDPA (nvidia-cudnn-frontend graph API): a THD/ragged graph whose longest query (or key)
sequence is 0 -- every sequence of the batch empty on that side -- run in a child process each.

Needs torch and nvidia-cudnn-frontend only. Prints one JSON line per variant: the steps the
child reached and how it ended (returncode; -8 is SIGFPE). A correct library either returns an
error from validate/build (cudnnGraphNotSupportedError, catchable) or computes O = 0, dK = dV = 0.
Run: python3 repro_cudnn_zero_seqlen.py
"""
import json
import subprocess
import sys

CHILD = r'''
import sys, torch, cudnn
seq_q, seq_k = eval(sys.argv[1]), eval(sys.argv[2])
b, h, d = len(seq_q), 2, 64
sq, sk = max(seq_q), max(seq_k)
tq, tk = max(sum(seq_q), 1), max(sum(seq_k), 1)
def step(s): print("step", s, flush=True)
handle = cudnn.create_handle()
g = cudnn.pygraph(io_data_type=cudnn.data_type.HALF, intermediate_data_type=cudnn.data_type.FLOAT,
                  compute_data_type=cudnn.data_type.FLOAT, handle=handle)
def t4(name, h_, s_, d_, dt=cudnn.data_type.HALF):
    return g.tensor(name=name, dim=(b, h_, s_, d_), stride=(s_ * h_ * d_, d_, h_ * d_, 1), data_type=dt)
q, k, v = t4("q", h, sq, d), t4("k", h, sk, d), t4("v", h, sk, d)
lens = [g.tensor(name=n, dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT32) for n in ("sq", "sk")]
offs = [g.tensor(name=n, dim=(b + 1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=cudnn.data_type.INT64)
        for n in ("oq", "ok", "oo", "os")]
q.set_ragged_offset(offs[0]); k.set_ragged_offset(offs[1]); v.set_ragged_offset(offs[1])
o, stats = g.sdpa(name="sdpa", q=q, k=k, v=v, generate_stats=True, attn_scale=0.125, use_padding_mask=True,
                  seq_len_q=lens[0], seq_len_kv=lens[1], diagonal_band_right_bound=0,
                  diagonal_alignment=cudnn.diagonal_alignment.BOTTOM_RIGHT)
o.set_output(True).set_dim((b, h, sq, d)).set_stride((sq * h * d, d, h * d, 1)).set_ragged_offset(offs[2])
stats.set_output(True).set_data_type(cudnn.data_type.FLOAT).set_dim((b, h, sq, 1)).set_stride((sq * h, 1, h, 1))
stats.set_ragged_offset(offs[3])
step("graph declared")
g.validate(); step("validate")
g.build_operation_graph(); step("build_operation_graph")
g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK]); step("create_execution_plans")
g.check_support(); step("check_support")
g.build_plans(); step("build_plans")
def cu(s):
    return torch.tensor([0] + torch.tensor(s).cumsum(0).tolist(), dtype=torch.int64, device="cuda").view(-1, 1, 1, 1)
dev = dict(device="cuda")
Q, K, V = (torch.randn(t, h, d, dtype=torch.float16, **dev) for t in (tq, tk, tk))
O, S = torch.full((tq, h, d), float("nan"), dtype=torch.float16, **dev), torch.full((tq, h), float("nan"), **dev)
pack = {q: Q, k: K, v: V, o: O, stats: S,
        lens[0]: torch.tensor(seq_q, dtype=torch.int32, **dev).view(-1, 1, 1, 1),
        lens[1]: torch.tensor(seq_k, dtype=torch.int32, **dev).view(-1, 1, 1, 1),
        offs[0]: cu(seq_q) * h * d, offs[1]: cu(seq_k) * h * d, offs[2]: cu(seq_q) * h * d, offs[3]: cu(seq_q) * h}
ws = torch.empty(max(g.get_workspace_size(), 1), dtype=torch.uint8, **dev)
g.execute(pack, ws, handle=handle); torch.cuda.synchronize(); step("execute")
print("O rows written", int((~O[: sum(seq_q)].isnan()).any(-1).any(-1).sum()), "of", sum(seq_q), flush=True)
'''

VARIANTS = [("(0, 0)", "(3, 4)"), ("(3, 2)", "(0, 0)"), ("(1, 0)", "(3, 4)")]  # the last one: a control
for sq, sk in VARIANTS:
    r = subprocess.run([sys.executable, "-c", CHILD, sq, sk], capture_output=True, text=True, timeout=120)
    lines = (r.stdout + r.stderr).strip().splitlines()
    print(json.dumps({"seq_len_q": sq, "seq_len_kv": sk, "returncode": r.returncode,
                      "steps": [x[5:] for x in lines if x.startswith("step ")],
                      "tail": [x for x in lines if not x.startswith("step ")][-3:]}), flush=True)
