"""Phase 1 on the H200: each GPU adapter on a few hand-picked problems, checked directly
against the float64 reference on the GPU (and through difftest's runner, so the engine's
gates are exercised too). Problems outside an adapter's declared capability are run as
"probe" rows, to learn what the kernel really does and set capabilities from data.

    python3 scripts/device/phase1.py KERNEL [KERNEL ...]   (writes $OUT/phase1-*.json/.md)
"""

import json
import os
import sys
import time
import traceback

import torch

from difftest.execute import adapter as registry
from difftest.model.inputs import make_inputs
from difftest.model.problem import Problem
from difftest.oracles.reference import reference

P = Problem
DEADLINE = time.time() + float(os.environ.get("PHASE_SECONDS", "1e9"))
PROBLEMS = [
    ("dense", P(batch=2, seqlen_q=128, seqlen_k=128, heads_q=4, heads_kv=4, head_dim_qk=64, head_dim_v=64, dtype="float16")),
    ("dense-bf16-gqa-causal", P(batch=2, seqlen_q=130, seqlen_k=130, heads_q=8, heads_kv=2, head_dim_qk=128, head_dim_v=128, dtype="bfloat16", causal=True)),
    ("causal-br-sq<sk", P(batch=2, seqlen_q=96, seqlen_k=200, heads_q=4, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16", causal=True)),
    ("causal-tl-sq<sk", P(batch=2, seqlen_q=96, seqlen_k=200, heads_q=4, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16", causal=True, align="top_left")),
    ("causal-br-sq>sk(empty rows)", P(batch=1, seqlen_q=100, seqlen_k=40, heads_q=2, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16", causal=True)),
    ("window", P(batch=1, seqlen_q=200, seqlen_k=200, heads_q=4, heads_kv=4, head_dim_qk=64, head_dim_v=64, dtype="float16", window_left=32, window_right=8)),
    ("varlen-causal-empty", P(batch=3, seqlen_q=(100, 0, 37), seqlen_k=(80, 50, 0), heads_q=4, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16", causal=True)),
    ("varlen-pad-tail", P(batch=2, seqlen_q=(70, 33), seqlen_k=(70, 33), heads_q=4, heads_kv=4, head_dim_qk=64, head_dim_v=64, dtype="bfloat16", pad_tail=5)),
    ("sinks-gqa-causal", P(batch=2, seqlen_q=96, seqlen_k=96, heads_q=4, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="bfloat16", causal=True, sinks=True)),
    ("varlen-sinks-window", P(batch=2, seqlen_q=(50, 77), seqlen_k=(60, 77), heads_q=4, heads_kv=4, head_dim_qk=64, head_dim_v=64, dtype="float16", window_left=16, window_right=0, sinks=True)),
    ("d192/128", P(batch=1, seqlen_q=128, seqlen_k=160, heads_q=4, heads_kv=4, head_dim_qk=192, head_dim_v=128, dtype="bfloat16", causal=True)),
    ("d256", P(batch=1, seqlen_q=150, seqlen_k=150, heads_q=2, heads_kv=2, head_dim_qk=256, head_dim_v=256, dtype="float16")),
    ("fp32", P(batch=1, seqlen_q=64, seqlen_k=80, heads_q=2, heads_kv=1, head_dim_qk=64, head_dim_v=64, dtype="float32", causal=True, align="top_left")),
    ("scaled-logits", P(batch=1, seqlen_q=128, seqlen_k=128, heads_q=2, heads_kv=2, head_dim_qk=64, head_dim_v=64, dtype="float16", values="scaled", value_scale=4.0)),
]


def maxerr(a, b):
    """(max |a-b| over finite entries of b, nonfinite parity ok?)."""
    if a is None or b is None:
        return None, None
    a, b = a.double(), b.double()
    fin = torch.isfinite(b)
    parity = bool(torch.equal(torch.isfinite(a), fin))
    if not fin.any():
        return 0.0, parity
    d = (a - b).abs()[fin]
    d = torch.nan_to_num(d, nan=float("inf"))
    return float(d.max()), parity


def one(kernel, name, p):
    row = {"kernel": kernel.name, "case": name, "problem": p.short()}
    why = kernel.capability.excludes(p)
    row["probe"] = why is not None
    if why:
        row["outside"] = why
    t0 = time.perf_counter()
    try:
        x = make_inputs(p, "cuda")
        got = kernel.run(x)
        torch.cuda.synchronize()
        row["kernel_s"] = round(time.perf_counter() - t0, 2)
        truth = reference(x, "float64")
        same = reference(x, "same") if p.dtype != "float32" else reference(x, "float32")
        errs = {}
        for n in ("o", "lse", "dq", "dk", "dv", "dsink"):
            e, par = maxerr(got.get(n), truth.get(n))
            if e is None:
                continue
            r, _ = maxerr(same.get(n), truth.get(n))
            errs[n] = {"err": e, "ref_err": r, "ratio": (e / r) if r else (0.0 if e == 0 else float("inf")),
                       "nonfinite_ok": par}
        row["errors"] = errs
        row["status"] = "ok"
        if not why:
            try:
                from difftest.judge.runner import RunConfig, run_case

                cr = run_case(kernel, p, RunConfig())
                row["runner"] = {"status": cr.status, "failed_gates": cr.failed_gates,
                                 "worst_ratio": cr.worst_ratio, "reason": cr.reason[:300]}
            except Exception as e:  # noqa: BLE001
                row["runner"] = {"status": "runner-exception", "reason": f"{type(e).__name__}: {e}"[:300]}
    except Exception as e:  # noqa: BLE001
        row["status"] = "error"
        row["error"] = f"{type(e).__name__}: {e}"[:600]
        row["trace"] = traceback.format_exc(limit=6)[-1500:]
    row["seconds"] = round(time.perf_counter() - t0, 2)
    return row


def fmt(row):
    if row["status"] != "ok":
        return f"{row['kernel']:>14} {row['case']:<28} {'PROBE ' if row['probe'] else ''}ERROR {row['error'][:200]}"
    parts = []
    for n, e in row["errors"].items():
        flag = "" if e["nonfinite_ok"] else "!NF"
        parts.append(f"{n}:{e['err']:.2e}(x{e['ratio']:.2g}){flag}")
    rn = row.get("runner", {})
    rs = f" runner={rn.get('status')}{rn.get('failed_gates') or ''}" if rn else ""
    return f"{row['kernel']:>14} {row['case']:<28} {'PROBE ' if row['probe'] else ''}{' '.join(parts)}{rs} {row['seconds']}s"


def main(names):
    out = os.environ.get("OUT", "/tmp/out")
    tag = "-".join(n.partition(":")[0] for n in names)[:60]
    rows = []
    for kn in names:
        kn, _, mode = kn.partition(":")  # "NAME:noprobe" runs only problems inside the capability
        try:
            k = registry.get(kn)
        except Exception as e:  # noqa: BLE001
            rows.append({"kernel": kn, "status": "error", "case": "load", "probe": False, "error": str(e)})
            print(fmt(rows[-1]), flush=True)
            continue
        why = k.available()
        if why:
            rows.append({"kernel": kn, "status": "error", "case": "available", "probe": False, "error": why})
            print(fmt(rows[-1]), flush=True)
            continue
        for name, p in PROBLEMS:
            if time.time() > DEADLINE:
                rows.append({"kernel": kn, "status": "error", "case": name, "probe": False,
                             "error": "not run: phase deadline reached"})
                print(fmt(rows[-1]), flush=True)
                continue
            if mode == "noprobe" and k.capability.excludes(p):
                continue
            rows.append(one(k, name, p))
            print(fmt(rows[-1]), flush=True)
        torch.cuda.empty_cache()
    with open(f"{out}/phase1-{tag}.json", "w") as f:
        json.dump(rows, f, indent=1, default=str)
    with open(f"{out}/phase1-{tag}.txt", "w") as f:
        f.write("\n".join(fmt(r) for r in rows) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
