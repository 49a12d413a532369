"""Shape strategies: heads (MHA/GQA/MQA), head dims, dense and varlen sequence lengths.

Everything is built legal by construction (no ``.filter``), and every choice is drawn so
that Hypothesis's shrinker moves toward the simplest case: integers shrink toward their
lower bound, ``sampled_from`` toward its first element, ``one_of`` toward its first branch.
Sequence lengths are biased toward the kernel's tile edges (``Capability.block_m`` and
``block_n``) and toward multiples and non-multiples of 64 and 128.
"""

from math import isqrt

from hypothesis import strategies as st

from difftest.model.capability import Capability
from difftest.model.profiles import Profile

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


def _index_space(lo: int, hi: int, least: int, multiple: int = 1):
    """Legal lengths in [lo, hi] when a non-empty length must be >= ``least``
    (``Capability.min_seqlen_q``/``min_seqlen_k``) and a multiple of ``multiple``
    (``Capability.seqlen_multiple``): 0 (only when ``lo`` is 0) and the multiples in
    ``least..hi``. They are drawn as indices with no gap: index 0 is length 0 and index
    i >= 1 is the i-th legal length, so no draw is ever rejected, an index shrinks toward
    the shortest legal length, and with ``least`` and ``multiple`` 1 index and length
    coincide (the draws of a capability without a minimum are unchanged). A dense, a
    varlen and a no-empty varlen length take the same index for the same length.
    ``least`` wins over ``hi`` (as ``lo`` does). Returns (lo, hi, to_length, to_index)."""
    m = max(1, multiple)
    first = -(-max(1, least) // m) * m  # the shortest legal non-empty length
    lo = 0 if lo <= 0 else max(-(-lo // m) * m, first)
    hi = max(hi // m * m, lo)
    if 0 < hi < first:
        hi = first

    def to_length(i: int) -> int:
        return first + (i - 1) * m if i > 0 else 0

    def to_index(n: int) -> int:  # a length between two legal ones takes the next one's index
        return -(-(n - first) // m) + 1 if n > 0 else 0

    return lo, hi, to_length, to_index


def _edges(lo: int, hi: int, least: int, blocks, multiple: int = 1) -> list[int]:
    """``edge_lengths`` that are legal under ``least`` and ``multiple`` (the minimum
    legal length itself is one); ``lo``/``hi`` as ``_index_space`` returns them."""
    if multiple <= 1:
        if least <= 1 or lo >= least:
            return edge_lengths(lo, hi, blocks)
        return sorted({0} | set(edge_lengths(least, hi, blocks)))
    first = -(-max(1, least) // multiple) * multiple
    out = {e for e in edge_lengths(max(lo, first), hi, blocks) if e % multiple == 0 and e > 0}
    out |= {max(lo, first), hi} | ({0} if lo == 0 else set())
    return sorted(x for x in out if lo <= x <= hi)


def lengths(lo: int, hi: int, blocks=(64, 128), least: int = 1, multiple: int = 1) -> st.SearchStrategy[int]:
    """A sequence length in [lo, hi]: half the time any value, half the time a tile edge.
    A non-zero length is at least ``least`` (see ``_index_space``). Shrinks toward ``lo``
    (the plain-integer branch comes first); and a multiple of ``multiple``."""
    lo, hi, to_length, to_index = _index_space(lo, hi, least, multiple)
    if hi <= lo:
        return st.just(lo)
    if least <= 1 and multiple <= 1:  # no gap: plain integers, exactly the draws of before the minimums
        return st.one_of(st.integers(lo, hi), st.sampled_from(edge_lengths(lo, hi, blocks)))
    return st.one_of(
        st.integers(to_index(lo), to_index(hi)).map(to_length), st.sampled_from(_edges(lo, hi, least, blocks, multiple))
    )


def blocks_of(capability: Capability) -> tuple[int, int]:
    return (capability.block_m, capability.block_n)


def seqlen_cap(capability: Capability, profile: Profile, batch: int, heads_q: int, head_dim: int | None = None) -> int:
    """Longest sequence to draw for this batch, head count and head dim (default: the
    capability's smallest).

    The profile's budget bounds ``batch * heads_q * S^2 * head_dim``; the cap never
    drops below one tile plus one (``max(block_m, block_n) + 1``, when the capability and
    profile allow that length) so tail-block bugs stay reachable at every batch size:
    that floor, and the capability's minimum sequence lengths (which also win over the
    profile's ``max_seqlen``), are the only places a drawn Problem may exceed the budget."""
    hard = min(capability.max_seqlen, profile.max_seqlen)
    dim = head_dim or min(capability.head_dims_qk)
    by_budget = isqrt(profile.budget // max(1, batch * heads_q * dim))
    reach = max(capability.block_m, capability.block_n) + 1
    least = max(min_lengths(capability))  # <= capability.max_seqlen
    return max(least, min(hard, max(by_budget, reach)))


HEAD_LAYOUTS = ("MHA", "MQA", "GQA")  # shrink order: MQA (2/1) is smaller than GQA (4/2)


@st.composite
def head_counts(draw, capability: Capability, max_heads: int, max_gqa_heads: int = 0):
    """(heads_q, heads_kv), each legal ratio equally likely: MHA (group 1), MQA
    (heads_kv 1, group >= 2), GQA (heads_kv >= 2, group >= 2). Shrinks to (1, 1); a fault
    needing group > 1 shrinks to MQA 2/1, one needing several key heads to GQA 4/2.
    GQA draws reach ``max(max_heads, max_gqa_heads)`` query heads (within the capability):
    a wrong group reduction needs group >= 3 with >= 2 KV heads (8/2) to show."""
    h = max(1, min(capability.max_heads, max_heads))
    hg = max(h, min(capability.max_heads, max_gqa_heads))
    layouts = ["MHA"]
    # MQA also when the kernel takes only MHA calls but declares the kv_broadcast layout
    # (one K/V head expanded with stride 0: an MHA call); strategies/layouts.py then pins it
    if (capability.gqa or "kv_broadcast" in capability.layouts) and h >= 2:
        layouts.append("MQA")
    if capability.gqa and hg >= 4:
        layouts.append("GQA")
    layout = draw(st.sampled_from(layouts))
    if layout == "MHA":
        n = draw(st.integers(1, h))
        return n, n
    if layout == "MQA":
        return draw(st.integers(2, h)), 1
    heads_kv = draw(st.integers(2, hg // 2))
    return heads_kv * draw(st.integers(2, hg // heads_kv)), heads_kv


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


def key_length(
    sq: int, lo: int, hi: int, blocks=(64, 128), least: int = 1, multiple: int = 1
) -> st.SearchStrategy[int]:
    """A key length in [lo, hi] for a query length ``sq``, drawn as ``sq + delta``; a
    non-zero key length is at least ``least`` (``Capability.min_seqlen_k``: the delta is
    counted in ``_index_space``, and "equal" means the legal length nearest ``sq``).

    Three equally likely branches, each two choices long: any delta, "equal to sq" and a
    tile edge. Drawing a delta (shrink target 0: equal lengths) rather than a second
    length lets the shrinker trade length between the two (seqlen_q=65, seqlen_k=65 ->
    seqlen_q=1, seqlen_k=65) when only the key length matters."""
    lo, hi, to_length, to_index = _index_space(lo, hi, least, multiple)
    if hi <= lo:
        return st.just(lo)
    sq = min(max(sq, lo), hi)
    if 0 < sq < least:
        sq = least
    i = min(to_index(sq), to_index(hi))  # with least 1 (no gap) i == sq: the deltas of before the minimums
    deltas = st.one_of(
        st.integers(to_index(lo) - i, to_index(hi) - i),
        st.sampled_from((0, 0)),
        st.sampled_from([to_index(e) - i for e in _edges(lo, hi, least, blocks, multiple)]),
    )
    return deltas.map(lambda d: to_length(i + d))


@st.composite
def dense_seqlens(draw, capability: Capability, cap_len: int):
    """(seqlen_q, seqlen_k) ints, both tile-edge biased; equal a third of the time,
    otherwise unequal in either direction; never below the capability's
    ``min_seqlen_q``/``min_seqlen_k`` (both, when the two must be equal). Shrinks toward
    the shortest seqlen_q first."""
    blocks = blocks_of(capability)
    least_q, least_k = min_lengths(capability)
    m = capability.seqlen_multiple
    sq = draw(lengths(least_q, cap_len, blocks, least_q, m))
    if not capability.seqlen_q_ne_k:
        return sq, sq
    return sq, draw(key_length(sq, least_k, cap_len, blocks, least_k, m))


def min_lengths(capability: Capability) -> tuple[int, int]:
    """The shortest non-empty (query, key) lengths to draw: the capability's minimums,
    each raised to the other's when the two lengths must be equal, and up to a multiple
    of ``seqlen_multiple``."""
    q, k = capability.min_seqlen_q, capability.min_seqlen_k
    if not capability.seqlen_q_ne_k:
        q = k = max(q, k)
    m = capability.seqlen_multiple
    return -(-q // m) * m, -(-k // m) * m


VARLEN_PATTERNS = ("short", "mixed", "one_long")


@st.composite
def varlen_seqlens(draw, capability: Capability, batch: int, cap_len: int, pattern: str):
    """(seqlens_q, seqlens_k) tuples of ``batch`` per-sequence lengths.

    ``pattern`` (one of VARLEN_PATTERNS, drawn by the caller): "short" (every sequence
    <= SHORT tokens, zeros common: many short sequences), "mixed" (each length
    edge-biased up to cap_len), "one_long" (one sequence of at least one tile among short
    ones; "mixed" when batch is 1). Zero-length query and key sequences appear when the
    capability allows empty sequences; every non-empty one is at least the capability's
    ``min_seqlen_q``/``min_seqlen_k`` ("short" then means "as short as allowed"). Each key
    length is drawn from its query length (see ``key_length``) within the same range.
    Every sequence takes the same choices as a dense (seqlen_q, seqlen_k) pair, so the
    shrinker can turn a one-sequence varlen example into the dense one."""
    blocks = blocks_of(capability)
    least_q, least_k = min_lengths(capability)
    lo = 0 if capability.empty_seqs else 1
    short_hi = max(lo, min(SHORT, cap_len))  # lengths() lifts it to the minimum if need be
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
        m = capability.seqlen_multiple
        q = draw(lengths(a, b, blocks, least_q, m))
        sq.append(q)
        sk.append(draw(key_length(q, a, b, blocks, least_k, m)) if capability.seqlen_q_ne_k else q)
    return tuple(sq), tuple(sk)
