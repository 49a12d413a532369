"""The failure store on its own: Problems round-trip through it, once each, oldest first,
keyed by the kernel's spec; a line from an older schema is skipped; no database, no store.
And the campaign object around it: settings resolved from the profile, the same search as
run_campaign."""

from difftest import Problem
from difftest.judge.runner import RunConfig
from difftest.model.profiles import PROFILES
from difftest.search.campaign import Campaign, run_campaign
from difftest.search.failure_store import load_failures, safe_name, save_failures, store_path
from tests.kernels_for_tests import RefKernel
from tests.test_campaign import small

A = Problem(seqlen_q=3, seqlen_k=5, head_dim_qk=8, head_dim_v=8)
B = Problem(batch=2, seqlen_q=7, seqlen_k=7, heads_q=4, heads_kv=2, causal=True, dtype="float16", seed=3)
C = Problem(batch=2, seqlen_q=(0, 4), seqlen_k=(2, 6), sinks=True).validate()


def test_round_trip_once_each_oldest_first(tmp_path):
    db = str(tmp_path / "db")
    assert load_failures(db, "mutant:x") == []
    save_failures(db, "mutant:x", [B, A, None, B])
    save_failures(db, "mutant:x", [A, C])
    assert load_failures(db, "mutant:x") == [B, A, C]
    path = store_path(db, "mutant:x")
    assert path.name == "mutant_x.jsonl" and path.read_text().count("\n") == 3
    assert load_failures(db, "other") == []  # another kernel's store is its own


def test_unparsable_lines_are_skipped(tmp_path):
    db = str(tmp_path / "db")
    save_failures(db, "k", [A])
    with store_path(db, "k").open("a") as f:
        f.write('{"seqlen_q": -1}\nnot json\n{"no_such_field": 1}\n')
    save_failures(db, "k", [B])
    assert load_failures(db, "k") == [A, B]


def test_no_database_keeps_nothing(tmp_path):
    save_failures(None, "k", [A])
    assert store_path(None, "k") is None and load_failures(None, "k") == []
    assert safe_name("tests.kernels_for_tests:Ref Kernel/1") == "tests.kernels_for_tests_Ref_Kernel_1"


def test_campaign_object_takes_its_numbers_from_the_profile():
    c = Campaign.of(RefKernel(), "quick", shrink_budget=7.0)
    q = PROFILES["quick"]
    assert (c.max_examples, c.time_budget, c.shrink_budget, c.seed) == (q.examples, q.search_s, 7.0, q.seed)
    assert Campaign.of(RefKernel(), "nightly", seed=5).seed == 5 and c.spec == RefKernel.spec


def test_campaign_object_runs_the_search_run_campaign_runs(tmp_path):
    kw = dict(max_examples=6, strategy=small(), edge_cases=False, database=None, config=RunConfig())
    a = run_campaign(RefKernel(), "quick", **kw)
    b = Campaign.of(RefKernel(), "quick", **kw).run()
    assert a.status == b.status == "passed"
    assert [c.problem for c in a.cases] == [c.problem for c in b.cases] and len(a.cases) >= 6
