"""One profile table: the strategies, the campaign and ``difftest mutants`` read the same
Profile for a name, and an unknown name fails in one line that lists the allowed ones
(before, ``difftest mutants`` quietly ran an unknown profile as ci)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from difftest import strategies
from difftest.kernels import mutants as catalogue
from difftest.kernels.blockwise import BlockwiseAttention
from difftest.measure import mutants as mutants_cmd
from difftest.model.profiles import PROFILES, Profile, get_profile
from difftest.search.campaign import run_campaign

ROOT = Path(__file__).resolve().parents[1]


def test_unknown_profile_names_the_allowed_ones():
    with pytest.raises(ValueError) as e:
        get_profile("nope")
    msg = str(e.value)
    assert "\n" not in msg and "'nope'" in msg
    for name in ("quick", "ci", "nightly", "gpu"):
        assert repr(name) in msg


@pytest.mark.parametrize(
    "call",
    [
        lambda: run_campaign(BlockwiseAttention(), "nope", max_examples=1, database=None),
        lambda: mutants_cmd.run_mutants(["dk-missing-scale"], "nope"),
        lambda: mutants_cmd.run_mutant(None, "nope"),
        lambda: strategies.problems(BlockwiseAttention().capability, "nope"),
        lambda: strategies.edge_problems(BlockwiseAttention().capability, "nope"),
    ],
)
def test_every_reader_rejects_an_unknown_profile(call):
    with pytest.raises(ValueError, match=r"profile='nope' is invalid: allowed \['ci', 'gpu', 'nightly', 'quick'\]"):
        call()


def test_one_table_serves_strategies_campaign_and_mutants(monkeypatch):
    assert strategies.PROFILES is PROFILES
    assert set(PROFILES) == {"quick", "ci", "nightly", "gpu"}
    for name, prof in PROFILES.items():
        assert isinstance(prof, Profile) and prof.name == name and get_profile(prof) is prof
        assert prof.examples >= 1 and prof.search_s > 0 and prof.shrink_s > 0
        assert 0 < prof.mutant_search_s <= prof.mutant_total_s and prof.mutant_shrink_s > 0
    monkeypatch.setattr(catalogue, "all_mutants", lambda: {})  # no mutant runs: the report carries the budgets
    report = mutants_cmd.run_mutants(None, "quick")
    assert report.rows == []
    q = PROFILES["quick"]
    assert (report.per_mutant_budget, report.shrink_budget, report.time_budget) == (
        q.mutant_search_s,
        q.mutant_shrink_s,
        q.mutant_total_s,
    )


def test_campaign_settings_come_from_the_profile():
    res = run_campaign(BlockwiseAttention(), "quick", max_examples=1, edge_cases=False, database=None, time_budget=0.0)
    q = PROFILES["quick"]
    assert res.profile == "quick"
    assert res.settings["seed"] == q.seed and res.settings["shrink_budget_s"] == q.shrink_s


@pytest.mark.parametrize("command", [["run", "--profile", "nope"], ["mutants", "--profile", "nope"]])
def test_cli_rejects_an_unknown_profile_with_exit_2(command, tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "difftest", *command],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert r.returncode == 2 and "'nope'" in r.stderr and "quick" in r.stderr, r.stderr
