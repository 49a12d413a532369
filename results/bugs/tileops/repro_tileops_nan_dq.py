"""TileOPs 0.1.0 GQADenseBwdOp (SM90, GQABwdWGMMAPipelinedKernel): dQ is NaN for every query
row whose LSE is so negative that exp(-lse) * |delta| overflows, in a NON-causal call whose
sequence length is not a multiple of the key block (128 rows at head dim 128).

Standalone: needs torch and tileops 0.1.0 (with its tilelang 0.1.12), not difftest.

    python3 repro_tileops_nan_dq.py            # every case, each in its own process, in parallel
    python3 repro_tileops_nan_dq.py CASE       # one case: a_fp16_scale10_s3, b_fp16_neglse_s9, ...

Why (read from tileops/_kernels/attention/gqa/bwd.py): the main kernel loads a 128-row key
tile; rows past seq_len are zero-filled, so their logit is 0 and P = exp2(0 * scale - lse_log2)
= exp(-lse). Only the causal path masks (lines 338-342); the non-causal path keeps that P,
forms dS = P * (dP * scale - delta) in the input dtype (line 348), and the dQ GEMM adds
dS^T @ K over the padded rows (line 351), K = 0 there. Finite dS * 0 = 0 is harmless;
once exp(-lse) * |delta| passes the dtype's range (fp16: lse below about -11, any dtype:
lse below about -88 where the fp32 exp2 itself overflows), dS = inf and inf * 0 = NaN
fills the whole dQ row. dK/dV only read the padded rows into rows that are never stored.

Each case draws seeded float64 inputs (torch.Generator seed 0, the same draws as difftest's
problem), rounds them to the dtype, runs TileOPs' forward (GQADenseWithLSEFwdOp: O and the
natural-log LSE, as its backward documents) and backward (GQADenseBwdOp), and compares dQ, dK,
dV with float64 PyTorch autograd and with plain PyTorch attention in the same dtype. It also
runs the backward on O/LSE from the float64 reference (so the forward is not the cause) and
predicts the NaN rows from the model above. One JSON line per case, then a verdict line.
Exit 1 when any case shows NaN in dQ where the truth is finite (the bug reproduces), 0 when
none does, 2 on bad usage.
"""
import json
import math
import os
import subprocess
import sys
import time

import torch

# name: (batch, seq_len, heads_q, heads_kv, head_dim, dtype, causal, softmax_scale or None, values,
#        value_scale, expect_nan); expect_nan: whether the model above predicts NaN rows in dQ.
CASES = {
    # difftest's shrunk findings (results/h200/phase5/P2): (a) normal values, scale 10; (b) negative_lse x16
    "a_fp16_scale10_s3": (1, 3, 1, 1, 128, "float16", False, 10.0, "normal", 1.0, True),
    "b_fp16_neglse_s9": (1, 9, 1, 1, 128, "float16", False, None, "negative_lse", 16.0, True),
    "b_bf16_neglse_s9": (1, 9, 1, 1, 128, "bfloat16", False, None, "negative_lse", 16.0, True),
    # GQA (2 query heads, 1 kv head), a longer tail: logits ~ -45, lse ~ -40: overflows fp16's dS, not bf16's
    "c_fp16_neglse2_s200": (1, 200, 2, 1, 128, "float16", False, None, "negative_lse", 2.0, True),
    "c_bf16_neglse2_s200": (1, 200, 2, 1, 128, "bfloat16", False, None, "negative_lse", 2.0, False),
    # controls: causal masks the padded keys; S = 256 has no padded key tile (GQABwdWSKernel)
    "control_causal_fp16_neglse_s9": (1, 9, 1, 1, 128, "float16", True, None, "negative_lse", 16.0, False),
    "control_fp16_neglse_s256": (1, 256, 1, 1, 128, "float16", False, None, "negative_lse", 16.0, False),
}
CASE_TIMEOUT_S = float(os.environ.get("REPRO_CASE_TIMEOUT_S", "85"))


def draw(b, s, h, hkv, d, values, vs, seed=0):
    """float64 q, do [b, s, h, d] and k, v [b, s, hkv, d] (difftest's order of draws).
    negative_lse: q and k aligned against one shared direction u (random signs), every logit
    ~ -vs^2 * d * scale."""
    g = torch.Generator(device="cpu").manual_seed(seed)
    mk = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float64)  # noqa: E731
    q, k, v, do = mk(b * s, h, d), mk(b * s, hkv, d), mk(b * s, hkv, d), mk(b * s, h, d)
    if values == "negative_lse":
        u = mk(1, 1, d).sign()
        q = vs * u + 0.1 * q
        k = -vs * u + 0.1 * k
    return tuple(t.view(b, s, -1, d) for t in (q, k, v, do))


def attention(q, k, v, do, scale, causal):
    """O [b,s,h,d], natural LSE [b,h,s] and dq, dk, dv of softmax(q k^T scale) v, in q's dtype."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    g = q.shape[2] // k.shape[2]
    kk, vv = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
    s = torch.einsum("bqhd,bkhd->bhqk", q, kk) * scale
    if causal:
        n = s.shape[-1]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool, device=s.device).triu(1), float("-inf"))
    lse = torch.logsumexp(s.double(), dim=-1)
    o = torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, dim=-1), vv)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), do)
    return {"o": o.detach(), "lse": lse, "dq": dq, "dk": dk, "dv": dv}


def predicted_nan_rows(o, do, lse, scale, dtype):
    """Query rows (b, h, s) where the padded keys' dS = exp(-lse) * (0 - delta), formed in fp32
    and cast to the dtype, is not finite: the model of the bug (non-causal, padded key tile)."""
    delta = (o.float() * do.float()).sum(-1).permute(0, 2, 1) * scale  # [b, h, s], as the preprocess
    p = torch.exp2(-(lse.float() * math.log2(math.e)))
    ds = (p * (0.0 - delta)).to(dtype)
    return ~torch.isfinite(ds)


def compare(got, truth, same_dtype):
    row = {}
    for n in ("dq", "dk", "dv"):
        t, gt, r = truth[n].double(), got[n].double().reshape(truth[n].shape), same_dtype[n].double()
        err = (gt - t).abs().max().item() if torch.isfinite(gt).all() else float("inf")
        ref_err = (r - t).abs().max().item()
        row[n] = {"nan": int(torch.isnan(gt).sum()), "inf": int(torch.isinf(gt).sum()),
                  "truth_nonfinite": int((~torch.isfinite(t)).sum()), "max_err": err, "plain_torch_err": ref_err,
                  "ratio": err / max(ref_err, 1e-6) if math.isfinite(err) else None}
    return row


def run_case(name):
    from tileops.attention import GQADenseBwdOp, GQADenseWithLSEFwdOp

    b, s, h, hkv, d, dt_name, causal, sm_scale, values, vs, expect = CASES[name]
    dt = getattr(torch, dt_name)
    scale = sm_scale if sm_scale is not None else d ** -0.5
    q64, k64, v64, do64 = (t.cuda() for t in draw(b, s, h, hkv, d, values, vs))
    q, k, v, do = (t.to(dt) for t in (q64, k64, v64, do64))
    # the truth is the float64 attention of the dtype-rounded inputs
    truth = attention(*(t.double() for t in (q, k, v, do)), scale, causal)
    plain = attention(q, k, v, do, scale, causal)
    row = {"case": name, "problem": {"batch": b, "seqlen_q": s, "seqlen_k": s, "heads_q": h, "heads_kv": hkv,
                                     "head_dim": d, "dtype": dt_name, "causal": causal, "softmax_scale": sm_scale,
                                     "values": values, "value_scale": vs, "seed": 0},
           "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
           "lse_truth_min": truth["lse"].min().item(), "lse_truth_max": truth["lse"].max().item()}
    t0 = time.time()
    o, lse = GQADenseWithLSEFwdOp(is_causal=causal, sm_scale=sm_scale).forward(q, k, v)
    bwd = GQADenseBwdOp(is_causal=causal, sm_scale=sm_scale)
    dq, dk, dv = bwd.forward(do, q, k, v, o, lse)
    torch.cuda.synchronize()
    row["compile_and_run_s"] = round(time.time() - t0, 1)
    # the forward is right and its LSE is the natural log the backward documents
    row["fwd_o_max_err"] = (o.double() - truth["o"]).abs().max().item()
    row["fwd_lse_max_err"] = (lse.double() - truth["lse"]).abs().max().item()
    row["own_forward"] = compare({"dq": dq, "dk": dk, "dv": dv}, truth, plain)
    # the same backward fed float64-reference O (rounded to the dtype) and LSE (float32)
    o_ref, lse_ref = truth["o"].to(dt).contiguous(), truth["lse"].float().contiguous()
    dq2, dk2, dv2 = bwd.forward(do, q, k, v, o_ref, lse_ref)
    torch.cuda.synchronize()
    row["reference_o_lse"] = compare({"dq": dq2, "dk": dk2, "dv": dv2}, truth, plain)
    # the model: which query rows must be NaN (non-causal with a padded key tile only)
    padded = s % 128 != 0 and not causal
    pred = predicted_nan_rows(o, do, lse, scale, dt) if padded else torch.zeros_like(lse, dtype=torch.bool)
    got_rows = torch.isnan(dq.float()).any(-1).permute(0, 2, 1)  # [b, h, s]
    row["nan_rows_predicted"] = int(pred.sum())
    row["nan_rows_got"] = int(got_rows.sum())
    row["prediction_matches"] = bool(torch.equal(pred.cpu(), got_rows.cpu()))
    row["expect_nan"] = expect
    row["bug"] = row["own_forward"]["dq"]["nan"] > 0 and row["own_forward"]["dq"]["truth_nonfinite"] == 0
    return row


def main(argv):
    if len(argv) == 2:
        if argv[1] not in CASES:
            print(f"case={argv[1]!r}: allowed {sorted(CASES)}", file=sys.stderr)
            return 2
        try:
            row = run_case(argv[1])
        except Exception as e:  # noqa: BLE001 -- an exception is a result too
            row = {"case": argv[1], "raised": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
        print(json.dumps(row), flush=True)
        return 0
    if len(argv) != 1:
        print(f"usage: {argv[0]} [CASE]; CASE one of {sorted(CASES)}", file=sys.stderr)
        return 2
    # every case in its own process, in parallel: each shape is one TileLang compile (up to ~40 s)
    procs = {n: subprocess.Popen([sys.executable, os.path.abspath(__file__), n], stdout=subprocess.PIPE, text=True)
             for n in CASES}
    rows, deadline = [], time.time() + CASE_TIMEOUT_S
    for n, p in procs.items():
        try:
            out, _ = p.communicate(timeout=max(1.0, deadline - time.time()))
            lines = [x for x in out.splitlines() if x.startswith("{")]
            row = json.loads(lines[-1]) if lines else {"case": n, "raised": f"no result (exit {p.returncode})"}
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            row = {"case": n, "raised": f"timeout after {CASE_TIMEOUT_S:.0f} s"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    bugs = [r["case"] for r in rows if r.get("bug")]
    unexpected = [r["case"] for r in rows if "bug" in r and r["bug"] != CASES[r["case"]][10]]
    mism = [r["case"] for r in rows if "prediction_matches" in r and not r["prediction_matches"]]
    ran = [r["case"] for r in rows if "bug" in r]
    print(json.dumps({"verdict": "BUG: dQ NaN where the float64 truth is finite" if bugs else "no NaN in dQ",
                      "bug_cases": bugs, "cases_ran": ran, "differs_from_expectation": unexpected,
                      "prediction_mismatch": mism}), flush=True)
    return 1 if bugs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
