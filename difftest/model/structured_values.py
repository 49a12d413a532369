"""The structured value kinds (``STRUCTURED_KINDS`` in problem.py), drawn by input version 2
(difftest/model/draw.py).

Activations of a trained model are not iid: they are low-rank, self-similar, have a few
huge "sink" tokens, heavy tails, repeated tokens, and the gradient dO comes from a loss
of the output. Each kind below builds one of these from the counter-based generator's
normals and uniforms with exact float64 operations only (+, -, *, /, sqrt, floor,
comparisons and gathers; every one correctly rounded or exact, and never a reduction
whose order a device could choose), so the bytes stay the same on every CPU and GPU.
docs/values.md says why each exists.

``loss_do``'s dO is O - target, O from the exact float64 forward
(difftest/model/exact_forward.py) of the rounded inputs (``make_inputs`` calls ``loss_do``).
"""

import math

import torch

from difftest.model import counter_rng
from difftest.model.exact_forward import exact_forward_o
from difftest.model.problem import Problem


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
    coef = keep.div_(torch.sqrt(ranks.to(torch.float64)).view(-1, 1)).mul_(s * d**-0.25)
    idx = torch.arange(p.heads_q, device=device) // p.group

    def build(stream, rows, heads_coef, heads_basis, noise):
        a = counter_rng.normal(p.seed, stream, (rows, heads_coef.shape[0], R), device)
        out = noise.mul_(0.01)
        for r in range(R):  # explicit sum over the rank: a fixed order on every device
            out = out.add_(a[..., r : r + 1] * heads_coef[:, r].view(1, -1, 1) * heads_basis[:, r].unsqueeze(0))
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


HEAVY_TAIL_CLIP = {
    "float16": 64.0,
    "bfloat16": 1024.0,
    "float32": 1024.0,
    # FP8: drawn in float32, scaled per tensor: one outlier of 1024 pushes the
    # bulk of the tensor toward the format's subnormals, FP8's own hazard
    "float8_e4m3fn": 1024.0,
    "float8_e5m2": 1024.0,
}


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
    return (
        _student_t(p, "t_q", q.shape, q, device),
        _student_t(p, "t_k", k.shape, k, device),
        _student_t(p, "t_v", v.shape, v, device),
        do,
    )


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


STRUCTURED = {
    "low_rank": _low_rank,
    "qk_correlated": _qk_correlated,
    "massive_keys": _massive_keys,
    "heavy_tailed": _heavy_tailed,
    "tied_keys": _tied_keys,
    "loss_do": lambda p, q, k, v, do, device: (q, k, v, do),
}  # dO: see loss_do()


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
