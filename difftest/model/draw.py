"""The float64 values of a Problem's q, k, v, dO and sinks, before they are rounded to its
dtype (difftest/model/inputs.py). Which generator draws them is ``Problem.input_version``:

- 2 (every Problem built in code): the counter-based generator of
  difftest/model/counter_rng.py, run where the tensors live (on the GPU for a CUDA campaign;
  numpy threads on the CPU). Element i of each tensor is a pure function of (seed,
  tensor, i), every step is exact integer or exact float64 arithmetic, so CPU and GPU
  give identical bytes and nothing is drawn serially or copied from the host. On the
  H200 the old serial draw was half of a campaign's wall time (results/speed.md).
- 1 (JSON written before 2026-11-30, which lacks the field): the original serial
  float64 CPU ``torch.Generator``, kept unchanged so old reproducers, reports and
  failure-store entries replay their recorded bytes.

Each value mode means the same under both versions (``VALUE_KINDS`` in problem.py);
version 2 draws each tensor from its own stream, so a mode that changes one tensor
leaves the others' bytes alone, and builds mixed_do's row magnitudes 2^n (1 + f)
(t = n + f spread uniformly over +-value_scale decades), an exact piecewise-linear
stand-in for 2^t: the same spread of 10^(+-value_scale), without ``pow``, whose last
bit differs between devices. The structured modes (low_rank, massive_keys, ..., loss_do)
are difftest/model/structured_values.py.
"""

import math

import torch

from difftest.model import counter_rng, fp8
from difftest.model.problem import Problem
from difftest.model.structured_values import STRUCTURED

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a Problem's tensors are carried in: the dtype itself, or float32 for
    an FP8 Problem (its dequantised values; the stored bytes are ``Inputs.fp8``)."""
    return torch.float32 if fp8.is_fp8(name) else TORCH_DTYPES[name]


LOG2_10 = 3.321928094887362  # log2(10) as a literal: the same double everywhere


def _pow2(t):
    """2^n (1 + f), t = n + f (n = floor(t)): the exact piecewise-linear stand-in for 2^t
    (within 6% of it, increasing, equal at integers), built from the float's bits so no
    ``pow`` (whose last bit differs between devices and libms) is involved. ``t``: a
    float64 tensor (consumed) or a Python float."""
    if not isinstance(t, torch.Tensor):
        n = math.floor(t)
        return math.ldexp(1.0 + (t - n), n)
    n = torch.floor(t)
    f = t.sub_(n)
    e = n.to(torch.int64).clamp_(-1022, 1023).add_(1023)
    return f.add_(1.0).mul_(e.bitwise_left_shift_(52).view(torch.float64))


def large_do_top(dtype: str, value_scale: float) -> float:
    """The largest dO row magnitude of ``values="large_do"``: ~10^value_scale (``_pow2``),
    held at max finite(dtype) / ``counter_rng.normal_bound()`` so that no dO element, a
    bounded normal times its row's magnitude, rounds to an infinity in ``dtype``."""
    safe = float(torch.finfo(torch_dtype(dtype)).max) / counter_rng.normal_bound()
    return min(_pow2(value_scale * LOG2_10), safe)


def draw_v2(p: Problem, device: torch.device):
    """Float64 q, k, v, dO and sink of input version 2, on ``device`` (counter_rng)."""

    def normal(stream, *shape):
        return counter_rng.normal(p.seed, stream, shape, device)

    Tq, Tk = p.total_q, p.total_k
    if p.capture is not None:  # values="captured": the window of a capture file (difftest/model/capture.py)
        w = p.capture.window(p, device)
        do = w["do"] if "do" in w else normal("do", Tq, p.heads_q, p.head_dim_v)
        sink = normal("sink", p.heads_q).add_(p.sink_center) if p.sinks else None
        return w["q"], w["k"], w["v"], do, sink
    q, k, v, do = counter_rng.normals(
        p.seed,
        (
            ("q", (Tq, p.heads_q, p.head_dim_qk)),
            ("k", (Tk, p.heads_kv, p.head_dim_qk)),
            ("v", (Tk, p.heads_kv, p.head_dim_v)),
            ("do", (Tq, p.heads_q, p.head_dim_v)),
        ),
        device,
    )
    s = p.value_scale
    if p.values == "scaled":
        q, k = q.mul_(s), k.mul_(s)
    elif p.values == "near_constant":
        c = 1e-3 * s
        k = normal("base_k", 1, p.heads_kv, p.head_dim_qk) + k.mul_(c)
        v = normal("base_v", 1, p.heads_kv, p.head_dim_v) + v.mul_(c)
    elif p.values == "outlier_channels":
        n_out = max(1, p.head_dim_qk // 16)
        ch = torch.tensor(
            counter_rng.permutation_keys(p.seed, "outlier_channels", p.head_dim_qk)[:n_out], device=device
        )
        q[..., ch] *= s
        k[..., ch] *= s
    elif p.values == "negative_lse":
        # q and k aligned against one shared direction: every logit ~ -s^2 * d * scale
        u = normal("lse_direction", 1, 1, p.head_dim_qk).sign()
        q = (s * u) + q.mul_(0.1)
        k = (-s * u) + k.mul_(0.1)
    elif p.values == "mixed_do":
        u = counter_rng.uniform(p.seed, "do_magnitude", (Tq, p.heads_q, 1), device)
        t = u.mul_(2.0).sub_(1.0).mul_(s * LOG2_10)  # uniform in +-s decades, in powers of 2
        do = do.mul_(_pow2(t))
    elif p.values == "large_do":
        # row magnitudes top * 2^t, t uniform over the s decades below 0: (top 10^-s, top),
        # top = ~10^s, or the dtype's largest finite value over the normal's bound; every
        # |dO| < bound * top <= max finite, so no input is infinite, at any scale
        u = counter_rng.uniform(p.seed, "do_magnitude", (Tq, p.heads_q, 1), device)
        do = do.mul_(_pow2(u.mul_(-s * LOG2_10)).mul_(large_do_top(p.dtype, s)))
    elif p.values in STRUCTURED:
        q, k, v, do = STRUCTURED[p.values](p, q, k, v, do, device)
    sink = None
    if p.sinks:
        sink = normal("sink", p.heads_q).add_(p.sink_center)
    return q, k, v, do, sink


def draw_v1(p: Problem):
    """Input version 1, unchanged: one serial float64 CPU generator (JSON written before
    input_version existed replays these bytes)."""
    g = torch.Generator(device="cpu").manual_seed(p.seed)
    f64 = torch.float64

    def randn(*shape):
        return torch.randn(*shape, generator=g, dtype=f64)

    Tq, Tk = p.total_q, p.total_k
    q = randn(Tq, p.heads_q, p.head_dim_qk)
    k = randn(Tk, p.heads_kv, p.head_dim_qk)
    v = randn(Tk, p.heads_kv, p.head_dim_v)
    do = randn(Tq, p.heads_q, p.head_dim_v)
    s = p.value_scale
    if p.values == "scaled":
        q, k = q * s, k * s
    elif p.values == "near_constant":
        base_k = randn(1, p.heads_kv, p.head_dim_qk)
        base_v = randn(1, p.heads_kv, p.head_dim_v)
        k = base_k + 1e-3 * s * k
        v = base_v + 1e-3 * s * v
    elif p.values == "outlier_channels":
        n_out = max(1, p.head_dim_qk // 16)
        ch = torch.randperm(p.head_dim_qk, generator=g)[:n_out]
        q[..., ch] *= s
        k[..., ch] *= s
    elif p.values == "negative_lse":
        u = randn(1, 1, p.head_dim_qk).sign()
        q = s * u + 0.1 * q
        k = -s * u + 0.1 * k
    elif p.values == "mixed_do":
        mag = torch.pow(10.0, (torch.rand(Tq, p.heads_q, 1, generator=g, dtype=f64) * 2 - 1) * s)
        do = do * mag
    sink = None
    if p.sinks:
        sink = (p.sink_center + randn(p.heads_q)).to(torch.float32)
    return q, k, v, do, sink
