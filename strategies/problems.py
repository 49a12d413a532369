"""``problems(capability, profile)``: one Hypothesis strategy over every attention Problem
a kernel declares it supports.

Composed from the strategies in shapes.py, masks.py, values.py and compile.py, drawn in
shrink-priority order so a failure shrinks to: fewer batches, fewer heads, smaller head
dims, shorter sequences, no mask (non-negative window sides first), standard-normal values,
no softcap, no ALiBi, the contiguous memory layout (then float32, seed 0), no sparse mask (drawn last,
and only for a kernel that declares one: strategies/sparsity.py). The head dims come before
the lengths, which the size budget then bounds: every declared head dim is as likely on a
long problem as on a short one.
Every Problem is legal by construction (no ``.filter``) and inside the capability.

Knobs (keyword arguments):
  budget, max_batch, max_varlen_batch, max_heads, max_seqlen, max_head_dim, max_pad_tail
      override the profile's size bounds (the capability's own limits still bind);
      ``budget`` bounds Problem.size(), the cost of the CPU reference.
  new_compile_p   probability that a draw opens a new compile configuration when the
                  capability declares ``compile_key`` (default 0.1; 1.0 = always new; left
                  as None, a CPU capability under a profile whose ``cpu_compile_configs``
                  is "corpus", the ci profile, draws only ``compile.corpus_configs``).
  warm_configs    how many compile configurations count as already compiled (default 4: the
                  edge corpus's first).
  warm            the Problems whose configurations are compiled already (a campaign passes
                  those its coverage phase ran: the value search then spreads over every
                  configuration covered, not the corpus's first four); overrides warm_configs.
"""

from hypothesis import strategies as st

from difftest.errors import InputError
from difftest.model.capability import Capability
from difftest.model.problem import Problem
from difftest.model.profiles import get_profile

from .compile import compile_pins, corpus_configs, corpus_only, warm_problems
from .coverage import logit_scale
from .layouts import layouts
from .masks import masks
from .shapes import VARLEN_PATTERNS, dense_seqlens, head_counts, head_dims, seqlen_cap, varlen_seqlens
from .sparsity import sparsities
from .values import (
    alibi_settings,
    clamp_scale,
    dtypes,
    rel_bias_settings,
    sink_settings,
    softcap_settings,
    softmax_scales,
    value_settings,
)

SEED_MAX = 2**32 - 1


def problems(
    capability: Capability,
    profile="ci",
    *,
    new_compile_p: float | None = None,
    warm_configs: int = 4,
    warm=None,
    **size_knobs,
) -> st.SearchStrategy[Problem]:
    """A strategy of valid Problems inside ``capability``, sized by ``profile``
    ("quick", "ci", "nightly", "gpu"); see the module docstring for the knobs."""
    if not isinstance(capability, Capability):
        raise TypeError(f"capability must be a difftest Capability, got {type(capability).__name__}")
    prof = get_profile(profile).with_knobs(**size_knobs)
    if new_compile_p is not None and (not isinstance(new_compile_p, (int, float)) or not 0.0 <= new_compile_p <= 1.0):
        raise InputError(f"new_compile_p={new_compile_p!r} is invalid: allowed a probability in [0, 1] or None")
    if not isinstance(warm_configs, int) or warm_configs < 1:
        raise InputError(f"warm_configs={warm_configs!r} is invalid: allowed an int >= 1")
    if new_compile_p is None and corpus_only(capability, prof):
        warm, new_compile_p = corpus_configs(capability, prof), 0.0
    elif warm is not None:  # configurations compiled already (a campaign's coverage phase): one Problem each
        warm = list({capability.compile_signature(p): p for p in warm if capability.covers(p)}.values())
        new_compile_p = 0.1 if new_compile_p is None else new_compile_p
    else:
        warm = warm_problems(capability, prof, warm_configs) if capability.compile_key else []
        new_compile_p = 0.1 if new_compile_p is None else new_compile_p
    return _problems(capability, prof, warm, float(new_compile_p))


@st.composite
def _problems(draw, c: Capability, prof, warm, new_compile_p):
    pin = draw(compile_pins(c, warm, new_compile_p))
    f = {}

    # 1. layout and heads (fewer batches, fewer heads first)
    layout_pinned = "batch" in pin
    if layout_pinned:
        varlen = isinstance(pin["seqlen_q"], tuple)
        f["batch"] = pin["batch"]
    else:
        varlen = c.varlen and draw(st.booleans())
        max_b = prof.max_varlen_batch if varlen else prof.max_batch
        f["batch"] = draw(st.integers(1, max(1, min(c.max_batch, max_b))))
    if "heads_q" in pin:
        f["heads_q"], f["heads_kv"] = pin["heads_q"], pin["heads_kv"]
    else:
        f["heads_q"], f["heads_kv"] = draw(head_counts(c, prof.max_heads, prof.max_gqa_heads))

    # 2. head dims (smaller first), every declared one as likely at any length: the lengths are
    # bounded by what the budget leaves after the head dim, not the other way round (drawn after
    # the lengths, 81% of an FA4 campaign's head dims were its smallest)
    if "head_dim_qk" in pin:
        f["head_dim_qk"], f["head_dim_v"] = pin["head_dim_qk"], pin["head_dim_v"]
    else:
        f["head_dim_qk"], f["head_dim_v"] = draw(head_dims(c, prof.max_head_dim))

    # 3. sequence lengths (shorter first), biased to the kernel's tile edges
    if layout_pinned:
        f.update(seqlen_q=pin["seqlen_q"], seqlen_k=pin["seqlen_k"], pad_tail=pin["pad_tail"])
    else:
        cap_len = seqlen_cap(c, prof, f["batch"], f["heads_q"], max(f["head_dim_qk"], f["head_dim_v"]))
        # pattern and padding are drawn for dense problems too (and ignored), so dense and
        # varlen examples take the same choices and a 1-sequence varlen failure shrinks to dense
        pattern = draw(st.sampled_from(VARLEN_PATTERNS)) if c.varlen else "mixed"
        if varlen:
            f["seqlen_q"], f["seqlen_k"] = draw(varlen_seqlens(c, f["batch"], cap_len, pattern))
        else:
            f["seqlen_q"], f["seqlen_k"] = draw(dense_seqlens(c, cap_len))
        padded = c.varlen and c.pad_tail and draw(st.booleans())
        f["pad_tail"] = draw(st.integers(1, prof.max_pad_tail)) if varlen and padded else 0
    seqs_q = f["seqlen_q"] if isinstance(f["seqlen_q"], tuple) else (f["seqlen_q"],)
    seqs_k = f["seqlen_k"] if isinstance(f["seqlen_k"], tuple) else (f["seqlen_k"],)

    # 4. mask (none first)
    if "causal" in pin:
        f.update({k: pin[k] for k in ("causal", "align", "window_left", "window_right")})
    else:
        f.update(draw(masks(c, max(seqs_q + seqs_k))))

    # 5. sinks, dtype and values (standard normal first), softmax scale
    if "sinks" in pin:
        f["sinks"], f["sink_center"] = pin["sinks"], pin["sink_center"]
    else:
        f["sinks"], f["sink_center"] = draw(sink_settings(c))
    f["dtype"] = pin["dtype"] if "dtype" in pin else draw(dtypes(c))
    if "values" in pin:
        f["values"] = pin["values"]
        f["value_scale"] = clamp_scale(pin["values"], pin["value_scale"], f["dtype"])
    else:
        f["values"], f["value_scale"] = draw(value_settings(c, f["dtype"]))
    f["softmax_scale"] = pin["softmax_scale"] if "softmax_scale" in pin else draw(softmax_scales(c))
    # softcap (none first), aimed at the scale of the logits just drawn
    if "softcap" in pin:
        f["softcap"] = pin["softcap"]
    else:
        f["softcap"] = draw(softcap_settings(c, logit_scale(Problem(**f))))
    # ALiBi (none first): its distance has the mask's diagonal, so an unmasked problem draws its align
    f["alibi_slopes"] = (
        pin["alibi_slopes"]
        if "alibi_slopes" in pin
        else draw(alibi_settings(c, f["heads_q"], f["dtype"], logit_scale(Problem(**f))))
    )
    if f["alibi_slopes"] is not None and "causal" not in pin and not _masked(f) and c.aligns:
        f["align"] = draw(st.sampled_from(c.aligns))
    if f["alibi_slopes"] is not None and f["align"] not in c.aligns and seqs_q != seqs_k:
        f["alibi_slopes"] = None  # square ALiBi only: this kernel declares no diagonal for unequal lengths
    # a relative-position table (none first): the same diagonal as ALiBi's
    f["rel_bias"] = (
        pin["rel_bias"]
        if "rel_bias" in pin
        else draw(rel_bias_settings(c, f["heads_q"], f["dtype"], logit_scale(Problem(**f))))
    )
    if f["rel_bias"] is not None and f["alibi_slopes"] is None and "causal" not in pin and not _masked(f) and c.aligns:
        f["align"] = draw(st.sampled_from(c.aligns))
    if f["rel_bias"] is not None and f["align"] not in c.aligns and seqs_q != seqs_k:
        f["rel_bias"] = None  # square tables only: this kernel declares no diagonal for unequal lengths

    # 6. memory layout (contiguous first), inside what the interface accepts
    f["layout"] = pin["layout"] if "layout" in pin else draw(layouts(c, f["heads_q"], f["heads_kv"]))

    f["seed"] = pin["seed"] if "seed" in pin else draw(st.integers(0, SEED_MAX))

    # 7. sparse mask (none first): drawn only where the capability declares sparse block sizes
    f["sparsity"] = pin["sparsity"] if "sparsity" in pin else draw(sparsities(c, max(seqs_q + seqs_k)))
    return Problem(**f).validate()


def _masked(f: dict) -> bool:
    return f.get("causal") or f.get("window_left") is not None or f.get("window_right") is not None
