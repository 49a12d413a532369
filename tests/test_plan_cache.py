"""The coverage phase's plans kept between runs (difftest/search/plan_cache.py): a replay gives the
plan's own rows, a campaign run twice runs the same cases without planning again, and a cache file
that is not this plan's, not well formed, illegal, or in a folder others can write is not used."""

import json
import os
from itertools import islice

import pytest

from difftest.judge.runner import RunConfig
from difftest.search.campaign import run_campaign
from difftest.search.plan_cache import PlanCache, plan_key
from difftest.strategies import configurations
from difftest.strategies.configurations import claimed_pairs, dimensions, plan
from tests.kernels_for_tests import RefKernel
from tests.test_configurations import BROAD

CAP = BROAD  # three dtypes, four head dims, three layouts: illegal tuples to plan around


def _inputs():
    dims = dimensions(CAP, "ci")
    _, illegal = claimed_pairs(CAP, "ci", dims, 2)
    assert illegal, "the test needs illegal tuples"
    covered = [{d.name: d.values[0] for d in dims}]
    return dims, dict(strength=2, covered=covered, illegal=sorted(illegal, key=repr), avoid=(), salt="0:2:7")


def _make(dims, kw, calls):
    def make():
        calls.append(1)
        return plan(dims, **kw)

    return make


def _take(cache, dims, kw, n, calls):
    rows = cache.plan(dims, **kw, make=_make(dims, kw, calls))
    got = list(islice(iter(rows), n))
    rows.save()
    return got


def test_a_replayed_plan_is_the_plans_own_rows_and_goes_on_past_the_prefix(tmp_path):
    dims, kw = _inputs()
    truth = list(islice(plan(dims, **kw), 40))
    calls: list = []
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 15, calls) == truth[:15] and len(calls) == 1
    files = list((tmp_path / "plans").iterdir())
    assert [f.name for f in files] == [f"{plan_key(dims, 2, kw['covered'], kw['illegal'], kw['salt'])}.json"]
    assert (tmp_path / "plans").stat().st_mode & 0o077 == 0
    calls.clear()
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 15, calls) == truth[:15] and calls == []  # no planning
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 40, calls) == truth and len(calls) == 1
    calls.clear()
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 40, calls) == truth and calls == []
    # another salt (another stage, or another seed) is another plan
    other = dict(kw, salt="0:2:8")
    assert _take(PlanCache(tmp_path / "plans"), dims, other, 5, calls) == list(islice(plan(dims, **other), 5))
    assert calls == [1]


def test_a_whole_plan_is_replayed_to_its_end_without_planning(tmp_path):
    dims, kw = _inputs()
    kw = dict(kw, strength=1)
    truth = list(plan(dims, **kw))
    calls: list = []
    assert _take(PlanCache(tmp_path), dims, kw, 10_000, calls) == truth and calls == [1]
    calls.clear()
    assert _take(PlanCache(tmp_path), dims, kw, 10_000, calls) == truth and calls == []


def test_no_cache_and_a_plan_with_avoid_predicates_plan_afresh(tmp_path):
    dims, kw = _inputs()
    calls: list = []
    assert _take(PlanCache(None), dims, kw, 5, calls) == list(islice(plan(dims, **kw), 5)) and calls == [1]
    avoid = [(("dtype",), lambda r: r["dtype"] == "float16")]
    kw = dict(kw, avoid=avoid)
    _take(PlanCache(tmp_path), dims, kw, 5, calls)
    assert not any(tmp_path.iterdir())


def _poison(tmp_path, dims, kw, edit):
    """Cache 10 rows, rewrite the file with ``edit(body)``, and return what a new cache replays."""
    folder = tmp_path / "plans"
    _take(PlanCache(folder), dims, kw, 10, [])
    (f,) = folder.iterdir()
    body = json.loads(f.read_text())
    edit(body, f)
    calls: list = []
    got = _take(PlanCache(folder), dims, kw, 10, calls)
    return got, calls


def _illegal_row(dims, kw):
    (a, va), (b, vb) = kw["illegal"][0]
    names = [d.name for d in dims]
    row = [0] * len(dims)
    row[names.index(a)] = list(dims[names.index(a)].values).index(va)
    row[names.index(b)] = list(dims[names.index(b)].values).index(vb)
    return row


@pytest.mark.parametrize(
    "how",
    ["other key", "index out of range", "not an index", "short row", "illegal tuple", "a row run before", "not json"],
)
def test_a_cache_file_that_is_not_this_plans_legal_rows_is_not_used(tmp_path, how):
    dims, kw = _inputs()
    truth = list(islice(plan(dims, **kw), 10))

    def edit(body, f):
        rows = body["rows"]
        if how == "other key":
            body["key"] = "0" * 64
        elif how == "index out of range":
            rows[3][0] = 99
        elif how == "not an index":
            rows[3][0] = True
        elif how == "short row":
            rows[3] = rows[3][:-1]
        elif how == "illegal tuple":
            rows[3] = _illegal_row(dims, kw)
        elif how == "a row run before":
            rows[3] = [0] * len(dims)
        if how == "not json":
            f.write_text("{" + json.dumps(body))
        else:
            f.write_text(json.dumps(body))

    got, calls = _poison(tmp_path, dims, kw, edit)
    assert got == truth and calls == [1]


def test_a_cache_in_a_folder_others_can_write_or_behind_a_link_is_not_read(tmp_path):
    dims, kw = _inputs()
    truth = list(islice(plan(dims, **kw), 10))

    def forge(body, f):
        body["rows"] = list(reversed(body["rows"]))  # legal rows, another order
        f.write_text(json.dumps(body))

    got, calls = _poison(tmp_path, dims, kw, forge)
    assert got == truth[::-1] and calls == []  # a legal forgery in a private folder is replayed: rows, no more
    os.chmod(tmp_path / "plans", 0o777)
    calls = []
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 10, calls) == truth and calls == [1]
    os.chmod(tmp_path / "plans", 0o700)
    (f,) = (tmp_path / "plans").iterdir()
    elsewhere = tmp_path / "elsewhere.json"
    os.replace(f, elsewhere)
    os.symlink(elsewhere, f)
    calls = []
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 10, calls) == truth and calls == [1]
    assert not (tmp_path / "plans" / f.name).is_symlink()  # the save replaced the link
    assert json.loads(elsewhere.read_text())["rows"]  # and wrote nothing through it
    # the plans folder itself a link to a private folder of forged rows: not read, not written through
    forged = tmp_path / "forged"
    os.replace(tmp_path / "plans", forged)
    (f,) = forged.iterdir()
    forge(json.loads(f.read_text()), f)
    before = f.read_text()
    os.symlink(forged, tmp_path / "plans")
    calls = []
    assert _take(PlanCache(tmp_path / "plans"), dims, kw, 10, calls) == truth and calls == [1]
    assert f.read_text() == before and [g.name for g in forged.iterdir()] == [f.name]


def test_a_campaign_run_twice_runs_the_same_cases_without_planning_again(tmp_path, monkeypatch):
    def campaign():
        return run_campaign(
            RefKernel(),
            "ci",
            max_examples=2,
            edge_cases=False,
            database=None,
            coverage=2,
            config=RunConfig(isolate=False),
            plan_cache=tmp_path / "plans",
        )

    first = campaign()
    assert any((tmp_path / "plans").iterdir())
    monkeypatch.setattr(configurations, "covering_rows", _no_planning)
    second = campaign()
    assert [c.problem for c in second.cases] == [c.problem for c in first.cases]
    assert second.coverage["pairs"]["covered"] == first.coverage["pairs"]["covered"] > 0


def _no_planning(*a, **k):
    raise AssertionError("covertable planned again")
