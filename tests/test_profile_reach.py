"""Profiles never cap below a capability silently: GQA draws reach group 4 with 2 KV heads,
coverage records group sizes and head counts, and a run names what its profile leaves out."""

import pytest

from difftest.kernels.blockwise import CAPABILITY
from difftest.kernels.mutants import MUTANTS
from difftest.model.problem import Problem
from difftest.search.campaign import run_campaign
from difftest.strategies.coverage import GQA_WIDE, beyond_profile, expected_features, features


@pytest.mark.slow
def test_ci_kills_a_dk_summed_over_the_wrong_gqa_group():
    """Visible only with group >= 3 and >= 2 KV heads: the old ci/quick head cap of 4 never drew it."""
    m = MUTANTS["gqa-dkdv-wrong-group"]
    res = run_campaign(m.make(), "ci", max_examples=40, shrink_budget=5, database=None)
    assert res.failure is not None
    assert {"dk:budget", "dv:budget"} & set(res.failure.failed_gates)
    p = res.failure.problem
    assert p.heads_kv >= 2 and p.group >= 3


def test_coverage_records_group_and_head_counts():
    f = features(Problem(heads_q=8, heads_kv=2), CAPABILITY)
    assert {"heads:GQA", "heads:8/2", "gqa:group=4", GQA_WIDE} <= f
    assert GQA_WIDE not in features(Problem(heads_q=4, heads_kv=2), CAPABILITY)
    for profile in ("quick", "ci", "nightly"):
        assert GQA_WIDE in expected_features(CAPABILITY, profile)


def test_a_run_names_what_its_profile_leaves_out():
    gaps = beyond_profile(CAPABILITY, "ci")
    assert any(g.startswith("heads 5..16") for g in gaps) and any(g.startswith("seqlen 161..") for g in gaps)
    assert beyond_profile(CAPABILITY, "nightly") == []
