"""myattn's own difftest tests (after `pip install -e examples/myattn`): the pytest fixture
runs a campaign through the entry point and fails with the shrunk case on a bug; each
planted bug (MYATTN_BUG, switched on by monkeypatch for one test) is found. Each campaign
runs in a kernel worker started with the test's environment."""

import pytest


def test_myattn_backward(difftest_campaign):
    difftest_campaign("myattn", profile="quick")


@pytest.mark.parametrize("bug", ["gqa-head-map", "causal-offset"])
def test_planted_bug_is_found(difftest_campaign, monkeypatch, bug):
    monkeypatch.setenv("MYATTN_BUG", bug)
    res = difftest_campaign("myattn", profile="quick", max_examples=40, database=None, expect_failure=True)
    assert res.failed, f"MYATTN_BUG={bug} was not found"
