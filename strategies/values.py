"""Value strategies: dtype, input value distribution and its scale, sinks, softmax scale.

Value distributions are Problem.values / value_scale (see difftest/model/inputs.py). Each kind
has a ladder of scales, mildest first, bounded per dtype so inputs stay representable
while logits reach the dtype's safe range. Everything shrinks toward float32 (when
allowed), standard-normal values, no sinks and the default softmax scale.
"""

from hypothesis import strategies as st

from difftest.errors import InputError
from difftest.model.capability import Capability
from difftest.model.capture import PROBLEM_DTYPES, CaptureSlice
from difftest.model.problem import (
    CAPTURED,
    FP8_DTYPES,
    MAX_ALIBI_SLOPE,
    MAX_REL_BIAS,
    MAX_REL_DISTANCE,
    VALUE_KINDS,
    Problem,
    standard_alibi_slopes,
)
from difftest.model.profiles import get_profile

# shrink order: the simplest first; the FP8 formats last, drawn only for a capability that
# lists them (a capability without them draws exactly as before)
DTYPE_ORDER = ("float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2")

# (ladder of named scales, mildest first; float range drawn the other half of the time)
SCALES = {
    "normal": ((1.0,), None),
    "scaled": ((2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0), (1.0, 256.0)),
    "near_constant": ((1.0, 0.1, 0.01), (0.001, 1.0)),
    "outlier_channels": ((4.0, 16.0, 64.0, 256.0), (2.0, 256.0)),
    "negative_lse": ((1.0, 2.0, 4.0, 8.0, 16.0), (1.0, 16.0)),
    "mixed_do": ((1.0, 2.0, 3.0, 4.0, 6.0, 8.0), (0.5, 8.0)),
    # dO rows over value_scale decades up to ~10^value_scale, held (by the generator, at any
    # scale) where dO's largest element stays finite: from 4.18 up every float16 scale puts
    # the top row at 65504 / 4.32, so the gradients straddle fp16's overflow threshold
    "large_do": ((1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0), (0.5, 8.0)),
    # structured kinds (docs/values.md); the first rung of each is the mildest
    "low_rank": ((1.0, 2.0, 4.0, 8.0, 16.0, 32.0), (1.0, 32.0)),  # logits ~ scale^2
    "qk_correlated": ((1.0, 2.0, 4.0, 8.0, 16.0, 32.0), (1.0, 32.0)),  # same-token logit ~ 2 scale
    "massive_keys": ((10.0, 30.0, 100.0, 300.0, 1000.0), (10.0, 1000.0)),  # key norm ratio
    "heavy_tailed": ((1.0, 2.0, 4.0, 8.0), (1.0, 8.0)),  # Student-t, round(8 / scale) degrees of freedom
    "tied_keys": ((2.0, 4.0, 16.0, 64.0, 1024.0), (1.0, 64.0)),  # copies of each key row
    "loss_do": ((1.0, 4.0, 16.0, 64.0), (1.0, 64.0)),  # size of the sparse target
}
# largest scale per dtype: float16 inputs and their logits must stay below 65504
MAX_SCALE = {
    "float16": {"scaled": 64.0, "outlier_channels": 64.0, "mixed_do": 4.0, "low_rank": 16.0, "massive_keys": 300.0},
    "bfloat16": {},
    "float32": {},
}

SINK_CENTERS = (0.0, 2.0, -2.0, 10.0, -10.0, 30.0, -30.0, 90.0, -90.0)  # +-90: past exp's float32 overflow
SINK_RANGE = (-100.0, 100.0)
SOFTMAX_SCALES = (1.0, 0.5, 2.0, 0.01, 10.0)
# softcap: named caps (Gemma 2's 50 and 30, FA4's tests' 15, tiny ones that flatten every logit,
# one far above any), and caps relative to the problem's typical logit (values.typical_logit):
# near it (tanh bends where the logits are), well below (saturated: 1 - tanh^2 near 0), far above
SOFTCAPS = (30.0, 50.0, 15.0, 1.0, 0.1, 0.01, 1000.0)
SOFTCAP_RELATIVE = (1.0, 0.5, 2.0, 0.25, 4.0, 0.05, 100.0)
SOFTCAP_RANGE = (0.01, 1000.0)
SOFTCAP_OCTAVES = 8.0  # arbitrary caps: the typical logit times 2^[-8, 8] (log-uniform around it)


def dtypes(capability: Capability) -> st.SearchStrategy[str]:
    ordered = [d for d in DTYPE_ORDER if d in capability.dtypes]
    return st.sampled_from(ordered)


def value_kinds(capability: Capability) -> tuple[str, ...]:
    return tuple(k for k in VALUE_KINDS if capability.values is None or k in capability.values)


def clamp_scale(kind: str, scale: float, dtype: str) -> float:
    """``scale`` lowered to the largest ``kind`` may have in ``dtype``."""
    top = MAX_SCALE.get(dtype, {}).get(kind)
    return scale if top is None else min(scale, top)


@st.composite
def value_settings(draw, capability: Capability, dtype: str):
    """(values, value_scale) for the Problem."""
    kind = draw(st.sampled_from(value_kinds(capability)))
    ladder, rng = SCALES[kind]
    top = MAX_SCALE.get(dtype, {}).get(kind)
    if top is not None:
        ladder = tuple(s for s in ladder if s <= top) or ladder[:1]
        rng = None if rng is None else (rng[0], min(rng[1], top))
    if rng is None:
        return kind, draw(st.sampled_from(ladder))
    scale = draw(st.one_of(st.sampled_from(ladder), st.floats(rng[0], rng[1], allow_nan=False, allow_infinity=False)))
    return kind, float(scale)


@st.composite
def sink_settings(draw, capability: Capability):
    """(sinks, sink_center): per-head sink logits centred anywhere from far below to far
    above the row maxima."""
    if not capability.sinks or not draw(st.booleans()):
        return False, 0.0
    center = draw(
        st.one_of(st.sampled_from(SINK_CENTERS), st.floats(*SINK_RANGE, allow_nan=False, allow_infinity=False))
    )
    return True, float(center)


def softmax_scales(capability: Capability) -> st.SearchStrategy[float | None]:
    """None (1/sqrt(head_dim_qk)) three draws in four, else a named or arbitrary scale."""
    if not capability.softmax_scale:
        return st.none()
    custom = st.one_of(st.sampled_from(SOFTMAX_SCALES), st.floats(0.01, 10.0, allow_nan=False, allow_infinity=False))
    # a custom scale one draw in four: 0..2 (the shrink target) keep the default
    return st.integers(0, 3).flatmap(lambda k: custom if k == 3 else st.none())


def softcap_settings(capability: Capability, typical: float) -> st.SearchStrategy[float | None]:
    """None (no cap) three draws in four, else a named cap, a cap relative to the typical
    logit ``typical`` (coverage.logit_scale: caps near the logits' scale, below and far above
    them) or any log-uniform around it, within SOFTCAP_RANGE. Shrinks toward no cap, then the
    first named cap."""
    if not capability.softcap:
        return st.none()

    def clamp(c: float) -> float:
        return min(SOFTCAP_RANGE[1], max(SOFTCAP_RANGE[0], c))

    t = abs(typical)
    rel = [clamp(float(f"{r * t:.3g}")) for r in SOFTCAP_RELATIVE]
    caps = st.one_of(
        st.sampled_from(SOFTCAPS),
        st.sampled_from(list(dict.fromkeys(rel))),
        st.floats(-SOFTCAP_OCTAVES, SOFTCAP_OCTAVES).map(lambda e: clamp(t * 2.0**e)),
    )
    return st.integers(0, 3).flatmap(lambda k: caps if k == 3 else st.none())


# ALiBi slopes: the geometric ones' range (2^-8..2^-1), zero, tiny, ones that dominate a logit
# of ~1 (8 and 16: each key of distance puts e^-8 on it: rows one-hot on their diagonal key) and
# small negative ones (distant keys favoured); and slopes relative to the problem's typical logit
# (ALIBI_RELATIVE: one that dominates it, whatever the values). A float16 slope stays at most 16, so
# slope x distance stays inside float16 at every length a profile draws (an attn_mask carries it).
ALIBI_SLOPES = (0.5, 0.0625, 2.0**-8, 1.0, 0.0, 1e-6, 8.0, 16.0, -0.25)
ALIBI_RANGE = (-0.5, 16.0)
ALIBI_RELATIVE = (4.0, 16.0)
ALIBI_MAX = {"float16": 16.0}  # else MAX_ALIBI_SLOPE


def alibi_settings(capability: Capability, heads_q: int, dtype: str, typical: float) -> st.SearchStrategy[tuple | None]:
    """None (no ALiBi) three draws in four, else one slope per query head: the paper's
    geometric slopes, one named, arbitrary or dominant (relative to the typical logit
    ``typical``) slope for every head, or each head its own (a GQA group's heads differ: a
    head-mapping fault shows). Shrinks toward no ALiBi, then the geometric slopes."""
    if not capability.alibi or dtype in FP8_DTYPES:
        return st.none()
    top = ALIBI_MAX.get(dtype, MAX_ALIBI_SLOPE)
    relative = sorted({min(top, float(f"{r * abs(typical):.3g}")) for r in ALIBI_RELATIVE})
    slope = st.one_of(
        st.sampled_from(ALIBI_SLOPES),
        st.floats(0.0, ALIBI_RANGE[1], allow_nan=False, allow_infinity=False),
        st.floats(ALIBI_RANGE[0], 0.0, exclude_max=True, allow_nan=False, allow_infinity=False),
        st.sampled_from(relative),
    )
    slopes = st.one_of(
        st.just(standard_alibi_slopes(heads_q)),
        slope.map(lambda m: (m,) * heads_q),
        st.lists(slope, min_size=heads_q, max_size=heads_q).map(tuple),
    )
    return st.integers(0, 3).flatmap(lambda k: slopes if k == 3 else st.none())


# Relative-position bias tables (Problem.rel_bias): the clamp distance R (smallest first: R = 0 is
# one entry per head, a per-head constant), and the entries' kinds: small ones (the logits still
# decide), ones relative to the typical logit (REL_RELATIVE: the bias decides the row's softmax),
# each head its own row (a GQA head-mapping fault shows), and a clamp-boundary table (interior
# zero, the two edge entries large and of opposite signs: every key beyond R shares an edge, so a
# distance clamped or signed wrongly moves the row's weight). A float16 entry stays at most
# REL_MAX["float16"] so a bias plus ALiBi's stays inside float16 (an attn_mask carries it).
REL_DISTANCES = (2, 1, 0, 3, 4, 8, MAX_REL_DISTANCE)
REL_KINDS = ("small", "relative", "per_head", "clamp_edges")
REL_SMALL = 1.0
REL_RELATIVE = (4.0, 16.0)
REL_MAX = {"float16": 256.0}  # else MAX_REL_BIAS


def rel_bias_tables(dtype: str, heads_q: int, typical: float, kinds=REL_KINDS) -> st.SearchStrategy[tuple]:
    """A relative-position table of ``heads_q`` rows: R from REL_DISTANCES, entries of one of
    ``kinds`` (REL_KINDS's comment); float32 (the Problem rounds them)."""
    top = REL_MAX.get(dtype, MAX_REL_BIAS)
    big = sorted({min(top, float(f"{r * max(abs(typical), 1e-3):.3g}")) for r in REL_RELATIVE})

    def table(r: int, kind: str) -> st.SearchStrategy[tuple]:
        width = 2 * r + 1
        small = st.floats(-REL_SMALL, REL_SMALL, allow_nan=False, allow_infinity=False, width=32)
        large = st.sampled_from(big).flatmap(lambda b: st.sampled_from((b, -b)))
        row = st.lists(st.one_of(small, large) if kind == "relative" else small, min_size=width, max_size=width)
        if kind == "small":
            return row.map(lambda x: (tuple(x),) * heads_q)
        if kind == "relative":  # large entries where they fall: rows the bias decides
            return row.map(lambda x: (tuple(x),) * heads_q)
        if kind == "per_head":  # each query head its own row: a GQA group's heads differ
            return st.lists(
                st.one_of(row, large.map(lambda b: [b * (c - r) / max(r, 1) for c in range(width)])),
                min_size=heads_q,
                max_size=heads_q,
            ).map(lambda rows: tuple(tuple(x) for x in rows))
        # clamp_edges: interior zero, the far-left and far-right entries large and opposite
        return large.map(lambda b: ((b,) + (0.0,) * (width - 2) + (-b,) if width > 1 else (b,),) * heads_q)

    return st.tuples(st.sampled_from(REL_DISTANCES), st.sampled_from(kinds)).flatmap(lambda rk: table(*rk))


def rel_bias_settings(
    capability: Capability, heads_q: int, dtype: str, typical: float
) -> st.SearchStrategy[tuple | None]:
    """None (no table) three draws in four, else a relative-position table (``rel_bias_tables``).
    Shrinks toward no table, then R = 2 with small entries shared by every head."""
    if not capability.rel_bias or dtype in FP8_DTYPES:
        return st.none()
    return st.integers(0, 3).flatmap(lambda k: rel_bias_tables(dtype, heads_q, typical) if k == 3 else st.none())


# ---------------------------------------------------------------- captured activations
def captured_problems(cap, capability: Capability, profile="ci") -> st.SearchStrategy:
    """Problems whose q/k/v(/dO) are windows of a capture (``difftest.model.capture``,
    ``difftest run --values-from``): a recorded call the kernel can take, a run of batches,
    a run of key/value heads with their query heads, a query and a key token window
    (causal calls: both windows end on the same token, bottom-right aligned, so every query
    keeps the keys it saw up to the window's start), and a dtype the kernel takes (the
    call's own first). Everything shrinks toward the first batch, head and token and the
    smallest windows. Raises ValueError when no call fits the kernel."""
    prof = get_profile(profile)
    c = capability
    fits = [
        call
        for call in cap.calls
        if call.head_dim_qk in c.head_dims_qk
        and call.head_dim_v in c.v_dims
        and (call.head_dim_qk == call.head_dim_v or not c.equal_head_dims)
        and (call.heads_q == call.heads_kv or c.gqa)
        and (c.causal or (not call.causal and not c.causal_required))
        and min(call.seqlen_q, call.seqlen_k) >= max(c.min_seqlen_q, c.min_seqlen_k, c.seqlen_multiple)
        and call.heads_q // call.heads_kv <= min(c.max_heads, prof.max_heads)
    ]
    if not fits:
        raise InputError(
            f"{cap.path}: no recorded call fits the kernel (head dims, GQA, causal, lengths): "
            f"calls {[(x.head_dim_qk, x.head_dim_v, x.heads_q, x.heads_kv, x.causal) for x in cap.calls]}"
        )
    m = c.seqlen_multiple

    @st.composite
    def draw_one(draw):
        call = draw(st.sampled_from(fits))
        g = call.heads_q // call.heads_kv
        batch = draw(st.integers(1, max(1, min(call.batch, c.max_batch, prof.max_batch))))
        heads_kv = draw(st.integers(1, max(1, min(call.heads_kv, min(c.max_heads, prof.max_heads) // g))))
        top = min(c.max_seqlen, prof.max_seqlen)
        lo_q, lo_k = max(c.min_seqlen_q, m), max(c.min_seqlen_k, m)
        sq = draw(st.integers(lo_q, max(lo_q, min(call.seqlen_q, top)))) // m * m
        sk = sq if not c.seqlen_q_ne_k else draw(st.integers(lo_k, max(lo_k, min(call.seqlen_k, top)))) // m * m
        causal = call.causal or c.causal_required
        align = "bottom_right"
        if causal and sq != sk and "bottom_right" not in c.aligns:
            align = "top_left"
        b0 = draw(st.integers(0, call.batch - batch))
        h0 = draw(st.integers(0, call.heads_kv - heads_kv))
        if causal and call.seqlen_q == call.seqlen_k and align == "bottom_right":
            end = draw(st.integers(max(sq, sk), call.seqlen_q))  # both windows end on this token
            q0, k0 = end - sq, end - sk
        else:
            q0 = draw(st.integers(0, call.seqlen_q - sq))
            k0 = draw(st.integers(0, call.seqlen_k - sk))
        own = PROBLEM_DTYPES[call.dtype]
        dts = [own] + [d for d in DTYPE_ORDER if d != own]
        dtype = draw(st.sampled_from([d for d in dts if d in c.dtypes]))
        default = 1.0 / (call.head_dim_qk**0.5)
        scale = call.scale if c.softmax_scale and abs(call.scale - default) > 1e-12 * default else None
        sl = CaptureSlice(cap.path, cap.sha256, call.index, call.extents, call.dtype, call.has_do, b0, h0, q0, k0)
        return Problem(
            batch=batch,
            seqlen_q=sq,
            seqlen_k=sk,
            heads_q=heads_kv * g,
            heads_kv=heads_kv,
            head_dim_qk=call.head_dim_qk,
            head_dim_v=call.head_dim_v,
            dtype=dtype,
            causal=causal,
            align=align,
            softmax_scale=scale,
            values=CAPTURED,
            capture=sl,
            seed=0,
        )

    def ok(p):
        try:
            p.validate()
        except ValueError:
            return False
        return c.excludes(p) is None

    return draw_one().filter(ok)
