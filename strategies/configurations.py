"""Configurations: the corners of a kernel's declared space, as dimensions a campaign covers.

Most attention-kernel bugs live at one corner of the configuration space: a head dim, a GQA
ratio with a head dim, a dtype with a head dim, a mask kind, an empty sequence. A fixed grid
finds them because it visits every configuration; random draws visit them by luck (a drawn
head dim shrank with the sequence lengths, so 81% of an FA4 campaign ran head dim 8). Here
the space a capability declares is cut into *dimensions* (a name and its values, cheapest
first); a Problem exercises a set of values of each (``values_of``: a varlen batch holds
several length classes), and a *configuration* (one value per dimension) is realised as the
cheapest Problem that has it (``realise``). ``plan`` lays configurations out as a covering
array (covertable), so that every pair of values (t = 2) is run at least once;
``claimed_pairs`` lists the pairs some Problem inside the capability can exercise, which is
what coverage is measured against (``pair_coverage``).

The dimensions, each only where the capability and profile reach two or more values:

- ``dtype``; ``head_dim_qk``; ``head_dim_v`` (where the head dims may differ);
- ``group`` (the GQA ratio heads_q / heads_kv: 1 is MHA) and ``heads_kv`` (1, or 2 and more:
  a reduction over the wrong group or a head stride shows only with several key heads);
- ``mask`` (none, causal, a window's left / right / both sides, causal with a window; where
  declared, a window with a negative side and one whose bounds cross: rows with no key) and
  ``align`` (the mask's diagonal on unequal lengths; ``n/a`` where it cannot matter);
- ``length`` (short, a tile edge, long rows; ``decode``: one query token in every sequence
  against two keys or more, where seqlen_q may differ from seqlen_k) and ``relation``
  (seqlen_q equal to, shorter or longer than seqlen_k);
- ``batching`` (dense, a dense batch, varlen, varlen with an empty query or key sequence,
  varlen with unused tail tokens);
- ``sinks``, ``softcap`` (none or capped) and ``alibi`` (none or slopes: in turn the paper's
  geometric slopes, one slope per head that differ inside a GQA group, one that dominates the
  typical logit, a negative one) and ``relpos`` (none, or a relative-position table: ``small``
  entries, ``dominant`` ones that decide the rows, ``clamp_edges``: the interior zero and the
  two edges large, so only keys beyond R carry a bias; each query head its own row, so a GQA
  head-mapping fault shows) where declared, ``layout``, and ``softmax_scale`` where the
  compile key names it;
- ``sparsity`` (none, a block-sparse mask, one at its edges: a row with no block or every block
  dropped; a top-k selection, one with invalid and duplicate slots), where the capability
  declares sparse block sizes (strategies/sparsity.py).

Value kinds are not a dimension: the coverage phase hands each configuration the next kind
in turn (``free``), and the value search explores kinds and scales inside configurations.
"""

import random
import zlib
from dataclasses import dataclass
from itertools import combinations, product

from difftest.model.capability import Capability
from difftest.model.layouts import Layout
from difftest.model.problem import MAX_ALIBI_SLOPE, MAX_REL_BIAS, Problem, ProblemError, standard_alibi_slopes
from difftest.model.profiles import get_profile

from .coverage import logit_scale, rel_kinds
from .covering_array import covering_rows
from .layouts import declared
from .masks import UNMASKED_ALIGN, mask_kinds
from .shapes import min_lengths
from .sparsity import SPARSITY_CLASSES, realise_sparsity, sparsity_class, sparsity_kinds
from .values import (
    ALIBI_MAX,
    ALIBI_RELATIVE,
    DTYPE_ORDER,
    REL_MAX,
    REL_RELATIVE,
    SINK_CENTERS,
    SOFTCAP_RANGE,
    SOFTCAP_RELATIVE,
    SOFTMAX_SCALES,
    clamp_scale,
    value_kinds,
)

SHORT = 16  # a "short" sequence has at most this many tokens
GROUPS = (1, 2, 3, 4, 6, 8, 16)  # GQA ratios worth a configuration (3 and 6: packing not a power of two)
NA = "n/a"  # a dimension that does not apply to a Problem (the alignment of no mask)
MASKS = ("none", "causal", "window_left", "window_right", "window_both", "causal_window")
# where the capability declares negative_window: a window with a negative side, and crossed bounds
NEGATIVE_MASKS = ("window_negative", "window_crossed")
SOFTCAP = ("none", "capped")
ALIBI = ("none", "slopes")
RELPOS = ("none", "small", "dominant", "clamp_edges")
BATCHINGS = ("dense", "batched", "varlen", "varlen_empty_q", "varlen_empty_k", "varlen_pad_tail")
RELATIONS = ("equal", "q_shorter", "q_longer")
# decode: one query against many keys, every sequence (a decoding step): kernels route it to
# their own paths (FA's PackGQA packs a GQA group's queries into one tile; cuDNN's THD GQA
# with s_q 1 left Stats unwritten, cudnn-frontend#1083), which the other classes reach by luck
LENGTHS = ("short", "tile_edge", "long", "decode")
DEFAULT_VALUES = Problem.__dataclass_fields__["values"].default  # what a Problem draws when nothing says
VARIANTS = 8  # realisations tried per configuration (lengths, windows, seeds), cheapest first
# A kernel declaring more head dims than this gets representatives (``head_dim_values``): every
# pair of 256 head dims is 65,536 pairs, and listing which of them the capability claims took
# sdpa-math's campaign 38 s of a 40 s budget on an H100 host before its first case.
HEAD_DIMS_KEPT = 32


@dataclass(frozen=True)
class Dimension:
    """One configuration dimension: its name and the values a capability declares, cheapest first."""

    name: str
    values: tuple

    def __str__(self):
        return f"{self.name}({', '.join(map(str, self.values))})"


def _reach(c: Capability, prof) -> dict:
    """The sizes draws under ``prof`` reach inside ``c``."""
    S = max(1, min(c.max_seqlen, prof.max_seqlen))
    H = max(1, min(c.max_heads, prof.max_heads))
    HG = max(H, min(c.max_heads, prof.max_gqa_heads))
    return {
        "S": S,
        "H": H,
        "HG": HG,
        "tile": max(c.block_m, c.block_n),
        "batch": max(1, min(c.max_batch, prof.max_batch)),
        "varlen_batch": max(1, min(c.max_batch, prof.max_varlen_batch)),
    }


def tile_edges(c: Capability) -> set[int]:
    """Lengths at a tile's edge: one below, at and one past each of the kernel's tiles, 64 and 128."""
    return {b + d for b in {c.block_m, c.block_n, 64, 128} for d in (-1, 0, 1) if b + d >= 1}


def head_dim_values(declared) -> list[int]:
    """The head dims a dimension lists: all of them up to ``HEAD_DIMS_KEPT``, else the corners a
    kernel's code paths turn on (1-8, each power of two from 16 and its neighbours, multiples
    of 32, the largest), then the multiples of 16 and of 8 from the smallest up. The value
    search still draws every declared head dim."""
    ds = sorted(set(declared))
    if len(ds) <= HEAD_DIMS_KEPT:
        return ds
    powers = [1 << k for k in range(4, 11)]
    corners = {d for d in ds if d <= 8 or d % 32 == 0 or d == ds[-1] or any(abs(d - m) <= 1 for m in powers)}
    for step in (16, 8):
        for d in ds:
            if len(corners) >= HEAD_DIMS_KEPT:
                break
            if d % step == 0:
                corners.add(d)
    return sorted(corners)


def dimensions(capability: Capability, profile="ci") -> tuple[Dimension, ...]:
    """The configuration dimensions of ``capability`` under ``profile`` (see the module docstring)."""
    c, prof = capability, get_profile(profile)
    r = _reach(c, prof)
    dims = []

    def add(name, values):
        values = tuple(dict.fromkeys(values))
        if len(values) > 1:
            dims.append(Dimension(name, values))

    add("dtype", [d for d in DTYPE_ORDER if d in c.dtypes])
    add("head_dim_qk", head_dim_values([d for d in c.head_dims_qk if d <= prof.max_head_dim] or [min(c.head_dims_qk)]))
    if not c.equal_head_dims:
        add("head_dim_v", head_dim_values([d for d in c.v_dims if d <= prof.max_head_dim] or [min(c.v_dims)]))
    kv_broadcast = "kv_broadcast" in c.layouts
    if c.gqa or kv_broadcast:
        add("group", [g for g in GROUPS if g <= (r["HG"] if c.gqa else r["H"])])
    if r["H"] >= 2:
        add("heads_kv", (1, 2))
    add("mask", [m for m in MASKS + NEGATIVE_MASKS if _mask_declared(c, m)])
    if len(c.aligns) >= 2 and c.seqlen_q_ne_k and (c.causal or c.window):
        add("align", (NA,) + tuple(c.aligns))
    add("length", [n for n in LENGTHS if _length_reachable(c, r, n)])
    if c.seqlen_q_ne_k:
        add("relation", RELATIONS)
    add("batching", [b for b in BATCHINGS if _batching_declared(c, r, prof, b)])
    if c.sinks:
        add("sinks", (False, True))
    if c.softcap:
        add("softcap", SOFTCAP)
    if c.alibi:
        add("alibi", ALIBI)
    if c.rel_bias:
        add("relpos", RELPOS)
    add("layout", declared(c))
    if "softmax_scale" in c.compile_key and c.softmax_scale:
        add("softmax_scale", ("default", "custom"))
    add("sparsity", [v for v in SPARSITY_CLASSES if v == "none" or v.split("_")[0] in sparsity_kinds(c)])
    return tuple(dims)


def _mask_declared(c: Capability, m: str) -> bool:
    kinds = mask_kinds(c)
    if m in NEGATIVE_MASKS:
        return "window" in kinds and c.negative_window
    if m.startswith("window"):
        return "window" in kinds
    return m in kinds


def _length_reachable(c: Capability, r: dict, name: str) -> bool:
    S, least = r["S"], max(min_lengths(c))
    if name == "short":
        return least <= SHORT
    if name == "tile_edge":
        return any(max(least, SHORT + 1) <= e <= S for e in tile_edges(c))
    if name == "decode":
        return c.seqlen_q_ne_k and min_lengths(c)[0] <= 1 and c.seqlen_multiple == 1 and S >= 2
    return 2 * r["tile"] + 1 <= S


def _batching_declared(c: Capability, r: dict, prof, b: str) -> bool:
    if b == "dense":
        return True
    if b == "batched":
        return r["batch"] >= 2
    if not c.varlen or r["varlen_batch"] < 2:
        return False
    if b in ("varlen_empty_q", "varlen_empty_k"):
        return c.empty_seqs
    if b == "varlen_pad_tail":
        return c.pad_tail and prof.max_pad_tail >= 1
    return True


# ---------------------------------------------------------------------------- a Problem's values
def _mask_of(p: Problem) -> str:
    if any(w is not None and w < 0 for w in (p.window_left, p.window_right)):
        return "window_crossed" if p.empty_window else "window_negative"
    window = p.window_left is not None or p.window_right is not None
    if p.causal:
        return "causal_window" if window else "causal"
    if not window:
        return "none"
    if p.window_left is not None and p.window_right is not None:
        return "window_both"
    return "window_left" if p.window_left is not None else "window_right"


def _length_classes(q: int, k: int, edges: set[int], tile: int) -> set[str]:
    out = {"decode"} if q == 1 and k >= 2 else set()
    if max(q, k) <= SHORT:
        out.add("short")
    if (q in edges or k in edges) and max(q, k) > SHORT:
        out.add("tile_edge")
    if max(q, k) > 2 * tile:
        out.add("long")
    return out


def _relation(q: int, k: int) -> str:
    return "equal" if q == k else "q_shorter" if q < k else "q_longer"


def values_of(p: Problem, capability: Capability, dims) -> dict:
    """The values of each dimension in ``dims`` that ``p`` exercises (a set each; empty where
    none: a Problem whose every sequence is empty has no length class)."""
    c = capability
    pairs = [(q, k) for q, k in zip(p.seqlens_q, p.seqlens_k) if q and k]
    edges, tile = tile_edges(c), max(c.block_m, c.block_n)
    out = {}
    for d in dims:
        n = d.name
        if n == "dtype":
            v = {p.dtype}
        elif n == "head_dim_qk":
            v = {p.head_dim_qk}
        elif n == "head_dim_v":
            v = {p.head_dim_v}
        elif n == "group":
            v = {p.group}
        elif n == "heads_kv":
            v = {1 if p.heads_kv == 1 else 2}
        elif n == "mask":
            v = {_mask_of(p)}
        elif n == "align":
            v = {p.align} if p.masked and any(q != k for q, k in pairs) else {NA}
        elif n == "length":
            v = set().union(*(_length_classes(q, k, edges, tile) for q, k in pairs)) if pairs else set()
        elif n == "relation":
            v = {_relation(q, k) for q, k in pairs}
        elif n == "batching":
            if not p.varlen:
                v = {"dense" if p.batch == 1 else "batched"}
            else:
                v = {"varlen"}
                if 0 in p.seqlens_q:
                    v.add("varlen_empty_q")
                if 0 in p.seqlens_k:
                    v.add("varlen_empty_k")
                if p.pad_tail:
                    v.add("varlen_pad_tail")
        elif n == "sinks":
            v = {p.sinks}
        elif n == "layout":
            v = {p.layout.kind}
        elif n == "softmax_scale":
            v = {"default" if p.softmax_scale is None else "custom"}
        elif n == "sparsity":
            v = {sparsity_class(p)}
        elif n == "softcap":
            v = {"none" if p.softcap is None else "capped"}
        elif n == "alibi":
            v = {"none" if p.alibi_slopes is None else "slopes"}
        elif n == "relpos":
            v = rel_kinds(p, logit_scale(p)) if p.rel_bias is not None else {"none"}
        else:  # pragma: no cover - dimensions() names only the above
            raise KeyError(n)
        out[n] = v & set(d.values)
    return out


Pair = tuple  # ((dim, value), ...) sorted by dimension order, t entries


def decoding_only(values: dict) -> bool:
    """A Problem whose only length class is a decoding step (``values_of``'s ``length``)."""
    return values.get("length") == {"decode"}


def pairs_of(values: dict, dims, strength: int = 2) -> set:
    """Every t-tuple of (dimension, value) that a Problem with these ``values`` exercises. A
    decoding step alone (its only length class ``decode``) exercises only tuples with it: one
    query row leaves dK and dV rank one and most of a tile idle, so a fault other rows show
    (bfloat16 dK at one head dim) hides there, and the pair must still run on a fuller row."""
    # each dimension's (name, value) items once, not once per combination it is in
    items = [tuple((d.name, v) for v in sorted(values.get(d.name, ()), key=str)) for d in dims]
    decoding = decoding_only(values)
    out = set()
    for combo in combinations(items, strength):
        if decoding and not any(it and it[0][0] == "length" for it in combo):
            continue
        out.update(product(*combo))
    return out


def pair_text(pair: Pair) -> str:
    return " x ".join(f"{n}={v}" for n, v in pair)


# ---------------------------------------------------------------------------- realisation
def _rng(config: dict, variant: int) -> random.Random:
    key = repr(sorted((k, repr(v)) for k, v in config.items())) + f"#{variant}"
    return random.Random(zlib.crc32(key.encode()))


def _lengths(c: Capability, r: dict, cls: str, rel: str, rng: random.Random) -> tuple[int, int] | None:
    """(seqlen_q, seqlen_k) of the length class and relation, or None where none fits."""
    S, tile = r["S"], r["tile"]
    least_q, least_k = min_lengths(c)
    m = c.seqlen_multiple
    if cls == "short":  # a few tokens: one or two keys hide most gradients (dQ is 0 at one key)
        hi = min(SHORT, S)
        lo = min(hi, max(4, least_q, least_k))
        main = rng.randint(lo, hi)
        other = rng.randint(min(2, main - 1), main - 1) if main > 1 else None
        if rel != "equal" and other is None:
            main = min(hi, main + 1)
            other = 1 if main > 1 else None
    elif cls == "decode":  # one query; the keys short, at a tile's edge or long, in turn
        if rel != "q_shorter" or least_q > 1 or m != 1:
            return None
        edges = sorted(e for e in tile_edges(c) if max(SHORT + 1, least_k) <= e <= S)
        keys = [rng.randint(max(2, least_k), max(2, least_k, min(SHORT, S)))]
        keys += [rng.choice(edges)] if edges else []
        keys += [rng.randint(2 * tile + 1, min(S, 4 * tile + 3))] if 2 * tile + 1 <= S else []
        return (1, keys[rng.randrange(len(keys))]) if c.seqlen_q_ne_k else None
    elif cls == "tile_edge":
        edges = sorted(e for e in tile_edges(c) if max(SHORT + 1, least_q, least_k) <= e <= S)
        if not edges:
            return None
        main = rng.choice(edges)  # every edge in turn over the rows (sq = block, block + 1, ...)
        other = rng.randint(1, max(1, min(SHORT, main - 1)))
    else:
        lo, hi = 2 * tile + 1, min(S, 4 * tile + 3)
        if lo > hi:
            return None
        main = rng.randint(lo, hi)
        other = rng.randint(max(1, main // 4), main - 1)
    if rel == "equal" or other is None:
        q = k = main
    elif rel == "q_shorter":
        q, k = other, main
    else:
        q, k = main, other
    q, k = max(q, least_q), max(k, least_k)
    q, k = -(-q // m) * m, -(-k // m) * m
    if not c.seqlen_q_ne_k:
        k = q
    return q, k


def _window(rng: random.Random, variant: int, length: int, block: int) -> int:
    widths = (1, 0, 3, max(0, block - 1), block + 1, length)
    return widths[variant % len(widths)] if variant < len(widths) else rng.randint(0, length + 1)


def realise(
    config: dict, capability: Capability, profile="ci", *, variant: int = 0, free: dict | None = None
) -> Problem | None:
    """The ``variant``-th cheapest Problem inside ``capability`` whose values include every
    value of ``config`` (dimension name -> value; a dimension left out takes its cheapest
    value), or None where that realisation is not a Problem the capability covers. ``free``
    sets what no dimension fixes (``values``, ``value_scale``, ``softmax_scale``, ``seed``)."""
    got = attempt(config, capability, profile, variant=variant, free=free)
    return got if isinstance(got, Problem) else None


def attempt(
    config: dict, capability: Capability, profile="ci", *, variant: int = 0, free: dict | None = None
) -> Problem | str:
    """``realise``'s Problem, or why there is none (one line)."""
    c, prof = capability, get_profile(profile)
    r = _reach(c, prof)
    rng = _rng(config, variant)
    f = dict(free or {})
    f.setdefault("seed", rng.randrange(2**31))
    if "values" not in f and c.values is not None and DEFAULT_VALUES not in c.values:
        f["values"] = value_kinds(c)[0]  # a kernel narrowed to other value kinds refuses the default one
    f["dtype"] = config.get("dtype", next(d for d in DTYPE_ORDER if d in c.dtypes))
    qk = config.get("head_dim_qk", min(c.head_dims_qk))
    f["head_dim_qk"] = qk
    same = c.equal_head_dims or qk in c.v_dims
    f["head_dim_v"] = config.get("head_dim_v", qk if same else min(c.v_dims))
    layout = config.get("layout", declared(c)[0])
    g = config.get("group", 2 if layout == "kv_broadcast" else 1)
    kv = config.get("heads_kv", 1)
    if layout == "kv_broadcast":
        kv = 1
    f["heads_q"], f["heads_kv"] = g * kv, kv
    f["layout"] = Layout(layout)
    # lengths: the main sequence carries the length class and the relation
    lens = _lengths(c, r, config.get("length", "short"), config.get("relation", "equal"), rng)
    if lens is None:
        return f"no {config.get('length', 'short')} lengths here"
    q, k = lens
    batching = config.get("batching", "dense")
    if batching == "dense":
        f.update(batch=1, seqlen_q=q, seqlen_k=k)
    elif batching == "batched":
        f.update(batch=2 + variant % 2 if r["batch"] >= 3 else 2, seqlen_q=q, seqlen_k=k)
    else:
        least_q, least_k = min_lengths(c)
        s = max(1, least_q, least_k, min(3, r["S"]))
        extra = {"varlen_empty_q": (0, s), "varlen_empty_k": (s, 0)}.get(batching, (s, s))
        if config.get("length") == "decode":  # every sequence a decoding step (or empty)
            extra = (min(1, extra[0]), max(2, extra[1]) if extra[1] else 0)
        seqs = [(q, k), extra] if variant % 2 == 0 else [extra, (q, k)]
        f.update(batch=2, seqlen_q=tuple(a for a, _ in seqs), seqlen_k=tuple(b for _, b in seqs))
        if batching == "varlen_pad_tail":
            f["pad_tail"] = 1 + variant % max(1, min(8, prof.max_pad_tail))
    # mask
    mask = config.get("mask", "causal" if c.causal_required else "none")
    block = c.block_n
    f["causal"] = mask in ("causal", "causal_window")
    if mask in ("window_left", "window_both", "causal_window"):
        f["window_left"] = _window(rng, variant, max(q, k), block)
    if mask in ("window_right", "window_both"):
        f["window_right"] = _window(rng, variant + 1, max(q, k), block)
    if mask in NEGATIVE_MASKS:  # a negative left side; the right side past it or short of it
        w = 1 + _window(rng, variant, max(q, k), block)
        f["window_left"] = -w
        f["window_right"] = w + _window(rng, variant + 1, max(q, k), block) if mask == "window_negative" else w - 2
    align = config.get("align", NA)
    if mask == "none":
        f["align"] = UNMASKED_ALIGN
    else:
        f["align"] = align if align != NA else (c.aligns[0] if c.aligns else UNMASKED_ALIGN)
    if config.get("sinks", False):
        f["sinks"], f["sink_center"] = True, float(SINK_CENTERS[variant % len(SINK_CENTERS)])
    scale = config.get("softmax_scale")
    if scale == "custom":
        f["softmax_scale"] = SOFTMAX_SCALES[1 + variant % (len(SOFTMAX_SCALES) - 1)]
    elif scale == "default":
        f["softmax_scale"] = None
    if not c.softmax_scale:
        f["softmax_scale"] = None
    f["sparsity"] = realise_sparsity(config.get("sparsity", "none"), c, variant, rng)
    if "values" in f:  # the scale a value kind may have in the realised dtype (fp16's range: no inf inputs)
        f["value_scale"] = clamp_scale(f["values"], f.get("value_scale", 1.0), f["dtype"])
    if config.get("softcap") == "capped":  # a cap relative to this problem's typical logit, in turn: near it
        rel = SOFTCAP_RELATIVE[variant % len(SOFTCAP_RELATIVE)]  # first, then below (saturated) and far above
        try:
            typical = abs(logit_scale(Problem(**f)))
        except (TypeError, ValueError):
            typical = 1.0
        f["softcap"] = min(SOFTCAP_RANGE[1], max(SOFTCAP_RANGE[0], float(f"{rel * typical:.3g}")))
    if config.get("alibi") == "none":
        f["alibi_slopes"] = None
    elif config.get("alibi") == "slopes":
        f["alibi_slopes"] = _alibi_slopes(f, variant)
    rel = config.get("relpos")
    if rel == "none":
        f["rel_bias"] = None
    elif rel is not None:
        f["rel_bias"] = _rel_table(f, rel, variant, rng)
    try:
        p = Problem(**f).validate()
    except (ProblemError, TypeError, ValueError) as e:
        return str(e)
    why = c.excludes(p) or (None if _within(p, prof) else "beyond the profile's size limits")
    if why:
        return why
    got = values_of(p, c, [Dimension(n, (v,)) for n, v in config.items()])
    lost = [n for n, v in config.items() if not got[n] and v != NA]  # n/a: whatever applies
    return f"realised without {lost}" if lost else p


def _alibi_slopes(f: dict, variant: int) -> tuple:
    """A configuration's ALiBi slopes, in turn: the paper's geometric slopes (each query head its
    own: a GQA head-mapping fault shows), one slope that dominates the typical logit for every
    head, a negative one (distant keys favoured)."""
    heads = int(f.get("heads_q", 1))
    kind = variant % 3
    if kind == 0:
        return standard_alibi_slopes(heads)
    if kind == 1:
        try:
            typical = abs(logit_scale(Problem(**{**f, "alibi_slopes": None})))
        except (TypeError, ValueError):
            typical = 1.0
        top = ALIBI_MAX.get(str(f.get("dtype")), MAX_ALIBI_SLOPE)
        return (min(top, float(f"{ALIBI_RELATIVE[0] * max(typical, 1e-3):.3g}")),) * heads
    return (-0.25,) * heads


def _rel_table(f: dict, kind: str, variant: int, rng: random.Random) -> tuple:
    """A configuration's relative-position table of ``kind`` (RELPOS), each query head its own
    row: ``small`` entries in [-1, 1] (R = 2, 1, 3 in turn); ``dominant`` ones up to
    REL_RELATIVE[1] typical logits, one entry that large in every row (R = 2, 4, 1 in turn);
    ``clamp_edges``: the interior zero, the left edge +b_h and the right one -b_h (R = 1, 2 in
    turn, b_h large and different per head)."""
    heads = int(f.get("heads_q", 1))
    try:
        typical = abs(logit_scale(Problem(**{**f, "rel_bias": None})))
    except (TypeError, ValueError):
        typical = 1.0
    top = REL_MAX.get(str(f.get("dtype")), MAX_REL_BIAS)
    big = min(top, float(f"{REL_RELATIVE[1] * max(typical, 1e-3):.3g}"))
    if kind == "small":
        r = (2, 1, 3)[variant % 3]
        return tuple(tuple(round(rng.uniform(-1.0, 1.0), 3) for _ in range(2 * r + 1)) for _ in range(heads))
    if kind == "dominant":
        r = (2, 4, 1)[variant % 3]
        rows = []
        for _ in range(heads):
            row = [round(big * rng.uniform(-1.0, 1.0), 3) for _ in range(2 * r + 1)]
            row[rng.randrange(2 * r + 1)] = big * rng.choice((1.0, -1.0))
            rows.append(tuple(row))
        return tuple(rows)
    r = (1, 2)[variant % 2]
    return tuple((b,) + (0.0,) * (2 * r - 1) + (-b,) for b in (big * (1 - h / (2 * heads)) for h in range(heads)))


def _within(p: Problem, prof) -> bool:
    scores = sum(a * b for a, b in zip(p.seqlens_q, p.seqlens_k)) * p.heads_q
    return scores <= prof.max_score_elements and p.total_q + p.total_k + 2 * p.pad_tail <= prof.max_tokens


def realise_first(
    config: dict,
    capability: Capability,
    profile="ci",
    *,
    free: dict | None = None,
    accept=None,
    variants: int = VARIANTS,
) -> Problem | None:
    """The cheapest of the first ``variants`` realisations of ``config`` that ``accept`` (default:
    any) takes, or None."""
    for v in range(variants):
        p = realise(config, capability, profile, variant=v, free=free)
        if p is not None and (accept is None or accept(p)):
            return p
    return None


def in_build(built: Problem, other: Problem, capability: Capability, profile="ci") -> Problem | None:
    """``other``'s value of every field outside ``capability.compile_key``, on ``built``'s values
    of the key's fields: a Problem the configuration ``built`` compiled runs without a new build
    (a kernel whose key names the lengths, Flex's, gets another realisation's seed, values, sink
    centre and, where its key leaves them out, windows, softcap and biases), or None where that is
    no valid Problem inside the capability and the profile."""
    key = set(capability.compile_key)
    changes = {n: getattr(other, n) for n in Problem.__dataclass_fields__ if n not in key}
    try:
        p = built.replace(**changes).validate()
    except (ProblemError, TypeError, ValueError):
        return None
    if capability.excludes(p) or not _within(p, get_profile(profile)):
        return None
    return p


# ---------------------------------------------------------------------------- the plan
def claimed_pairs(capability: Capability, profile="ci", dims=None, strength: int = 2) -> tuple[set, set]:
    """(claimed, illegal): the t-tuples of values some Problem inside the capability exercises,
    and those none does (found by realising the tuple with the other dimensions at their
    cheapest values, then with each other dimension moved one value at a time)."""
    dims = dimensions(capability, profile) if dims is None else dims
    claimed, illegal = set(), set()
    doomed = _doomed_test(capability)
    for combo in combinations(dims, strength):
        for vs in product(*(d.values for d in combo)):
            pair = tuple((d.name, v) for d, v in zip(combo, vs))
            if pair in claimed:
                continue
            p = witness(dict(pair), capability, profile, dims, doomed=doomed)
            if p is None:
                illegal.add(pair)
            else:
                claimed |= pairs_of(values_of(p, capability, dims), dims, strength)
    return claimed, illegal - claimed


def witness(base: dict, capability, profile, dims, tries: int = 24, doomed=None, accept=None) -> Problem | None:
    """A Problem exercising every value of ``base``: its cheapest realisation, else one with
    another dimension moved one value, else seeded random completions; each one ``accept``
    (default: any) takes. ``doomed``: the capability's ``_doomed_test``, made once by the caller."""
    doomed = doomed or _doomed_test(capability)

    def first(config):  # realise_first(config, variants=2), skipping a configuration no variant realises
        return None if doomed(config) else realise_first(config, capability, profile, variants=2, accept=accept)

    p = first(base)
    if p is not None:
        return p
    for d in dims:
        if d.name in base:
            continue
        for v in d.values[1:]:
            p = first({**base, d.name: v})
            if p is not None:
                return p
    rng = _rng(base, -1)
    for _ in range(tries):
        row = {**{d.name: rng.choice(d.values) for d in dims if d.name not in base}, **base}
        p = first(row)
        if p is not None:
            return p
    return None


def _doomed_test(c: Capability):
    """A predicate of configurations: True only where ``attempt`` gives no Problem for any
    variant, decided from the configuration alone (no Problem built). ``claimed_pairs``
    tries tens of thousands of configurations, most of them one of these: a mask alignment
    on an unmasked problem or on equal lengths (each realised, then found "without align"),
    a broadcast K/V with two key heads or no query heads to share it, GQA on a kernel without
    it, more query heads than declared, an empty sequence where lengths must be equal. False
    says nothing. Pinned: tests/test_configurations.py compares claimed_pairs with the
    unpruned search and realises every configuration this skips."""
    unmasked = "causal" if c.causal_required else "none"
    least_q, least_k = min_lengths(c)
    default_layout = declared(c)[0]

    def doomed(config: dict) -> bool:
        align = config.get("align", NA)
        if align != NA:
            # no mask: the Problem's align is unmasked, values_of says n/a
            if config.get("mask", unmasked) == "none":
                return True
            # equal lengths (every sequence: _lengths and the varlen extras): n/a
            if config.get("relation", "equal") == "equal" and least_q == least_k:
                return True
        if config.get("length") == "decode" and config.get("relation", "equal") != "q_shorter":
            return True  # one query and two keys or more: seqlen_q shorter (_lengths)
        if not c.seqlen_q_ne_k and config.get("batching") in ("varlen_empty_q", "varlen_empty_k"):
            return True  # an empty sequence beside a non-empty one: lengths differ (Capability.excludes)
        if config.get("layout", default_layout) == "kv_broadcast":
            if config.get("heads_kv", 1) != 1:  # realised with one key head: without heads_kv
                return True
            group = config.get("group", 2)
            if group == 1:  # one query head: not a broadcast (Layout.validate)
                return True
            return group > c.max_heads  # heads_q = group (Capability.excludes)
        group = config.get("group", 1)
        if group != 1 and not c.gqa:  # heads_q != heads_kv (Capability.excludes)
            return True
        return group * config.get("heads_kv", 1) > c.max_heads  # heads_q (Capability.excludes)

    return doomed


def plan(dims, *, strength: int = 2, covered=(), illegal=(), avoid=(), salt: str = ""):
    """Configurations (dicts) covering every t-tuple of values of ``dims`` not in ``illegal``,
    lazily, cheapest values first: a covering array (covertable's greedy generator). ``covered``:
    configurations already run (their tuples need no new row); ``avoid``: (dimension names,
    predicate of a row) pairs a row must not satisfy (a finding's needs). Rows that repeat a
    ``covered`` configuration are not yielded."""
    factors = {d.name: list(d.values) for d in dims}
    if not factors:
        return iter(())
    if len(factors) < strength:
        strength = len(factors)
    constraints = []
    by_dims = {}
    for pair in illegal:
        by_dims.setdefault(tuple(n for n, _ in pair), set()).add(tuple(v for _, v in pair))
    for names, bad in by_dims.items():
        if all(n in factors for n in names):

            def legal(row, names=names, bad=bad):
                return tuple(row[n] for n in names) not in bad

            constraints.append({"operator": "fn", "requires": list(names), "evaluate": legal})
    for names, predicate in avoid:
        if all(n in factors for n in names):
            constraints.append(
                {
                    "operator": "fn",
                    "requires": list(names),
                    "evaluate": (lambda row, predicate=predicate: not predicate(row)),
                }
            )
    presets = [{n: v for n, v in row.items() if n in factors} for row in covered]
    seen = {frozenset(p.items()) for p in presets}  # as dicts compare: by items, order aside
    rows = covering_rows(factors, strength=strength, salt=salt, presets=presets, constraints=constraints)
    return (row for row in rows if frozenset(row.items()) not in seen)


def pair_coverage(
    problems, capability: Capability, profile="ci", *, strength: int = 2, claimed=None, dims=None
) -> dict:
    """Which claimed t-tuples of values the ``problems`` exercised, per dimension pair:
    {"strength", "claimed", "covered", "by_dimensions": {"a x b": [covered, claimed]},
    "missing": [pair_text...]}."""
    dims = dimensions(capability, profile) if dims is None else dims
    if claimed is None:
        claimed, _ = claimed_pairs(capability, profile, dims, strength)
    hit = set()
    for p in problems:
        hit |= pairs_of(values_of(p, capability, dims), dims, strength)
    hit &= claimed
    by = {}
    for pair in claimed:
        key = " x ".join(n for n, _ in pair)
        row = by.setdefault(key, [0, 0])
        row[1] += 1
        row[0] += pair in hit
    return {
        "strength": strength,
        "dimensions": [d.name for d in dims],
        "claimed": len(claimed),
        "covered": len(hit),
        "by_dimensions": dict(sorted(by.items())),
        "missing": sorted(pair_text(p) for p in claimed - hit),
    }
