"""Capability.min_seqlen_q / min_seqlen_k: the shortest non-empty sequence a kernel serves
(torch SDPA cuDNN refuses a key/value length of 1; TileOPs GQA's forward refuses a query
length of 1 on the H200). Draws, the edge corpus and shrinking all stay at or above the
minimums; empty varlen sequences stay governed by ``empty_seqs``."""

import pytest

from difftest import Problem
from difftest.model.capability import Capability
from difftest.search.campaign import run_campaign
from difftest.search.shrinking import neighbours, simplify
from difftest.strategies import edge_problems, problems
from difftest.strategies.shapes import key_length, lengths
from tests.drawing import draw_many
from tests.kernels_for_tests import RefKernel, full_capability

MIN_Q, MIN_K = 3, 5
DENSE = full_capability(
    dtypes=("float32", "float16"),
    head_dims_qk=(8, 16),
    max_seqlen=160,
    max_heads=4,
    min_seqlen_q=MIN_Q,
    min_seqlen_k=MIN_K,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
)
VARLEN = full_capability(
    dtypes=("float32", "float16"),
    head_dims_qk=(8, 16),
    max_seqlen=160,
    max_heads=4,
    min_seqlen_q=MIN_Q,
    min_seqlen_k=MIN_K,
)
VARLEN_NO_EMPTY = full_capability(
    dtypes=("float32",),
    head_dims_qk=(8, 16),
    max_seqlen=160,
    max_heads=4,
    min_seqlen_q=MIN_Q,
    min_seqlen_k=MIN_K,
    empty_seqs=False,
)
SQUARE = full_capability(
    dtypes=("float16",),
    head_dims_qk=(16,),
    max_seqlen=160,
    max_heads=4,
    seqlen_q_ne_k=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    min_seqlen_q=MIN_Q,
    min_seqlen_k=MIN_K,
    compile_key=("dtype", "causal"),
)  # TileOPs-like: square, compile pins
CAPS = {"dense": DENSE, "varlen": VARLEN, "varlen_no_empty": VARLEN_NO_EMPTY, "square": SQUARE}


@pytest.mark.parametrize("name", sorted(CAPS))
@pytest.mark.slow
def test_draws_respect_the_minimum_and_reach_it(name):
    cap = CAPS[name]
    ps = draw_many(problems(cap, "ci"), 400)
    assert len(ps) == 400
    for p in ps:
        assert p.validate() is p
        assert cap.excludes(p) is None, (p.short(), cap.excludes(p))
    qs = [n for p in ps for n in p.seqlens_q]
    ks = [n for p in ps for n in p.seqlens_k]
    least_q = MIN_Q if cap.seqlen_q_ne_k else max(MIN_Q, MIN_K)
    assert min(n for n in qs if n) == least_q and min(n for n in ks if n) == MIN_K
    assert not [n for n in qs if 0 < n < least_q] and not [n for n in ks if 0 < n < MIN_K]
    assert qs.count(least_q) >= 10 and ks.count(MIN_K) >= 10  # the minimum is a favoured corner
    if cap.varlen:
        assert any(p.varlen for p in ps) and any(not p.varlen for p in ps)
        assert (0 in qs and 0 in ks) == cap.empty_seqs  # zeros stay governed by empty_seqs
    if cap.seqlen_q_ne_k:
        assert any(p.seqlen_q != p.seqlen_k for p in ps if not p.varlen)


@pytest.mark.parametrize("profile", ["quick", "nightly", "gpu"])
def test_other_profiles_and_a_tiny_max_seqlen_knob_respect_the_minimum(profile):
    for cap in (DENSE, VARLEN):
        for p in draw_many(problems(cap, profile, budget=2**20), 60) + draw_many(
            problems(cap, profile, max_seqlen=2), 30
        ):  # the minimum wins over the profile's bound
            assert cap.excludes(p) is None, (p.short(), cap.excludes(p))


def test_length_strategies_skip_the_gap_below_the_minimum():
    for lo in (0, 1, 4):
        got = set(draw_many(lengths(lo, 20, (8,), least=MIN_K), 300))
        legal = ({0} if lo == 0 else set()) | set(range(max(lo, MIN_K), 21))
        assert got <= legal and MIN_K in got and 20 in got, (lo, sorted(got))
        keys = set(draw_many(key_length(2, lo, 20, (8,), least=MIN_K), 300))
        assert keys <= legal and MIN_K in keys, (lo, sorted(keys))
    assert set(draw_many(lengths(1, 3, least=MIN_K), 5)) == {MIN_K}  # the minimum wins over hi


@pytest.mark.parametrize("name", sorted(CAPS))
def test_edge_corpus_respects_the_minimum_and_keeps_the_tile_corners(name):
    cap = CAPS[name]
    edges = edge_problems(cap)
    assert len(edges) == len(set(edges)) >= 10
    for p in edges:
        assert p.validate() is p
        assert cap.excludes(p) is None, (p.short(), cap.excludes(p))
    least_q = MIN_Q if cap.seqlen_q_ne_k else max(MIN_Q, MIN_K)
    assert (edges[0].seqlen_q, edges[0].seqlen_k) == (least_q, MIN_K)  # the smallest corner, lifted
    lens = {n for p in edges for n in p.seqlens_q + p.seqlens_k}
    assert {63, 64, 65, 127, 128, 129} <= lens  # tail-block corners survive
    if cap.varlen and cap.empty_seqs:
        assert any(0 in p.seqlens_q for p in edges) and any(0 in p.seqlens_k for p in edges)


def test_excludes_names_the_field():
    base = Problem(seqlen_q=MIN_Q, seqlen_k=MIN_K, head_dim_qk=16, head_dim_v=16).validate()
    assert VARLEN.excludes(base) is None
    assert VARLEN.excludes(base.replace(seqlen_q=MIN_Q - 1)) == f"query sequence length 2 < min_seqlen_q {MIN_Q}"
    assert VARLEN.excludes(base.replace(seqlen_k=1)) == f"key sequence length 1 < min_seqlen_k {MIN_K}"
    vl = base.replace(batch=3, seqlen_q=(0, 3, 7), seqlen_k=(5, 0, 9))
    assert VARLEN.excludes(vl) is None  # empty sequences are empty_seqs' business
    assert "zero-length" in VARLEN_NO_EMPTY.excludes(vl)
    assert "min_seqlen_k" in VARLEN.excludes(vl.replace(seqlen_k=(5, 0, 4)))
    assert "min_seqlen_q" in VARLEN.excludes(vl.replace(seqlen_q=(1, 3, 7)))
    assert full_capability().excludes(base.replace(seqlen_q=1, seqlen_k=1)) is None  # default minimum: 1


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"min_seqlen_q": 0}, "min_seqlen_q=0: allowed an int in 1..256"),
        ({"min_seqlen_k": -3}, "min_seqlen_k=-3: allowed an int in 1..256"),
        ({"min_seqlen_k": 65, "max_seqlen": 64}, "min_seqlen_k=65: allowed an int in 1..64"),
        ({"min_seqlen_q": 2.0}, "min_seqlen_q=2.0"),
        ({"min_seqlen_q": True}, "min_seqlen_q=True"),
    ],
)
def test_bad_minimums_are_a_clear_error(kw, says):
    with pytest.raises(ValueError) as e:
        Capability(**kw)
    assert says in str(e.value)
    assert Capability(min_seqlen_q=256, min_seqlen_k=256).min_seqlen_k == 256


def test_simplify_stops_at_the_minimum():
    p = Problem(
        batch=2, seqlen_q=90, seqlen_k=70, heads_q=4, heads_kv=2, causal=True, head_dim_qk=16, head_dim_v=16, seed=5
    ).validate()
    best, _ = simplify(p, lambda q: True, DENSE)
    assert (best.batch, best.seqlen_q, best.seqlen_k, best.heads_q, best.causal) == (1, MIN_Q, MIN_K, 1, False)
    assert DENSE.covers(best)
    assert all(min(n.seqlens_q) >= MIN_Q and min(n.seqlens_k) >= MIN_K for n in neighbours(p, DENSE) if not n.varlen)
    # varlen: non-empty sequences stop at the minimum, empty ones stay allowed
    v = Problem(batch=3, seqlen_q=(40, 0, 9), seqlen_k=(33, 12, 0), head_dim_qk=16, head_dim_v=16).validate()
    best, _ = simplify(v, lambda q: q.varlen and q.batch == 3, VARLEN)
    assert best.seqlen_q == (0, 0, 0) and best.seqlen_k == (0, 0, 0), best.short()
    full = v.replace(seqlen_q=(40, 4, 9))
    best, _ = simplify(full, lambda q: q.varlen and q.batch == 3 and 0 not in q.seqlens_q, VARLEN)
    assert best.seqlen_q == (MIN_Q,) * 3 and best.seqlen_k == (0, 0, 0), best.short()
    for n in neighbours(v, VARLEN):
        assert all(x == 0 or x >= MIN_Q for x in n.seqlens_q) and all(x == 0 or x >= MIN_K for x in n.seqlens_k)


def test_simplify_shrinks_square_only_problems_to_the_minimum():
    # seqlen_q == seqlen_k is required (TileOPs GQA): both lengths go down together
    p = Problem(seqlen_q=100, seqlen_k=100, head_dim_qk=16, head_dim_v=16, dtype="float16").validate()
    best, _ = simplify(p, lambda q: q.seqlen_q >= 2, SQUARE)
    assert (best.seqlen_q, best.seqlen_k) == (MIN_K, MIN_K), best.short()  # max(min_q, min_k)
    best, _ = simplify(p, lambda q: q.seqlen_q > 40, SQUARE)
    assert (best.seqlen_q, best.seqlen_k) == (41, 41), best.short()


class RaisesOnCausalMin(RefKernel):
    """Every causal problem raises; the capability has minimum lengths."""

    name = "test-raises-min"
    spec = "tests.test_min_seqlen:RaisesOnCausalMin"
    capability = full_capability(
        dtypes=("float32", "float16"),
        head_dims_qk=(8, 16),
        max_seqlen=48,
        max_heads=4,
        max_batch=2,
        min_seqlen_q=MIN_Q,
        min_seqlen_k=MIN_K,
    )

    def corrupt(self, inputs, out):
        if inputs.problem.causal:
            raise RuntimeError("illegal memory access (simulated)")
        return out


def test_campaign_draws_and_shrinks_inside_the_minimum(tmp_path):
    r = run_campaign(RaisesOnCausalMin(), "quick", max_examples=10, database=None, out_dir=tmp_path)
    cap = RaisesOnCausalMin.capability
    assert all(cap.excludes(c.problem) is None for c in r.cases)
    assert r.failed and r.failure.status == "error"
    p = r.failure.problem
    assert p.causal and (p.batch, p.seqlen_q, p.seqlen_k, p.heads_q) == (1, MIN_Q, MIN_K, 1), p.short()


def test_coverage_does_not_expect_lengths_below_the_minimum():
    from difftest.execute import adapter as registry
    from difftest.strategies.coverage import expected_features

    cudnn = expected_features(registry.get("sdpa-cudnn").capability, "gpu")
    assert "sk=1" not in cudnn and "sq=1" in cudnn and "sk=block+1" in cudnn
    tileops = expected_features(registry.get("tileops-gqa").capability, "gpu")
    assert not {"sq=1", "sk=1"} & tileops and "sq=block" in tileops
    assert {"sq=1", "sk=1"} <= expected_features(registry.get("sdpa-flash").capability, "gpu")
