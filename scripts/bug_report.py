"""Turn a difftest reproducer into an upstream-ready standalone script (results/bugs/README.md).

    python3 scripts/bug_report.py REPRO.json [--out DIR] [--name NAME]

Writes DIR/NAME.py (default DIR results/bugs/<package>/, NAME repro_<kernel>_<hash>) and
DIR/NAME.inputs.pt: the reproducer's exact inputs (q, k, v, dO, sinks, cu_seqlens, packed
[T, H, D], as difftest drew them), saved so the script needs no difftest. The script imports
only torch (and numpy/jax for FA3-dew) and the package's public API, runs the package on those
inputs, and prints one JSON line per output: the package's max |error| against a float64
reference, what the same attention in plain PyTorch at the problem's dtype costs (rounding
alone), and their ratio; or the exception the package raised. Kinds: fa4, fa4-fast, fa3 (dew,
JAX), sdpa-{flash,efficient,cudnn,math}, flex, flex-gqa, tileops-{gqa,mha,gqa-bwd,mla},
fastflash, fastflash-atomic, jvp-flash, jvp-flash-mask, flash-attention-triton(-fast),
tilelang-file:PATH. Exit 2 with one line for anything else.
"""

import argparse
import hashlib
import json
import pprint
import sys
from pathlib import Path

PACKAGES = {  # kernel spec prefix -> (results/bugs folder, package line)
    "fa4": ("fa4", "flash-attn-4 (flash_attn.cute)"),
    "fa3": ("fa3", "dew-flash-attn (FA3 Hopper kernels through JAX FFI)"),
    "sdpa": ("sdpa", "torch (torch.nn.functional.scaled_dot_product_attention)"),
    "flex": ("flex", "torch (torch.nn.attention.flex_attention)"),
    "tileops": ("tileops", "tileops 0.1.0"),
    "fastflash": ("fastflash", "fastflash-attention 0.2.0"),
    "jvp-flash": ("jvp-flash", "jvp-flash-attention 0.14.0"),
    "flash-attention-triton": ("flash-attention-triton", "flash-attention-triton 0.1.1"),
    "tilelang-file": ("tilelang-file", "tilelang (a user's TileLang kernel file)"),
}

IMPORTS = '''
import json
import math
import sys
from pathlib import Path

import torch
'''

COMMON = r'''
DT = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}[P["dtype"]]
X = torch.load(Path(__file__).with_suffix(".inputs.pt"), weights_only=True)  # q k v do [T,H,D], sink [H], cu_seqlens
DEV = "cuda" if torch.cuda.is_available() else "cpu"  # the CPU serves torch's own backends only
B, HQ, HKV, DQK, DV = P["batch"], P["heads_q"], P["heads_kv"], P["head_dim_qk"], P["head_dim_v"]
VARLEN = isinstance(P["seqlen_q"], list)
SQ = P["seqlen_q"] if VARLEN else [P["seqlen_q"]] * B
SK = P["seqlen_k"] if VARLEN else [P["seqlen_k"]] * B
SCALE = P["softmax_scale"] if P["softmax_scale"] is not None else 1.0 / math.sqrt(DQK)
CQ, CK = X["cu_seqlens_q"].tolist(), X["cu_seqlens_k"].tolist()


def allowed(sq, sk):
    """[sq, sk] bool: query i sees key j (causal / window, aligned top-left or bottom-right)."""
    off = sk - sq if P["align"] == "bottom_right" else 0
    i = torch.arange(sq).unsqueeze(1) + off
    j = torch.arange(sk).unsqueeze(0)
    ok = torch.ones(sq, sk, dtype=torch.bool)
    if P["causal"]:
        ok &= j <= i
    if P["window_right"] is not None:
        ok &= j <= i + P["window_right"]
    if P["window_left"] is not None:
        ok &= j >= i - P["window_left"]
    return ok


def attention(q, k, v, do, sink):
    """Packed [T, H, D] attention per sequence in the inputs' dtype: o, natural-log lse [T, H]
    (-inf for a row that sees nothing and no sink) and the gradients, by autograd."""
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    sink = None if sink is None else sink.detach().requires_grad_()
    os, lses = [], []
    g = HQ // HKV
    for b in range(B):
        qb, kb, vb = q[CQ[b]:CQ[b + 1]], k[CK[b]:CK[b + 1]], v[CK[b]:CK[b + 1]]
        kx, vx = kb.repeat_interleave(g, dim=1), vb.repeat_interleave(g, dim=1)
        s = torch.einsum("qhd,khd->hqk", qb, kx) * SCALE
        s = s.masked_fill(~allowed(len(qb), len(kb)).to(s.device), float("-inf"))
        if sink is not None:
            s = torch.cat([s, sink.to(s.dtype).view(-1, 1, 1).expand(-1, s.shape[1], 1)], dim=-1)
        lse = torch.logsumexp(s, dim=-1) if s.shape[-1] else torch.full(s.shape[:2], float("-inf"), dtype=s.dtype,
                                                                         device=s.device)
        p = torch.exp(s - lse.unsqueeze(-1)).nan_to_num(0.0)
        if sink is not None:
            p = p[..., :-1]
        os.append(torch.einsum("hqk,khd->qhd", p, vx))
        lses.append(lse.transpose(0, 1))
    o, lse = torch.cat(os), torch.cat(lses)
    wrt = (q, k, v) + ((sink,) if sink is not None else ())
    grads = torch.autograd.grad(o, wrt, do, allow_unused=True)
    out = {"o": o, "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if sink is not None:
        out["dsink"] = grads[3]
    return out


def dense(t, s):
    """Packed [B*S, H, D] as [B, S, H, D] (dense problems)."""
    return t.reshape(B, s, *t.shape[1:])


def packed(t):
    """[B, S, H, D] (or [B, S, H]) back to [B*S, ...]."""
    return t.reshape(-1, *t.shape[2:])


def lse_bhs(lse):
    """A dense kernel's [B, H, S] LSE as packed [B*S, H]."""
    return lse.permute(0, 2, 1).reshape(-1, lse.shape[1])


def driver():
    import subprocess

    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=30).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main():
    cu = {n: (X[n].to(DEV) if X[n] is not None else None) for n in ("q", "k", "v", "do", "sink")}
    truth = attention(*(None if t is None else t.double() for t in cu.values()))
    low = attention(cu["q"], cu["k"], cu["v"], cu["do"], cu["sink"])  # rounding alone
    row = {"problem": P, "torch": torch.__version__,
           "gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu", "driver": driver()}
    try:
        got = kernel(cu["q"], cu["k"], cu["v"], cu["do"], cu["sink"], truth)
        if DEV == "cuda":
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 -- the finding may be the exception
        row["raised"] = f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"
        print(json.dumps(row), flush=True)
        return 1
    bad = False
    for n, g in got.items():
        if g is None:
            continue
        t, r = truth[n].double(), low[n].double()
        g = g.double().reshape(t.shape)
        finite = torch.isfinite(t)
        err = float((g - t).abs()[finite].max()) if finite.any() else 0.0
        ref_err = float((r - t).abs()[finite].max()) if finite.any() else 0.0
        mismatched_inf = int(((g != t) & ~finite).sum())  # -inf rows (no key seen) must stay -inf
        nonfinite = int((~torch.isfinite(g) & finite).sum())
        ratio = err / max(ref_err, 1e-30)
        bad |= ratio > 8 or nonfinite > 0 or mismatched_inf > 0
        print(json.dumps({"output": n, "max_abs_err": err, "plain_torch_err": ref_err, "ratio": round(ratio, 2),
                          "nonfinite": nonfinite, "mismatched_inf": mismatched_inf}), flush=True)
    print(json.dumps({**row, "verdict": "MISMATCH" if bad else "ok"}), flush=True)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
'''

KERNELS = {}

KERNELS["fa4"] = r'''
def kernel(q, k, v, do, sink, truth):
    from flash_attn.cute import flash_attn_func, flash_attn_varlen_func

    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    sink = None if sink is None else sink.detach().float().requires_grad_()
    kw = dict(softmax_scale=SCALE, causal=P["causal"], window_size=(P["window_left"], P["window_right"]),
              learnable_sink=sink, deterministic=DETERMINISTIC, return_lse=True)
    if VARLEN:
        o, lse = flash_attn_varlen_func(q, k, v, cu_seqlens_q=X["cu_seqlens_q"].to(DEV),
                                        cu_seqlens_k=X["cu_seqlens_k"].to(DEV), max_seqlen_q=max(SQ),
                                        max_seqlen_k=max(SK), **kw)
        lse = lse[:, :q.shape[0]].transpose(0, 1)
        grads = torch.autograd.grad(o, (q, k, v) + ((sink,) if sink is not None else ()), do)
    else:
        q4, k4, v4 = dense(q, SQ[0]), dense(k, SK[0]), dense(v, SK[0])
        o, lse = flash_attn_func(q4, k4, v4, **kw)
        grads = torch.autograd.grad(o, (q, k, v) + ((sink,) if sink is not None else ()), dense(do, SQ[0]))
        o, lse = packed(o), lse_bhs(lse)
    out = {"o": o, "lse": lse, "dq": grads[0], "dk": grads[1], "dv": grads[2]}
    if sink is not None:
        out["dsink"] = grads[3]
    return out
'''

KERNELS["fa3"] = r'''
def kernel(q, k, v, do, sink, truth):
    """dew-flash-attn's public flash_mha / flash_mha_varlen under jax.vjp (no LSE is public)."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from dew_flash_attn import flash_mha, flash_mha_varlen

    jdt = {torch.float16: jnp.float16, torch.bfloat16: jnp.bfloat16}[DT]
    to_j = lambda t: jnp.asarray(t.detach().float().cpu().numpy()).astype(jdt)  # noqa: E731
    win = (-1 if P["window_left"] is None else P["window_left"], -1 if P["window_right"] is None else P["window_right"])
    js = None if sink is None else jnp.asarray(sink.detach().float().cpu().numpy())
    if VARLEN:
        def f(a, b, c):
            return flash_mha_varlen(a, b, c, np.array(CQ, np.int32), max(1, max(SQ)), SCALE, P["causal"], win, js,
                                    np.array(CK, np.int32), max(1, max(SK)))

        args = (to_j(q), to_j(k), to_j(v))
        jdo = to_j(do)
    else:
        f = lambda a, b, c: flash_mha(a, b, c, SCALE, P["causal"], win, js)  # noqa: E731
        args = (to_j(dense(q, SQ[0])), to_j(dense(k, SK[0])), to_j(dense(v, SK[0])))
        jdo = to_j(dense(do, SQ[0]))
    o, vjp = jax.vjp(f, *args)
    dq, dk, dv = vjp(jdo)
    back = lambda a: torch.from_numpy(np.asarray(a.astype(jnp.float32))).to(DEV)  # noqa: E731
    fix = (lambda t: t) if VARLEN else packed
    return {"o": fix(back(o)), "dq": fix(back(dq)), "dk": fix(back(dk)), "dv": fix(back(dv))}
'''

KERNELS["sdpa"] = r'''
def kernel(q, k, v, do, sink, truth):
    """SDPA pinned to one backend; the built-in is_causal (top-left) where it means the
    problem's mask, else the mask as a boolean attn_mask; enable_gqa for GQA/MQA."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sq, sk = SQ[0], SK[0]
    plain = P["causal"] and P["window_left"] is None and P["window_right"] is None and (
        P["align"] == "top_left" or sq == sk)
    masked = P["causal"] or P["window_left"] is not None or P["window_right"] is not None
    mask = allowed(sq, sk).to(DEV) if masked and not plain else None
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    bhsd = lambda t, s: dense(t, s).transpose(1, 2)  # noqa: E731
    with sdpa_kernel(SDPBackend.BACKEND):
        o = F.scaled_dot_product_attention(bhsd(q, sq), bhsd(k, sk), bhsd(v, sk), attn_mask=mask, is_causal=plain,
                                           scale=SCALE, enable_gqa=HQ != HKV)
        dq, dk, dv = torch.autograd.grad(o, (q, k, v), bhsd(do, sq))
    return {"o": packed(o.transpose(1, 2)), "dq": dq, "dk": dk, "dv": dv}
'''

KERNELS["flex"] = r'''
def kernel(q, k, v, do, sink, truth):
    """torch.compile(flex_attention) with the problem's mask as a block mask."""
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    sq, sk = SQ[0], SK[0]
    rule = allowed(sq, sk).to(DEV)

    def mask_mod(b, h, i, j):
        return rule[i, j]

    bm = create_block_mask(mask_mod, None, None, sq, sk, device=DEV)
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    bhsd = lambda t, s: dense(t, s).transpose(1, 2)  # noqa: E731
    o, lse = torch.compile(flex_attention, dynamic=False)(bhsd(q, sq), bhsd(k, sk), bhsd(v, sk), block_mask=bm,
                                                          scale=SCALE, enable_gqa=HQ != HKV, return_lse=True)
    dq, dk, dv = torch.autograd.grad(o, (q, k, v), bhsd(do, sq))
    return {"o": packed(o.transpose(1, 2)), "lse": lse_bhs(lse), "dq": dq, "dk": dk, "dv": dv}
'''

KERNELS["tileops"] = r'''
def kernel(q, k, v, do, sink, truth):
    """TileOPs' public ops on BSHD tensors. OWN_FORWARD: GQADenseWithLSEFwdOp gives O and the
    LSE; otherwise O (rounded to the dtype) and the LSE come from the float64 reference and
    only the backward op is under test."""
    from tileops.attention import GQADenseBwdOp, GQADenseWithLSEFwdOp, MLADenseBwdOp

    sq, sk = SQ[0], SK[0]
    q4, k4, v4, do4 = dense(q, sq), dense(k, sk), dense(v, sk), dense(do, sq)
    out = {}
    if OWN_FORWARD:
        o4, lse = GQADenseWithLSEFwdOp(is_causal=P["causal"], sm_scale=SCALE).forward(q4, k4, v4)
        out.update(o=packed(o4), lse=lse_bhs(lse.float()))
    else:
        o4 = dense(truth["o"].to(DT), sq)
        lse = truth["lse"].float().reshape(B, sq, HQ).permute(0, 2, 1).contiguous()
    op = (MLADenseBwdOp if WIRE == "mla" else GQADenseBwdOp)(is_causal=P["causal"], sm_scale=SCALE)
    dq, dk, dv = op.forward(do4, q4, k4, v4, o4.contiguous(), lse.contiguous())
    out.update(dq=packed(dq), dk=packed(dk), dv=packed(dv))
    return out
'''

KERNELS["fastflash"] = r'''
def kernel(q, k, v, do, sink, truth):
    """fast_attention (autograd; UNIFLASH_BWD_FUSED_ATOMIC picks the backward) and the same
    forward kernel's base-2 LSE from fastflash_attn(return_lse=True), times ln 2."""
    import os

    from fastflash_attention import fast_attention
    from fastflash_attention._kernel import fastflash_attn

    os.environ["UNIFLASH_BWD_FUSED_ATOMIC"] = ATOMIC
    s = SQ[0]
    bhsd = lambda t: dense(t, s).transpose(1, 2).contiguous().detach().requires_grad_()  # noqa: E731
    q4, k4, v4 = bhsd(q), bhsd(k), bhsd(v)
    o = fast_attention(q4, k4, v4, is_causal=P["causal"], scale=SCALE)
    _, lse2 = fastflash_attn(q4.detach(), k4.detach(), v4.detach(), P["causal"], return_lse=True, scale=SCALE)
    dq, dk, dv = torch.autograd.grad(o, (q4, k4, v4), dense(do, s).transpose(1, 2).contiguous())
    th = lambda t: packed(t.transpose(1, 2))  # noqa: E731
    return {"o": th(o), "lse": lse_bhs(lse2.float() * math.log(2.0)), "dq": th(dq), "dk": th(dk), "dv": th(dv)}
'''

KERNELS["jvp-flash"] = r'''
def kernel(q, k, v, do, sink, truth):
    """JVPAttn.apply: causal flag, or (windows) a boolean attn_mask that also carries the
    causal rule; M, its LSE, is base 2: times ln 2."""
    from jvp_flash_attention.jvp_attention import JVPAttn

    s = SQ[0]
    bhsd = lambda t: dense(t, s).transpose(1, 2).contiguous().detach().requires_grad_()  # noqa: E731
    q4, k4, v4 = bhsd(q), bhsd(k), bhsd(v)
    windowed = P["window_left"] is not None or P["window_right"] is not None
    mask = allowed(s, s).to(DEV).expand(B, HQ, s, s).contiguous() if windowed else None
    causal = P["causal"] and not windowed
    o, aux = JVPAttn.apply(q4, k4, v4, None, None, None, mask, 0.0, causal, SCALE, True, True, True)
    dq, dk, dv = torch.autograd.grad(o, (q4, k4, v4), dense(do, s).transpose(1, 2).contiguous())
    th = lambda t: packed(t.transpose(1, 2))  # noqa: E731
    return {"o": th(o), "lse": lse_bhs(aux[1].float() * math.log(2.0)), "dq": th(dq), "dk": th(dk), "dv": th(dv)}
'''

KERNELS["flash-attention-triton"] = r'''
def kernel(q, k, v, do, sink, truth):
    """flash_attention_v2: always causal (top-left); the LSE is not returned."""
    from flash_attention_triton import flash_attention_v2

    sq, sk = SQ[0], SK[0]
    bhsd = lambda t, s: dense(t, s).transpose(1, 2).contiguous().detach().requires_grad_()  # noqa: E731
    q4, k4, v4 = bhsd(q, sq), bhsd(k, sk), bhsd(v, sk)
    o = flash_attention_v2(q4, k4, v4, softmax_scale=SCALE, deterministic=DETERMINISTIC)
    dq, dk, dv = torch.autograd.grad(o, (q4, k4, v4), dense(do, sq).transpose(1, 2).contiguous())
    th = lambda t: packed(t.transpose(1, 2))  # noqa: E731
    return {"o": th(o), "dq": th(dq), "dk": th(dk), "dv": th(dv)}
'''

KERNELS["tilelang-file"] = r'''
def kernel(q, k, v, do, sink, truth):
    """The kernel file's four @tilelang.jit functions, compiled for CUDA and called as its own
    _attention wrapper does (forward tiles 128x64, backward 64x32); its LSE is base 2."""
    import importlib.util

    import tilelang

    spec = importlib.util.spec_from_file_location("user_kernel", KERNEL_FILE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def build(name, *args):
        jit = getattr(mod, name)
        return tilelang.compile(jit.get_tir(*args), out_idx=jit.out_idx, target="cuda",
                                execution_backend=jit.execution_backend, pass_configs=jit.pass_configs,
                                compile_flags=jit.compile_flags)

    s, g = SQ[0], HQ // HKV
    q4, k4, v4, do4 = (dense(t, s).contiguous() for t in (q, k, v, do))
    o, lse2 = build("flashattn_fwd", B, HQ, s, DQK, DV, P["causal"], 128, 64, g)(q4, k4, v4)
    delta = build("flashattn_bwd_preprocess", B, HQ, s, DV)(o, do4)
    dq32 = torch.zeros(q4.shape, dtype=torch.float32, device=DEV)
    dk = torch.zeros(k4.shape, dtype=torch.float16, device=DEV)
    dv = torch.zeros(v4.shape, dtype=torch.float16, device=DEV)
    build("flashattn_bwd", B, HQ, s, DQK, DV, P["causal"], 64, 32, g)(q4, k4, v4, do4, lse2, delta, dq32, dk, dv)
    dq = build("flashattn_bwd_postprocess", B, HQ, s, DQK)(dq32)
    return {"o": packed(o), "lse": lse_bhs(lse2.float() * math.log(2.0)), "dq": packed(dq), "dk": packed(dk),
            "dv": packed(dv)}
'''


def kind_of(spec: str) -> tuple[str, dict]:
    """(template kind, constants the template reads) for a kernel spec; ValueError otherwise."""
    if spec in ("fa4", "fa4-fast"):
        return "fa4", {"DETERMINISTIC": spec == "fa4"}
    if spec == "fa3":
        return "fa3", {}
    if spec in ("sdpa-flash", "sdpa-efficient", "sdpa-cudnn", "sdpa-math"):
        backend = {"flash": "FLASH_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                   "math": "MATH"}[spec.split("-", 1)[1]]
        return "sdpa", {"BACKEND": backend}
    if spec in ("flex", "flex-gqa"):
        return "flex", {}
    if spec in ("tileops-gqa", "tileops-mha", "tileops-gqa-bwd", "tileops-mla"):
        return "tileops", {"OWN_FORWARD": spec in ("tileops-gqa", "tileops-mha"),
                           "WIRE": "mla" if spec == "tileops-mla" else "gqa"}
    if spec in ("fastflash", "fastflash-atomic"):
        return "fastflash", {"ATOMIC": "1" if spec == "fastflash-atomic" else "0"}
    if spec in ("jvp-flash", "jvp-flash-mask"):
        return "jvp-flash", {}
    if spec in ("flash-attention-triton", "flash-attention-triton-fast"):
        return "flash-attention-triton", {"DETERMINISTIC": spec == "flash-attention-triton"}
    if spec.startswith("tilelang-file:"):
        return "tilelang-file", {"KERNEL_FILE": spec.split(":", 1)[1]}
    raise ValueError(f"kernel {spec!r}: allowed fa4, fa4-fast, fa3, sdpa-*, flex, flex-gqa, tileops-*, fastflash*, "
                     f"jvp-flash*, flash-attention-triton*, tilelang-file:PATH")


def unsupported(kind: str, p: dict) -> str | None:
    """Why this kind's template cannot express the problem (it then cannot be a report)."""
    varlen = isinstance(p["seqlen_q"], list)
    if varlen and kind not in ("fa4", "fa3"):
        return "varlen problems: only the fa4 and fa3 templates call the varlen API"
    if p.get("sinks") and kind not in ("fa4", "fa3"):
        return "sinks: only the fa4 and fa3 templates pass them"
    return None


def render(rec: dict) -> tuple[str, str]:
    """(script text, results/bugs folder) for a reproducer record."""
    spec = rec["kernel"]
    kind, consts = kind_of(spec)
    p = rec["problem"]
    why = unsupported(kind, p)
    if why:
        raise ValueError(f"kernel {spec!r}: {why}")
    folder, package = next(v for k, v in PACKAGES.items() if spec == k or spec.startswith(k))
    lines = [f'"""Standalone reproducer: {package}; difftest kernel spec in KERNEL.',
             "",
             "Needs torch and the package only (no difftest). Inputs: the .inputs.pt file beside this",
             "script (the exact tensors difftest drew). Prints one JSON line per output: the package's",
             "max |error| against a float64 reference, what plain PyTorch at the same dtype costs, their",
             "ratio; then a verdict line. Exit 1 on a mismatch (ratio > 8, non-finite values, or a row",
             "that sees no key not left at -inf) or an exception.",
             *([f"difftest laid the inputs out as {p['layout']!r}; this script hands the package",
                "contiguous tensors (if it passes, the layout is the trigger)."]
               if p.get("layout", "contiguous") != "contiguous" else []),
             '"""',
             IMPORTS,  # before the constants: the script passes our own lint (E402)
             f"KERNEL = {spec!r}" + ("  # noqa: E501" if len(repr(spec)) > 100 else ""),
             f"P = {pprint.pformat(p, width=100, sort_dicts=False)}"]
    lines += [f"{k} = {v!r}" for k, v in consts.items()]
    if kind == "sdpa":
        body = KERNELS["sdpa"].replace("SDPBackend.BACKEND", f"SDPBackend.{consts['BACKEND']}")
    else:
        body = KERNELS[kind]
    return "\n".join(lines) + "\n" + COMMON.replace("\ndef main():", body + "\n\ndef main():"), folder


def save_inputs(rec: dict, path: Path) -> None:
    """The reproducer's inputs as difftest draws them, contiguous CPU tensors."""
    import torch

    from difftest.model.inputs import make_inputs
    from difftest.model.problem import Problem

    x = make_inputs(Problem.from_dict(rec["problem"]).validate())
    torch.save({n: (None if getattr(x, n) is None else getattr(x, n).detach().contiguous().cpu())
                for n in ("q", "k", "v", "do", "sink", "cu_seqlens_q", "cu_seqlens_k")}, path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repro", help="a difftest reproducer .json")
    ap.add_argument("--out", help="folder (default results/bugs/<package>/)")
    ap.add_argument("--name", help="script name without .py (default repro_<kernel>_<hash>)")
    a = ap.parse_args(argv)
    try:
        rec = json.loads(Path(a.repro).read_text())
        if not isinstance(rec, dict) or "kernel" not in rec or "problem" not in rec:
            raise ValueError("not a difftest reproducer: allowed a .json with 'kernel' and 'problem'")
        text, folder = render(rec)
    except (OSError, ValueError, KeyError) as e:
        print(f"bug_report: {a.repro}: {e}", file=sys.stderr)
        return 2
    out = Path(a.out) if a.out else Path(__file__).resolve().parents[1] / "results" / "bugs" / folder
    tag = hashlib.sha1(json.dumps(rec["problem"], sort_keys=True).encode()).hexdigest()[:8]
    name = a.name or f"repro_{rec['kernel'].split(':')[0].replace('-', '_')}_{tag}"
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.py").write_text(text)
    save_inputs(rec, out / f"{name}.inputs.pt")
    print(out / f"{name}.py")
    return 0


if __name__ == "__main__":
    sys.exit(main())
