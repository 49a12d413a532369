"""difftest.search.shrinking finishes shrinking where Hypothesis stalls, and shrinks failures of
the explicit edge corpus, which Hypothesis never shrinks."""

from difftest import Problem
from difftest.search.campaign import run_campaign
from difftest.search.shrinking import complexity, neighbours, simplify
from tests.kernels_for_tests import SMALL, RaisesOnCausal, WrongDkForLongGqa


def test_walks_out_of_a_local_minimum():
    # what Hypothesis left once: a batch of empty varlen sequences around one token, 3 heads
    p = Problem(
        batch=4,
        seqlen_q=(0, 0, 0, 1),
        seqlen_k=(0, 0, 0, 1),
        heads_q=3,
        heads_kv=3,
        head_dim_qk=16,
        head_dim_v=16,
        sinks=True,
        seed=7,
    ).validate()
    best, calls = simplify(p, lambda q: q.sinks and q.total_q >= 1)
    assert (best.varlen, best.batch, best.seqlen_q, best.seqlen_k, best.heads_q) == (False, 1, 1, 1, 1)
    assert best.seed == 0 and best.head_dim_qk == 8 and calls < 100


def test_only_strictly_simpler_failing_problems_are_taken():
    p = Problem(batch=2, seqlen_q=40, seqlen_k=40, heads_q=4, heads_kv=2, causal=True, seed=3).validate()
    best, _ = simplify(p, lambda q: q.seqlen_k > 32 and q.group > 1, SMALL)
    assert (best.seqlen_k, best.heads_q, best.heads_kv, best.batch, best.causal) == (33, 2, 1, 1, False)
    assert all(complexity(n) != complexity(p) or n == p for n in neighbours(p))
    assert SMALL.covers(best)


def test_stays_inside_the_capability():
    p = Problem(batch=1, seqlen_q=8, seqlen_k=8, head_dim_qk=16, head_dim_v=16).validate()
    best, _ = simplify(p, lambda q: True, SMALL)
    assert best.head_dim_qk == 8 and SMALL.covers(best)  # 8 is SMALL's smallest head dim


def test_campaign_shrinks_an_edge_corpus_failure(tmp_path):
    # every causal problem raises; the first causal corner of the corpus is not minimal
    r = run_campaign(RaisesOnCausal(), "quick", max_examples=5, database=None, out_dir=tmp_path)
    assert r.failed and r.failure.status == "error"
    p = r.failure.problem
    assert p.causal and (p.batch, p.seqlen_q, p.seqlen_k, p.heads_q) == (1, 1, 1, 1), p.short()


def test_campaign_result_fails_the_same_way(tmp_path):
    r = run_campaign(WrongDkForLongGqa(), "quick", max_examples=30, database=None, out_dir=tmp_path)
    assert r.failed and r.failure.failed_gates == ["dk:budget"]
    assert r.failure.problem.seqlen_k == 33 and r.failure.problem.group == 2
