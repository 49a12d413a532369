"""H200: triage of the cuDNN FP8 dQ/dK class (results/fp8.md, "The dQ/dK class") without difftest.

What it triages. difftest's ``cudnn-fp8`` adapter (kernels/cudnn_fp8.py) saw cuDNN's FP8 SDPA backward
(``sdpa_fp8_backward``, cuDNN 9.19, Hopper, d = 128) return dQ/dK elements that are wrong against the float64
backward of the dequantised inputs and even against the backward from cuDNN's own O and Stats: e.g.
b1 sq2 sk2 h1/1 e4m3, dQ exactly 0 at dim 124 of query 0 where the truth is -1.27, cuDNN's own amax of dQ
(0.791) below 1.27. This script asks, with torch and the cuDNN frontend only (no difftest import): is it
cuDNN, or how it is called, and what is the pattern?

For each problem (a)..(j) below it
  1. draws Q, K, V, dO (torch.randn * value scale, CPU generator, fixed seeds), stores each as FP8 with a
     power-of-two per-tensor scale (largest power of two with amax * scale <= 448 for e4m3fn, 57344 for
     e5m2), exactly as difftest/model/fp8.py does;
  2. builds the adapter's graphs (sdpa_fp8 with generate_stats, sdpa_fp8_backward; [B,H,S,D] dims over
     BSHD memory; the same scalar tensors; causal through use_causal_mask) and runs them as the adapter
     does: forward at scale_o = 1 (calibration) then at pow2_scale(amax_o); backward at unit dQ/dK/dV/dP
     scales (calibration) then at pow2_scale of the calibration's amaxes (scale_s = P_SCALE, 256 for
     e4m3 and 32768 for e5m2, descale_s = 1 / P_SCALE);
  3. compares O, LSE, dQ, dK, dV with
       truth      float64 attention forward + backward of the dequantised inputs (GQA by repeat);
       own-stats  the float64 backward from cuDNN's own O (dequantised) and Stats:
                  Delta = rowsum(dO * O_cudnn), P = exp(S * scale - Stats);
       fp8-model  float64 with cuDNN's FP8 quantisation points (as cudnn-frontend's test/python/sdpa/
                  fp8_ref.py places them): P stored at scale_s, dS = P (dP - Delta) * scale stored at
                  the scale_dP passed to cuDNN, dQ = dS K, dK = dS^T Q, dV = P^T dO, each output
                  stored at the scale passed to cuDNN; O from P (relative to the row max) stored at
                  scale_s and O stored at scale_o;
     and prints, per output: max |err| vs truth, the fp8-model's max |err|, their ratio; for dQ/dK the
     elements where cuDNN is exactly 0 but |truth| > 0.1 max|truth|, the worst elements
     (batch, row, head, dim) and the pattern of the "bad" set (|cuDNN - truth| > 2x the fp8-model's
     largest error): dims (0..63 vs 64..127, per 16), rows (per 64-row tile), heads, whole rows;
     the distance of cuDNN's dQ to candidate explanations (dS unquantised, dS stored at unit scale,
     K's head-dim halves swapped, ...); cuDNN's amax outputs against the true ones;
  4. runs the backward again in variants and says whether dQ/dK/dV change (bytes) and whether the bad
     elements stay the same: the same call twice (determinism); unit scales (the calibration call:
     all backward scales 1); outputs pre-filled with NaN (unwritten elements) and canary bytes after
     them (writes out of bounds); zero-filled outputs and workspace; inputs copied to the start of
     larger buffers whose tails are zero or poison (FP8 max, Stats -30000: reads out of bounds);
     scales with 16x headroom (cuDNN's own tests keep amax * scale <= 32); P scale as cuDNN's tests
     (32 for e4m3); the backward graph with use_padding_mask and full sequence lengths; the backward
     graph with use_deterministic_algorithm=True; every execution plan the heuristics list, each run
     (the last three are extra graph builds, skipped once --budget seconds are spent). The main call
     writes into the calibration call's output buffers and workspace, as the adapter does.

Problems: (a) b1 sq2 sk2 h1/1 e4m3; (b) the same, e5m2; (c) b1 sq33 sk127 h4/4; (d) b1 sq128 sk128 h1;
(e) b1 sq64 sk64 h2/1; (f) b1 sq256 sk256 h1; (g) b2 sq200 sk300 h4/2; (h) b1 sq2 sk2, dO all ones;
(i) b1 sq3 sk5; (j) b1 sq128 sk128 causal. All d = 128, attn_scale = 1/sqrt(128), e4m3 unless stated.

Run (H200, torch 2.11+cu130, cuDNN 9.19, nvidia-cudnn-frontend 1.32.0 importable as ``cudnn``):
    PYTHONUNBUFFERED=1 PYTHONPATH=/path/to/cudnn-frontend-site python3 results/h200/fp8_dq_triage.py
    options: --only a,c (a subset) | --budget 60 (seconds after which the extra graph builds -- padding mask,
    deterministic, every plan -- are skipped) | --deadline 100 (seconds after which no further problem starts)
CPU check of the pure-torch parts (quantisation, truth vs autograd, fp8-model, the pattern report on
the fp8-model with planted zeros) for problems (a) and (c):
    python3 results/h200/fp8_dq_triage.py --cpu-selftest

Nothing is asserted: it prints lines (one exception line per failed problem or variant, then goes on).
"""

import argparse
import math
import sys
import time
import traceback

import torch

D = 128
F64, F32 = torch.float64, torch.float32
CANARY = 0x5A  # a finite byte in both FP8 formats (e4m3fn 20, e5m2 192)


class Fmt:
    def __init__(self, name, dtype, fmax, p_scale, nan_byte, max_byte, test_p_scale):
        self.name, self.dtype, self.fmax, self.p_scale = name, dtype, fmax, p_scale
        self.nan_byte, self.max_byte = nan_byte, max_byte
        self.test_p_scale = test_p_scale  # cuDNN's tests: get_fp8_scale_factor(1.0, dtype) with fudge 0.25


# p_scale as difftest/model/fp8.py FORMATS (the adapter's f.p_scale): 256 for e4m3fn, 32768 for e5m2
FMTS = {
    "float8_e4m3fn": Fmt("e4m3", torch.float8_e4m3fn, 448.0, 256.0, 0x7F, 0x7E, 32.0),
    "float8_e5m2": Fmt("e5m2", torch.float8_e5m2, 57344.0, 32768.0, 0x7F, 0x7B, 8192.0),
}


def say(*a):
    print(*a, flush=True)


def g3(x):
    return f"{float(x):.3g}"


# ---------------------------------------------------------------------------------------------------------------
# FP8 helpers (difftest/model/fp8.py's rule, re-implemented)

def pow2_scale(amax: float, fmt: Fmt) -> float:
    """The power of two putting amax in (fmax/2, fmax]; 1.0 where amax is 0 or not finite."""
    amax = float(amax)
    if not (amax > 0.0) or not math.isfinite(amax):
        return 1.0
    m, e = math.frexp(fmt.fmax / amax)
    s = math.ldexp(1.0, e - 1)
    while amax * s > fmt.fmax:
        s /= 2.0
    return min(max(s, 2.0 ** -126), 2.0 ** 126)


def quantise(x: torch.Tensor, scale: float, fmt: Fmt) -> torch.Tensor:
    """x * scale in float32, saturated to +-fmax, cast (round to nearest even) to the FP8 dtype."""
    y = x.to(F32) * scale
    return torch.where(torch.isnan(y), y, y.clamp(-fmt.fmax, fmt.fmax)).to(fmt.dtype)


def dequantise(x8: torch.Tensor, descale: float) -> torch.Tensor:
    return x8.to(F64) * descale


def qdq(x: torch.Tensor, scale: float, fmt: Fmt) -> torch.Tensor:
    """float64 x stored in FP8 at ``scale`` and read back (float64): a quantisation point of the model."""
    y = (x * scale).clamp(-fmt.fmax, fmt.fmax)
    return y.to(F32).to(fmt.dtype).to(F64) / scale


# ---------------------------------------------------------------------------------------------------------------
# problems and inputs

def _p(name, sq, sk, hq=1, hk=1, b=1, fmt="float8_e4m3fn", causal=False, seed=0, vscale=1.0, do_ones=False,
       note=""):
    return dict(name=name, b=b, sq=sq, sk=sk, hq=hq, hk=hk, fmt=fmt, causal=causal, seed=seed, vscale=vscale,
                do_ones=do_ones, scale=1.0 / math.sqrt(D), note=note)


PROBLEMS = [
    _p("a", 2, 2, seed=101),
    _p("b", 2, 2, fmt="float8_e5m2", seed=101),
    _p("c", 33, 127, hq=4, hk=4, seed=103),
    _p("d", 128, 128, seed=104),
    _p("e", 64, 64, hq=2, hk=1, seed=105),
    _p("f", 256, 256, seed=106),
    _p("g", 200, 300, hq=4, hk=2, b=2, seed=107),
    _p("h", 2, 2, seed=108, do_ones=True, note="dO all ones"),
    _p("i", 3, 5, seed=109),
    _p("j", 128, 128, causal=True, seed=110),
]


def short(P):
    return (f"({P['name']}) b{P['b']} sq{P['sq']} sk{P['sk']} h{P['hq']}/{P['hk']} d{D} {FMTS[P['fmt']].name}"
            f"{' causal' if P['causal'] else ''}{' ' + P['note'] if P['note'] else ''} seed {P['seed']}")


def make_inputs(P):
    """{name: (fp8 BSHD tensor on the CPU, descale)} for q, k, v, do; drawn on the CPU, fixed seed
    (or, with ``--inputs``, read from the file: tensors and floats only)."""
    if P.get("inputs"):
        return torch.load(P["inputs"], weights_only=True)
    fmt = FMTS[P["fmt"]]
    g = torch.Generator().manual_seed(P["seed"])
    b, sq, sk, hq, hk, vs = P["b"], P["sq"], P["sk"], P["hq"], P["hk"], P["vscale"]
    x = {"q": torch.randn(b, sq, hq, D, generator=g) * vs,
         "k": torch.randn(b, sk, hk, D, generator=g) * vs,
         "v": torch.randn(b, sk, hk, D, generator=g) * vs}
    x["do"] = torch.ones(b, sq, hq, D) if P["do_ones"] else torch.randn(b, sq, hq, D, generator=g) * vs
    out = {}
    for n, t in x.items():
        s = pow2_scale(float(t.abs().max()), fmt)
        out[n] = (quantise(t, s, fmt).contiguous(), 1.0 / s)
    return out


def bhsd(x8, descale):
    """FP8 BSHD bytes -> dequantised float64 [B, H, S, D]."""
    return dequantise(x8, descale).permute(0, 2, 1, 3)


def swap_sh(x):
    """[B, H, S, D] <-> [B, S, H, D] (the permutation is its own inverse)."""
    return x.permute(0, 2, 1, 3)


# ---------------------------------------------------------------------------------------------------------------
# float64 references

def _scores(q, k, scale, causal):
    s = (q @ k.transpose(-1, -2)) * scale
    if causal:  # top-left: key j visible to query i iff j <= i
        sq, sk = s.shape[-2], s.shape[-1]
        hide = torch.ones(sq, sk, dtype=torch.bool, device=s.device).triu(1)
        s = s.masked_fill(hide, float("-inf"))
    return s


def _group_sum(x, hk):
    b, hq, s, d = x.shape
    return x.reshape(b, hk, hq // hk, s, d).sum(2)


def reference(q, k, v, do, scale, causal, lse=None, o=None):
    """float64 attention forward + backward ([B, H, S, D] tensors; GQA by repeat_interleave, cuDNN's grouping).
    ``lse`` / ``o`` replace the softmax statistics / the O used for Delta (the own-statistics reference)."""
    hq, hk = q.shape[1], k.shape[1]
    kr, vr = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    s = _scores(q, kr, scale, causal)
    lse_true = torch.logsumexp(s, -1)
    p = torch.exp(s - (lse_true if lse is None else lse)[..., None])
    o_true = p @ vr
    dp = do @ vr.transpose(-1, -2)
    delta = (do * (o_true if o is None else o)).sum(-1, keepdim=True)
    ds = p * (dp - delta)
    dq = (ds @ kr) * scale
    dk = _group_sum((ds.transpose(-1, -2) @ q) * scale, hk)
    dv = _group_sum(p.transpose(-1, -2) @ do, hk)
    vis = torch.isfinite(s)
    return dict(o=o_true, lse=lse_true, dq=dq, dk=dk, dv=dv, p_max=float(p.max()),
                dp_amax=float(dp.abs().where(vis, torch.zeros_like(dp)).max()),
                dp_amax_all=float(dp.abs().max()), ds_amax=float((ds * scale).abs().max()),
                ds_noscale_amax=float(ds.abs().max()))


def model_fwd(q, k, v, scale, causal, fmt, s_scale, scale_o):
    """O with cuDNN's forward quantisation points: P relative to the row max stored at s_scale, O stored at
    scale_o (one KV block; the online rescaling of longer rows is not modelled)."""
    hq, hk = q.shape[1], k.shape[1]
    kr, vr = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    s = _scores(q, kr, scale, causal)
    pu = torch.exp(s - s.amax(-1, keepdim=True))
    o = (qdq(pu, s_scale, fmt) @ vr) / pu.sum(-1, keepdim=True)
    return qdq(o, scale_o, fmt), float(o.abs().max())


def model_bwd(q, k, v, do, scale, causal, fmt, lse, o, sc, extras=False):
    """dQ, dK, dV with cuDNN's backward quantisation points (fp8_ref.compute_ref_backward's order), from the
    statistics ``lse`` and the O ``o`` given; ``sc``: the scales passed to cuDNN (s, dP, dq, dk, dv)."""
    hq, hk = q.shape[1], k.shape[1]
    kr, vr = k.repeat_interleave(hq // hk, 1), v.repeat_interleave(hq // hk, 1)
    s = _scores(q, kr, scale, causal)
    p = torch.exp(s - lse[..., None])
    dv = _group_sum(qdq(p, sc["s"], fmt).transpose(-1, -2) @ do, hk)
    dp = do @ vr.transpose(-1, -2)
    delta = (do * o).sum(-1, keepdim=True)
    ds = p * (dp - delta) * scale
    dsq = qdq(ds, sc["dP"], fmt)
    dq = dsq @ kr
    dk = _group_sum(dsq.transpose(-1, -2) @ q, hk)
    out = dict(dq=qdq(dq, sc["dq"], fmt), dk=qdq(dk, sc["dk"], fmt), dv=qdq(dv, sc["dv"], fmt),
               amax=dict(dq=float(dq.abs().max()), dk=float(dk.abs().max()), dv=float(dv.abs().max()),
                         dp=float(ds.abs().max())))
    if extras:  # candidate explanations of a wrong dQ / dK
        out["dq: dS fp32"] = qdq(ds @ kr, sc["dq"], fmt)
        out["dk: dS fp32"] = qdq(_group_sum(ds.transpose(-1, -2) @ q, hk), sc["dk"], fmt)
        dsu = qdq(ds, 1.0, fmt)
        out["dq: dS@unit"] = qdq(dsu @ kr, sc["dq"], fmt)
        out["dk: dS@unit"] = qdq(_group_sum(dsu.transpose(-1, -2) @ q, hk), sc["dk"], fmt)
        ksw = torch.cat([kr[..., D // 2:], kr[..., :D // 2]], -1)
        out["dq: K halves swapped"] = qdq(dsq @ ksw, sc["dq"], fmt)
        dss = qdq(p * (dp - delta), sc["dP"], fmt) * scale  # attn_scale applied after the dS store
        out["dq: scale after dS store"] = qdq(dss @ kr, sc["dq"], fmt)
        out["dq: no Delta"] = qdq(qdq(p * dp * scale, sc["dP"], fmt) @ kr, sc["dq"], fmt)
    return out


def check_reference_autograd(q, k, v, do, scale, causal):
    """max |hand-written backward - torch autograd| (float64), a check of ``reference``."""
    hq, hk = q.shape[1], k.shape[1]
    qa, ka, va = (t.clone().requires_grad_(True) for t in (q, k, v))
    s = _scores(qa, ka.repeat_interleave(hq // hk, 1), scale, causal)
    o = torch.softmax(s, -1) @ va.repeat_interleave(hq // hk, 1)
    o.backward(do)
    r = reference(q, k, v, do, scale, causal)
    return max(float((r["dq"] - qa.grad).abs().max()), float((r["dk"] - ka.grad).abs().max()),
               float((r["dv"] - va.grad).abs().max()), float((r["o"] - o.detach()).abs().max()))


# ---------------------------------------------------------------------------------------------------------------
# reporting (tensors in BSHD [B, S, H, D], LSE [B, H, S]; float64, any device)

def unravel(i, shape):
    out = []
    for n in reversed(shape):
        out.append(i % n)
        i //= n
    return tuple(reversed(out))


def describe(mask):
    """The pattern of a bool [B, S, H, D] mask: which batches, rows, heads, dims; dim halves; per-64-row tiles;
    whole rows."""
    n = int(mask.sum())
    if n == 0:
        return "none"
    idx = mask.nonzero().cpu()
    parts = [f"n={n}/{mask.numel()}"]
    for ax, nm in enumerate(("b", "row", "head", "dim")):
        u = torch.unique(idx[:, ax]).tolist()
        parts.append(f"{nm}s={u}" if len(u) <= 12 else f"{nm}s: {len(u)} distinct in [{min(u)},{max(u)}]")
    dims, rows = idx[:, 3], idx[:, 1]
    parts.append(f"dims<64:{int((dims < 64).sum())} >=64:{int((dims >= 64).sum())}")
    parts.append(f"per16dims={torch.bincount(dims // 16, minlength=D // 16).tolist()}")
    parts.append(f"per64rows={torch.bincount(rows // 64).tolist()}")
    per_row = mask.sum(-1)  # [B, S, H]
    parts.append(f"(b,row,head) touched={int((per_row > 0).sum())}/{per_row.numel()}, "
                 f">=64 dims bad={int((per_row >= D // 2).sum())}, all dims={int((per_row == D).sum())}")
    return " ".join(parts)


def worst(got, truth, model, k=6):
    e = (got - truth).abs().flatten()
    k = min(k, e.numel())
    vals, ids = torch.topk(e, k)
    items = []
    for val, i in zip(vals.tolist(), ids.tolist()):
        ix = unravel(i, tuple(got.shape))
        items.append(f"{ix}: got {g3(got[ix])} truth {g3(truth[ix])} model {g3(model[ix])}")
    return "; ".join(items)


def bad_mask(got, truth, model):
    """Elements where cuDNN is off the truth by more than twice the fp8-model's largest error."""
    errm = float((model - truth).abs().max())
    thr = 2.0 * errm if errm > 0 else 1e-9 * max(float(truth.abs().max()), 1e-30)
    return (got - truth).abs() > thr


def zero_mask(got, truth):
    return (got == 0) & (truth.abs() > 0.1 * truth.abs().max())


def report_grad(name, got, truth, own, model, cands=None, detail=True):
    """Lines for one output (BSHD float64)."""
    err = float((got - truth).abs().max())
    errm = float((model - truth).abs().max())
    line = (f"  {name:3s} err {g3(err)} | fp8-model err {g3(errm)} | ratio {g3(err / errm) if errm > 0 else 'inf'}"
            + (f" | vs own-stats {g3((got - own).abs().max())}" if own is not None else "")
            + f" | vs model {g3((got - model).abs().max())}"
            f" | max|truth| {g3(truth.abs().max())} max|got| {g3(got.abs().max())}")
    nan = int(torch.isnan(got).sum())
    if nan:
        line += f" | NaN {nan}"
    say(line)
    if not detail or name not in ("dq", "dk"):
        return
    z = zero_mask(got, truth)
    zl = [unravel(int(i), tuple(got.shape)) for i in z.flatten().nonzero().flatten()[:8].tolist()]
    say(f"      zeros (cuDNN 0, |truth| > 0.1 max): {int(z.sum())}"
        + (" at " + "; ".join(f"{ix} truth {g3(truth[ix])} model {g3(model[ix])}" for ix in zl) if zl else "")
        + f" | fp8-model zeros there: {int(zero_mask(model, truth).sum())}")
    if z.any():
        say(f"      zeros pattern: {describe(z)}")
    say(f"      worst: {worst(got, truth, model)}")
    say(f"      bad (|err| > 2x model's max err): {describe(bad_mask(got, truth, model))}")
    if cands:
        say("      dist of cuDNN to: " + " | ".join(f"{n} {g3((got - c).abs().max())}" for n, c in cands.items()))


def overlap(a, b):
    na = int(a.sum())
    return f"{int((a & b).sum())}/{na}" if na else "0/0"


# ---------------------------------------------------------------------------------------------------------------
# cuDNN (graphs as kernels/cudnn_fp8.py builds them)

FWD_SCALARS = ("descale_q", "descale_k", "descale_v", "descale_s", "scale_s", "scale_o")
BWD_SCALARS = ("descale_q", "descale_k", "descale_v", "descale_o", "descale_dO", "descale_s", "descale_dP",
               "scale_s", "scale_dQ", "scale_dK", "scale_dV", "scale_dP")


class Cudnn:
    def __init__(self, dev):
        import cudnn
        self.cudnn, self.dev = cudnn, dev
        self.handle = cudnn.create_handle()
        self.cache = {}
        self.build_seconds = 0.0

    def stream(self):
        self.cudnn.set_stream(handle=self.handle, stream=torch.cuda.current_stream().cuda_stream)

    def _build(self, g, all_plans=False):
        """kernels/cudnn.py's build_graph (heuristics A then FALLBACK); ``all_plans``: build every candidate."""
        t0 = time.perf_counter()
        cudnn = self.cudnn
        try:
            g.validate()
            g.build_operation_graph()
            g.create_execution_plans([cudnn.heur_mode.A, cudnn.heur_mode.FALLBACK])
            g.check_support()
            if all_plans:
                g.build_plans(cudnn.build_plan_policy.ALL)
            else:
                g.build_plans()
        finally:
            self.build_seconds += time.perf_counter() - t0

    def _common(self, P):
        cudnn = self.cudnn
        io = {"float8_e4m3fn": cudnn.data_type.FP8_E4M3, "float8_e5m2": cudnn.data_type.FP8_E5M2}[P["fmt"]]
        b, hq, sq = P["b"], P["hq"], P["sq"]

        def dims(h, s):  # [B, H, S, D] dims over BSHD memory
            return dict(dim=(b, h, s, D), stride=(s * h * D, D, h * D, 1))

        stats_dims = dict(dim=(b, hq, sq, 1), stride=(hq * sq, sq, 1, 1))
        mask = {"use_causal_mask": True} if P["causal"] else {}
        return io, cudnn.data_type.FLOAT, dims, stats_dims, mask

    def fwd(self, P):
        key = ("fwd", P["fmt"], P["b"], P["sq"], P["sk"], P["hq"], P["hk"], P["causal"], P["scale"])
        if key in self.cache:
            return self.cache[key]
        io, f32, dims, stats_dims, mask = self._common(P)
        hq, hk, sq, sk = P["hq"], P["hk"], P["sq"], P["sk"]
        fg = self.cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32,
                                handle=self.handle)
        t = {"q": fg.tensor(name="q", data_type=io, **dims(hq, sq)),
             "k": fg.tensor(name="k", data_type=io, **dims(hk, sk)),
             "v": fg.tensor(name="v", data_type=io, **dims(hk, sk))}
        for n in FWD_SCALARS:
            t[n] = fg.tensor(name=n, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=f32)
        o, stats, amax_s, amax_o = fg.sdpa_fp8(
            name="sdpa_fp8", q=t["q"], k=t["k"], v=t["v"], **{n: t[n] for n in FWD_SCALARS},
            generate_stats=True, attn_scale=P["scale"], **mask)
        o.set_output(True).set_data_type(io).set_dim(dims(hq, sq)["dim"]).set_stride(dims(hq, sq)["stride"])
        stats.set_output(True).set_data_type(f32).set_dim(stats_dims["dim"]).set_stride(stats_dims["stride"])
        for a in (amax_s, amax_o):
            a.set_output(True).set_data_type(f32).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
        t.update(o=o, stats=stats, amax_s=amax_s, amax_o=amax_o)
        self._build(fg)
        self.cache[key] = (fg, t)
        return fg, t

    def bwd(self, P, variant=""):
        """The adapter's backward graph; variant "padmask" adds use_padding_mask with seq_len tensors,
        "determ" use_deterministic_algorithm=True, "allplans" builds every execution plan candidate."""
        key = ("bwd", variant, P["fmt"], P["b"], P["sq"], P["sk"], P["hq"], P["hk"], P["causal"], P["scale"])
        if key in self.cache:
            return self.cache[key]
        io, f32, dims, stats_dims, mask = self._common(P)
        b, hq, hk, sq, sk = P["b"], P["hq"], P["hk"], P["sq"], P["sk"]
        bg = self.cudnn.pygraph(io_data_type=io, intermediate_data_type=f32, compute_data_type=f32,
                                handle=self.handle)
        t = {"q": bg.tensor(name="q", data_type=io, **dims(hq, sq)),
             "k": bg.tensor(name="k", data_type=io, **dims(hk, sk)),
             "v": bg.tensor(name="v", data_type=io, **dims(hk, sk)),
             "o": bg.tensor(name="o", data_type=io, **dims(hq, sq)),
             "do": bg.tensor(name="do", data_type=io, **dims(hq, sq)),
             "stats": bg.tensor(name="stats", data_type=f32, **stats_dims)}
        for n in BWD_SCALARS:
            t[n] = bg.tensor(name=n, dim=(1, 1, 1, 1), stride=(1, 1, 1, 1), data_type=f32)
        extra = {}
        if variant == "padmask":
            i32 = self.cudnn.data_type.INT32
            t["seq_q"] = bg.tensor(name="seq_q", dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i32)
            t["seq_k"] = bg.tensor(name="seq_k", dim=(b, 1, 1, 1), stride=(1, 1, 1, 1), data_type=i32)
            extra = dict(use_padding_mask=True, seq_len_q=t["seq_q"], seq_len_kv=t["seq_k"])
        elif variant == "determ":
            extra = dict(use_deterministic_algorithm=True)
        dq, dk, dv, amax_dq, amax_dk, amax_dv, amax_dp = bg.sdpa_fp8_backward(
            name="sdpa_fp8_backward", q=t["q"], k=t["k"], v=t["v"], o=t["o"], dO=t["do"], stats=t["stats"],
            **{n: t[n] for n in BWD_SCALARS}, attn_scale=P["scale"], **mask, **extra)
        for grad, h, s in ((dq, hq, sq), (dk, hk, sk), (dv, hk, sk)):
            grad.set_output(True).set_data_type(io).set_dim(dims(h, s)["dim"]).set_stride(dims(h, s)["stride"])
        for a in (amax_dq, amax_dk, amax_dv, amax_dp):
            a.set_output(True).set_data_type(f32).set_dim((1, 1, 1, 1)).set_stride((1, 1, 1, 1))
        t.update(dq=dq, dk=dk, dv=dv, amax_dq=amax_dq, amax_dk=amax_dk, amax_dv=amax_dv, amax_dp=amax_dp)
        self._build(bg, all_plans=variant == "allplans")
        self.cache[key] = (bg, t)
        return bg, t

    def scalars(self, values):
        return {n: torch.tensor([[[[float(v)]]]], dtype=F32, device=self.dev) for n, v in values.items()}

    def execute(self, g, t, pack, scalars, ws, plan=None):
        self.stream()
        vp = {**pack, **{t[n]: x for n, x in self.scalars(scalars).items()}}
        if plan is None:
            g.execute(vp, ws, handle=self.handle)
        else:
            g.execute_plan_at_index(vp, ws, plan, handle=self.handle)
        torch.cuda.synchronize()

    def plans(self, g):
        """'name, name, ...' of the graph's execution plan candidates (what the frontend reports)."""
        try:
            n = g.get_execution_plan_count()
            return f"{n} candidate(s): " + ", ".join(str(g.get_plan_name_at_index(i)) for i in range(min(n, 6)))
        except Exception as e:  # noqa: BLE001
            return f"(plan names unavailable: {type(e).__name__}: {str(e)[:100]})"


def guarded(x, pad_elems, fill):
    """A copy of contiguous ``x`` at the start of a larger buffer whose tail holds ``fill`` (a byte for FP8,
    a float for float32): (the view, the whole buffer)."""
    n = x.numel()
    if x.dtype == F32:
        buf = torch.full((n + pad_elems,), float(fill), dtype=F32, device=x.device)
    else:
        buf = torch.full((n + pad_elems,), int(fill), dtype=torch.uint8, device=x.device).view(x.dtype)
    view = buf[:n].view(x.shape)
    view.copy_(x)
    return view, buf


def out_buffer(like, mode, fmt, pad_elems):
    """An output buffer shaped like ``like``: "empty" (torch.empty, as the adapter), "zero", or "nan"
    (NaN bytes, followed by ``pad_elems`` canary bytes); returns (view, canary tail or None)."""
    if mode == "empty":
        return torch.empty_like(like), None
    if mode == "zero":
        return torch.zeros_like(like), None
    n = like.numel()
    buf = torch.full((n + pad_elems,), CANARY, dtype=torch.uint8, device=like.device)
    buf[:n].fill_(fmt.nan_byte)
    return buf[:n].view(like.dtype).view(like.shape), buf[n:]


def pad_rows(s):
    return (-(-s // 128) * 128 - s) + 128


def run_bwd(cx, P, graph, ins, o8, stats4, descale_o, scales, out_mode="empty", in_mode=None, ws_mode="empty",
            seq=None, reuse=None, plan=None):
    """One backward call; ``scales``: scale_dQ, scale_dK, scale_dV, scale_dP, descale_dP (and optionally
    scale_s / descale_s). ``reuse``: an earlier call's result whose output buffers and workspace this call
    writes into (the adapter's calibration and real call share them); ``plan``: execute that plan index.
    Returns grads (fp8 BSHD, copies), amaxes, NaNs left in the outputs, canary bytes changed."""
    fmt = FMTS[P["fmt"]]
    g, t = graph
    b, hq, hk, sq, sk = P["b"], P["hq"], P["hk"], P["sq"], P["sk"]
    q, k, v, do = (ins[n][0] for n in ("q", "k", "v", "do"))
    o, stats = o8, stats4
    if in_mode is not None:  # inputs at the start of larger buffers with a zero or a poison tail
        byte = 0 if in_mode == "zero" else fmt.max_byte
        q = guarded(q, pad_rows(sq) * hq * D, byte)[0]
        k = guarded(k, pad_rows(sk) * hk * D, byte)[0]
        v = guarded(v, pad_rows(sk) * hk * D, byte)[0]
        do = guarded(do, pad_rows(sq) * hq * D, byte)[0]
        o = guarded(o, pad_rows(sq) * hq * D, byte)[0]
        stats = guarded(stats, pad_rows(sq) * hq + 256, 0.0 if in_mode == "zero" else -30000.0)[0]
    outs, tails = {}, {}
    if reuse is not None:
        outs, ws = reuse["buffers"], reuse["ws"]
    else:
        for n, like, s_ in (("dq", q, sq), ("dk", k, sk), ("dv", v, sk)):
            outs[n], tails[n] = out_buffer(like, out_mode, fmt, pad_rows(s_) * like.shape[2] * D)
        wsz = max(g.get_workspace_size() if plan is None else g.get_workspace_size_plan_at_index(plan), 1)
        ws = {"empty": torch.empty, "zero": torch.zeros}.get(ws_mode)
        ws = ws(wsz, dtype=torch.uint8, device=cx.dev) if ws else torch.full((wsz,), 0xFF, dtype=torch.uint8,
                                                                             device=cx.dev)
    amax = {n: torch.full((1, 1, 1, 1), float("nan"), device=cx.dev) for n in ("dq", "dk", "dv", "dp")}
    pack = {t["q"]: q, t["k"]: k, t["v"]: v, t["o"]: o, t["do"]: do, t["stats"]: stats,
            **{t[n]: x for n, x in outs.items()}, **{t[f"amax_{n}"]: a for n, a in amax.items()}}
    if seq is not None:
        pack[t["seq_q"]] = torch.full((b, 1, 1, 1), sq, dtype=torch.int32, device=cx.dev)
        pack[t["seq_k"]] = torch.full((b, 1, 1, 1), sk, dtype=torch.int32, device=cx.dev)
    fixed = {"descale_q": ins["q"][1], "descale_k": ins["k"][1], "descale_v": ins["v"][1],
             "descale_o": descale_o, "descale_dO": ins["do"][1],
             "descale_s": 1.0 / fmt.p_scale, "scale_s": fmt.p_scale}
    cx.execute(g, t, pack, {**fixed, **scales}, ws, plan=plan)
    res = dict(grads={n: x.clone() for n, x in outs.items()}, amax={n: float(a) for n, a in amax.items()},
               buffers=outs, ws=ws)
    nan = out_mode == "nan" and reuse is None
    res["nan_left"] = {n: int(torch.isnan(x.float()).sum()) for n, x in outs.items()} if nan else None
    res["canary"] = {n: int((tl != CANARY).sum()) for n, tl in tails.items()} if nan else None
    return res


def unit_scales():
    return {"scale_dQ": 1.0, "scale_dK": 1.0, "scale_dV": 1.0, "scale_dP": 1.0, "descale_dP": 1.0}


def real_scales(amax, fmt, div=1.0):
    s = {n: pow2_scale(amax[n], fmt) / div for n in ("dq", "dk", "dv", "dp")}
    return {"scale_dQ": s["dq"], "scale_dK": s["dk"], "scale_dV": s["dv"], "scale_dP": s["dp"],
            "descale_dP": 1.0 / s["dp"]}


def model_sc(scales, fmt):
    return {"s": scales.get("scale_s", fmt.p_scale), "dP": scales["scale_dP"], "dq": scales["scale_dQ"],
            "dk": scales["scale_dK"], "dv": scales["scale_dV"]}


def deq_grads(res, scales):
    g = res["grads"]
    return {"dq": dequantise(g["dq"], 1.0 / scales["scale_dQ"]), "dk": dequantise(g["dk"], 1.0 / scales["scale_dK"]),
            "dv": dequantise(g["dv"], 1.0 / scales["scale_dV"])}


def bytes_diff(a, b):
    return int((a.view(torch.uint8) != b.view(torch.uint8)).sum())


# ---------------------------------------------------------------------------------------------------------------
# one problem on the GPU

def run_problem(cx, P, t_start, budget):
    fmt = FMTS[P["fmt"]]
    dev = cx.dev
    say(f"== {short(P)}")
    t0 = time.perf_counter()
    ins = {n: (x.to(dev), d) for n, (x, d) in make_inputs(P).items()}
    q, k, v, do = (bhsd(*ins[n]) for n in ("q", "k", "v", "do"))
    b, hq, sq = P["b"], P["hq"], P["sq"]
    say(f"  input descales q {g3(ins['q'][1])} k {g3(ins['k'][1])} v {g3(ins['v'][1])} dO {g3(ins['do'][1])}")

    # forward, as the adapter: calibration at scale_o = 1, then the real call
    fg, ft = cx.fwd(P)
    o8 = torch.empty(b, sq, hq, D, dtype=fmt.dtype, device=dev)
    stats = torch.full((b, hq, sq), float("-inf"), dtype=F32, device=dev)
    famax = {n: torch.full((1, 1, 1, 1), float("nan"), device=dev) for n in ("amax_s", "amax_o")}
    fws = torch.empty(max(fg.get_workspace_size(), 1), dtype=torch.uint8, device=dev)
    pack = {ft["q"]: ins["q"][0], ft["k"]: ins["k"][0], ft["v"]: ins["v"][0], ft["o"]: o8, ft["stats"]: stats,
            **{ft[n]: a for n, a in famax.items()}}
    fixed = {"descale_q": ins["q"][1], "descale_k": ins["k"][1], "descale_v": ins["v"][1],
             "descale_s": 1.0 / fmt.p_scale, "scale_s": fmt.p_scale}
    cx.execute(fg, ft, pack, {**fixed, "scale_o": 1.0}, fws)
    cal_amax_o = float(famax["amax_o"])
    scale_o = pow2_scale(cal_amax_o, fmt)
    cx.execute(fg, ft, pack, {**fixed, "scale_o": scale_o}, fws)
    amax_s, amax_o = float(famax["amax_s"]), float(famax["amax_o"])
    o_deq = dequantise(o8, 1.0 / scale_o)  # BSHD
    stats4 = stats.view(b, hq, sq, 1)

    truth = reference(q, k, v, do, P["scale"], P["causal"])
    own = reference(q, k, v, do, P["scale"], P["causal"], lse=stats.to(F64), o=swap_sh(o_deq))
    o_model, o_model_amax = model_fwd(q, k, v, P["scale"], P["causal"], fmt, fmt.p_scale, scale_o)
    say(f"  fwd amax: cuDNN amax_s {g3(amax_s)} (max P truth {g3(truth['p_max'])}) | amax_o calib {g3(cal_amax_o)}"
        f" real {g3(amax_o)} (max|O| truth {g3(truth['o'].abs().max())}, model {g3(o_model_amax)}) | scale_o {scale_o}")
    report_grad("O", o_deq, swap_sh(truth["o"]), None, swap_sh(o_model), detail=False)
    lse_err = (stats.to(F64) - truth["lse"]).abs()
    wi = unravel(int(lse_err.flatten().argmax()), tuple(lse_err.shape))
    say(f"  LSE err {g3(lse_err.max())} at (b,head,row) {wi}: got {g3(stats[wi])} truth {g3(truth['lse'][wi])}"
        f" | fp8-model n/a (no FP8 point in the statistics) | -inf/nan in stats: "
        f"{int((~torch.isfinite(stats)).sum())}")

    # backward, as the adapter: calibration at unit scales, then the real call
    bgraph = cx.bwd(P)
    descale_o = 1.0 / scale_o
    cal = run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, unit_scales())
    rs = real_scales(cal["amax"], fmt)
    real = run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs, reuse=cal)  # the adapter reuses the buffers
    say(f"  plans: fwd {cx.plans(fg)} | bwd {cx.plans(bgraph[0])} | bwd workspace {bgraph[0].get_workspace_size()}")
    say(f"  bwd scales (from the calibration's amaxes): dQ {rs['scale_dQ']} dK {rs['scale_dK']} dV {rs['scale_dV']}"
        f" dP {rs['scale_dP']} | scale_s {fmt.p_scale}")
    lse_c, o_c = stats.to(F64), swap_sh(o_deq)
    mdl = model_bwd(q, k, v, do, P["scale"], P["causal"], fmt, lse_c, o_c, model_sc(rs, fmt), extras=True)
    mdl_unit = model_bwd(q, k, v, do, P["scale"], P["causal"], fmt, lse_c, o_c, model_sc(unit_scales(), fmt))
    say(f"  bwd amax calib (unit scales): dq {g3(cal['amax']['dq'])} dk {g3(cal['amax']['dk'])} "
        f"dv {g3(cal['amax']['dv'])} dp {g3(cal['amax']['dp'])} | model at unit scales: dq {g3(mdl_unit['amax']['dq'])}"
        f" dk {g3(mdl_unit['amax']['dk'])} dv {g3(mdl_unit['amax']['dv'])} dS {g3(mdl_unit['amax']['dp'])}")
    say(f"  bwd amax real: dq {g3(real['amax']['dq'])} dk {g3(real['amax']['dk'])} dv {g3(real['amax']['dv'])} "
        f"dp {g3(real['amax']['dp'])} | truth: max|dQ| {g3(truth['dq'].abs().max())} max|dK| "
        f"{g3(truth['dk'].abs().max())} max|dV| {g3(truth['dv'].abs().max())} | model (pre-store): dq "
        f"{g3(mdl['amax']['dq'])} dk {g3(mdl['amax']['dk'])} dv {g3(mdl['amax']['dv'])} | candidates for amax_dP: "
        f"max|dP=dO V^T| visible {g3(truth['dp_amax'])} all {g3(truth['dp_amax_all'])}, max|dS| {g3(truth['ds_amax'])}"
        f", max|P(dP-Delta)| {g3(truth['ds_noscale_amax'])}")
    got = deq_grads(real, rs)
    tr = {n: swap_sh(truth[n]) for n in ("dq", "dk", "dv")}
    ow = {n: swap_sh(own[n]) for n in ("dq", "dk", "dv")}
    md = {n: swap_sh(mdl[n]) for n in ("dq", "dk", "dv")}
    for n in ("dq", "dk", "dv"):
        cands = None
        if n in ("dq", "dk"):
            cands = {"truth": tr[n], "own-stats": ow[n], "fp8-model": md[n]}
            cands.update({c.split(": ")[1]: swap_sh(x) for c, x in mdl.items() if c.startswith(n + ":")})
        report_grad(n, got[n], tr[n], ow[n], md[n], cands=cands)
    bad_real = {n: bad_mask(got[n], tr[n], md[n]) for n in ("dq", "dk", "dv")}
    zero_real = {n: zero_mask(got[n], tr[n]) for n in ("dq", "dk")}

    def variant_line(label, res, scales, model=None):
        g = deq_grads(res, scales)
        if model is None:
            model = model_bwd(q, k, v, do, P["scale"], P["causal"], fmt, lse_c, o_c, model_sc(scales, fmt))
        parts = []
        for n in ("dq", "dk", "dv"):
            mn = swap_sh(model[n])
            err, errm = float((g[n] - tr[n]).abs().max()), float((mn - tr[n]).abs().max())
            bm = bad_mask(g[n], tr[n], mn)
            s = f"{n} err {g3(err)}/model {g3(errm)} bad {int(bm.sum())}"
            if bm.any() or bad_real[n].any():
                s += f" ({int((bm & bad_real[n]).sum())} of real's {int(bad_real[n].sum())})"
            if n in zero_real:
                zm = zero_mask(g[n], tr[n])
                s += f" zeros {int(zm.sum())}"
                if zm.any() or zero_real[n].any():
                    s += f" ({int((zm & zero_real[n]).sum())} of real's {int(zero_real[n].sum())})"
            if scales is rs:
                s += f" bytes!=real {bytes_diff(res['grads'][n], real['grads'][n])}"
            nan = int(torch.isnan(g[n]).sum())
            if nan:
                s += f" NaN {nan}"
            parts.append(s)
        extra = (f" | amax dq {g3(res['amax']['dq'])} dk {g3(res['amax']['dk'])} dv {g3(res['amax']['dv'])}"
                 f" dp {g3(res['amax']['dp'])}")
        if res.get("nan_left") is not None:
            extra += f" | NaN left (unwritten) {res['nan_left']} | canary bytes changed {res['canary']}"
        say(f"  [{label}] " + " || ".join(parts) + extra)

    def attempt(label, fn):
        try:
            fn()
        except Exception as e:  # noqa: BLE001
            say(f"  [{label}] {type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}")

    attempt("unit scales (the calibration call)", lambda: variant_line(
        "unit scales (the calibration call)", cal, unit_scales(), mdl_unit))
    attempt("real again, fresh buffers", lambda: variant_line(
        "real again, fresh buffers", run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs), rs))
    attempt("real x3 without calibration in between", lambda: say(
        "  [real x3] dq bytes != real: " + str([bytes_diff(run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs)
                                                          ["grads"]["dq"], real["grads"]["dq"]) for _ in range(3)])))
    attempt("nan-prefilled outputs, NaN workspace", lambda: variant_line(
        "nan-prefilled outputs, NaN workspace",
        run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs, out_mode="nan", ws_mode="nan"), rs))
    attempt("zero outputs + workspace", lambda: variant_line(
        "zero outputs + workspace",
        run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs, out_mode="zero", ws_mode="zero"), rs))
    attempt("inputs guarded, zero tails", lambda: variant_line(
        "inputs guarded, zero tails",
        run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs, out_mode="nan", in_mode="zero"), rs))
    attempt("inputs guarded, poison tails", lambda: variant_line(
        "inputs guarded, poison tails",
        run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, rs, out_mode="nan", in_mode="poison"), rs))
    head = real_scales(cal["amax"], fmt, div=16.0)
    attempt("scales / 16 (headroom)", lambda: variant_line(
        "scales / 16 (headroom)", run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, head), head))
    tps = dict(rs, scale_s=fmt.test_p_scale, descale_s=1.0 / fmt.test_p_scale)
    attempt(f"bwd scale_s {fmt.test_p_scale:g} (cuDNN tests' P scale)", lambda: variant_line(
        f"bwd scale_s {fmt.test_p_scale:g} (cuDNN tests' P scale)",
        run_bwd(cx, P, bgraph, ins, o8, stats4, descale_o, tps), tps))
    for var, label in (("padmask", "graph with use_padding_mask, full lengths"),
                       ("determ", "graph with use_deterministic_algorithm=True")):
        if time.perf_counter() - t_start > budget:
            say(f"  [{label}] skipped (--budget {budget:g} s spent)")
            continue
        attempt(label, lambda var=var, label=label: variant_line(
            label, run_bwd(cx, P, cx.bwd(P, var), ins, o8, stats4, descale_o, rs,
                           seq=True if var == "padmask" else None), rs))

    def every_plan():
        ga = cx.bwd(P, "allplans")
        n = ga[0].get_execution_plan_count()
        say(f"  [every plan] {cx.plans(ga[0])}")
        for i in range(min(n, 6)):
            label = f"plan {i} {str(ga[0].get_plan_name_at_index(i))[:60]}"
            attempt(label, lambda i=i, label=label: variant_line(
                label, run_bwd(cx, P, ga, ins, o8, stats4, descale_o, rs, plan=i), rs))

    if time.perf_counter() - t_start > budget:
        say(f"  [every plan] skipped (--budget {budget:g} s spent)")
    else:
        attempt("every plan", every_plan)
    say(f"  ({time.perf_counter() - t0:.1f} s, graph builds so far {cx.build_seconds:.1f} s)")


# ---------------------------------------------------------------------------------------------------------------
# CPU self-test: every pure-torch part, with the fp8-model (planted zeros) standing in for cuDNN

def selftest(names):
    torch.manual_seed(0)
    say(f"== CPU self-test (torch {torch.__version__}); the 'kernel' is the fp8-model with planted zeros")
    g = torch.Generator().manual_seed(1)
    gq = [torch.randn(1, h, s, D, generator=g, dtype=F64) for h, s in ((4, 5), (2, 7), (2, 7), (4, 5))]
    say(f"  reference vs torch autograd, GQA 4/2 sq5 sk7: {g3(check_reference_autograd(*gq, 0.3, False))}, "
        f"causal: {g3(check_reference_autograd(*gq, 0.3, True))}")
    for P in PROBLEMS:
        if P["name"] not in names:
            continue
        fmt = FMTS[P["fmt"]]
        say(f"== {short(P)}")
        ins = make_inputs(P)
        for n, (x8, d) in ins.items():
            x = x8.to(F64)
            say(f"  {n}: {tuple(x8.shape)} {x8.dtype} descale {d} max|stored| {g3(x.abs().max())} "
                f"(in ({fmt.fmax / 2:g}, {fmt.fmax:g}]: {fmt.fmax / 2 < float(x.abs().max()) <= fmt.fmax})")
        q, k, v, do = (bhsd(*ins[n]) for n in ("q", "k", "v", "do"))
        ag = check_reference_autograd(q, k, v, do, P["scale"], P["causal"])
        ag_causal = check_reference_autograd(q, k, v, do, P["scale"], True)
        say(f"  reference vs torch autograd (float64): max diff {g3(ag)}; causal: {g3(ag_causal)}")
        truth = reference(q, k, v, do, P["scale"], P["causal"])
        scale_o = pow2_scale(float(truth["o"].abs().max()), fmt)
        o_m, o_m_amax = model_fwd(q, k, v, P["scale"], P["causal"], fmt, fmt.p_scale, scale_o)
        stats = truth["lse"].to(F32)  # stands in for cuDNN's Stats
        own = reference(q, k, v, do, P["scale"], P["causal"], lse=stats.to(F64), o=o_m)
        cal = model_bwd(q, k, v, do, P["scale"], P["causal"], fmt, stats.to(F64), o_m, model_sc(unit_scales(), fmt))
        rs = real_scales(cal["amax"], fmt)
        mdl = model_bwd(q, k, v, do, P["scale"], P["causal"], fmt, stats.to(F64), o_m, model_sc(rs, fmt),
                        extras=True)
        cal_amax = {n: float(g3(a)) for n, a in cal["amax"].items()}
        say(f"  scale_o {scale_o} (max|O| {g3(o_m_amax)}); calibration amaxes {cal_amax}"
            f" -> scales dQ {rs['scale_dQ']} dK {rs['scale_dK']} dV {rs['scale_dV']} dP {rs['scale_dP']}")
        say(f"  truth amaxes: dQ {g3(truth['dq'].abs().max())} dK {g3(truth['dk'].abs().max())} dV "
            f"{g3(truth['dv'].abs().max())} dP {g3(truth['dp_amax'])} dS {g3(truth['ds_amax'])}")
        report_grad("O", swap_sh(o_m), swap_sh(truth["o"]), None, swap_sh(o_m), detail=False)
        tr = {n: swap_sh(truth[n]) for n in ("dq", "dk", "dv")}
        md = {n: swap_sh(mdl[n]) for n in ("dq", "dk", "dv")}
        kern = {n: md[n].clone() for n in md}
        kern["dq"][0, 0, 0, 124] = 0.0  # planted: the reported element
        if P["sq"] > 31 and P["hq"] > 2:
            kern["dq"][0, 31, 2, 64:] = 0.0  # planted: a head-dim half of one row
            kern["dk"][0, 5:9, 1, 96:112] = 0.0
        for n in ("dq", "dk", "dv"):
            cands = None
            if n in ("dq", "dk"):
                cands = {"truth": tr[n], "fp8-model": md[n]}
                cands.update({c.split(": ")[1]: swap_sh(x) for c, x in mdl.items() if c.startswith(n + ":")})
            report_grad(n, kern[n], tr[n], swap_sh(own[n]), md[n], cands=cands)
        planted = overlap(bad_mask(kern["dq"], tr["dq"], md["dq"]), zero_mask(kern["dq"], tr["dq"]))
        say(f"  planted-zero overlap check: {planted} (bad dQ elements that are planted zeros)")
        buf, whole = guarded(ins["q"][0], 7, 0x7E)
        say(f"  guarded copy: equal {bool(torch.equal(buf.view(torch.uint8), ins['q'][0].view(torch.uint8)))}, "
            f"tail {whole.view(torch.uint8)[-7:].tolist()}; nan out buffer: "
            f"{int(torch.isnan(out_buffer(ins['q'][0], 'nan', fmt, 5)[0].float()).sum())} NaN of {ins['q'][0].numel()}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--cpu-selftest", action="store_true", help="pure-torch parts on the CPU, problems (a) and (c)")
    ap.add_argument("--only", default="", help="comma-separated problem names (a..j)")
    ap.add_argument("--budget", type=float, default=60.0, help="seconds after which extra graph builds are skipped")
    ap.add_argument("--deadline", type=float, default=100.0, help="seconds after which no further problem starts")
    ap.add_argument("--inputs", default="", help="one problem (x): the FP8 Q, K, V, dO of this .pt file "
                    "({name: (bytes [b, s, h, 128], descale)}, e.g. results/bugs/cudnn/fp8-dk-negative-lse.inputs.pt)")
    a = ap.parse_args()
    if a.inputs:
        x = torch.load(a.inputs, weights_only=True)
        (b, sq, hq, _), (_, sk, hk, _) = x["q"][0].shape, x["k"][0].shape
        fmt = {f.dtype: n for n, f in FMTS.items()}[x["q"][0].dtype]
        PROBLEMS[:] = [dict(_p("x", sq, sk, hq, hk, b, fmt, note=f"inputs {a.inputs}"), inputs=a.inputs)]
    names = [n.strip() for n in a.only.split(",") if n.strip()] or [P["name"] for P in PROBLEMS]
    if a.cpu_selftest:
        selftest([n for n in names if n in ("a", "c")] if a.only else ["a", "c"])
        return
    t_start = time.perf_counter()
    try:
        import cudnn
        say(f"torch {torch.__version__} cuda {torch.version.cuda} gpu "
            f"{torch.cuda.get_device_name(0) if torch.cuda.is_available() else None} | cudnn-frontend "
            f"{getattr(cudnn, '__version__', '?')} backend {cudnn.backend_version()}")
        cx = Cudnn("cuda")
    except Exception as e:  # noqa: BLE001
        say(f"cannot start cuDNN: {type(e).__name__}: {e}")
        sys.exit(1)
    for P in PROBLEMS:
        if P["name"] not in names:
            continue
        if time.perf_counter() - t_start > a.deadline:
            say(f"== {short(P)}: skipped (--deadline {a.deadline:g} s passed; rerun with --only {P['name']})")
            continue
        try:
            run_problem(cx, P, t_start, a.budget)
        except Exception as e:  # noqa: BLE001
            tb = traceback.extract_tb(e.__traceback__)
            where = f"{tb[-1].name}:{tb[-1].lineno}" if tb else "?"
            msg = str(e).splitlines()[0][:300] if str(e) else ""
            say(f"  FAILED ({short(P)}) {type(e).__name__} at {where}: {msg}")
    say(f"== done in {time.perf_counter() - t_start:.1f} s (graph builds {cx.build_seconds:.1f} s)")


if __name__ == "__main__":
    main()
