"""Shape strategies: heads (MHA/GQA/MQA), head dims, dense and varlen sequence lengths.

Everything is built legal by construction (no ``.filter``), and every choice is drawn so
that Hypothesis's shrinker moves toward the simplest case: integers shrink toward their
lower bound, ``sampled_from`` toward its first element, ``one_of`` toward its first branch.
Sequence lengths are biased toward the kernel's tile edges (``Capability.block_m`` and
``block_n``) and toward multiples and non-multiples of 64 and 128.
"""

from math import isqrt

from hypothesis import strategies as st

from difftest.capability import Capability

from .profiles import Profile

SHORT = 8  # a "short" varlen sequence has at most this many tokens


def edge_lengths(lo: int, hi: int, blocks=(64, 128)) -> list[int]:
    """Sorted lengths in [lo, hi] where tiled kernels break: 0..3, and m*b-1, m*b, m*b+1
    for every block b (the kernel's tiles, plus 64 and 128), and the bounds themselves."""
    cands = {0, 1, 2, 3, lo, hi, hi - 1}
    for b in set(blocks) | {64, 128}:
        if b < 1:
            continue
        for m in range(1, hi // b + 2):
            cands.update((m * b - 1, m * b, m * b + 1))
    return sorted(x for x in cands if lo <= x <= hi)


def lengths(lo: int, hi: int, blocks=(64, 128)) -> st.SearchStrategy[int]:
    """A sequence length in [lo, hi]: half the time any value, half the time a tile edge.
    Shrinks toward ``lo`` (the plain-integer branch comes first)."""
    if hi <= lo:
        return st.just(lo)
    return st.one_of(st.integers(lo, hi), st.sampled_from(edge_lengths(lo, hi, blocks)))


def blocks_of(capability: Capability) -> tuple[int, int]:
    return (capability.block_m, capability.block_n)


def seqlen_cap(capability: Capability, profile: Profile, batch: int, heads_q: int) -> int:
    """Longest sequence to draw for this batch and head count.

    The profile's budget bounds ``batch * heads_q * S^2 * min_head_dim``; the cap never
    drops below one tile plus one (``max(block_m, block_n) + 1``, when the capability and
    profile allow that length) so tail-block bugs stay reachable at every batch size:
    that floor is the only place a drawn Problem may exceed the budget."""
    hard = min(capability.max_seqlen, profile.max_seqlen)
    dmin = min(capability.head_dims_qk)
    by_budget = isqrt(profile.budget // max(1, batch * heads_q * dmin))
    reach = max(capability.block_m, capability.block_n) + 1
    return max(1, min(hard, max(by_budget, reach)))


HEAD_LAYOUTS = ("MHA", "MQA", "GQA")  # shrink order: MQA (2/1) is smaller than GQA (4/2)


@st.composite
def head_counts(draw, capability: Capability, max_heads: int):
    """(heads_q, heads_kv), each legal ratio equally likely: MHA (group 1), MQA
    (heads_kv 1, group >= 2), GQA (heads_kv >= 2, group >= 2). Shrinks to (1, 1); a fault
    needing group > 1 shrinks to MQA 2/1, one needing several key heads to GQA 4/2."""
    h = max(1, min(capability.max_heads, max_heads))
    layouts = ["MHA"]
    if capability.gqa and h >= 2:
        layouts.append("MQA")
    if capability.gqa and h >= 4:
        layouts.append("GQA")
    layout = draw(st.sampled_from(layouts))
    if layout == "MHA":
        n = draw(st.integers(1, h))
        return n, n
    if layout == "MQA":
        return draw(st.integers(2, h)), 1
    heads_kv = draw(st.integers(2, h // 2))
    return heads_kv * draw(st.integers(2, h // heads_kv)), heads_kv


@st.composite
def head_dims(draw, capability: Capability, max_dim: int):
    """(head_dim_qk, head_dim_v) from the capability's lists, smallest first; qk != v is a
    separate choice that shrinks to "equal".

    ``max_dim`` (what the size budget leaves) clamps the drawn index instead of narrowing
    the list: the number of choices never depends on the budget, so when the shrinker
    shortens a sequence (loosening the budget) the rest of the example still replays."""
    qk_all = sorted(set(capability.head_dims_qk))
    v_all = sorted(set(capability.v_dims))
    if capability.equal_head_dims:
        qk_all = [d for d in qk_all if d in v_all] or qk_all
    qk_fit = max(1, sum(d <= max_dim for d in qk_all))
    qk = qk_all[min(draw(st.integers(0, len(qk_all) - 1)), qk_fit - 1)]
    if capability.equal_head_dims:
        return qk, qk
    if len(set(qk_all) | set(v_all)) == 1:
        return qk, v_all[0]
    differ = draw(st.booleans())
    if qk in v_all and not differ:
        return qk, qk
    others = [d for d in v_all if d != qk] or v_all
    fit = max(1, sum(d <= max(max_dim, qk) for d in others))
    return qk, others[min(draw(st.integers(0, len(others) - 1)), fit - 1)]


def key_length(sq: int, lo: int, hi: int, blocks=(64, 128)) -> st.SearchStrategy[int]:
    """A key length in [lo, hi] for a query length ``sq``, drawn as ``sq + delta``.

    Three equally likely branches, each two choices long: any delta, "equal to sq" and a
    tile edge. Drawing a delta (shrink target 0: equal lengths) rather than a second
    length lets the shrinker trade length between the two (seqlen_q=65, seqlen_k=65 ->
    seqlen_q=1, seqlen_k=65) when only the key length matters."""
    sq = min(max(sq, lo), hi)
    if hi <= lo:
        return st.just(lo)
    deltas = st.one_of(
        st.integers(lo - sq, hi - sq),
        st.sampled_from((0, 0)),
        st.sampled_from([e - sq for e in edge_lengths(lo, hi, blocks)]),
    )
    return deltas.map(lambda d: sq + d)


@st.composite
def dense_seqlens(draw, capability: Capability, cap_len: int):
    """(seqlen_q, seqlen_k) ints, both tile-edge biased; equal a third of the time,
    otherwise unequal in either direction. Shrinks toward seqlen_q = 1 first."""
    blocks = blocks_of(capability)
    sq = draw(lengths(1, cap_len, blocks))
    if not capability.seqlen_q_ne_k:
        return sq, sq
    return sq, draw(key_length(sq, 1, cap_len, blocks))


VARLEN_PATTERNS = ("short", "mixed", "one_long")


@st.composite
def varlen_seqlens(draw, capability: Capability, batch: int, cap_len: int, pattern: str):
    """(seqlens_q, seqlens_k) tuples of ``batch`` per-sequence lengths.

    ``pattern`` (one of VARLEN_PATTERNS, drawn by the caller): "short" (every sequence
    <= SHORT tokens, zeros common: many short sequences), "mixed" (each length
    edge-biased up to cap_len), "one_long" (one sequence of at least one tile among short
    ones; "mixed" when batch is 1). Zero-length query and key sequences appear when the
    capability allows empty sequences. Each key length is drawn from its query length
    (see ``key_length``) within the same range. Every sequence takes the same choices as
    a dense (seqlen_q, seqlen_k) pair, so the shrinker can turn a one-sequence varlen
    example into the dense one."""
    blocks = blocks_of(capability)
    lo = 0 if capability.empty_seqs else 1
    short_hi = max(lo, min(SHORT, cap_len))
    if pattern == "one_long" and batch == 1:
        pattern = "mixed"
    long_at = draw(st.integers(0, batch - 1)) if pattern == "one_long" else -1
    long_lo = min(cap_len, max(capability.block_m, capability.block_n))

    def bounds(i):
        if pattern == "short" or (pattern == "one_long" and i != long_at):
            return lo, short_hi
        if pattern == "one_long":
            return long_lo, cap_len
        return lo, cap_len

    sq, sk = [], []
    for i in range(batch):
        a, b = bounds(i)
        q = draw(lengths(a, b, blocks))
        sq.append(q)
        sk.append(draw(key_length(q, a, b, blocks)) if capability.seqlen_q_ne_k else q)
    return tuple(sq), tuple(sk)
