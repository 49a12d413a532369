"""Domain-aware shrinking that finishes what Hypothesis's shrinker leaves.

Hypothesis shrinks the choice sequence behind a Problem, which can stall in a local
minimum (a batch of empty varlen sequences around the one that fails, three heads that
could be one) and never shrinks explicit examples at all (the edge corpus). This module
walks a failing Problem down through simpler neighbours, accepting one only while it
still fails the same way and is strictly simpler, until none is.

Simpler means a smaller ``complexity`` tuple, compared in the shrink order the project
wants: fewer sequences, fewer heads, shorter sequences, no mask (no negative window side), no
sparse mask (then the smallest one: ``Sparsity.complexity``), no sinks, no softcap, no ALiBi
(then one slope for every head), no relative-position table (then one row for every head, a
shorter R), plain values,
smaller head dims, the contiguous layout, seed 0.
"""

import time

from difftest.model.capability import Capability
from difftest.model.layouts import CONTIGUOUS, LAYOUTS
from difftest.model.problem import Problem, ProblemError


def complexity(p: Problem) -> tuple:
    return (
        p.batch,
        p.heads_q,
        p.heads_kv,
        p.max_seqlen_q + p.max_seqlen_k,
        sum(p.seqlens_q) + sum(p.seqlens_k),
        int(p.varlen),
        p.pad_tail,
        int(p.causal) + (p.window_left is not None) + (p.window_right is not None),
        sum(w is not None and w < 0 for w in (p.window_left, p.window_right)),
        p.sparsity.complexity() if p.sparsity is not None else (),
        int(p.sinks),
        abs(p.sink_center),
        int(p.softcap is not None),
        int(p.alibi),
        len(set(p.alibi_slopes or ())),
        max((abs(m) for m in p.alibi_slopes or ()), default=0.0),
        int(p.rel),
        p.rel_distance,
        len(set(p.rel_bias or ())),
        max((abs(x) for row in p.rel_bias or () for x in row), default=0.0),
        int(p.values != "normal"),
        p.value_scale,
        int(p.softmax_scale is not None),
        p.head_dim_qk + p.head_dim_v,
        LAYOUTS.index(p.layout.kind) if p.layout.kind in LAYOUTS else 0,
        p.seed,
    )


def _lengths(n: int, least: int = 1, multiple: int = 1) -> list[int]:
    """Shorter lengths to try for a sequence of ``n``: empty, the shortest the kernel
    serves (``least``, its minimum; 1 without one) and the next, half, one less. None in
    1..least-1: the capability would refuse them anyway. With ``multiple`` (the
    capability's ``seqlen_multiple``) only its multiples, the candidates rounded down to one."""
    m = max(1, multiple)
    least = -(-max(1, least) // m) * m
    return sorted(
        {
            x // m * m
            for x in (0, least, least + m, 1, 2, n // 2, n - 1)
            if 0 <= x // m * m < n and (x // m * m == 0 or x // m * m >= least)
        }
    )


def neighbours(p: Problem, cap: Capability | None = None):
    """Simpler variants of ``p``, most valuable first (not yet validated). With ``cap``,
    shorter sequences stop at its minimum lengths (``min_seqlen_q``/``min_seqlen_k``)."""
    least_q, least_k = (cap.min_seqlen_q, cap.min_seqlen_k) if cap else (1, 1)
    m = cap.seqlen_multiple if cap else 1
    if p.varlen:
        sq, sk = list(p.seqlen_q), list(p.seqlen_k)  # type: ignore[arg-type]  # varlen: tuples
        for i in range(p.batch):  # drop a sequence
            if p.batch > 1:
                yield p.replace(
                    batch=p.batch - 1, seqlen_q=tuple(sq[:i] + sq[i + 1 :]), seqlen_k=tuple(sk[:i] + sk[i + 1 :])
                )
        if p.batch == 1 and sq[0] >= 1 and sk[0] >= 1:  # one sequence: dense
            yield p.replace(seqlen_q=sq[0], seqlen_k=sk[0], pad_tail=0)
        for i in range(p.batch):
            for L in _lengths(sq[i], least_q, m):
                yield p.replace(seqlen_q=tuple(sq[:i] + [L] + sq[i + 1 :]))
            for L in _lengths(sk[i], least_k, m):
                yield p.replace(seqlen_k=tuple(sk[:i] + [L] + sk[i + 1 :]))
    else:
        if p.batch > 1:
            yield p.replace(batch=1)
        # a value-dependent fault (an overflow on a few large logits) may need other values
        # once tokens are gone: each shorter length with a few seeds, as for heads below
        for L in _lengths(p.seqlen_q, least_q, m):  # type: ignore[arg-type]  # dense: ints
            if L >= 1:
                for seed in dict.fromkeys((p.seed, 0, 1, 2, 3)):
                    yield p.replace(seqlen_q=L, seed=seed)
        for L in _lengths(p.seqlen_k, least_k, m):  # type: ignore[arg-type]  # dense: ints
            if L >= 1:
                for seed in dict.fromkeys((p.seed, 0, 1, 2, 3)):
                    yield p.replace(seqlen_k=L, seed=seed)
        if p.seqlen_q != p.seqlen_k:
            yield p.replace(seqlen_k=p.seqlen_q)
        else:  # both at once: the only way down for a kernel that takes square problems only
            for L in _lengths(p.seqlen_q, max(least_q, least_k), m):  # type: ignore[arg-type]  # dense: ints
                if L >= 1:
                    yield p.replace(seqlen_q=L, seqlen_k=L)
    if p.pad_tail:
        yield p.replace(pad_tail=0)
    if p.sparsity is not None:  # no sparse mask, then a simpler one (fewer empty rows, dense, fewer slots)
        yield p.replace(sparsity=None)
        for sp in p.sparsity.simpler():
            yield p.replace(sparsity=sp)
    g = p.group
    for hq, hkv in (
        (1, 1),
        (g, 1),
        (p.heads_kv, p.heads_kv),
        (p.heads_q // 2, p.heads_kv // 2),
        (p.heads_q - p.group, p.heads_kv - 1),
    ):
        if hq >= 1 and hkv >= 1 and hq % hkv == 0 and (hq, hkv) != (p.heads_q, p.heads_kv):
            # a value-dependent fault may need other values once heads are gone: a few seeds
            for seed in dict.fromkeys((p.seed, 0, 1, 2, 3)):
                yield p.replace(heads_q=hq, heads_kv=hkv, seed=seed)
    if p.causal:
        yield p.replace(causal=False)
    if p.window_left is not None:
        yield p.replace(window_left=None)
        if p.window_left < 0:  # a crossed or shifted window may need the bound, not its sign
            yield p.replace(window_left=0)
    if p.window_right is not None:
        yield p.replace(window_right=None)
        if p.window_right < 0:
            yield p.replace(window_right=0)
    if p.softcap is not None:
        yield p.replace(softcap=None)
    if p.alibi_slopes is not None:  # no bias; one slope for every head (the first, the largest, 1, 1/2)
        yield p.replace(alibi_slopes=None)
        top = max(p.alibi_slopes, key=abs)
        for slope in dict.fromkeys((p.alibi_slopes[0], top, 1.0, 0.5)):
            yield p.replace(alibi_slopes=(slope,) * p.heads_q)
    if p.rel_bias is not None:  # no table; one row for every head (the first, the largest); a shorter R
        yield p.replace(rel_bias=None)
        top_row = max(p.rel_bias, key=lambda row: max(abs(x) for x in row))
        for row in dict.fromkeys((p.rel_bias[0], top_row)):
            yield p.replace(rel_bias=(row,) * p.heads_q)
        r = p.rel_distance
        for shorter in dict.fromkeys((0, r // 2, r - 1)):
            if 0 <= shorter < r:  # the central 2 shorter + 1 entries (distance 0 stays in the middle)
                yield p.replace(rel_bias=tuple(row[r - shorter : r + shorter + 1] for row in p.rel_bias))
    if p.sinks:
        yield p.replace(sinks=False, sink_center=0.0)
        if p.sink_center:
            yield p.replace(sink_center=0.0)
    if p.values != "normal":
        yield p.replace(values="normal", value_scale=1.0)
    if p.value_scale > 1.0:
        yield p.replace(value_scale=1.0)
        yield p.replace(value_scale=max(1.0, p.value_scale / 2))
    if p.softmax_scale is not None:
        yield p.replace(softmax_scale=None)
    dims_qk = sorted(cap.head_dims_qk) if cap else [8, 16, 32, 64]
    dims_v = sorted(cap.v_dims) if cap else dims_qk
    for d in dims_qk:
        if d < p.head_dim_qk:
            yield p.replace(head_dim_qk=d, head_dim_v=d if cap and cap.equal_head_dims else p.head_dim_v)
            if p.head_dim_v == p.head_dim_qk:
                yield p.replace(head_dim_qk=d, head_dim_v=d)
    for d in dims_v:
        if d < p.head_dim_v:
            yield p.replace(head_dim_v=d)
    if p.layout != CONTIGUOUS:
        yield p.replace(layout=CONTIGUOUS)
    if p.seed:
        yield p.replace(seed=0)


def simplify(
    problem: Problem,
    still_fails,
    capability: Capability | None = None,
    *,
    time_budget: float = 60.0,
    max_calls: int = 400,
    affordable=None,
) -> tuple[Problem, int]:
    """Greedily replace ``problem`` by a strictly simpler neighbour for which
    ``still_fails(neighbour)`` is true, until none is or the budget is spent.
    ``affordable(neighbour)``, where given, says whether a valid neighbour may be tried at
    all (a compile-bound kernel's new builds are rationed: ``hunt.py``); one it refuses is
    neither run nor counted. Returns (simplest failing Problem, calls made)."""
    t0 = time.perf_counter()
    calls = 0
    best = problem
    improved = True
    tried = set()
    while improved:
        improved = False
        for cand in neighbours(best, capability):
            if time.perf_counter() - t0 > time_budget or calls >= max_calls:
                return best, calls
            if cand in tried or not complexity(cand) < complexity(best):
                continue
            tried.add(cand)
            try:
                cand.validate()
            except ProblemError:
                continue
            if capability is not None and not capability.covers(cand):
                continue
            if affordable is not None and not affordable(cand):
                continue
            calls += 1
            if still_fails(cand):
                best, improved = cand, True
                break
    return best, calls
