"""TileOPs 0.1.0 on an H200: which head dims do GQADenseWithLSEFwdOp and GQADenseBwdOp serve?

TileOPs' own refusal checks accept every head dim that is a multiple of 16 (the forward's
GQADenseWSKernel: _kernels/attention/gqa/dense.py:785-789 with call_spec.py:151-154; the backward's
GQABwdWGMMAPipelinedKernel: _kernels/attention/gqa/bwd.py:580-591, which sizes shared memory for
d <= 291 in 227 KiB). difftest's survey (results/h200/phase7, call R1) met a late refusal at d288:
the forward raised "InternalError: Failed to set the allowed dynamic shared memory size to
442368" at launch. This script, which does not import difftest, tries every multiple of 16 from 16
to 288 for the forward and for the backward (fed float64 O and LSE, so the forward cannot be the
cause) at b1 s128 h1/1 fp16 non-causal, each part in its own process, and prints one JSON line per
(head dim, part): the last phase reached (built, called, synced, checked, as in
repro_tileops_hang.py, whose float64 reference it uses), the error a late refusal raised, and
the max abs error against float64 PyTorch autograd next to plain fp16 PyTorch's own error.

    python3 repro_tileops_head_dims.py              # every head dim and part, SWEEP_JOBS processes at a time
    python3 repro_tileops_head_dims.py D PART       # one head dim D, PART fwd or bwd
Environment: SWEEP_JOBS (default 12), SWEEP_TIMEOUT_S per process (default 240), SWEEP_DIMS=a,b to pick dims.
Exit 1 when some head dim the refusal checks accept fails late (raised or timed out), 0 otherwise,
2 on bad usage.
"""
import json
import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import repro_tileops_hang as hang  # noqa: E402  (its float64 reference and phase printer)

SEQ_LEN = 128
DIMS = [int(d) for d in os.environ.get("SWEEP_DIMS", "").split(",") if d] or list(range(16, 289, 16))
JOBS = int(os.environ.get("SWEEP_JOBS", "12"))
TIMEOUT_S = float(os.environ.get("SWEEP_TIMEOUT_S", "240"))


def fp16_error(q, k, v, do, ref):
    """max abs error of plain fp16 PyTorch attention (same inputs), per output: the yardstick."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    s = torch.einsum("bqhd,bkhd->bhqk", q, k) * q.shape[-1] ** -0.5
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s.float(), -1).to(q.dtype), v)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return {n: (x.double() - r).abs().max().item() for n, x, r in zip(("o", "dq", "dk", "dv"), (o, dq, dk, dv), ref)}


def run(d, part):
    from tileops.attention import GQADenseBwdOp, GQADenseWithLSEFwdOp

    hang.HEAD_DIM = d  # the reference's softmax scale
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v, do = (torch.randn(1, SEQ_LEN, 1, d, generator=g).half().cuda() for _ in range(4))
    o64, lse64, dq64, dk64, dv64 = hang.reference(q, k, v, do, False)
    row = {"head_dim": d, "part": part, "problem": {"batch": 1, "seq_len": SEQ_LEN, "heads_q": 1, "heads_kv": 1,
                                                    "head_dim": d, "dtype": "float16", "causal": False},
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    t0 = time.time()
    fp16 = fp16_error(q, k, v, do, (o64, dq64, dk64, dv64))
    if part == "fwd":
        op = GQADenseWithLSEFwdOp(is_causal=False)
        hang.say(row, "built", t0)
        o, lse = op.forward(q, k, v)
        hang.say(row, "called", t0)
        torch.cuda.synchronize()
        hang.say(row, "synced", t0)
        row["max_err"] = {"o": (o.double() - o64).abs().max().item(), "lse": (lse.double() - lse64).abs().max().item()}
        row["fp16_pytorch_err"] = {"o": fp16["o"]}
    else:
        op = GQADenseBwdOp(is_causal=False)
        hang.say(row, "built", t0)
        dq, dk, dv = op.forward(do, q, k, v, o64.half().contiguous(), lse64.float().contiguous())
        hang.say(row, "called", t0)
        torch.cuda.synchronize()
        hang.say(row, "synced", t0)
        row["max_err"] = {n: (x.double() - r).abs().max().item()
                          for n, x, r in (("dq", dq, dq64), ("dk", dk, dk64), ("dv", dv, dv64))}
        row["fp16_pytorch_err"] = {n: fp16[n] for n in ("dq", "dk", "dv")}
    hang.say(row, "checked", t0)


def main(argv):
    if len(argv) == 3:
        if not argv[1].isdigit() or int(argv[1]) % 16 or argv[2] not in ("fwd", "bwd"):
            print(f"usage: D a multiple of 16, PART fwd or bwd; got {argv[1:]}", file=sys.stderr)
            return 2
        run(int(argv[1]), argv[2])
        return 0
    if len(argv) != 1:
        print(f"usage: {argv[0]} [D PART]", file=sys.stderr)
        return 2
    todo = [(d, p) for d in DIMS for p in ("fwd", "bwd")]
    running, late = {}, []
    while todo or running:
        while todo and len(running) < JOBS:
            d, p = todo.pop(0)
            running[(d, p)] = (subprocess.Popen([sys.executable, os.path.abspath(__file__), str(d), p],
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True),
                               time.time())
        time.sleep(0.5)
        for (d, p), (proc, t0) in list(running.items()):
            timed_out = proc.poll() is None and time.time() - t0 > TIMEOUT_S
            if proc.poll() is None and not timed_out:
                continue
            if timed_out:
                proc.kill()
            out, err = proc.communicate()
            del running[(d, p)]
            lines = [x for x in out.splitlines() if x.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"head_dim": d, "part": p, "phase": "started"}
            row["timed_out"] = timed_out
            if not timed_out and proc.returncode:
                row["raised"] = (err.strip().splitlines() or ["?"])[-1][:300]
            if timed_out or proc.returncode:
                late.append(f"d{d}/{p} ({'timed out' if timed_out else row['raised'][:80]})")
            print(json.dumps(row), flush=True)
    print(json.dumps({"verdict": "late refusals" if late else "every head dim served", "late": sorted(late),
                      "timeout_s": TIMEOUT_S}), flush=True)
    return 1 if late else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
