"""A seeded search draws the same Problems whatever the kernel returns and whatever local
code is imported (difftest/search/seeded.py): what `--seed` promises CI and `difftest gate`."""

import importlib
import sys

import hypothesis
import pytest
import torch

from difftest.search.campaign import run_campaign
from difftest.search.seeded import local_constants_off
from tests.kernels_for_tests import RefKernel

# enough drawn examples for Hypothesis to start targeting (it does after half of them)
EXAMPLES = 60


class Nudged(RefKernel):
    """A candidate that changes only the last bits of dQ (2^-20 relative): it passes, as the
    baseline does, with other error ratios."""

    def corrupt(self, inputs, out):
        out.dq = out.dq * (1 + 2**-20)
        return out


class Noisy(RefKernel):
    """Run-to-run noise in dQ's last bits (atomics), no determinism claimed."""

    def corrupt(self, inputs, out):
        out.dq = out.dq * (1 + float(torch.randint(-1, 2, ())) * 2**-20)
        return out


def _drawn(kernel):
    res = run_campaign(kernel, "quick", max_examples=EXAMPLES, edge_cases=False, database=None, seed=5, time_budget=1e4)
    assert res.status == "passed", res.reason
    return [c.problem for c in res.cases]


@pytest.mark.parametrize("candidate", [Nudged, Noisy], ids=["last-bits-changed", "nondeterministic"])
def test_a_seeded_search_draws_the_same_problems_whatever_the_kernel_returns(candidate):
    """The old campaign steered every search by the kernel's error ratio (hypothesis.target):
    its seeded draws followed the kernel's last bits and diverged after half the examples."""
    baseline = _drawn(RefKernel())
    assert len(baseline) > EXAMPLES // 2 + 10  # well into the examples Hypothesis would target (a few repeat)
    assert _drawn(candidate()) == baseline
    assert _drawn(candidate()) == baseline


def test_a_seeded_search_ignores_the_literals_of_local_code(tmp_path, monkeypatch):
    """A kernel change that edits literals (tile sizes) in local source code: Hypothesis mixes
    the constants of every imported module outside site-packages into its draws, and the old
    campaign drew other Problems from the same seed once such a module was imported."""
    before = _drawn(RefKernel())
    (tmp_path / "kernel_v2_literals.py").write_text(
        "BLOCK_M, BLOCK_N, STAGES, WARPS = 96, 48, 3, 5\n"
        "TILES = (17, 33, 65, 129, 7, 11, 13, 2.5, 0.125, 1e-3, -7, 255, 1023)\n"
        "NAME = 'tail_kernel_v2'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("kernel_v2_literals")
        assert _drawn(RefKernel()) == before
    finally:
        sys.modules.pop("kernel_v2_literals", None)


def test_only_an_unseeded_search_is_steered_by_the_error_ratio(monkeypatch):
    calls = []
    monkeypatch.setattr(hypothesis, "target", lambda score, label="": calls.append(label))
    run_campaign(RefKernel(), "quick", max_examples=5, edge_cases=False, database=None, seed=5)
    assert calls == []
    run_campaign(RefKernel(), "quick", max_examples=5, edge_cases=False, database=None, seed=None)
    assert calls and set(calls) == {"worst error ratio"}


def test_local_constants_are_off_inside_the_block_and_back_after_it():
    """The block replaces Hypothesis's internal collector: if an upgrade moves it, this fails
    (and the seeded draws above would follow local code again)."""
    from hypothesis.internal.conjecture import providers

    original = providers._get_local_constants
    assert len(original()) > 0  # this test module's own literals, at least
    with local_constants_off():
        assert len(providers._get_local_constants()) == 0
        with local_constants_off():  # nested
            assert len(providers._get_local_constants()) == 0
        assert len(providers._get_local_constants()) == 0
    assert providers._get_local_constants is original
    assert len(providers.CONSTANTS_CACHE.cache) == 0  # no empty local pools left behind
