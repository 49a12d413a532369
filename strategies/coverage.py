"""Which bug-class features a Problem exercises, and a coverage table over many draws.

The features are the classes of bugs attention backward kernels are known to have (varlen,
GQA/MQA, causal alignment, tails, sinks, value-dependent bugs, softcap against the logits'
scale, negative and crossed window bounds, ALiBi: dominant, negative, per head inside a GQA group,
off the diagonal's default alignment; a relative-position table: dominant, per head inside a GQA
group, clamped distances, asymmetric, off the default alignment), plus the memory layouts (``layout:<kind>``) and
sparse masks (``sparse:<edge>``, strategies/sparsity.py).
``expected_features`` lists those a capability and profile make reachable, so a test can
demand that a fixed budget of draws hits every one.
"""

from collections import Counter
from math import sqrt

from difftest.model.capability import Capability
from difftest.model.problem import Problem
from difftest.model.profiles import get_profile

from .layouts import declared
from .shapes import SHORT, min_lengths
from .sparsity import expected_features as sparse_expected
from .sparsity import features as sparse_features
from .values import DTYPE_ORDER, value_kinds

LARGE_LOGIT = 1000.0  # far past exp()'s float32 overflow (88.7) without max subtraction
VERY_NEGATIVE_LSE = -100.0  # below exp()'s float32 underflow (-103) in magnitude


GQA_WIDE = "gqa:group>=4,kv>=2"  # where a dK/dV summed over the wrong group shows


def logit_scale(p: Problem) -> float:
    """Typical scaled logit of a visible pair (its standard deviation, or for
    ``negative_lse`` its mean, which is negative)."""
    d, sc, s = p.head_dim_qk, p.scale, p.value_scale
    if p.values == "scaled":
        return s * s * sqrt(d) * sc
    if p.values == "outlier_channels":
        n = max(1, d // 16)
        return sqrt(max(0, d - n) + n * s**4) * sc
    if p.values == "negative_lse":
        return -s * s * d * sc
    return sqrt(d) * sc


SOFTCAP_CLASSES = ("saturating", "near_logits", "far_above")
SOFTCAP_NEAR = 4.0  # a cap within this factor of the typical logit bends where the logits are


def softcap_class(cap: float, typical: float) -> str:
    """Where a softcap lies against the typical logit: ``saturating`` (below a quarter of it:
    most logits capped, 1 - tanh^2 near 0), ``near_logits``, or ``far_above`` (4x and more:
    tanh nearly the identity, the cap a rounding's worth)."""
    t = max(abs(typical), 1e-30)
    return "saturating" if cap < t / SOFTCAP_NEAR else "far_above" if cap > t * SOFTCAP_NEAR else "near_logits"


ALIBI_DOMINANT = 4.0  # a slope this many typical logits per key of distance: rows one-hot on the nearest key


REL_DOMINANT = 4.0  # a table entry this many typical logits: the bias decides the row's softmax
REL_SMALL_MAX = 1.0  # a table whose entries are all this small nudges the logits


def rel_clamped(p: Problem) -> bool:
    """Some query and key of a non-empty sequence lie farther apart than the table's R (from the
    query's diagonal, masked or not): they share the table's edge entry."""
    r = p.rel_distance
    for sq, sk in zip(p.seqlens_q, p.seqlens_k):
        if sq and sk:
            o = p.mask_offset(sq, sk)
            if max(sk - 1 - o, sq - 1 + o) > r:  # the farthest key right of / left of a diagonal
                return True
    return False


def rel_kinds(p: Problem, typical: float) -> set[str]:
    """The kinds of a relative-position table (the configuration dimension ``relpos``'s values):
    ``small`` (every entry at most REL_SMALL_MAX), ``dominant`` (an entry of REL_DOMINANT typical
    logits or more: the bias decides rows), ``clamp_edges`` (R >= 1, the interior zero, both
    edge entries not: the keys beyond R carry the bias); empty without a table."""
    if p.rel_bias is None:
        return set()
    top = max(abs(x) for row in p.rel_bias for x in row)
    out = set()
    if top <= REL_SMALL_MAX:
        out.add("small")
    if top >= REL_DOMINANT * max(abs(typical), 1e-30):
        out.add("dominant")
    if p.rel_distance >= 1 and all(row[0] and row[-1] and not any(row[1:-1]) for row in p.rel_bias):
        out.add("clamp_edges")
    return out


def rel_features(p: Problem, typical: float) -> set[str]:
    """The relative-position table's features: ``relpos``; ``relpos:dominant`` (rel_kinds);
    ``relpos:gqa_heads`` (rows that differ inside a GQA group: a head-mapping fault shows);
    ``relpos:clamped`` (a distance beyond R: the edge entries shared); ``relpos:asymmetric``
    (entry +d differs from entry -d: a distance of the wrong sign shows); ``relpos:offset``
    (sq != sk: the diagonal's alignment matters)."""
    if p.rel_bias is None:
        return set()
    f = {"relpos"}
    if "dominant" in rel_kinds(p, typical):
        f.add("relpos:dominant")
    G = p.group
    if G > 1 and any(len(set(p.rel_bias[g * G : (g + 1) * G])) > 1 for g in range(p.heads_kv)):
        f.add("relpos:gqa_heads")
    if rel_clamped(p):
        f.add("relpos:clamped")
    if any(row != row[::-1] for row in p.rel_bias):
        f.add("relpos:asymmetric")
    if p.seqlens_q != p.seqlens_k:
        f.add("relpos:offset")
    return f


def alibi_features(p: Problem, typical: float) -> set[str]:
    """ALiBi's features: ``alibi``; ``alibi:dominant`` (a slope of ALIBI_DOMINANT typical logits
    or more: one-hot rows); ``alibi:negative`` (distant keys favoured); ``alibi:gqa_heads`` (slopes
    that differ inside a GQA group: a head-mapping fault shows); ``alibi:offset`` (sq != sk: the
    diagonal's alignment matters)."""
    if p.alibi_slopes is None:
        return set()
    f = {"alibi"}
    if max(p.alibi_slopes) >= ALIBI_DOMINANT * max(abs(typical), 1e-30):
        f.add("alibi:dominant")
    if min(p.alibi_slopes) < 0:
        f.add("alibi:negative")
    G = p.group
    if G > 1 and any(len(set(p.alibi_slopes[g * G : (g + 1) * G])) > 1 for g in range(p.heads_kv)):
        f.add("alibi:gqa_heads")
    if p.seqlens_q != p.seqlens_k:
        f.add("alibi:offset")
    return f


def _len_features(prefix: str, lens, block: int) -> set[str]:
    out = set()
    for L in lens:
        if L == 1:
            out.add(f"{prefix}=1")
        for name, v in (("block-1", block - 1), ("block", block), ("block+1", block + 1)):
            if L == v and v >= 1:
                out.add(f"{prefix}={name}")
        for m in (64, 128):
            if L >= m and L % m == 0:
                out.add(f"{prefix}:multiple_of_{m}")
            if L > m and L % m:
                out.add(f"{prefix}:above_{m}_not_multiple")
    return out


def features(p: Problem, c: Capability) -> set[str]:
    f = {"batch=1" if p.batch == 1 else "batch>1", f"dtype:{p.dtype}", f"values:{p.values}", f"dim_qk={p.head_dim_qk}"}
    f.add(f"heads:{p.heads_q}/{p.heads_kv}")  # head counts as drawn
    if p.heads_q == p.heads_kv:
        f.add("heads:MHA")
    elif p.heads_kv == 1:
        f.add("heads:MQA")
        f.add(f"gqa:group={p.group}")
    else:
        f.add("heads:GQA")
        f.add(f"gqa:group={p.group}")
        if p.group >= 4:
            f.add(GQA_WIDE)
    if p.head_dim_qk != p.head_dim_v:
        f.add("dims:qk!=v")
    if p.head_dim_qk % 16 or p.head_dim_v % 16:
        f.add("dims:not_multiple_of_16")
    f |= _len_features("sq", p.seqlens_q, c.block_m)
    f |= _len_features("sk", p.seqlens_k, c.block_n)
    pairs = list(zip(p.seqlens_q, p.seqlens_k))
    if any(a > b for a, b in pairs):
        f.add("sq>sk")
    if any(a < b for a, b in pairs):
        f.add("sq<sk")
    if all(a == b for a, b in pairs):
        f.add("sq==sk")
    if p.varlen:
        f.add("varlen")
        if 0 in p.seqlens_q:
            f.add("varlen:empty_q")
        if 0 in p.seqlens_k:
            f.add("varlen:empty_k")
        if p.batch == 1:
            f.add("varlen:single")
        if p.batch >= 4 and max(p.max_seqlen_q, p.max_seqlen_k) <= SHORT:
            f.add("varlen:many_short")
        tile = max(c.block_m, c.block_n)
        longs = [i for i, (a, b) in enumerate(pairs) if max(a, b) >= min(tile, c.max_seqlen)]
        if (
            p.batch >= 2
            and len(longs) == 1
            and all(max(a, b) <= SHORT for i, (a, b) in enumerate(pairs) if i != longs[0])
        ):
            f.add("varlen:one_long")
        if p.pad_tail:
            f.add("varlen:pad_tail")
    wl, wr = p.window_left, p.window_right
    if not p.masked:
        f.add("mask:none")
    if p.causal:
        f.add(f"causal:{p.align}")
    if wl is not None or wr is not None:
        f.add(
            {(True, False): "window:left_only", (False, True): "window:right_only", (True, True): "window:both"}[
                (wl is not None, wr is not None)
            ]
        )
        if 0 in (wl, wr):
            f.add("window:zero")
        if any(w is not None and w > p.max_seqlen_k for w in (wl, wr)):
            f.add("window:wider_than_seq")
        if p.causal:
            f.add("window+causal")
    if p.masked or any(b == 0 for a, b in pairs if a):
        if any(p.key_range(i, a, b)[0] >= p.key_range(i, a, b)[1] for a, b in pairs for i in range(a)):
            f.add("fully_masked_row")
    if p.sinks:
        f.add("sinks")
        if p.sink_center >= 20:
            f.add("sink:far_above")
        if p.sink_center <= -20:
            f.add("sink:far_below")
    if any(w is not None and w < 0 for w in (wl, wr)):
        f.add(
            "negative_window:crossed"
            if p.empty_window
            else "negative_window:right_of_diagonal"
            if wl is not None and wl < 0
            else "negative_window:left_of_diagonal"
        )
    ls = logit_scale(p)
    if p.softcap is not None:
        f.add("softcap")
        f.add(f"softcap:{softcap_class(p.softcap, ls)}")
    f |= alibi_features(p, ls)
    f |= rel_features(p, ls)
    if ls >= LARGE_LOGIT:
        f.add("logits:large")
    if ls <= VERY_NEGATIVE_LSE:
        f.add("lse:very_negative")
    if p.softmax_scale is not None:
        f.add("softmax_scale:custom")
    f.add(f"layout:{p.layout.kind}")
    f |= sparse_features(p)
    return f


def expected_features(c: Capability, profile="ci") -> set[str]:
    """Features that draws inside ``c`` under ``profile`` can reach."""
    prof = get_profile(profile)
    S = min(c.max_seqlen, prof.max_seqlen)
    H = min(c.max_heads, prof.max_heads)
    e = {"batch=1", "heads:MHA", "sq==sk"} | (set() if c.causal_required else {"mask:none"})
    e |= {f"dtype:{d}" for d in DTYPE_ORDER if d in c.dtypes}
    e |= {f"values:{k}" for k in value_kinds(c)}
    dims = [d for d in c.head_dims_qk if d <= prof.max_head_dim] or [min(c.head_dims_qk)]
    e |= {f"dim_qk={d}" for d in dims}
    if min(c.max_batch, prof.max_batch) > 1:
        e.add("batch>1")
    if c.gqa and H >= 2:
        e.add("heads:MQA")
    HG = min(c.max_heads, max(prof.max_heads, prof.max_gqa_heads))
    if c.gqa and HG >= 4:
        e.add("heads:GQA")
    if c.gqa and HG >= 8:
        e.add(GQA_WIDE)
    if not c.equal_head_dims and len(set(c.head_dims_qk) | set(c.v_dims)) > 1:
        e.add("dims:qk!=v")
    if any(d % 16 for d in dims):
        e.add("dims:not_multiple_of_16")
    least_q, least_k = min_lengths(c)  # the shortest lengths drawn
    for prefix, block, least in (("sq", c.block_m, least_q), ("sk", c.block_n, least_k)):
        e |= _len_features(
            prefix,
            [
                x
                for x in (1, block - 1, block, block + 1, 64, 65, 128, 129)
                if least <= x <= S and x % c.seqlen_multiple == 0
            ],
            block,
        )
    if c.seqlen_q_ne_k:
        e |= {"sq>sk", "sq<sk"}
    if c.varlen:
        e |= {"varlen", "varlen:single"}
        if c.empty_seqs:
            e |= {"varlen:empty_q", "varlen:empty_k"}
        if min(c.max_batch, prof.max_varlen_batch) >= 4:
            e.add("varlen:many_short")
        if min(c.max_batch, prof.max_varlen_batch) >= 2 and min(max(c.block_m, c.block_n), c.max_seqlen) <= S:
            e.add("varlen:one_long")  # one sequence of a whole tile: beyond a profile shorter than the tile
        if c.pad_tail:
            e.add("varlen:pad_tail")
    if c.causal:
        e |= {f"causal:{a}" for a in c.aligns}
    if c.window:
        e |= {"window:left_only", "window:right_only", "window:both", "window:zero", "window:wider_than_seq"}
        if c.causal:
            e.add("window+causal")
    # a square problem's diagonal is visible under every causal/window rule: only sq != sk
    # (or an empty key sequence) leaves a row with no key
    if (c.seqlen_q_ne_k and ((c.causal and "bottom_right" in c.aligns) or c.window)) or (c.varlen and c.empty_seqs):
        e.add("fully_masked_row")
    if c.window and c.negative_window:
        e |= {"negative_window:right_of_diagonal", "negative_window:left_of_diagonal", "negative_window:crossed"}
    if c.sinks:
        e |= {"sinks", "sink:far_above", "sink:far_below"}
    if c.softcap:
        e |= {"softcap"} | {f"softcap:{k}" for k in SOFTCAP_CLASSES}
    if c.alibi:
        e |= {"alibi", "alibi:dominant", "alibi:negative"}
        e |= {"alibi:gqa_heads"} if c.gqa and H >= 2 else set()
        e |= {"alibi:offset"} if c.seqlen_q_ne_k and c.aligns else set()
    if c.rel_bias:
        e |= {"relpos", "relpos:dominant", "relpos:clamped", "relpos:asymmetric"}
        e |= {"relpos:gqa_heads"} if c.gqa and H >= 2 else set()
        e |= {"relpos:offset"} if c.seqlen_q_ne_k and c.aligns else set()
    kinds = value_kinds(c)
    if "scaled" in kinds or "outlier_channels" in kinds:
        e.add("logits:large")
    if "negative_lse" in kinds:
        e.add("lse:very_negative")
    if c.softmax_scale:
        e.add("softmax_scale:custom")
    e |= {f"layout:{k}" for k in declared(c) if k != "kv_broadcast" or H >= 2}
    e |= sparse_expected(c)
    return e


def beyond_profile(c: Capability, profile="ci") -> list[str]:
    """What ``c`` claims that draws under ``profile`` never reach, one phrase each: a run
    that reports every expected feature ran names these too, so a profile's cap is never a
    silent miss."""
    prof = get_profile(profile)
    out = []
    H, HG = min(c.max_heads, prof.max_heads), min(c.max_heads, max(prof.max_heads, prof.max_gqa_heads))
    if c.max_heads > H:
        out.append(
            f"heads {H + 1}..{c.max_heads} (MHA/MQA; GQA to {HG})" if HG > H else f"heads {H + 1}..{c.max_heads}"
        )
    if c.max_seqlen > prof.max_seqlen:
        out.append(f"seqlen {prof.max_seqlen + 1}..{c.max_seqlen}")
    if c.max_batch > max(prof.max_batch, prof.max_varlen_batch):
        out.append(f"batch {max(prof.max_batch, prof.max_varlen_batch) + 1}..{c.max_batch}")
    dims = sorted(d for d in set(c.head_dims_qk) if d > prof.max_head_dim)
    if dims:
        out.append("head dims " + ",".join(map(str, dims)))
    return out


def coverage_table(problems, c: Capability, profile="ci") -> str:
    """A text table: each expected (or seen) feature, how many Problems hit it."""
    counts = Counter()
    n = 0
    for p in problems:
        n += 1
        counts.update(features(p, c))
    names = sorted(expected_features(c, profile) | set(counts))
    width = max(len(x) for x in names)
    lines = [f"{'feature':<{width}}  {'count':>6}  share", "-" * (width + 16)]
    for name in names:
        k = counts.get(name, 0)
        lines.append(f"{name:<{width}}  {k:>6}  {k / max(1, n):6.1%}" + ("   MISSING" if k == 0 else ""))
    lines.append(f"{n} problems")
    return "\n".join(lines)
