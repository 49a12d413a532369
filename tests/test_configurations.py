"""Configuration coverage (strategies/configurations.py, difftest/search/configuration_phase.py):
the dimensions a capability declares, each configuration realised as the cheapest Problem that
has it, covering arrays that run every pair of values, and the campaign's coverage phase that
meets a corner bug on schedule (it used to be luck: 81% of an FA4 campaign ran head dim 8),
re-planned around each finding, measured and reported per pair of dimensions."""

import dataclasses
import json
import random
from itertools import combinations, product

import pytest

from difftest import Capability, Problem
from difftest.judge.runner import RunConfig
from difftest.kernels import flex, flex_dynamic
from difftest.report.ci_gate import compare, render
from difftest.report.html import render_html
from difftest.report.read import ReportError, load_report_doc
from difftest.report.write import write_json
from difftest.search.campaign import Campaign, run_campaign
from difftest.strategies.configurations import (
    HEAD_DIMS_KEPT,
    NA,
    _doomed_test,
    _rng,
    claimed_pairs,
    dimensions,
    in_build,
    pair_coverage,
    pairs_of,
    plan,
    realise,
    realise_first,
    values_of,
)
from tests.kernels_for_tests import SMALL, RefKernel, full_capability

BROAD = full_capability(
    dtypes=("float32", "float16", "bfloat16"),
    head_dims_qk=(8, 16, 24, 40),
    max_seqlen=160,
    max_heads=8,
    max_batch=4,
    layouts=("contiguous", "bhsd", "kv_broadcast"),
    block_m=16,
    block_n=32,
)
NARROW = Capability(dtypes=("float32",), head_dims_qk=(16,))


def _names(cap, profile="ci"):
    return [d.name for d in dimensions(cap, profile)]


def test_dimensions_follow_the_capability():
    assert _names(BROAD) == [
        "dtype",
        "head_dim_qk",
        "head_dim_v",
        "group",
        "heads_kv",
        "mask",
        "align",
        "length",
        "relation",
        "batching",
        "sinks",
        "layout",
    ]
    dims = {d.name: d.values for d in dimensions(BROAD, "ci")}
    assert dims["dtype"] == ("float32", "float16", "bfloat16")  # cheapest first
    assert dims["group"] == (1, 2, 3, 4, 6, 8)  # reaches the profile's GQA heads (8), 3 and 6 included
    assert dims["batching"] == ("dense", "batched", "varlen", "varlen_empty_q", "varlen_empty_k", "varlen_pad_tail")
    assert dims["align"] == (NA, "top_left", "bottom_right")
    # a basic capability: one dtype, one head dim, no features: only what varies
    assert _names(NARROW) == ["heads_kv", "length", "relation", "batching"]
    # head_dim_v only where the dims may differ; softmax_scale only where the compile key names it
    assert "head_dim_v" not in _names(dataclasses.replace(BROAD, equal_head_dims=True))
    keyed = dataclasses.replace(BROAD, compile_key=("dtype", "softmax_scale"))
    assert "softmax_scale" in _names(keyed) and "softmax_scale" not in _names(BROAD)


def test_a_kernel_of_every_head_dim_lists_representatives_and_claims_them_quickly():
    """sdpa-math declares head dims 1..256: listing all 65,536 head-dim pairs' witnesses took its
    campaign 38 s of a 40 s budget on an H100 host before the first case."""
    every = full_capability(dtypes=("float32",), head_dims_qk=tuple(range(1, 257)), max_seqlen=160)
    dims = {d.name: d.values for d in dimensions(every, "gpu")}
    for name in ("head_dim_qk", "head_dim_v"):
        hd = dims[name]
        assert len(hd) <= HEAD_DIMS_KEPT
        assert {1, 3, 8, 15, 16, 17, 31, 33, 63, 64, 65, 96, 127, 128, 129, 192, 255, 256} <= set(hd)
    # a kernel of 32 head dims (FA4's multiples of 8) keeps every one: its bugs sat at 40, 88, 216
    fa4_like = full_capability(dtypes=("float32",), head_dims_qk=tuple(range(8, 257, 8)), max_seqlen=160)
    assert dict((d.name, d.values) for d in dimensions(fa4_like, "gpu"))["head_dim_qk"] == tuple(range(8, 257, 8))
    claimed, _ = claimed_pairs(every, "gpu")
    assert {(("head_dim_qk", 3), ("head_dim_v", 255))} <= claimed


@pytest.mark.parametrize("cap", [BROAD, SMALL, NARROW], ids=["broad", "small", "narrow"])
def test_every_realisation_is_inside_the_capability_and_has_its_values(cap):
    dims = dimensions(cap, "ci")
    claimed, illegal = claimed_pairs(cap, "ci", dims)
    assert claimed and not claimed & illegal
    rows = list(plan(dims, illegal=illegal))
    realised = 0
    for row in rows:
        p = realise_first(row, cap, "ci")
        if p is None:
            continue
        realised += 1
        assert p.validate() is p and cap.excludes(p) is None, (row, p.short())
        got = values_of(p, cap, dims)
        assert all(v in got[n] for n, v in row.items() if v != NA), (row, got)
    assert realised >= 0.8 * len(rows)
    # the plan's realisations cover most claimed pairs in one pass; the phase re-plans the rest
    cov = pair_coverage([p for p in (realise_first(r, cap, "ci") for r in rows) if p], cap, "ci", claimed=claimed)
    assert cov["covered"] >= 0.85 * cov["claimed"], cov["by_dimensions"]


# ---------------------------------------------------------------- claimed_pairs, fast = slow
def _slow_pairs_of(values, dims, strength):  # pairs_of as it was: one sort per dimension per combination
    out = set()
    for combo in combinations([d.name for d in dims], strength):
        out.update(tuple(zip(combo, vs)) for vs in product(*(sorted(values.get(n, ()), key=str) for n in combo)))
    return out


def _slow_claimed_pairs(cap, profile, dims, strength):
    """claimed_pairs as it was before it skipped doomed configurations: every witness built
    by realising each configuration it tries (the same search, unpruned)."""

    def witness(base):
        p = realise_first(base, cap, profile, variants=2)
        if p is not None:
            return p
        for d in dims:
            if d.name not in base:
                for v in d.values[1:]:
                    p = realise_first({**base, d.name: v}, cap, profile, variants=2)
                    if p is not None:
                        return p
        rng = _rng(base, -1)
        for _ in range(24):
            row = {**{d.name: rng.choice(d.values) for d in dims if d.name not in base}, **base}
            p = realise_first(row, cap, profile, variants=2)
            if p is not None:
                return p
        return None

    claimed, illegal = set(), set()
    for combo in combinations(dims, strength):
        for vs in product(*(d.values for d in combo)):
            pair = tuple((d.name, v) for d, v in zip(combo, vs))
            if pair in claimed:
                continue
            p = witness(dict(pair))
            if p is None:
                illegal.add(pair)
            else:
                claimed |= _slow_pairs_of(values_of(p, cap, dims), dims, strength)
    return claimed, illegal - claimed


# each turns one of _doomed_test's rules on or off: kv_broadcast without GQA and few heads (flex's
# shape), causal-only, equal lengths only (fla-attn's), unequal minimum lengths (the equal-relation
# rule must stay off), a small t = 3 case
PRUNED = {
    "broad": (BROAD, 2),
    "no_gqa_broadcast": (dataclasses.replace(BROAD, gqa=False, max_heads=4), 2),
    "causal_only": (dataclasses.replace(BROAD, causal_required=True, head_dims_qk=(8, 16)), 2),
    "equal_lengths": (dataclasses.replace(BROAD, seqlen_q_ne_k=False, head_dims_qk=(8, 16)), 2),
    "unequal_minimums": (dataclasses.replace(BROAD, min_seqlen_k=24, head_dims_qk=(8, 16)), 2),
    "small_t3": (SMALL, 3),
}


@pytest.mark.parametrize("name", sorted(PRUNED))
def test_claimed_pairs_skip_only_configurations_that_cannot_be_realised(name):
    """claimed_pairs skips configurations ``_doomed_test`` says no variant realises (80-95% of
    the tries: 0.2-0.6 s of every campaign's start, 1-5 s at t = 3). Pinned: the same claimed
    and illegal tuples as the unpruned search, and every skipped configuration really has no
    realisation (random configurations of the capability's dimensions, and each pair)."""
    cap, t = PRUNED[name]
    dims = dimensions(cap, "ci")
    assert claimed_pairs(cap, "ci", dims, t) == _slow_claimed_pairs(cap, "ci", dims, t)
    doomed, rng = _doomed_test(cap), random.Random(name)
    rows = [
        dict(pair)
        for combo in combinations(dims, 2)
        for pair in product(*([(d.name, v) for v in d.values] for d in combo))
    ]
    rows += [{d.name: rng.choice(d.values) for d in dims if rng.random() < 0.6} for _ in range(300)]
    skipped = [row for row in rows if doomed(row)]
    assert len(skipped) >= 0.05 * len(rows), len(skipped)  # the rules fire here
    for row in skipped:
        assert all(realise(row, cap, "ci", variant=v) is None for v in range(2)), row


def test_a_pair_no_problem_can_exercise_is_not_claimed():
    claimed, illegal = claimed_pairs(BROAD, "ci")
    assert (("mask", "none"), ("align", "top_left")) in illegal  # no mask, no alignment
    assert (("group", 1), ("layout", "kv_broadcast")) in illegal  # a broadcast K/V needs query heads to share it
    assert (("mask", "causal"), ("align", "top_left")) in claimed
    assert (("head_dim_qk", 8), ("head_dim_v", 40)) in claimed


def test_values_of_a_varlen_problem():
    p = Problem(
        batch=3,
        seqlen_q=(0, 33, 5),
        seqlen_k=(4, 33, 0),
        heads_q=6,
        heads_kv=2,
        head_dim_qk=8,
        head_dim_v=16,
        causal=True,
        align="top_left",
        pad_tail=2,
        sinks=True,
    )
    v = values_of(p, BROAD, dimensions(BROAD, "ci"))
    assert v["batching"] == {"varlen", "varlen_empty_q", "varlen_empty_k", "varlen_pad_tail"}
    assert v["length"] == {"tile_edge"} and v["relation"] == {"equal"}  # 33 = block_n + 1; empty pairs count not
    assert v["align"] == {NA}  # every non-empty sequence is square: the alignment cannot matter
    assert v["group"] == {3} and v["heads_kv"] == {2} and v["mask"] == {"causal"} and v["sinks"] == {True}
    assert (("head_dim_qk", 8), ("group", 3)) in pairs_of(v, dimensions(BROAD, "ci"))


def test_in_build_takes_what_the_compile_key_leaves_out_from_another_realisation():
    """A value problem of a built configuration: another realisation's fields outside the compile
    key on the build's key fields. Flex's key names the lengths and windows, so only the values and
    seed move; flex-dynamic's leaves the window out, so it moves too; a field that does not fit the
    build (unused tail tokens on a dense batch) is no Problem."""
    row = {"dtype": "float16", "length": "long", "mask": "window_left"}
    flex_key = dataclasses.replace(BROAD, compile_key=flex.COMPILE_KEY)
    built = realise(row, flex_key, "ci", variant=0)
    other = realise(row, flex_key, "ci", variant=3, free={"values": "massive_keys", "seed": 5})
    assert flex_key.compile_signature(other) != flex_key.compile_signature(built)  # other lengths
    p = in_build(built, other, flex_key, "ci")
    assert flex_key.compile_signature(p) == flex_key.compile_signature(built)
    assert (p.values, p.seed, p.window_left) == ("massive_keys", 5, built.window_left)
    dynamic = dataclasses.replace(BROAD, compile_key=flex_dynamic.COMPILE_KEY)
    p = in_build(built, other, dynamic, "ci")
    assert dynamic.compile_signature(p) == dynamic.compile_signature(built)
    assert (p.seqlen_q, p.window_left) == (built.seqlen_q, other.window_left) != (other.seqlen_q, built.window_left)
    shapes = dataclasses.replace(BROAD, compile_key=("dtype", "batch", "seqlen_q", "seqlen_k"))
    dense, tail = (realise({"batching": b}, shapes, "ci") for b in ("dense", "varlen_pad_tail"))
    assert tail.pad_tail and in_build(dense, tail, shapes, "ci") is None


def test_a_realised_value_scale_fits_the_realised_dtype():
    """A row planned in bfloat16 and realised in float16 (a repair moves its dtype) took
    mixed_do at scale 8: dO rows up to 1e8, inf in float16, a NaN truth and a spurious finding."""
    p = realise({"dtype": "float16"}, BROAD, "ci", free={"values": "mixed_do", "value_scale": 8.0})
    assert p.dtype == "float16" and p.value_scale == 4.0
    from difftest.model.inputs import make_inputs

    assert make_inputs(p).do.isfinite().all()


def test_a_kernel_narrowed_to_other_value_kinds_claims_the_same_pairs():
    """A kernel narrowed to a structured value kind refuses the Problem default's normal
    values: realisations take its own kind, so it claims what the unnarrowed kernel claims
    (it claimed nothing, its coverage phase ran no row, after a minute of failed witnesses)."""
    tied = dataclasses.replace(SMALL, values=("tied_keys",))
    p = realise({}, tied, "ci")
    assert p is not None and p.values == "tied_keys" and tied.excludes(p) is None
    assert realise({}, tied, "ci", free={"values": "tied_keys", "value_scale": 2.0}).value_scale == 2.0
    assert claimed_pairs(tied, "ci") == claimed_pairs(SMALL, "ci")


def test_realise_takes_the_cheapest_problem_first():
    p = realise(
        {"head_dim_qk": 40, "group": 3, "mask": "causal", "relation": "q_longer", "align": "top_left"}, BROAD, "ci"
    )
    assert (p.batch, p.heads_q, p.heads_kv, p.head_dim_qk) == (1, 3, 1, 40)
    assert p.causal and p.align == "top_left" and p.seqlen_q > p.seqlen_k and p.seqlen_q <= 16
    assert realise({"layout": "kv_broadcast"}, BROAD, "ci").heads_kv == 1
    assert realise({"length": "long"}, NARROW, "ci") is None or True  # NARROW's 256 rows fit ci's 160: none
    assert realise({"length": "long"}, BROAD, "ci").max_seqlen_q > 64


class CornerBug(RefKernel):
    """dK 5% off at one corner: bfloat16 with head dim 24 (a dtype with a head dim)."""

    name = "test-corner"
    spec = "tests.test_configurations:CornerBug"
    capability = dataclasses.replace(BROAD, max_seqlen=48, layouts=("contiguous", "bhsd"))

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.dtype == "bfloat16" and p.head_dim_qk == 24:
            out.dk = out.dk * 1.05
        return out


@pytest.mark.slow
def test_the_coverage_phase_meets_a_corner_bug_on_schedule(tmp_path):
    """No drawn example and no edge corpus: the pairs alone find the bug, and it signs its corner."""
    r = run_campaign(
        CornerBug(),
        "ci",
        max_examples=1,
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        coverage=2,
        hunt=True,
        config=RunConfig(isolate=False),
    )
    assert r.status == "failed" and len(r.findings) == 1
    needs = dict(r.findings[0].signature.needs)
    assert needs.get("dtype") == ("bfloat16",) and needs.get("head_dim_qk") == (24,), needs
    pairs = r.coverage["pairs"]
    assert pairs["covered"] + pairs["explained"] >= 0.97 * pairs["claimed"], pairs["phase"]
    assert pairs["phase"]["stage"] == "t=2" and pairs["by_dimensions"]["dtype x head_dim_qk"] == [12, 12]
    # re-planned around the finding: the search meets the corner it explains once or twice (before a
    # first signature that also needed sinks widened), then plans no row there
    assert 1 <= r.findings[0].search_hits <= 3, r.findings[0].search_hits


class DecodeStats(RefKernel):
    """cuDNN's THD GQA decode bug (cudnn-frontend#1083, also 9.19 on the H200): with one query
    token in every sequence of a varlen GQA batch, the LSE of every query head but a group's
    first is wrong."""

    name = "test-decode-stats"
    spec = "tests.test_configurations:DecodeStats"
    capability = dataclasses.replace(SMALL, head_dims_qk=(8,), dtypes=("float16",))

    def corrupt(self, inputs, out):
        p = inputs.problem
        if p.varlen and p.group > 1 and max(p.seqlens_q) == 1:
            later = [h for h in range(p.heads_q) if h % p.group]
            out.lse[:, later] = out.lse[:, later] + 0.5
        return out


@pytest.mark.slow
def test_the_coverage_phase_runs_decoding_steps(tmp_path):
    """One query against many keys in every sequence is a length class of its own, paired with
    the batching and the GQA ratio. On caea68a no row had it (varlen rows added a 3-token
    sequence beside the planned one) and the pairs never met this bug."""
    r = run_campaign(
        DecodeStats(),
        "ci",
        max_examples=1,
        edge_cases=False,
        database=None,
        out_dir=tmp_path,
        coverage=2,
        hunt=True,
        config=RunConfig(isolate=False),
    )
    assert r.status == "failed" and len(r.findings) == 1, r.status
    sig = r.findings[0].signature
    assert sig.gates[0].startswith("lse:") and {"varlen", "gqa"} <= set(dict(sig.needs)), sig.describe()
    assert r.coverage["pairs"]["by_dimensions"]["length x batching"][0] >= 1


@pytest.mark.slow
def test_the_t3_stage_covers_every_claimed_triple_and_runs_no_row_that_covers_nothing():
    """Every case the coverage phase runs covers a tuple no earlier case did, and the phase ends
    with every claimed triple covered. On 2fcc6cb the t = 3 plans (which know no illegal
    triples) offered rows such as an ``n/a`` alignment under a window; their realisations had
    other values, covered none of the row's triples, and counted as progress, so the stage
    planned again 261 times: 1,464 cases and 65-130 s for a correct kernel, 14 triples still
    uncovered."""
    from difftest.search.configuration_phase import SMALL_DIMENSION

    kernel = RefKernel()
    r = run_campaign(kernel, "nightly", max_examples=0, edge_cases=False, database=None, seed=11)
    dims = dimensions(kernel.capability, "nightly")
    small = tuple(d for d in dims if len(d.values) <= SMALL_DIMENSION)
    ran = [c.problem for c in r.cases if c.status.value != "skipped"]
    triples = pair_coverage(ran, kernel.capability, "nightly", strength=3, dims=small)
    assert triples["missing"] == [] and r.coverage["pairs"]["covered"] == r.coverage["pairs"]["claimed"]
    seen: set = set()
    idle = 0
    for p in ran:
        mine = pairs_of(values_of(p, kernel.capability, dims), dims, 2) | pairs_of(
            values_of(p, kernel.capability, small), small, 3
        )
        idle += mine <= seen
        seen |= mine
    assert idle <= 2, (idle, len(ran))


@pytest.mark.slow
def test_first_failure_mode_runs_every_value_once_in_ci(tmp_path):
    """ci's coverage strength is 1: every value of every dimension runs (the edge corpus counts)."""
    r = run_campaign(
        RefKernel(), "ci", max_examples=5, database=None, out_dir=tmp_path, config=RunConfig(isolate=False)
    )
    assert r.status == "passed" and r.settings["coverage_strength"] == 1
    dims = dimensions(RefKernel.capability, "ci")
    ran = [c.problem for c in r.cases]
    seen = {n: set() for n in (d.name for d in dims)}
    for p in ran:
        for n, v in values_of(p, RefKernel.capability, dims).items():
            seen[n] |= v
    for d in dims:
        assert set(d.values) - {NA} <= seen[d.name], (d.name, set(d.values) - seen[d.name])


def test_pair_coverage_is_reported_read_back_and_gated(tmp_path):
    a = run_campaign(
        RefKernel(), "ci", max_examples=5, database=None, out_dir=tmp_path / "a", config=RunConfig(isolate=False)
    )
    doc_a = load_report_doc(write_json([a], tmp_path / "a.json"))
    pairs = doc_a["campaigns"][0]["coverage"]["pairs"]
    assert pairs["claimed"] > 100 and 0 < pairs["covered"] <= pairs["claimed"]
    assert pairs["claimed"] - pairs["covered"] == len(pairs["missing"])
    html = render_html(doc_a)
    assert f'data-k="{a.kernel}/pairs_covered">{pairs["covered"]}<' in html
    # a candidate covering fewer pairs with the same dimensions loses coverage in the gate
    b = json.loads(json.dumps(doc_a))
    gone = sorted(set(json.loads(json.dumps(_covered(doc_a)))))[:3]
    b["campaigns"][0]["coverage"]["pairs"]["missing"] += gone
    res = compare(doc_a, b)
    assert not res.passed and any(f.gate == "pairs" for f in res.findings), render(res)
    assert "3 configuration pairs covered in the baseline, not in the candidate" in render(res)
    # a malformed pair record is refused in one line
    bad = json.loads(json.dumps(doc_a))
    bad["campaigns"][0]["coverage"]["pairs"]["by_dimensions"] = {"dtype x layout": "all"}
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    with pytest.raises(ReportError, match="by_dimensions"):
        load_report_doc(tmp_path / "bad.json")


def _covered(doc) -> list[str]:
    """Pair names the report's campaign covered (claimed pairs not listed missing)."""
    from difftest.strategies.configurations import pair_text

    cap = RefKernel.capability
    claimed, _ = claimed_pairs(cap, "ci")
    missing = set(doc["campaigns"][0]["coverage"]["pairs"]["missing"])
    return [pair_text(p) for p in claimed if pair_text(p) not in missing]


def test_campaign_settings_are_frozen_and_the_strategy_turns_coverage_off():
    c = Campaign.of(RefKernel(), "nightly")
    assert c.coverage_strength == 3 and c.hunting and c.profile.fill_budget
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.time_budget = 1.0
    assert dataclasses.replace(c, strategy=object()).coverage_strength == 0
    assert Campaign.of(RefKernel(), "quick").coverage_strength == 0


def test_softcap_and_negative_window_configurations_where_declared():
    """softcap (none, capped) is a dimension and the mask dimension gains a window with a
    negative side and one whose bounds cross, only where the capability declares them; each
    realises as a Problem that has it."""
    from difftest.kernels.blockwise import CAPABILITY as blockwise
    from difftest.strategies.configurations import realise

    dims = {d.name: d.values for d in dimensions(blockwise, "ci")}
    assert dims["softcap"] == ("none", "capped")
    assert {"window_negative", "window_crossed"} <= set(dims["mask"])
    crossed = realise({"mask": "window_crossed"}, blockwise, "ci")
    assert crossed.empty_window and crossed.window_left < 0
    shifted = realise({"mask": "window_negative"}, blockwise, "ci")
    assert shifted.window_left < 0 and not shifted.empty_window
    assert realise({"softcap": "capped"}, blockwise, "ci").softcap is not None
    plain = Capability(window=True, causal=True)
    names = {d.name: d.values for d in dimensions(plain, "ci")}
    assert "softcap" not in names and "window_crossed" not in names["mask"]


def test_alibi_is_a_configuration_where_declared_and_realises_its_three_kinds_of_slopes():
    """alibi (none, slopes) is a dimension only where the capability declares ALiBi; a row
    realises, in turn, the geometric slopes (each head its own), one dominant slope for every
    head and a negative one, each a Problem with slopes, and none realises without."""
    from difftest.kernels.blockwise import CAPABILITY as blockwise
    from difftest.strategies.configurations import attempt, realise

    dims = {d.name: d.values for d in dimensions(blockwise, "ci")}
    assert dims["alibi"] == ("none", "slopes")
    assert "alibi" not in _names(Capability(window=True, causal=True))
    assert realise({"alibi": "none"}, blockwise, "ci").alibi_slopes is None
    config = {"alibi": "slopes", "group": 2}
    kinds = []
    for variant in range(3):
        p = attempt(config, blockwise, "ci", variant=variant)
        assert isinstance(p, Problem) and p.alibi_slopes is not None and p.group == 2, p
        kinds.append(p.alibi_slopes)
    geometric, dominant, negative = kinds
    assert len(set(geometric)) == len(geometric) > 1  # the heads of a group differ
    assert len(set(dominant)) == 1 and dominant[0] > 1 and set(negative) == {-0.25}


def test_relpos_is_a_configuration_where_declared_and_realises_each_kind_of_table():
    """relpos (none, small, dominant, clamp_edges) is a dimension only where the capability
    declares a relative-position table; each kind realises, in every variant, a Problem whose
    table is of that kind (rel_kinds) with rows that differ inside its GQA group, and none
    realises without a table."""
    from difftest.kernels.blockwise import CAPABILITY as blockwise
    from difftest.strategies.configurations import attempt, realise
    from difftest.strategies.coverage import logit_scale, rel_kinds

    dims = {d.name: d.values for d in dimensions(blockwise, "ci")}
    assert dims["relpos"] == ("none", "small", "dominant", "clamp_edges")
    assert "relpos" not in _names(Capability(window=True, causal=True, alibi=True))
    assert realise({"relpos": "none"}, blockwise, "ci").rel_bias is None
    for kind in ("small", "dominant", "clamp_edges"):
        reach = set()
        for variant in range(3):
            p = attempt({"relpos": kind, "group": 2}, blockwise, "ci", variant=variant)
            assert isinstance(p, Problem) and p.rel and p.group == 2, p
            assert kind in rel_kinds(p, logit_scale(p)) and len(set(p.rel_bias)) == 2, p.short()
            reach.add(p.rel_distance)
        assert len(reach) >= 2, (kind, reach)  # R differs between a kind's variants


@pytest.mark.slow
def test_shards_split_the_coverage_phase_and_together_cover_what_one_campaign_does(tmp_path):
    """Under --shard I/N a shard plans rows for its own share of the tuples (shard.owns), so N
    shards of a compile-bound kernel cover N shares in the time of one (tests/test_compile_bound
    measures it: three shards of the simulated FA4 found 8 of 8 where one campaign found 6). On
    the old code every shard planned and built the same rows."""

    def run(shard, out):
        return Campaign.of(
            RefKernel(),
            "ci",
            max_examples=1,
            edge_cases=False,
            database=None,
            out_dir=tmp_path / out,
            coverage=2,
            shard=shard,
            config=RunConfig(isolate=False),
        ).run()

    one, a, b = run(None, "one"), run((0, 2), "a"), run((1, 2), "b")
    dims = dimensions(RefKernel.capability, "ci")

    def rows(r):
        return {
            tuple(sorted((n, tuple(sorted(v))) for n, v in values_of(c.problem, RefKernel.capability, dims).items()))
            for c in r.cases
        }

    ra, rb = rows(a), rows(b)
    assert len(ra & rb) < 0.5 * min(len(ra), len(rb)), (len(ra & rb), len(ra), len(rb))  # not the same rows
    neither = set(a.coverage["pairs"]["missing"]) & set(b.coverage["pairs"]["missing"])
    assert len(neither) <= len(one.coverage["pairs"]["missing"]), sorted(neither)[:10]
