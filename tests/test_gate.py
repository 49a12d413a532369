"""`difftest gate`: a report compared with itself passes; a broken candidate of the same
kernel fails with the shrunk problem and reproducer in the JUnit file; ratio growth,
lost determinism and lost coverage fail; known failures do not block; bad input is one
line and exit code 2. `--seed` makes two runs draw the same problems."""

import copy
import dataclasses
import json
import xml.etree.ElementTree as ET

import pytest

from difftest.judge.runner import RunConfig
from difftest.model.profiles import get_profile
from difftest.report.ci_gate import compare, render
from difftest.report.junit import junit_xml
from difftest.report.write import write_json
from difftest.search.campaign import run_campaign
from difftest.search.first_failure import FirstFailure
from tests.kernels_for_tests import Flaky, RefKernel, WrongDkForLongGqa


class BrokenRef(WrongDkForLongGqa):
    """The candidate: the same kernel name as the baseline, dK wrong for long GQA."""

    name = RefKernel.name


class NoisyRef(RefKernel):
    """The candidate: run-to-run noise in dQ, no determinism claimed (measured only)."""

    name = RefKernel.name
    corrupt = Flaky.corrupt


def _report(tmp_path, name, kernel, **kw):
    kw.setdefault("max_examples", 25)
    res = run_campaign(
        kernel,
        "quick",
        edge_cases=kw.pop("edge_cases", False),
        database=None,
        out_dir=tmp_path / name,
        seed=kw.pop("seed", 3),
        **kw,
    )
    path = write_json([res], tmp_path / name / "report.json")
    return path, json.loads(path.read_text())


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return _report(tmp_path_factory.mktemp("base"), "a", RefKernel(), config=RunConfig(determinism_runs=2))


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    return _report(
        tmp_path_factory.mktemp("broken"),
        "b",
        BrokenRef(),
        max_examples=40,
        shrink_budget=10.0,
        config=RunConfig(determinism_runs=2),
    )


def test_report_against_itself_passes(baseline, tmp_path, difftest_cli):
    path, doc = baseline
    res = compare(doc, copy.deepcopy(doc))
    assert res.passed and not res.findings, render(res)
    r = difftest_cli(
        "gate", "--baseline", str(path), "--candidate", str(path), "--junit", str(tmp_path / "j.xml"), cwd=tmp_path
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "gate: PASSED" in r.stdout and "dk      budget" in r.stdout
    suites = ET.parse(tmp_path / "j.xml").getroot()
    names = {tc.get("name") for tc in suites.iter("testcase")}
    assert suites.get("failures") == "0" and {"coverage", "all:run", "dq:determinism_info"} <= names
    assert {f"{o}:budget" for o in ("o", "lse", "dq", "dk", "dv")} <= names


def test_broken_candidate_fails_with_shrunk_problem_and_reproducer(baseline, broken, tmp_path, difftest_cli):
    a_path, a = baseline
    b_path, b = broken
    assert b["campaigns"][0]["status"] == "failed"
    r = difftest_cli(
        "gate",
        "--baseline",
        str(a_path),
        "--candidate",
        str(b_path),
        "--junit",
        str(tmp_path / "j.xml"),
        "--html",
        str(tmp_path / "g.html"),
        cwd=tmp_path,
    )
    assert r.returncode == 1, r.stdout + r.stderr
    assert "REGRESSION: test-ref32 dk:budget" in r.stdout and "gate: FAILED" in r.stdout
    repro = b["campaigns"][0]["reproducer"]["py"]
    assert f"reproducer: {repro}" in r.stdout
    root = ET.parse(tmp_path / "j.xml").getroot()
    cases = {(tc.get("classname"), tc.get("name")): tc for tc in root.iter("testcase")}
    dk = cases[("difftest.test-ref32", "dk:budget")]
    fail = dk.find("failure")
    shrunk = b["campaigns"][0]["failure"]["problem"]
    assert fail is not None and "regression" in fail.get("type")
    assert "shrunk problem: " + json.dumps(shrunk, sort_keys=True) in fail.text and f"reproducer: {repro}" in fail.text
    assert cases[("difftest.test-ref32", "dq:budget")].find("failure") is None  # dQ is still right
    assert int(root.get("failures")) >= 1
    assert "Gate: " in (tmp_path / "g.html").read_text()


def test_known_failure_does_not_block_but_a_newly_failing_problem_does(broken):
    _, b = broken
    res = compare(b, copy.deepcopy(b))
    assert res.passed and [f.kind for f in res.findings] == ["known"]
    root = ET.fromstring(junit_xml(res))
    # skipped: dk:budget, and the campaign's one finding as its own testcase
    assert root.get("failures") == "0" and root.get("skipped") == "2"
    fid = b["campaigns"][0]["findings"][0]["id"]
    tc = next(t for t in root.iter("testcase") if t.get("name") == f"finding {fid}")
    assert tc.find("skipped") is not None and "reproducer: " in tc.find("skipped").text
    # the same failing problem passed in a baseline: a case regression, even though dk:budget "already failed"
    a = copy.deepcopy(b)
    bad = next(c for c in a["campaigns"][0]["cases"] if c["status"] == "failed")
    bad["status"], bad["failed_gates"] = "passed", []
    for v in bad["verdicts"]:
        v["passed"] = True
    res = compare(a, b)
    assert not res.passed and any(
        f.kind == "regression" and "passed in the baseline" in f.message for f in res.findings
    ), render(res)


def test_ratio_growth_fails_beyond_the_allowed_factor(baseline):
    _, a = baseline
    b = copy.deepcopy(a)
    case = max(b["campaigns"][0]["cases"], key=lambda c: c["worst_ratio"])
    v = next(v for v in case["verdicts"] if v["output"] == "dv" and v["gate"] == "budget")
    old = max(
        x["numbers"]["ratio"]
        for c in a["campaigns"][0]["cases"]
        for x in c["verdicts"]
        if x["output"] == "dv" and x["gate"] == "budget"
    )
    v["numbers"]["ratio"] = max(old, 0.05) * 2.5  # still under the limit: only growth can catch it
    res = compare(a, b, max_ratio_growth=1.0)
    assert [(f.kind, f.output) for f in res.findings] == [("ratio", "dv")], render(res)
    assert compare(a, b, max_ratio_growth=2.0).passed


def test_lost_determinism_fails(baseline, tmp_path):
    _, a = baseline
    _, b = _report(tmp_path, "b", NoisyRef(), config=RunConfig(determinism_runs=2))
    res = compare(a, b, max_ratio_growth=100.0)
    lost = [f for f in res.findings if f.kind == "determinism"]
    assert lost and lost[0].output == "dq" and not res.passed, render(res)


def test_less_coverage_fails(baseline):
    _, a = baseline
    b = copy.deepcopy(a)  # a feature no longer drawn, one problem now skipped
    c = b["campaigns"][0]
    feature = sorted(c["coverage"]["hit"])[0]
    del c["coverage"]["hit"][feature]
    c["cases"][0]["status"], c["cases"][0]["reason"] = "skipped", "dtype float16 unsupported"
    res = compare(a, b)
    msgs = " | ".join(f.message for f in res.findings)
    assert not res.passed and f"not in the candidate: {feature}" in msgs and "skipped in the candidate" in msgs
    b["campaigns"] = []  # the kernel gone
    res = compare(a, b)
    assert [f.kind for f in res.findings] == ["coverage"] and "absent from the candidate" in res.findings[0].message
    res = compare(b, a)  # B covers more: fine
    assert res.passed


class NoSinksRef(RefKernel):
    """The candidate: the same kernel, claiming no sinks (a narrower capability)."""

    capability = dataclasses.replace(RefKernel.capability, sinks=False)


def _cut_after(n):
    """FirstFailure.search_over as if the search budget ran out once n cases have run."""
    return lambda self: self.state.failed_at is None and len(self.state.result.cases) >= n


def test_a_candidate_cut_short_by_its_budget_is_listed_not_blocking(baseline, tmp_path, monkeypatch):
    """The same seeded stream, stopped by the candidate's search budget (a loaded runner, cold
    builds of a changed kernel): what it did not reach is no coverage loss. The old gate failed
    it; a narrower candidate cut as short still fails."""
    _, a = baseline
    monkeypatch.setattr(FirstFailure, "search_over", _cut_after(6))
    _, b = _report(tmp_path, "cut", RefKernel(), config=RunConfig(determinism_runs=2))
    cb = b["campaigns"][0]
    assert len(cb["cases"]) == 6 and cb["unrun"] > 0
    res = compare(a, b)
    assert res.passed, render(res)
    assert res.findings and {f.kind for f in res.findings} == {"incomplete"}
    assert "not reached" in render(res) and "search budget ran out after 6 of the baseline's" in render(res)
    xml = junit_xml(res)
    assert "<failure" not in xml and "not reached in the candidate's search budget" in xml
    _, n = _report(tmp_path, "narrow", NoSinksRef(), config=RunConfig(determinism_runs=2))
    assert n["campaigns"][0]["unrun"] > 0
    res = compare(a, n)
    assert not res.passed and "coverage" in {f.kind for f in res.findings}, render(res)


def test_a_campaign_cut_by_its_budget_says_so(monkeypatch, capsys):
    from difftest.run.plan import print_campaign as _print_campaign

    monkeypatch.setattr(FirstFailure, "search_over", _cut_after(3))
    kernel = RefKernel()
    res = run_campaign(kernel, "quick", max_examples=10, edge_cases=False, database=None, seed=3)
    assert len(res.cases) == 3 and res.unrun > 0
    _print_campaign(kernel, res)
    assert f"search budget spent: {res.unrun} drawn problems not run" in capsys.readouterr().out


def test_bad_input_is_one_line_and_exit_2(baseline, tmp_path, difftest_cli):
    path, _ = baseline
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "other.json").write_text(json.dumps({"campaigns": []}))
    (tmp_path / "typed.json").write_text(
        json.dumps({"difftest_report": 1, "campaigns": [{"kernel": "x", "cases": [{"status": 3}]}]})
    )
    for args in (
        ["--candidate", str(path), "--baseline", str(tmp_path / "missing.json")],
        ["--candidate", str(tmp_path / "bad.json"), "--baseline", str(path)],
        ["--candidate", str(tmp_path / "other.json"), "--baseline", str(path)],
        ["--candidate", str(tmp_path / "typed.json"), "--baseline", str(path)],
        ["--candidate", str(path), "--baseline", str(path), "--max-ratio-growth", "nan"],
    ):
        r = difftest_cli("gate", *args, cwd=tmp_path)
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and not r.stdout, (args, r.stderr)


def test_seed_draws_the_same_problems_in_an_unseeded_profile(tmp_path, difftest_cli):
    # nightly (unseeded) with its coverage phase at t = 1 instead of 3: the same seeded draws
    # and a coverage phase realised from the seed, 24 cases instead of 238 (6.5 s a campaign
    # alone on one core, against 0.4 s)
    nightly = dataclasses.replace(get_profile("nightly"), coverage=1)

    def problems(seed):
        res = run_campaign(RefKernel(), nightly, max_examples=6, edge_cases=False, database=None, seed=seed)
        assert res.settings["seed"] == seed
        return [c.problem for c in res.cases]

    assert problems(11) == problems(11) != problems(12)
    r = difftest_cli("run", "-k", "tests.kernels_for_tests:RefKernel", "--seed", "-1", cwd=tmp_path)
    assert r.returncode == 2 and "--seed" in r.stderr


def test_looser_gates_other_narrowing_or_another_shard_are_not_compared(baseline):
    from difftest.report.read import ReportError

    _, a = baseline
    b = copy.deepcopy(a)
    b["campaigns"][0]["settings"]["config"]["gates"]["k"]["dq"] = 100.0  # a looser budget hides regressions
    res = compare(a, b)
    assert not res.passed and [f.kind for f in res.findings] == ["settings"]
    assert "gates.k.dq 1.5 -> 100.0" in res.findings[0].message
    assert ET.fromstring(junit_xml(res)).find(".//testcase[@name='settings']/failure") is not None
    b = copy.deepcopy(a)
    b["campaigns"][0]["settings"]["narrowed"] = {"sinks": False}
    res = compare(a, b)
    assert [f.kind for f in res.findings] == ["settings"]
    assert "narrowed None -> {'sinks': False}" in res.findings[0].message
    b = copy.deepcopy(a)
    b["campaigns"][0]["settings"]["shard"] = "0/2"
    with pytest.raises(ReportError, match="merge"):
        compare(a, b)


def test_ill_typed_reports_are_refused_or_handled_never_a_traceback(baseline):
    """Every field the gate, merge and HTML report read, set to each wrong type: either the
    loader refuses it (one ReportError line) or all three commands work on it."""
    from difftest.report.html import render_html
    from difftest.report.merge import merge_reports
    from difftest.report.read import ReportError, check_report

    _, a = baseline
    a = copy.deepcopy(a)
    a["campaigns"][0]["cases"] = a["campaigns"][0]["cases"][:3]
    paths = (
        [("campaigns",), ("campaigns", 0)]
        + [
            ("campaigns", 0, k)
            for k in (
                "kernel",
                "status",
                "cases",
                "settings",
                "coverage",
                "failure",
                "failures",
                "reproducer",
                "reason",
                "profile",
                "elapsed_s",
                "compile_stats",
            )
        ]
        + [("campaigns", 0, "coverage", k) for k in ("hit", "missing")]
        + [("campaigns", 0, "settings", k) for k in ("shard", "seed", "narrowed", "config", "edge_cases")]
        + [("campaigns", 0, "cases", 0)]
        + [
            ("campaigns", 0, "cases", 0, k)
            for k in ("problem", "status", "verdicts", "worst_ratio", "reason", "failed_gates")
        ]
        + [
            ("campaigns", 0, "cases", 0, "verdicts", 0, k)
            for k in ("output", "gate", "passed", "numbers", "worst", "message")
        ]
        + [("campaigns", 0, "cases", 0, "verdicts", 0, "numbers", "ratio")]
    )
    refused = 0
    for path in paths:
        for bad in (None, "x", 7, 1.5, True, [], {}, [1], {"a": 1}):
            doc = copy.deepcopy(a)
            node = doc
            for p in path[:-1]:
                node = node[p]
            node[path[-1]] = bad
            try:
                check_report(doc, "r.json")
            except ReportError as e:
                assert "\n" not in str(e) and str(e).startswith("r.json")
                refused += 1
                continue
            try:
                res = compare(a, doc)
                junit_xml(res), render(res), render_html(doc, gate=res)
                compare(doc, a), compare(doc, doc)
                merge_reports([("r.json", doc)])
            except ReportError:
                refused += 1
            except Exception as e:  # noqa: BLE001 - the point of the test
                raise AssertionError(f"{path} = {bad!r}: {type(e).__name__}: {e}") from e
    assert refused > len(paths)  # most wrong types are refused up front


def test_a_report_reads_back_as_the_types_that_wrote_it(broken):
    """load_report gives each campaign as the CampaignResult that wrote it, its cases and
    shrunk failure as CaseResults: written again, the record is the one the run wrote."""
    from difftest.judge.runner import CaseResult
    from difftest.report.read import load_report
    from difftest.report.write import campaign_record
    from difftest.search.result import CampaignResult

    path, doc = broken
    (c,) = load_report(path).campaigns
    assert isinstance(c, CampaignResult) and all(isinstance(x, CaseResult) for x in c.cases)
    assert c.failure is not None and c.failure.failed and c.reproducer == doc["campaigns"][0]["reproducer"]
    again = json.loads(json.dumps(campaign_record(c)))
    written = doc["campaigns"][0]
    for key in (
        "kernel",
        "profile",
        "status",
        "counts",
        "outputs",
        "triage",
        "failure",
        "cases",
        "findings",
        "coverage",
        "settings",
        "unrun",
        "hunt",
    ):
        assert again[key] == written[key], key


def test_a_candidate_stopped_at_its_first_failure_loses_no_coverage(baseline, broken):
    """A first-failure candidate ran only up to its failure: what it did not run is not lost
    coverage (its regression blocks it already). The gate names the regression and reads the
    missing features and pairs as the stop, not as COVERAGE findings."""
    _, a = baseline
    _, b = broken
    assert b["campaigns"][0]["status"] == "failed" and not b["campaigns"][0].get("hunt")
    res = compare(a, b)
    kinds = {str(f.kind) for f in res.findings}
    assert not res.passed and any(f.output == "dk" for f in res.findings), render(res)
    assert not any(f.output == "coverage" and f.blocking for f in res.findings), render(res)
    assert "stopped at its first failure" in render(res), kinds
