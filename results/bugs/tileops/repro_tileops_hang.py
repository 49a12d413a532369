"""TileOPs 0.1.0 on an H200: does a call at seq_len 64 (head dim 128) hang, and where?

difftest's TileOPs surveys (results/h200/phase6, call Q1) saw both `tileops-gqa` and `tileops-mha`
stop returning on the edge case b1 sq64 sk64 h1/1 d128 fp16 non-causal (worker killed after
300 s), while 2, 3, 9, 63, 65, 127, 128, 129 passed. This script, which does not import
difftest, runs the forward (GQADenseWithLSEFwdOp) and the backward (GQADenseBwdOp, fed the
float64 reference's O and LSE so the forward cannot be the cause) as separate processes, and
prints one JSON line per process with the last phase it reached and the time of each phase:

    built   the op object exists (TileOPs may build its TileLang kernel here)
    called  the Python call returned (the kernel is launched, the GPU may still run)
    synced  torch.cuda.synchronize() returned (the GPU finished)
    checked the result was compared with float64 PyTorch autograd (max abs error)

A part that stops after `called` and never reaches `synced` hangs on the GPU; one that stops
before `built` or `called` hangs in the build. Needs torch and tileops 0.1.0 (its tilelang 0.1.12).

    python3 repro_tileops_hang.py             # every case and part, in parallel processes
    python3 repro_tileops_hang.py CASE PART   # one: CASE from CASES, PART fwd or bwd
Exit 1 when a part of a non-control case timed out (the hang reproduces), 0 otherwise, 2 on bad usage.
"""
import faulthandler
import json
import os
import subprocess
import sys
import time

import torch

# name: (batch, seq_len, heads_q, heads_kv, dtype, causal)
CASES = {
    "s64_fp16": (1, 64, 1, 1, "float16", False),
    "s64_bf16": (1, 64, 1, 1, "bfloat16", False),
    "s64_fp16_causal": (1, 64, 1, 1, "float16", True),
    "s192_fp16": (1, 192, 1, 1, "float16", False),
    "s64_fp16_gqa": (1, 64, 2, 1, "float16", False),
    "control_s63_fp16": (1, 63, 1, 1, "float16", False),
    "control_s65_fp16": (1, 65, 1, 1, "float16", False),
    "control_s128_fp16": (1, 128, 1, 1, "float16", False),
}
HEAD_DIM = 128
TIMEOUT_S = float(os.environ.get("REPRO_CASE_TIMEOUT_S", "150"))
# REPRO_CASES=a,b limits the run to those cases; a hung process dumps its Python stack (faulthandler) 15 s
# before the timeout, and the parent prints where it was: in the TileLang build or waiting on the GPU
SELECTED = [c for c in os.environ.get("REPRO_CASES", "").split(",") if c] or list(CASES)


def say(row, phase, t0):
    row["phase"] = phase
    row.setdefault("seconds", {})[phase] = round(time.time() - t0, 2)
    print(json.dumps(row), flush=True)


def reference(q, k, v, do, causal):
    """float64 O [b,s,h,d], natural LSE [b,h,s], dq, dk, dv."""
    q, k, v = (t.double().detach().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    s = torch.einsum("bqhd,bkhd->bhqk", q, k.repeat_interleave(g, 2)) * HEAD_DIM ** -0.5
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v.repeat_interleave(g, 2))
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do.double())
    return o.detach(), torch.logsumexp(s, -1).detach(), dq, dk, dv


def run(case, part):
    from tileops.attention import GQADenseBwdOp, GQADenseWithLSEFwdOp

    b, s, h, hkv, dt_name, causal = CASES[case]
    dt = getattr(torch, dt_name)
    g = torch.Generator(device="cpu").manual_seed(0)
    q, k, v, do = (torch.randn(b, s, n, HEAD_DIM, generator=g).to(dt).cuda() for n in (h, hkv, hkv, h))
    o64, lse64, dq64, dk64, dv64 = reference(q, k, v, do, causal)
    row = {"case": case, "part": part, "problem": {"batch": b, "seq_len": s, "heads_q": h, "heads_kv": hkv,
                                                   "head_dim": HEAD_DIM, "dtype": dt_name, "causal": causal},
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__}
    faulthandler.dump_traceback_later(max(5.0, TIMEOUT_S - 15), exit=False)
    t0 = time.time()
    if part == "fwd":
        op = GQADenseWithLSEFwdOp(is_causal=causal)
        say(row, "built", t0)
        o, lse = op.forward(q, k, v)
        say(row, "called", t0)
        torch.cuda.synchronize()
        say(row, "synced", t0)
        row["max_err"] = {"o": (o.double() - o64).abs().max().item(), "lse": (lse.double() - lse64).abs().max().item()}
    else:
        op = GQADenseBwdOp(is_causal=causal)
        say(row, "built", t0)
        dq, dk, dv = op.forward(do, q, k, v, o64.to(dt).contiguous(), lse64.float().contiguous())
        say(row, "called", t0)
        torch.cuda.synchronize()
        say(row, "synced", t0)
        row["max_err"] = {n: (x.double() - r).abs().max().item()
                          for n, x, r in (("dq", dq, dq64), ("dk", dk, dk64), ("dv", dv, dv64))}
    say(row, "checked", t0)


def main(argv):
    if len(argv) == 3:
        if argv[1] not in CASES or argv[2] not in ("fwd", "bwd"):
            print(f"usage: CASE in {sorted(CASES)}, PART fwd or bwd; got {argv[1:]}", file=sys.stderr)
            return 2
        run(argv[1], argv[2])
        return 0
    if len(argv) != 1:
        print(f"usage: {argv[0]} [CASE PART]", file=sys.stderr)
        return 2
    procs = {(c, p): subprocess.Popen([sys.executable, os.path.abspath(__file__), c, p], stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True)
             for c in SELECTED for p in ("fwd", "bwd")}
    deadline, hung = time.time() + TIMEOUT_S, []
    for (c, p), proc in procs.items():
        try:
            out, err = proc.communicate(timeout=max(1.0, deadline - time.time()))
            timed_out = False
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            timed_out = True
        lines = [x for x in out.splitlines() if x.startswith("{")]
        row = json.loads(lines[-1]) if lines else {"case": c, "part": p, "phase": "started"}
        row["timed_out"] = timed_out
        if timed_out:  # the innermost frames of the stack faulthandler dumped
            frames = [x.strip() for x in err.splitlines() if x.strip().startswith("File ")]
            row["stack_innermost_first"] = frames[:12]
        if not timed_out and proc.returncode:
            row["raised"] = (err.strip().splitlines() or ["?"])[-1][:300]
        print(json.dumps(row), flush=True)
        if timed_out and not c.startswith("control"):
            hung.append(f"{c}/{p} (last phase: {row['phase']})")
    print(json.dumps({"verdict": "HANG" if hung else "no hang", "hung": hung, "timeout_s": TIMEOUT_S}), flush=True)
    return 1 if hung else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
