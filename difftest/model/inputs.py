"""Deterministic input tensors for a Problem.

The same Problem gives the same bytes on every run, machine and device
(``Inputs.digest()``, recorded as ``input_digest`` in reports, proves it). Values are
drawn in float64, shaped by the value mode (``Problem.values``), then rounded once to
the Problem's dtype. Which generator draws them is ``Problem.input_version``:

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
bit differs between devices. All tensors use the packed
THD layout (tokens of all sequences concatenated); ``bshd()`` views a dense problem as
[batch, seq, heads, dim] and ``rows(name, b)`` gives one sequence's rows.

These are the logical, contiguous tensors. The kernel receives them re-materialised in
the Problem's memory layout (``lay_out`` below, with difftest/model/layouts.py: same values, other strides,
offsets or storage); ``bshd()`` and ``rows()`` are then views of the laid-out memory.
"""

import hashlib
import math
import threading
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass

import torch

from difftest.model import counter_rng
from difftest.model.layouts import materialise
from difftest.model.problem import Problem

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    return TORCH_DTYPES[name]


@dataclass
class Inputs:
    problem: Problem
    q: torch.Tensor  # [total_q, heads_q, head_dim_qk], problem dtype
    k: torch.Tensor  # [total_k, heads_kv, head_dim_qk]
    v: torch.Tensor  # [total_k, heads_kv, head_dim_v]
    do: torch.Tensor  # [total_q, heads_q, head_dim_v]
    sink: torch.Tensor | None  # [heads_q] float32 sink logits, None without sinks
    cu_seqlens_q: torch.Tensor  # [batch + 1] int32
    cu_seqlens_k: torch.Tensor
    # dense problems under a layout (difftest/model/layouts.py): name -> the laid-out
    # [B, S, H, D] view, which the packed field above may only copy (head-major, B > 1)
    dense: dict | None = None

    TENSORS = ("q", "k", "v", "do", "sink", "cu_seqlens_q", "cu_seqlens_k")

    @property
    def device(self) -> torch.device:
        return self.q.device

    def to(self, device) -> "Inputs":
        kw = {n: (None if getattr(self, n) is None else getattr(self, n).to(device)) for n in self.TENSORS}
        return Inputs(problem=self.problem, **kw)

    def upcast(self, dtype=torch.float64) -> "Inputs":
        """The same (already rounded) values in a wider float type, for references."""
        kw = {n: getattr(self, n) for n in self.TENSORS}
        for n in ("q", "k", "v", "do", "sink"):
            if kw[n] is not None:
                kw[n] = kw[n].to(dtype)
        return Inputs(problem=self.problem, **kw)

    def bshd(self, name: str) -> torch.Tensor:
        """A dense problem's tensor as [batch, seq, heads, dim]: a view of the memory the
        kernel receives (the laid-out one under a layout)."""
        p = self.problem
        if p.varlen:
            raise ValueError("bshd() needs a dense problem; varlen problems use the packed layout")
        if self.dense and name in self.dense:
            return self.dense[name]
        t = getattr(self, name)
        s = p.seqlen_q if name in ("q", "do") else p.seqlen_k
        return t.view(p.batch, s, *t.shape[1:])

    def rows(self, name: str, b: int) -> torch.Tensor:
        """Sequence ``b``'s rows of q/do (queries) or k/v (keys), [len, heads, dim]: a view
        of the memory the kernel receives, whatever the layout."""
        p = self.problem
        if not p.varlen:
            return self.bshd(name)[b]
        cu = p.cu_seqlens_q if name in ("q", "do") else p.cu_seqlens_k
        return getattr(self, name)[cu[b]:cu[b + 1]]

    def digest(self) -> str:
        """The first 16 hex digits of the SHA-256 of every tensor's name, shape and bytes."""
        return _sha256(self._bytes(copy=False))  # hashed at once: nothing can write into them meanwhile

    def digest_later(self) -> Callable[[], str]:
        """digest() in two steps: the bytes are copied to the host now, so nothing written
        into these tensors later (a kernel that scribbles on its inputs) changes what is
        hashed; the hash runs on a thread of its own (hashlib releases the GIL), and the
        returned call waits for it. On the H200 hashing in line took ~34 ms of a TileLang
        case's ~200 (a profile of a gpu campaign); a case now overlaps it."""
        parts, result = self._bytes(copy=True), Future()

        def work():
            try:
                result.set_result(_sha256(parts))
            except BaseException as e:  # re-raised by the waiting call
                result.set_exception(e)

        threading.Thread(target=work, name="difftest-input-digest", daemon=True).start()
        return result.result

    def _bytes(self, copy: bool) -> list:
        """(name, shape, bytes as a flat uint8 host tensor) per tensor; ``copy``: never a view."""
        return [(n, tuple(t.shape), t.detach().contiguous().to("cpu", copy=copy).reshape(-1).view(torch.uint8))
                for n in self.TENSORS if (t := getattr(self, n)) is not None]


def _sha256(parts: list) -> str:
    h = hashlib.sha256()
    for n, shape, b in parts:
        h.update(n.encode())
        h.update(str(shape).encode())
        if b.numel():
            h.update(b.numpy())  # the buffer itself, no bytes copy
    return h.hexdigest()[:16]


def make_inputs(problem: Problem, device="cpu") -> Inputs:
    """Draw the inputs of ``problem`` (validated first) on ``device``."""
    p = problem.validate()
    if p.input_version == 1:
        q, k, v, do, sink = _draw_v1(p)
    else:
        q, k, v, do, sink = _draw_v2(p, torch.device(device))
    dt = torch_dtype(p.dtype)
    if p.input_version == 1:  # rounded on the CPU, as it always was, then moved
        def rnd(t):
            return t.to(dt).to(device)
    else:  # float64 -> float32 -> dtype, each step round-to-nearest-even as IEEE defines it on
        # every device, rather than whatever path torch takes from float64 to a 16-bit type
        def rnd(t):
            return t.to(torch.float32).to(dt)
    return Inputs(
        problem=p,
        q=rnd(q), k=rnd(k), v=rnd(v), do=rnd(do),
        sink=None if sink is None else sink.to(torch.float32).to(device),
        cu_seqlens_q=torch.tensor(p.cu_seqlens_q, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.tensor(p.cu_seqlens_k, dtype=torch.int32, device=device),
    )


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


def _draw_v2(p: Problem, device: torch.device):
    """Float64 q, k, v, dO and sink of input version 2, on ``device`` (counter_rng)."""
    def normal(stream, *shape):
        return counter_rng.normal(p.seed, stream, shape, device)

    Tq, Tk = p.total_q, p.total_k
    q = normal("q", Tq, p.heads_q, p.head_dim_qk)
    k = normal("k", Tk, p.heads_kv, p.head_dim_qk)
    v = normal("v", Tk, p.heads_kv, p.head_dim_v)
    do = normal("do", Tq, p.heads_q, p.head_dim_v)
    s = p.value_scale
    if p.values == "scaled":
        q, k = q.mul_(s), k.mul_(s)
    elif p.values == "near_constant":
        c = 1e-3 * s
        k = normal("base_k", 1, p.heads_kv, p.head_dim_qk) + k.mul_(c)
        v = normal("base_v", 1, p.heads_kv, p.head_dim_v) + v.mul_(c)
    elif p.values == "outlier_channels":
        n_out = max(1, p.head_dim_qk // 16)
        ch = torch.tensor(counter_rng.permutation_keys(p.seed, "outlier_channels", p.head_dim_qk)[:n_out],
                          device=device)
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
    sink = None
    if p.sinks:
        sink = normal("sink", p.heads_q).add_(p.sink_center)
    return q, k, v, do, sink


def _draw_v1(p: Problem):
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


def lay_out(inputs):
    """The Inputs a kernel receives under ``inputs.problem.layout``: the tensors the layout
    names re-materialised (same values, new strides/offsets/storage), the rest as given.
    ``inputs`` are the logical contiguous tensors from ``make_inputs``; keep them for the
    references. Dense problems also carry the [B, S, H, D] views (``Inputs.bshd``)."""
    p = inputs.problem
    layout = p.layout
    if not layout.tensors:
        return inputs
    why = layout.unfit(p)
    if why:
        raise ValueError(f"Problem.layout={layout.kind!r} is invalid: allowed {why}")
    kw = {n: getattr(inputs, n) for n in Inputs.TENSORS}
    dense = None if p.varlen else {}
    for name in layout.tensors:
        if dense is None:
            kw[name] = materialise(layout.kind, getattr(inputs, name), p.heads_q)
        else:
            y = materialise(layout.kind, inputs.bshd(name), p.heads_q)
            dense[name] = y
            kw[name] = y.reshape(-1, *y.shape[2:])  # a view where the memory allows, else a copy
    return Inputs(problem=p, dense=dense, **kw)
