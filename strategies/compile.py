"""Compile-aware drawing: reuse JIT-compiled configurations most of the time.

A capability may name ``compile_key`` fields (Problem fields whose change forces a new
JIT compile). ``problems()`` then draws each Problem either in a *warm* configuration
(its compile-key fields, and the fields they depend on, copied from one of the first
``warm_configs`` distinct configurations of ``edge_problems``, which every campaign
compiles first anyway) or, with probability ``new_compile_p``, in a freshly drawn one.

The choice is a Hypothesis draw, not state kept between examples, so a failing example
replays and shrinks exactly (shrinking moves toward warm configuration 0). It is a biased
coin (``Coin``): a uniform integer would not do, because Hypothesis over-samples simple
values (0 alone is ~17% of draws of integers(0, 999)), which halved the measured rate.
The coin holds for keys that leave most fields free; a key that pins nearly every field
(flex's) gets more new configurations than ``new_compile_p``: Hypothesis's generate phase
also mutates each example (copies spans with the same label), a fresh example has many such
spans and a warm one few, so fresh ones beget more fresh ones (flex, gpu profile, 300 draws:
p=0.1 gives 42% new, 12% with the mutator disabled; p=0.03 gives 12-22%).

Corpus mode (``corpus_only``: a profile whose ``cpu_compile_configs`` is "corpus", the ci
profile, and a CPU capability whose compile key holds only dtype, head dims and sinks): a
TileLang build on the CPU costs seconds of CPU each, so ci draws never open a fresh
configuration. Every draw takes one of ``corpus_configs``: the edge corpus's
configurations, then one per compile-key value the corpus lacks (so every dtype, head dim
and sinks setting the profile reaches still runs). ``difftest run`` builds exactly these
before the first campaign (difftest/run/prebuild.py), on every core. What ci then never runs,
a configuration outside that set, is the coverage feature ``compile:new_configuration``
(``compile_coverage``), listed as missing; nightly and gpu keep drawing fresh ones.
"""

from collections import Counter
from dataclasses import fields

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from difftest.model.capability import Capability, compile_signature
from difftest.model.problem import Problem, ProblemError
from difftest.model.profiles import get_profile

from .edges import edge_problems

NEW_CONFIG = "compile:new_configuration"  # a case compiled in a configuration outside corpus_configs
# compile-key fields whose every value corpus_configs can reach (each has a finite domain in
# the capability); a key with shape fields (batch, seqlen) keeps drawing fresh configurations
ENUMERABLE = ("dtype", "head_dim_qk", "head_dim_v", "sinks")

# Fields drawn together: pinning one pins the rest so the Problem stays legal.
GROUPS = (
    ("batch", "seqlen_q", "seqlen_k", "pad_tail"),
    ("heads_q", "heads_kv"),
    ("head_dim_qk", "head_dim_v"),
    ("causal", "align", "window_left", "window_right"),
    ("sinks", "sink_center"),
    ("values", "value_scale"),
)
# One-way dependencies: pinning the key's field pins these too (a pinned ``kv_broadcast``
# layout is legal only with the heads it was drawn with), not the other way round.
DEPENDS = {"layout": ("heads_q", "heads_kv")}


class Coin(SearchStrategy):
    """True with probability ``p``; shrinks to False. Hypothesis's own biased boolean
    (``ConjectureData.draw_boolean(p)``), which ``st.booleans()`` only offers at p = 1/2."""

    def __init__(self, p: float):
        super().__init__()
        self.p = float(p)

    def do_draw(self, data):
        return data.draw_boolean(self.p)

    def __repr__(self):
        return f"Coin({self.p})"


def pinned_fields(compile_key) -> tuple[str, ...]:
    """The compile-key fields, the fields they depend on (``DEPENDS``), and every field
    drawn in a group with one of them."""
    out = set(compile_key)
    for f in compile_key:
        out.update(DEPENDS.get(f, ()))
    for group in GROUPS:
        if out.intersection(group):
            out.update(group)
    return tuple(sorted(out))


def warm_problems(capability: Capability, profile, count: int | None) -> list[Problem]:
    """Problems with the first ``count`` (None: every) distinct compile signatures of the edge
    corpus, in its order."""
    seen, warm = set(), []
    for p in edge_problems(capability, profile):
        if count is not None and len(warm) >= count:
            break
        sig = capability.compile_signature(p)
        if sig not in seen:
            seen.add(sig)
            warm.append(p)
    return warm


def corpus_only(capability: Capability, profile) -> bool:
    """Whether draws under ``profile`` keep to ``corpus_configs`` (see the module docstring)."""
    key = capability.compile_key
    return (
        bool(key)
        and capability.device == "cpu"
        and get_profile(profile).cpu_compile_configs == "corpus"
        and set(key) <= set(ENUMERABLE)
    )


def _domains(c: Capability, prof) -> dict:
    """Each enumerable compile-key field's values that draws under ``prof`` reach."""
    qk = [d for d in c.head_dims_qk if d <= prof.max_head_dim] or [min(c.head_dims_qk)]
    v = [d for d in c.v_dims if d <= prof.max_head_dim] or [min(c.v_dims)]
    return {"dtype": list(c.dtypes), "head_dim_qk": qk, "head_dim_v": v, "sinks": [False, True] if c.sinks else [False]}


def corpus_configs(capability: Capability, profile) -> list[Problem]:
    """One Problem per compile configuration of the edge corpus (its order), then, for each
    value of a compile-key field (dtype, head dims, sinks) that none of them has, the first
    corpus Problem with that value (head dims kept equal where the capability demands it)."""
    c, prof = capability, get_profile(profile)
    out = warm_problems(c, prof, None)
    seen = {c.compile_signature(p) for p in out}
    if not out:
        return out
    for f, values in _domains(c, prof).items():
        if f not in c.compile_key:
            continue
        for v in values:
            if any(getattr(p, f) == v for p in out):
                continue
            change = {f: v}
            if c.equal_head_dims and f in ("head_dim_qk", "head_dim_v"):
                change = {"head_dim_qk": v, "head_dim_v": v}
            try:
                p = out[0].replace(**change).validate()
            except (ProblemError, ValueError):
                continue
            if c.excludes(p) is None and c.compile_signature(p) not in seen:
                seen.add(c.compile_signature(p))
                out.append(p)
    return out


def compile_coverage(problems, capability: Capability, profile) -> tuple[set, Counter]:
    """(expected, hit) of the feature ``NEW_CONFIG``: expected of every kernel with a
    compile key, hit by each Problem whose configuration is outside ``corpus_configs``."""
    if not capability.compile_key:
        return set(), Counter()
    corpus = {capability.compile_signature(p) for p in corpus_configs(capability, profile)}
    n = sum(capability.compile_signature(p) not in corpus for p in problems)
    return {NEW_CONFIG}, Counter({NEW_CONFIG: n} if n else {})


@st.composite
def compile_pins(draw, capability: Capability, warm: list[Problem], new_compile_p: float):
    """A dict of field -> value to impose on the Problem ({} = a new configuration).
    ``warm`` comes from ``warm_problems`` (computed once per strategy, not per draw)."""
    if not capability.compile_key or new_compile_p >= 1.0 or not warm:
        return {}
    if new_compile_p > 0.0 and draw(Coin(new_compile_p)):
        return {}
    w = draw(st.sampled_from(warm))
    return {f: getattr(w, f) for f in pinned_fields(capability.compile_key)}


def compile_keys(problems, capability: Capability) -> Counter:
    """How many of ``problems`` fall in each compile configuration of ``capability``
    (``len()`` of the result is the number of distinct compiles a campaign needs)."""
    return Counter(capability.compile_signature(p) for p in problems)


def compile_reuse(cases, capability: Capability) -> dict | None:
    """How many run cases reused a compiled kernel: a case whose compile configuration an
    earlier case of the same campaign already used (so the kernel was in memory, or in the
    disk cache a prebuild filled). ``fraction`` = reusing / cases; None when the capability
    declares no ``compile_key``. Skipped cases run nothing and are not counted."""
    if not capability.compile_key:
        return None
    seen, reusing, n = set(), 0, 0
    for c in cases:
        if c.status == "skipped":
            continue
        n += 1
        sig = capability.compile_signature(c.problem)
        if sig in seen:
            reusing += 1
        seen.add(sig)
    return {
        "cases": n,
        "reusing": reusing,
        "configurations": len(seen),
        "fraction": round(reusing / n, 4) if n else 0.0,
    }


def key_violations(events, compile_key) -> list[str]:
    """Check a declared ``compile_key`` against observed JIT behaviour. ``events``: (Problem,
    whether running it compiled anew), in run order. Returns one line per recompile under a
    signature seen before (the key misses a field; the line names the fields that changed).
    A new signature that compiles nothing is no violation: a key may be conservative."""
    seen, bad = {}, []
    for p, recompiled in events:
        sig = compile_signature(p, compile_key)
        if recompiled and sig in seen:
            changed = [f.name for f in fields(Problem) if getattr(p, f.name) != getattr(seen[sig], f.name)]
            bad.append(f"{p.short()} recompiled under the signature of {seen[sig].short()} (changed: {changed})")
        seen.setdefault(sig, p)
    return bad
