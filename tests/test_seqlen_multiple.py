"""Capability.seqlen_multiple and Capability.causal_required: contracts of kernels that
take only sequence lengths on a tile grid (jvp-flash-attention's backward asserts
N_CTX % 32 == 0) or only causal attention (flash-attention-triton). Draws, the edge
corpus, shrinking and coverage stay inside them, so every problem is legal by
construction instead of skipped."""

import pytest

from difftest import Problem
from difftest.model.capability import Capability
from difftest.search.campaign import run_campaign
from difftest.search.shrinking import neighbours, simplify
from difftest.strategies import edge_problems, problems
from difftest.strategies.coverage import expected_features
from tests.drawing import draw_many
from tests.kernels_for_tests import RefKernel, full_capability

M = 16
MULT = full_capability(
    dtypes=("float32",), head_dims_qk=(8, 16), max_seqlen=160, max_heads=4, seqlen_multiple=M, min_seqlen_q=20
)
SQUARE_MULT = full_capability(
    dtypes=("float16",),
    head_dims_qk=(16,),
    max_seqlen=160,
    max_heads=4,
    seqlen_q_ne_k=False,
    varlen=False,
    empty_seqs=False,
    pad_tail=False,
    seqlen_multiple=M,
    compile_key=("dtype", "causal"),
)
CAUSAL_ONLY = full_capability(
    dtypes=("float32",), head_dims_qk=(8,), max_seqlen=96, max_heads=2, causal_required=True, aligns=("top_left",)
)


@pytest.mark.parametrize("cap", [MULT, SQUARE_MULT], ids=["varlen", "square"])
def test_draws_are_multiples_and_reach_the_shortest_and_several(cap):
    ps = draw_many(problems(cap, "ci"), 300)
    for p in ps:
        assert cap.excludes(p) is None, (p.short(), cap.excludes(p))
    lens = [n for p in ps for n in p.seqlens_q + p.seqlens_k]
    assert all(n % M == 0 for n in lens)
    qs = [n for p in ps for n in p.seqlens_q if n]
    assert min(qs) == (32 if cap is MULT else M)  # min_seqlen_q 20 lifts to the next multiple
    assert min(n for n in lens if n) == M
    assert len({n for n in lens if n}) >= 4  # not pinned to one length
    if cap.varlen:
        assert 0 in lens and any(p.varlen for p in ps)


@pytest.mark.parametrize("cap", [MULT, SQUARE_MULT, CAUSAL_ONLY], ids=["varlen", "square", "causal"])
def test_edge_corpus_is_legal_by_construction(cap):
    corpus = edge_problems(cap, "ci")
    assert len(corpus) >= 5
    for p in corpus:
        assert cap.excludes(p) is None, p.short()
    if cap is CAUSAL_ONLY:
        assert all(p.causal for p in corpus)
        assert any(p.window_left is not None for p in corpus)  # causal + window corners kept


def test_causal_required_draws_only_causal_and_coverage_expects_no_unmasked():
    ps = draw_many(problems(CAUSAL_ONLY, "ci"), 150)
    assert all(p.causal for p in ps)
    e = expected_features(CAUSAL_ONLY, "ci")
    assert "mask:none" not in e and "causal:top_left" in e
    m = expected_features(MULT, "ci")
    assert "sq=1" not in m and "sk=block+1" not in m and "sq:multiple_of_64" in m


def test_excludes_names_the_field_and_narrowing_cannot_widen():
    p = Problem(seqlen_q=48, seqlen_k=40, head_dim_qk=8, head_dim_v=8).validate()
    assert "seqlen_multiple 16" in MULT.excludes(p)
    assert "causal_required" in CAUSAL_ONLY.excludes(Problem(head_dim_qk=8, head_dim_v=8).validate())
    assert MULT.narrowed(seqlen_multiple=32).seqlen_multiple == 32
    for bad in (8, 24, 0):
        with pytest.raises(ValueError, match="seqlen_multiple"):
            MULT.narrowed(seqlen_multiple=bad)
    with pytest.raises(ValueError, match="causal-only"):
        CAUSAL_ONLY.narrowed(causal_required=False)
    assert Capability(causal=True).narrowed(causal_required=True).causal_required


@pytest.mark.parametrize(
    "kw, says",
    [
        ({"seqlen_multiple": 0}, "seqlen_multiple=0"),
        ({"seqlen_multiple": 64, "max_seqlen": 48}, "no multiple"),
        ({"causal_required": True}, "needs causal=True"),
    ],
)
def test_bad_fields_are_a_clear_error(kw, says):
    with pytest.raises(ValueError, match=says):
        Capability(**kw)


def test_simplify_stays_on_the_multiple():
    p = Problem(batch=2, seqlen_q=144, seqlen_k=80, heads_q=4, heads_kv=2, head_dim_qk=16, head_dim_v=16).validate()
    best, _ = simplify(p, lambda q: True, MULT)
    assert (best.batch, best.seqlen_q, best.seqlen_k) == (1, 32, M), best.short()
    assert all(n % M == 0 for c in neighbours(p, MULT) for n in c.seqlens_q + c.seqlens_k)
    sq = Problem(seqlen_q=160, seqlen_k=160, head_dim_qk=16, head_dim_v=16, dtype="float16").validate()
    best, _ = simplify(sq, lambda q: q.seqlen_q > 50, SQUARE_MULT)
    assert (best.seqlen_q, best.seqlen_k) == (64, 64), best.short()


class RaisesOnLongCausal(RefKernel):
    name = "test-raises-mult"
    spec = "tests.test_seqlen_multiple:RaisesOnLongCausal"
    capability = full_capability(
        dtypes=("float32",),
        head_dims_qk=(8,),
        max_seqlen=96,
        max_heads=2,
        max_batch=2,
        seqlen_multiple=M,
        causal_required=True,
        aligns=("top_left",),
    )

    def corrupt(self, inputs, out):
        if max(inputs.problem.seqlens_q) > 40:
            raise RuntimeError("illegal memory access (simulated)")
        return out


def test_campaign_draws_and_shrinks_inside_both_fields(tmp_path):
    r = run_campaign(RaisesOnLongCausal(), "quick", max_examples=15, database=None, out_dir=tmp_path)
    cap = RaisesOnLongCausal.capability
    assert all(cap.excludes(c.problem) is None for c in r.cases)
    assert r.failed and r.failure.status == "error"
    p = r.failure.problem
    assert p.causal and max(p.seqlens_q) == 48 and all(n % M == 0 for n in p.seqlens_q + p.seqlens_k), p.short()


@pytest.mark.parametrize("spec", ["difftest.kernels.jvp_flash:masked", "difftest.kernels.flash_attention_triton:fast"])
def test_new_adapters_draws_reach_every_expected_feature(spec):
    """The real capabilities of the two kernels that need the new fields: draws (edge corpus
    first, as a campaign runs them) stay inside and reach what coverage expects."""
    from difftest.execute import adapter as registry
    from difftest.strategies.coverage import features

    cap = registry.get(spec).capability.narrowed(head_dims_qk=(16, 32), max_heads=4)
    ps = edge_problems(cap, "ci") + draw_many(problems(cap, "ci"), 250)
    assert all(cap.excludes(p) is None for p in ps)
    seen = set().union(*(features(p, cap) for p in ps))
    missing = expected_features(cap, "ci") - seen
    assert not missing, sorted(missing)
