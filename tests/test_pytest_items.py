"""`pytest --difftest-kernel NAME`: a test per kernel and per output with no test file;
a broken kernel fails its campaign test and its dK test only (with the shrunk case and
reproducer), a correct one passes all; under xdist (-n 2) the outcomes are the same and
each kernel's campaign runs once, on one worker; an unknown name fails its one test."""

import json
import os

import pytest
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD, BAD = "tests.kernels_for_tests:RefKernel", "tests.kernels_for_tests:WrongDkForLongGqa"


@pytest.fixture
def sub(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.syspath_prepend(ROOT)
    return pytester


def _args(sub, *extra):
    return (
        "--difftest-kernel",
        GOOD,
        "--difftest-kernel",
        BAD,
        "--difftest-profile",
        "quick",
        "--difftest-max-examples",
        "3",
        "--difftest-seed",
        "1",
        "--difftest-out",
        str(sub.path / "out"),
        "-p",
        "no:cacheprovider",
        *extra,
    )


def _check(res, sub):
    # RefKernel: campaign + o, lse, dq, dk, dv, dsink; WrongDk: the same, campaign and dk fail
    res.assert_outcomes(passed=12, failed=2)
    out = res.stdout.str()
    assert f"FAILED difftest::{BAD} " in out and f"FAILED difftest::{BAD}::dk " in out
    assert "dk: budget FAILED" in out and "reproducer: " in out and "shrunk failure" in out
    (run,) = (sub.path / "out" / "pytest-campaigns").iterdir()
    recs = {p.name: json.loads(p.read_text()) for p in run.glob("*.json")}
    assert len(recs) == 2  # one campaign per kernel, shared by its tests
    assert out.count("test-dk-long-gqa [quick]: failed") == 1 and out.count("test-ref32 [quick]: passed") == 1
    return recs


@pytest.mark.slow
def test_kernel_option_collects_tests_without_a_test_file(sub):
    # collecting runs nothing: in this process (a subprocess costs a pytest start and a torch import);
    # under xdist the plugin sets this process's torch threads from OMP_NUM_THREADS: put them back
    threads = torch.get_num_threads()
    try:
        res = sub.runpytest_inprocess(*_args(sub, "--collect-only", "-q"))
    finally:
        torch.set_num_threads(threads)
    ids = [line for line in res.stdout.lines if line.startswith("difftest::")]
    assert ids == [f"difftest::{GOOD}"] + [
        f"difftest::{GOOD}::{o}" for o in ("o", "lse", "dq", "dk", "dv", "dsink")
    ] + [f"difftest::{BAD}"] + [f"difftest::{BAD}::{o}" for o in ("o", "lse", "dq", "dk", "dv", "dsink")]
    res = sub.runpytest_subprocess(*_args(sub), timeout=600)
    _check(res, sub)


@pytest.mark.slow
def test_kernel_tests_under_xdist_run_each_campaign_once(sub):
    import xml.etree.ElementTree as ET

    res = sub.runpytest_subprocess(*_args(sub, "-n", "2", "--junitxml", str(sub.path / "j.xml")), timeout=600)
    recs = _check(res, sub)
    assert {r["pytest_worker"] for r in recs.values()} <= {"gw0", "gw1"}
    assert all(r["settings"]["config"]["isolate"] for r in recs.values())  # kernels in a worker process, as the CLI
    props = {
        (tc.get("classname") + "::" + tc.get("name"), p.get("name")): p.get("value")
        for tc in ET.parse(sub.path / "j.xml").iter("testcase")
        for p in tc.iter("property")
    }
    dk = next(k for k, _ in props if "WrongDkForLongGqa" in k and k.endswith("::dk"))
    assert props[(dk, "difftest_status")] == "failed" and props[(dk, "difftest_reproducer")].endswith(".py")


def test_unknown_kernel_fails_its_test_in_one_line(sub):
    res = sub.runpytest_subprocess("--difftest-kernel", "no-such-kernel", "-p", "no:cacheprovider", timeout=300)
    res.assert_outcomes(failed=1)
    assert "--difftest-kernel no-such-kernel: unknown kernel 'no-such-kernel'" in res.stdout.str()
