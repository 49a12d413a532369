"""The pytest plugin: the difftest_campaign fixture fails a test on a broken kernel (with
the shrunk case and reproducer path) and passes a correct one; the gpu marker skips
without CUDA; one GPU per xdist worker."""

import os

import pytest

from difftest.pytest_plugin import worker_gpu

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def sub(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ROOT)
    monkeypatch.syspath_prepend(ROOT)
    return pytester


def test_fixture_fails_broken_kernel_and_passes_correct_one(sub):
    sub.makepyfile(
        test_k="""
        def test_good(difftest_campaign):
            r = difftest_campaign("tests.kernels_for_tests:RefKernel", max_examples=5, edge_cases=False, database=None)
            assert r.status == "passed"

        def test_bad(difftest_campaign):
            difftest_campaign("tests.kernels_for_tests:WrongDkForLongGqa", max_examples=40, edge_cases=False,
                              database=None)
    """
    )
    res = sub.runpytest_subprocess("--difftest-profile", "quick", "--difftest-out", str(sub.path / "out"), timeout=600)
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "dk: budget FAILED" in out and "reproducer:" in out
    assert "difftest campaigns" in out and "test-dk-long-gqa [quick]: failed" in out


def test_gpu_marker_skips_without_cuda(sub):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the marker would not skip")
    sub.makepyfile(
        test_g="""
        import pytest

        @pytest.mark.gpu
        def test_needs_gpu():
            raise AssertionError("must not run without CUDA")
    """
    )
    res = sub.runpytest_inprocess()  # nothing runs: no interpreter of its own needed
    res.assert_outcomes(skipped=1)


def test_one_gpu_per_xdist_worker():
    assert worker_gpu("gw0", ["0", "1"]) == "0"
    assert worker_gpu("gw1", ["0", "1"]) == "1"
    assert worker_gpu("gw2", ["0", "1"]) == "0"
    assert worker_gpu("gw1", ["3", "5"]) == "5"
    assert worker_gpu("master", ["0"]) is None and worker_gpu("gw0", []) is None


@pytest.mark.slow
def test_fixture_isolates_kernels_and_reports_junit_properties(sub):
    """A kernel that kills its own process fails its test only (the kernel ran in a
    worker process, as in the CLI); JUnit entries carry kernel, profile, cases run and
    the absolute reproducer path."""
    import xml.etree.ElementTree as ET

    # every crash costs the next case a worker restart (an interpreter importing torch): the
    # crash's shrink gets 1 s, and so do the simplify walk and the signature after it (not 5)
    sub.makeconftest("""
        from difftest.search import first_failure

        first_failure.FINISH_FLOOR_S = 1.0
    """)
    sub.makepyfile(
        test_k="""
        def test_crashing_kernel(difftest_campaign):
            difftest_campaign("tests.kernels_for_tests:CrashOnLongQ", max_examples=12, database=None, shrink_budget=1)

        def test_after_the_crash(difftest_campaign):
            r = difftest_campaign("tests.kernels_for_tests:RefKernel", max_examples=2, edge_cases=False,
                                  database=None, isolate=False)
            assert r.status == "passed" and r.settings["config"]["isolate"] is False
    """
    )
    junit = sub.path / "junit.xml"
    res = sub.runpytest_subprocess(
        "--difftest-profile", "quick", "--difftest-out", "out", f"--junitxml={junit}", timeout=600
    )
    res.assert_outcomes(passed=1, failed=1)
    assert "KernelCrashed" in res.stdout.str()
    cases = {
        c.get("name"): {p.get("name"): p.get("value") for p in c.iter("property")}
        for c in ET.parse(junit).getroot().iter("testcase")
    }
    crash = cases["test_crashing_kernel"]
    assert crash["difftest_kernel"] == "test-crash" and crash["difftest_profile"] == "quick"
    assert int(crash["difftest_cases"]) >= 1 and crash["difftest_status"] == "failed"
    assert os.path.isabs(crash["difftest_reproducer"]) and os.path.exists(crash["difftest_reproducer"])
    assert crash["difftest_reproducer"].startswith(str(sub.path / "out"))
    assert cases["test_after_the_crash"]["difftest_status"] == "passed"
    assert "difftest_reproducer" not in cases["test_after_the_crash"]


@pytest.mark.slow
def test_xdist_workers_share_the_cores_between_their_torch_threads(sub, monkeypatch):
    from difftest.pytest_plugin import worker_threads

    assert worker_threads(2, 2) == 1 and worker_threads(2, 16) == 8 and worker_threads(4, 2) == 1
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    sub.makepyfile(
        test_t="""
        import os
        import torch

        WANT = max(1, (os.cpu_count() or 1) // 2)

        def test_a():
            assert os.environ["OMP_NUM_THREADS"] == str(WANT) and torch.get_num_threads() == WANT

        def test_b():
            assert os.environ["OMP_NUM_THREADS"] == str(WANT) and torch.get_num_threads() == WANT
    """
    )
    res = sub.runpytest_subprocess("-n", "2", "-p", "xdist", timeout=300)
    res.assert_outcomes(passed=2)


@pytest.mark.slow
def test_gpu_per_worker_records_each_workers_gpus(sub, monkeypatch):
    """`-n 2 --difftest-gpu-per-worker`: each campaign's JUnit entry and the summary line say which
    worker ran it on which GPUs (gw0 -> the first listed, gw1 -> the second)."""
    import xml.etree.ElementTree as ET

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    sub.makepyfile(
        test_g="""
        import pytest

        @pytest.mark.parametrize("i", range(4))
        def test_campaign(difftest_campaign, i):
            difftest_campaign("tests.kernels_for_tests:RefKernel", max_examples=1, edge_cases=False,
                              database=None, isolate=False)
    """
    )
    junit = sub.path / "junit.xml"
    res = sub.runpytest_subprocess(
        "-n",
        "2",
        "-p",
        "xdist",
        "--difftest-gpu-per-worker",
        "--difftest-profile",
        "quick",
        "--difftest-out",
        "out",
        f"--junitxml={junit}",
        timeout=600,
    )
    res.assert_outcomes(passed=4)
    seen = {}
    for c in ET.parse(junit).getroot().iter("testcase"):
        props = {p.get("name"): p.get("value") for p in c.iter("property")}
        seen[props["difftest_worker"]] = props["difftest_cuda_visible_devices"]
    assert seen and all(seen[w] == {"gw0": "3", "gw1": "5"}[w] for w in seen), seen
    assert "(worker gw" in res.stdout.str() and "CUDA_VISIBLE_DEVICES=" in res.stdout.str()


def test_the_plugin_loads_light_into_every_pytest_session():
    """pytest loads the plugin (entry point pytest11) into every session of anyone who installs
    difftest: it imports the run machinery (run/plan, the reports) on a campaign's first use,
    never at load (#45)."""
    import subprocess
    import sys

    code = (
        "import sys, difftest.pytest_plugin; "
        "print(sorted(m for m in sys.modules if m.startswith(('difftest.run', 'difftest.report', "
        "'difftest.search', 'difftest.judge', 'torch', 'hypothesis'))))"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": ROOT},
    )
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_the_plugin_registers_only_its_own_marker(monkeypatch):
    """``gpu`` is the plugin's; ``slow`` is this project's (pyproject.toml), not every user's."""
    import difftest.pytest_plugin as plugin

    lines = []

    class Config:
        stash = {}

        def addinivalue_line(self, name, line):
            lines.append((name, line.split(":")[0]))

        def getoption(self, name):
            return {"--difftest-profile": "ci", "--difftest-out": plugin.DEFAULT_OUT}.get(name)

    monkeypatch.setattr(plugin, "check_options", lambda config: None)
    plugin.pytest_configure(Config())
    assert lines == [("markers", "gpu")]
