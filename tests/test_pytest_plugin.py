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
    sub.makepyfile(test_k="""
        def test_good(difftest_campaign):
            r = difftest_campaign("tests.kernels_for_tests:RefKernel", max_examples=5, edge_cases=False, database=None)
            assert r.status == "passed"

        def test_bad(difftest_campaign):
            difftest_campaign("tests.kernels_for_tests:WrongDkForLongGqa", max_examples=40, edge_cases=False,
                              database=None)
    """)
    res = sub.runpytest_subprocess("--difftest-profile", "quick",
                                   "--difftest-out", str(sub.path / "out"), timeout=600)
    res.assert_outcomes(passed=1, failed=1)
    out = res.stdout.str()
    assert "dk: budget FAILED" in out and "reproducer:" in out
    assert "difftest campaigns" in out and "test-dk-long-gqa [quick]: failed" in out


def test_gpu_marker_skips_without_cuda(sub):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA: the marker would not skip")
    sub.makepyfile(test_g="""
        import pytest

        @pytest.mark.gpu
        def test_needs_gpu():
            raise AssertionError("must not run without CUDA")
    """)
    res = sub.runpytest_subprocess(timeout=300)
    res.assert_outcomes(skipped=1)


def test_one_gpu_per_xdist_worker():
    assert worker_gpu("gw0", ["0", "1"]) == "0"
    assert worker_gpu("gw1", ["0", "1"]) == "1"
    assert worker_gpu("gw2", ["0", "1"]) == "0"
    assert worker_gpu("gw1", ["3", "5"]) == "5"
    assert worker_gpu("master", ["0"]) is None and worker_gpu("gw0", []) is None
