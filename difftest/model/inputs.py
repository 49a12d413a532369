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

FP8 Problems (``Problem.dtype`` in ``FP8_DTYPES``, difftest/model/fp8.py): the values are drawn
exactly as for the other dtypes and rounded to float32, then each of q, k, v and dO is
quantised with its own power-of-two scale. ``Inputs.q`` etc. then hold the *dequantised*
values in float32 (exact: the scales are powers of two), so every reference, the truth
included, sees what the kernel was handed; ``Inputs.fp8`` holds what an FP8 kernel reads,
the stored bytes and their descales (``Fp8Tensor``). ``loss_do`` takes O from the
dequantised q, k, v. The 16/32-bit dtypes draw the same bytes as before.

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

from difftest.model import counter_rng, fp8
from difftest.model.layouts import materialise
from difftest.model.problem import Problem

TORCH_DTYPES = {"float16": torch.float16, "bfloat16": torch.bfloat16, "float32": torch.float32}


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype a Problem's tensors are carried in: the dtype itself, or float32 for
    an FP8 Problem (its dequantised values; the stored bytes are ``Inputs.fp8``)."""
    return torch.float32 if fp8.is_fp8(name) else TORCH_DTYPES[name]


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
    # FP8 problems: name ("q", "k", "v", "do") -> fp8.Fp8Tensor, what an FP8 kernel is handed
    # (contiguous packed bytes and descale); q, k, v, do above hold the dequantised values
    fp8: dict | None = None

    TENSORS = ("q", "k", "v", "do", "sink", "cu_seqlens_q", "cu_seqlens_k")

    @property
    def device(self) -> torch.device:
        return self.q.device

    def to(self, device) -> "Inputs":
        kw = {n: (None if getattr(self, n) is None else getattr(self, n).to(device)) for n in self.TENSORS}
        f8 = None if self.fp8 is None else {n: t.to(device) for n, t in self.fp8.items()}
        return Inputs(problem=self.problem, fp8=f8, **kw)

    def upcast(self, dtype=torch.float64) -> "Inputs":
        """The same (already rounded) values in a wider float type, for references."""
        kw = {n: getattr(self, n) for n in self.TENSORS}
        for n in ("q", "k", "v", "do", "sink"):
            if kw[n] is not None:
                kw[n] = kw[n].to(dtype)
        return Inputs(problem=self.problem, fp8=self.fp8, **kw)

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
        """(name, shape, bytes as a flat uint8 host tensor) per tensor; ``copy``: never a view.
        Tensors on a device are packed there and brought to the host in one copy (one
        synchronisation a case, not one per tensor)."""
        named = [(n, getattr(self, n)) for n in self.TENSORS if getattr(self, n) is not None]
        flat = [t.detach().contiguous().reshape(-1).view(torch.uint8) for _, t in named]
        devices = {t.device for _, t in named}
        if len(devices) == 1 and (copy or devices != {torch.device("cpu")}):
            whole = torch.cat(flat).cpu()  # a copy: later writes into the tensors change nothing here
            flat, at = [], 0
            for size in [t.numel() * t.element_size() for _, t in named]:
                flat.append(whole[at:at + size])
                at += size
        elif copy or len(devices) > 1:
            flat = [f.to("cpu", copy=True) for f in flat]
        return [(n, tuple(t.shape), f) for (n, t), f in zip(named, flat)]


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
    q, k, v = rnd(q), rnd(k), rnd(v)
    stored = None
    if fp8.is_fp8(p.dtype):  # quantised per tensor; the references see the dequantised values
        stored = {n: fp8.Fp8Tensor.of(t, p.dtype) for n, t in (("q", q), ("k", k), ("v", v))}
        q, k, v = (stored[n].dequantised() for n in ("q", "k", "v"))
    sink = None if sink is None else sink.to(torch.float32).to(device)
    if p.values == "loss_do":  # dO from the forward of the rounded inputs
        do = loss_do(p, q, k, v, sink)
    do = rnd(do)
    if stored is not None:
        stored["do"] = fp8.Fp8Tensor.of(do, p.dtype)
        do = stored["do"].dequantised()
    return Inputs(
        problem=p,
        q=q, k=k, v=v, do=do,
        sink=sink,
        cu_seqlens_q=torch.tensor(p.cu_seqlens_q, dtype=torch.int32, device=device),
        cu_seqlens_k=torch.tensor(p.cu_seqlens_k, dtype=torch.int32, device=device),
        fp8=stored,
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
    if p.capture is not None:  # values="captured": the window of a capture file (difftest/model/capture.py)
        w = p.capture.window(p, device)
        do = w["do"] if "do" in w else normal("do", Tq, p.heads_q, p.head_dim_v)
        sink = normal("sink", p.heads_q).add_(p.sink_center) if p.sinks else None
        return w["q"], w["k"], w["v"], do, sink
    q, k, v, do = counter_rng.normals(p.seed, (("q", (Tq, p.heads_q, p.head_dim_qk)),
                                               ("k", (Tk, p.heads_kv, p.head_dim_qk)),
                                               ("v", (Tk, p.heads_kv, p.head_dim_v)),
                                               ("do", (Tq, p.heads_q, p.head_dim_v))), device)
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
    elif p.values in _STRUCTURED:
        q, k, v, do = _STRUCTURED[p.values](p, q, k, v, do, device)
    sink = None
    if p.sinks:
        sink = normal("sink", p.heads_q).add_(p.sink_center)
    return q, k, v, do, sink


# ------------------------------------------------------------------ structured kinds
# Activations of a trained model are not iid: they are low-rank, self-similar, have a few
# huge "sink" tokens, heavy tails, repeated tokens, and the gradient dO comes from a loss
# of the output. Each kind below builds one of these from the counter-based generator's
# normals and uniforms with exact float64 operations only (+, -, *, /, sqrt, floor,
# comparisons and gathers; every one correctly rounded or exact, and never a reduction
# whose order a device could choose), so the bytes stay the same on every CPU and GPU.
# docs/values.md says why each exists.

def _sequence_of(cu: tuple, total: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(sequence index, position in it, its length) of each packed row; rows past the last
    sequence (pad_tail) get index -1, position 0, length 0."""
    rows = torch.arange(total, device=device)
    ends = torch.tensor(cu[1:], device=device)
    b = torch.bucketize(rows, ends, right=True)
    inside = b < len(cu) - 1
    starts = torch.tensor(cu[:-1] + (cu[-1],), device=device)
    lens = torch.tensor([cu[i + 1] - cu[i] for i in range(len(cu) - 1)] + [0], device=device)
    b = torch.where(inside, b, torch.full_like(b, -1))
    pos = torch.where(inside, rows - starts[b.clamp_min(0)], torch.zeros_like(rows))
    return b, pos, torch.where(inside, lens[b.clamp_min(0)], torch.zeros_like(rows))


def _floor_index(u: torch.Tensor, n) -> torch.Tensor:
    """floor(u * n) as int64 for u in (0, 1): an index below n (n a number or a tensor)."""
    return torch.floor(u * n).to(torch.int64)


def low_rank_ranks(p: Problem, device="cpu") -> torch.Tensor:
    """[heads_kv] int64: the rank (1..4) of each key/value head's q and k under ``low_rank``."""
    return _floor_index(counter_rng.uniform(p.seed, "low_rank_rank", (p.heads_kv,), device), 4).add_(1)


def _low_rank(p, q, k, v, do, device):
    # q_i = s d^(-1/4) sum_r a_ir U_r / sqrt(rank) + 0.01 noise, k likewise from b_jr, one basis
    # U (rank x d) shared by a key head and its query heads (projections of the same hidden
    # states): scaled logits ~ s^2 (a . b) / rank, every row of S a combination of rank vectors
    s, d, R = p.value_scale, p.head_dim_qk, 4
    ranks = low_rank_ranks(p, device)  # [Hkv]
    basis = counter_rng.normal(p.seed, "low_rank_basis", (p.heads_kv, R, d), device)
    keep = (torch.arange(R, device=device).view(1, R) < ranks.view(-1, 1)).to(torch.float64)  # [Hkv, R]
    coef = keep.div_(torch.sqrt(ranks.to(torch.float64)).view(-1, 1)).mul_(s * d ** -0.25)
    idx = torch.arange(p.heads_q, device=device) // p.group

    def build(stream, rows, heads_coef, heads_basis, noise):
        a = counter_rng.normal(p.seed, stream, (rows, heads_coef.shape[0], R), device)
        out = noise.mul_(0.01)
        for r in range(R):  # explicit sum over the rank: a fixed order on every device
            out = out.add_(a[..., r:r + 1] * heads_coef[:, r].view(1, -1, 1) * heads_basis[:, r].unsqueeze(0))
        return out

    q = build("low_rank_q", p.total_q, coef[idx], basis[idx], q)
    k = build("low_rank_k", p.total_k, coef, basis, k)
    return q, k, v, do


def _qk_correlated(p, q, k, v, do, device):
    # a vocabulary of Tk / 8 token embeddings E; key j is the embedding of its token plus 0.1
    # noise, query i of a sequence the (value_scale * 2 / sqrt(d))-scaled embedding of the token
    # at key position i + sk - sq (self-attention over the same text) plus 0.1 noise: each
    # query's logit against every key of its own token is ~2 value_scale, ~0 against others
    s, d = p.value_scale, p.head_dim_qk
    vocab = max(2, p.total_k // 8)
    emb = counter_rng.normal(p.seed, "tokens_embedding", (vocab, p.heads_kv, d), device)
    tok_k = _floor_index(counter_rng.uniform(p.seed, "tokens_k", (p.total_k,), device), vocab)
    tok_q = _floor_index(counter_rng.uniform(p.seed, "tokens_q", (p.total_q,), device), vocab)
    bq, pos, lq = _sequence_of(p.cu_seqlens_q, p.total_q, device)
    if p.batch:
        ck = torch.tensor(p.cu_seqlens_k, device=device)
        lk = torch.tensor(p.seqlens_k, device=device)
        b = bq.clamp_min(0)
        at = pos + lk[b] - lq  # the key position that holds this query's token
        same = (bq >= 0) & (at >= 0) & (at < lk[b])
        tok_q = torch.where(same, tok_k[(ck[b] + at).clamp(0, max(0, p.total_k - 1))] if p.total_k else tok_q, tok_q)
    idx = torch.arange(p.heads_q, device=device) // p.group
    k = emb[tok_k].add_(k.mul_(0.1))
    q = emb[tok_q][:, idx].mul_(2.0 * s / math.sqrt(d)).add_(q.mul_(0.1))
    return q, k, v, do


def massive_rows(p: Problem, device="cpu") -> torch.Tensor:
    """[total_k] bool: the keys ``massive_keys`` enlarges: each sequence's first token and
    about one in 32 of the others."""
    b, pos, _ = _sequence_of(p.cu_seqlens_k, p.total_k, device)
    u = counter_rng.uniform(p.seed, "massive_tokens", (p.total_k,), device)
    return (b >= 0) & ((pos == 0) | (u < 1.0 / 32))


def _massive_keys(p, q, k, v, do, device):
    # the keys of a few tokens value_scale (10^1..10^3) times larger, as the attention sinks
    # of trained LLMs (massive activations): their logits dominate a row or vanish from it
    big = massive_rows(p, device).view(-1, 1, 1)
    return q, torch.where(big, k * p.value_scale, k), v, do


def heavy_tail_dof(value_scale: float) -> int:
    """Degrees of freedom of ``heavy_tailed`` at ``value_scale``: round(8 / value_scale) in 1..8."""
    return max(1, min(8, int(math.floor(8.0 / value_scale + 0.5))))


HEAVY_TAIL_CLIP = {"float16": 64.0, "bfloat16": 1024.0, "float32": 1024.0,
                   # FP8: drawn in float32, scaled per tensor: one outlier of 1024 pushes the
                   # bulk of the tensor toward the format's subnormals, FP8's own hazard
                   "float8_e4m3fn": 1024.0, "float8_e5m2": 1024.0}


def _student_t(p, stream, shape, z, device):
    """Student-t: z / sqrt(W / nu), W a sum of nu squared normals added in a fixed order,
    clipped to +-HEAVY_TAIL_CLIP[dtype] (a Cauchy draw can reach 10^10)."""
    nu = heavy_tail_dof(p.value_scale)
    w = torch.zeros(shape, dtype=torch.float64, device=device)
    for m in range(nu):
        g = counter_rng.normal(p.seed, f"{stream}_chi{m}", shape, device)
        w = w.add_(g.mul_(g))
    c = HEAVY_TAIL_CLIP[p.dtype]
    return z.div_(torch.sqrt(w.div_(float(nu)))).clamp_(-c, c)


def _heavy_tailed(p, q, k, v, do, device):
    return (_student_t(p, "t_q", q.shape, q, device), _student_t(p, "t_k", k.shape, k, device),
            _student_t(p, "t_v", v.shape, v, device), do)


def tied_sources(p: Problem, device="cpu") -> torch.Tensor:
    """[total_k] int64: the packed key row each key copies under ``tied_keys``: a row of its
    own sequence among the first ceil(len / value_scale), so each distinct row appears
    value_scale times on average (every key the same one once value_scale >= len)."""
    b, pos, L = _sequence_of(p.cu_seqlens_k, p.total_k, device)
    distinct = torch.ceil(L.to(torch.float64) / p.value_scale).clamp_min(1.0)
    u = counter_rng.uniform(p.seed, "tied_sources", (p.total_k,), device)
    rows = torch.arange(p.total_k, device=device)
    src = rows - pos + _floor_index(u, distinct)
    return torch.where(b >= 0, src, rows)


def _tied_keys(p, q, k, v, do, device):
    # whole key rows (every head) copied: the logits of copies are exactly equal, so ties
    # at and below the row max, with values v that differ between the copies
    return q, k[tied_sources(p, device)], v, do


_STRUCTURED = {"low_rank": _low_rank, "qk_correlated": _qk_correlated, "massive_keys": _massive_keys,
               "heavy_tailed": _heavy_tailed, "tied_keys": _tied_keys,
               "loss_do": lambda p, q, k, v, do, device: (q, k, v, do)}  # dO: see loss_do()

# exp() from exact operations: fdlibm's split of ln 2 (n * LN2_HI is exact for |n| < 2^11)
# and a degree-13 Taylor polynomial on |r| <= ln(2)/2 (error < 2^-60), evaluated by Horner
# with one multiply and one add per step as separate operations (no fused multiply-add)
_LN2_HI, _LN2_LO, _LOG2E = 6.93147180369123816490e-01, 1.90821492927058770002e-10, 1.4426950408889634
_EXP_COEFS = tuple(1.0 / math.factorial(i) for i in range(13, -1, -1))
_EXP_FLOOR = -700.0  # exp below this (< 1e-304) is taken as 0: it never moves a float64 sum of the row's max


def exact_exp(x: torch.Tensor) -> torch.Tensor:
    """exp(x) for float64 x <= 0 (-inf allowed), the same bits on every device: within a
    few ulp of exp, 0 below -700. The same operations as ever, run in place (each
    in-place step rounds exactly as the out-of-place one did)."""
    zero = x < _EXP_FLOOR
    x = x.masked_fill(zero, 0.0)
    n = torch.mul(x, _LOG2E).add_(0.5).floor_()
    r = x.sub_(n * _LN2_HI).sub_(n * _LN2_LO)  # x is this function's own copy
    y = torch.full_like(r, _EXP_COEFS[0])
    for c in _EXP_COEFS[1:]:
        y.mul_(r).add_(c)
    two_n = n.to(torch.int64).add_(1023).bitwise_left_shift_(52).view(torch.float64)
    return y.mul_(two_n).masked_fill_(zero, 0.0)


def _halve(x: torch.Tensor, n: int) -> torch.Tensor:
    """The sum over dim 0 of the ``n`` rows of ``x`` by halving, zero-padded to a power of
    two W: row i + W/2 added to row i, then i + W/4, ...: a fixed order of correctly
    rounded additions, the same bits on every device. ``x`` is overwritten. A term added
    to the padding's +0 becomes +0 where it was -0, as in the padded sum."""
    if n == 0:
        return torch.zeros(x.shape[1:], dtype=x.dtype, device=x.device)
    w = 1 << (n - 1).bit_length()
    h = w // 2
    if h:
        x[:n - h].add_(x[h:n])
        if n < w:
            x[n - h:h].add_(0.0)
    while h > 1:
        h //= 2
        x[:h].add_(x[h:2 * h])
    return x[0]


class _Scratch:
    """Work buffers reused from one row chunk to the next: a fresh multi-megabyte tensor
    per product costs page faults on the CPU that took as long as the arithmetic."""

    def __init__(self, device):
        self.device, self.bufs = device, {}

    def get(self, name: str, shape) -> torch.Tensor:
        n = math.prod(shape)
        buf = self.bufs.get(name)
        if buf is None or buf.numel() < n:
            buf = self.bufs[name] = torch.empty(n, dtype=torch.float64, device=self.device)
        return buf[:n].view(shape)


def _dot_halving(qc: torch.Tensor, kc: torch.Tensor, scratch: _Scratch) -> torch.Tensor:
    """Sum over dim 0 (the head dim D) of qc * kc by ``_halve``'s order: qc [D, H, n, 1],
    kc [D, H, 1, m] -> [H, n, m], a view of scratch memory. Every product of two float16,
    bfloat16 or float32 values is exact in float64, so the first level is a multiply-add
    whose product needs no rounding (``addcmul``: fused or not, the same bits)."""
    d = qc.shape[0]
    h = (1 << (d - 1).bit_length()) // 2
    shape = (max(h, 1), qc.shape[1], qc.shape[2], kc.shape[3])
    x = scratch.get("dot", shape)
    if h == 0:
        return torch.mul(qc, kc, out=x)[0]
    torch.mul(qc[:h], kc[:h], out=x)
    x[:d - h].addcmul_(qc[h:d], kc[h:d])
    if d < 2 * h:
        x[d - h:h].add_(0.0)
    return _halve(x, h)


def _product_halving(e: torch.Tensor, vb: torch.Tensor, scratch: _Scratch | None = None) -> torch.Tensor:
    """Sum over dim 0 (the keys) of e * vb by ``_halve``'s order: e [m, H, n, 1], vb [m, H,
    1, Dv] -> [H, n, Dv] (a view of scratch memory when ``scratch`` is given). The
    products round, so each is its own multiply, then added."""
    m = e.shape[0]
    shape = (e.shape[1], e.shape[2], vb.shape[3])
    if m == 0:
        return torch.zeros(shape, dtype=e.dtype, device=e.device)
    scratch = scratch or _Scratch(e.device)
    h = (1 << (m - 1).bit_length()) // 2
    x = scratch.get("terms", (max(h, 1), *shape))
    if h == 0:
        return torch.mul(e, vb, out=x)[0]
    torch.mul(e[:h], vb[:h], out=x)
    x[:m - h].add_(torch.mul(e[h:m], vb[h:m], out=scratch.get("upper", (m - h, *shape))))
    if m < 2 * h:
        x[m - h:h].add_(0.0)
    return _halve(x, h)


# float64 elements of the largest temporary of one row chunk of exact_forward_o: on the CPU a
# few of them stay in the 32 MiB L3 of the 2-core box; on a GPU large enough that one chunk's
# ~60 launches are far below its arithmetic (results/input-speed.md)
FORWARD_CHUNK = {"cpu": 1 << 22, "cuda": 1 << 26}


def _forward_chunk(device: torch.device) -> int:
    return FORWARD_CHUNK.get(device.type, FORWARD_CHUNK["cuda"])


def _key_block(lo: int, hi: int) -> tuple[int, int]:
    """The smallest aligned power-of-two block [a, a + 2^m) holding keys [lo, hi)."""
    m = 0
    while (lo >> m) != ((hi - 1) >> m):
        m += 1
    return (lo >> m) << m, 1 << m


def exact_forward_o(p: Problem, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                    sink: torch.Tensor | None) -> torch.Tensor:
    """O of attention over the given (rounded) tensors in float64, [total_q, heads_q,
    head_dim_v], the same bits on every device: dot products and row sums added by
    halving (``_halve``: a fixed order of correctly rounded additions), exp by
    ``exact_exp``; masks, GQA and sinks as the Problem says; O = 0 for rows that see
    nothing and tail rows.

    The sums are defined over every key of a sequence (masked ones contribute +0 to the
    denominator and a signed zero, 0 * v, to the numerator) zero-padded to a power of two.
    A row chunk only computes the keys some of its rows see: the aligned power-of-two
    block that holds them, whose halving sum equals the whole one (a term that meets
    only zeros on its way up passes through unchanged), except that the sign of a sum
    that comes out exactly 0 depends on the zeros left out. A chunk where such a 0 reaches
    O is computed again over every key; which chunks, the device is asked once, at the end."""
    f64 = torch.float64
    dev = q.device
    q, k, v = q.to(f64), k.to(f64), v.to(f64)
    hq, d, dv = p.heads_q, p.head_dim_qk, p.head_dim_v
    idx = torch.arange(hq, device=dev) // p.group
    o = torch.zeros(p.total_q, hq, dv, dtype=f64, device=dev)
    left, right = p.key_bounds()
    sink64 = None if sink is None else sink.to(f64)
    budget = _forward_chunk(dev)
    scratch = _Scratch(dev)

    def sequence(b):  # sequence b's queries [D, Hq, sq, 1], keys [D, Hq, 1, sk], values [sk, Hq, 1, Dv]
        q0, sq, k0, sk = p.cu_seqlens_q[b], p.seqlens_q[b], p.cu_seqlens_k[b], p.seqlens_k[b]
        return (q[q0:q0 + sq].permute(2, 1, 0).contiguous().unsqueeze(-1),
                k[k0:k0 + sk][:, idx].permute(2, 1, 0).contiguous().unsqueeze(2), v[k0:k0 + sk][:, idx].unsqueeze(2))

    def rows_of(b, h0, h1, r0, r1, lo, hi, tensors):
        qt, kt, vb = tensors
        out, flag = _forward_rows(p, qt[:, h0:h1, r0:r1], kt[:, h0:h1], vb[:, h0:h1], r0,
                                  p.mask_offset(p.seqlens_q[b], p.seqlens_k[b]), lo, hi,
                                  None if sink64 is None else sink64[h0:h1].view(-1, 1), scratch)
        o[p.cu_seqlens_q[b] + r0:p.cu_seqlens_q[b] + r1, h0:h1] = out.permute(1, 0, 2)
        return flag

    pending = []  # (b, h0, h1, r0, r1, flag) of the chunks that left keys out
    for b in range(p.batch):
        sq, sk = p.seqlens_q[b], p.seqlens_k[b]
        if sq == 0:
            continue
        off = p.mask_offset(sq, sk)
        tensors = sequence(b)
        width = max(d, dv, 1)
        heads = max(1, min(hq, budget // max(1, sk * width)))
        rows = max(1, budget // max(1, sk * heads * width))
        for h0 in range(0, hq, heads):
            h1 = min(hq, h0 + heads)
            for r0 in range(0, sq, rows):
                r1 = min(sq, r0 + rows)
                lo = 0 if left is None else max(0, r0 + off - left)
                hi = sk if right is None else min(sk, r1 - 1 + off + right)
                flag = rows_of(b, h0, h1, r0, r1, lo, hi, tensors)
                if flag is not None:
                    pending.append((b, h0, h1, r0, r1, flag))
    if pending:  # one wait for the device, not one per chunk
        for i in torch.stack([x[-1] for x in pending]).nonzero().flatten().tolist():
            b, h0, h1, r0, r1, _ = pending[i]
            rows_of(b, h0, h1, r0, r1, 0, p.seqlens_k[b], sequence(b))
    return o


def _forward_rows(p, qt, kt, vb, r0, off, lo, hi, sink, scratch):
    """O of query rows r0.. (qt [D, H, n, 1]) against one sequence's keys (kt [D, H, 1, sk],
    vb [sk, H, 1, Dv]): ([H, n, Dv], flag); keys outside [lo, hi) are masked for every row.
    The sums run over the keys [a, hi) of the key block [a, a + 2^m): the terms past hi are
    the padding's zeros, and hi - a > 2^(m-1), so the halving pairs the same terms. ``flag``
    (a 0-d bool tensor, None when no key was left out): a numerator entry came out exactly 0
    where O keeps its sign (the denominator > 0), so the chunk must be computed again over
    every key (lo = 0, hi = sk)."""
    f64, dev = torch.float64, qt.device
    hc, n, sk = qt.shape[1], qt.shape[2], kt.shape[3]
    if hi <= lo and sink is not None:  # no key seen: O = (0 * v summed) / 1, whose sign every key sets
        lo, hi = 0, sk
    left, right = p.key_bounds()
    a = _key_block(lo, hi)[0] if hi > lo else 0
    e = torch.zeros((max(0, hi - a), hc, n), dtype=f64, device=dev)  # keys [a, hi), H, rows; +0 where masked
    if hi > lo:
        s = _dot_halving(qt, kt[..., lo:hi], scratch).mul_(p.scale)  # [H, n, keys lo..hi]
        rel = (torch.arange(lo, hi, device=dev).view(1, -1)
               - (torch.arange(r0, r0 + n, device=dev).view(-1, 1) + off))
        ok = torch.ones_like(rel, dtype=torch.bool)
        if left is not None:
            ok &= rel >= -left
        if right is not None:
            ok &= rel < right
        s.masked_fill_(~ok, float("-inf"))
        mx = s.amax(dim=-1)  # max: exact in any order
    else:
        mx = torch.full((hc, n), float("-inf"), dtype=f64, device=dev)
    if sink is not None:
        mx = torch.maximum(mx, sink)
    mx = mx.masked_fill_(torch.isinf(mx), 0.0)
    if hi > lo:
        e[lo - a:] = exact_exp(s.sub_(mx.unsqueeze(-1))).permute(2, 0, 1)
    num = _product_halving(e.unsqueeze(-1), vb[a:hi], scratch)
    if sink is None and hi <= lo:  # no key and no sink: O = 0
        return torch.zeros_like(num), None
    denom = _halve(e.clone(), e.shape[0])
    if sink is not None:
        denom = denom + exact_exp(sink - mx)
    whole = lo == 0 and hi == sk
    flag = None if whole else ((num == 0) & (denom > 0).unsqueeze(-1)).any()
    safe = torch.where(denom > 0, denom, torch.ones_like(denom))
    return torch.where(denom.unsqueeze(-1) > 0, num / safe.unsqueeze(-1), torch.zeros_like(num)), flag


def loss_target(p: Problem, device="cpu") -> torch.Tensor:
    """[total_q, heads_q, head_dim_v] float64: the sparse target of ``loss_do``: about half
    the query rows (per head) have value_scale in one channel (sign drawn), the rest 0."""
    shape = (p.total_q, p.heads_q, 1)
    u_row = counter_rng.uniform(p.seed, "target_rows", shape, device)
    u_ch = counter_rng.uniform(p.seed, "target_channel", shape, device)
    u_sign = counter_rng.uniform(p.seed, "target_sign", shape, device)
    ch = _floor_index(u_ch, p.head_dim_v)
    hot = (torch.arange(p.head_dim_v, device=device).view(1, 1, -1) == ch) & (u_row < 0.5)
    sign = torch.where(u_sign < 0.5, -1.0, 1.0).to(torch.float64)
    return torch.where(hot, sign * p.value_scale, torch.zeros((), dtype=torch.float64, device=device))


def loss_do(p: Problem, q, k, v, sink) -> torch.Tensor:
    """dO of the loss 0.5 |O - target|^2: O - target in float64, O from ``exact_forward_o``
    on the inputs as rounded to the Problem's dtype (the float64 truth's O)."""
    return exact_forward_o(p, q, k, v, sink).sub_(loss_target(p, q.device))


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
    kw["fp8"] = inputs.fp8  # the stored FP8 bytes stay packed and contiguous
    dense = None if p.varlen else {}
    for name in layout.tensors:
        if dense is None:
            kw[name] = materialise(layout.kind, getattr(inputs, name), p.heads_q)
        else:
            y = materialise(layout.kind, inputs.bshd(name), p.heads_q)
            dense[name] = y
            kw[name] = y.reshape(-1, *y.shape[2:])  # a view where the memory allows, else a copy
    return Inputs(problem=p, dense=dense, **kw)
