"""difftest calibrate: k_needed measured over correct kernels sits below the default k,
and a wrong kernel's k_needed is far above it (so calibrating on it would be visible)."""

from difftest.calibration import collect, quantile, table
from difftest.gates import DEFAULT_K
from tests.kernels_for_tests import RefKernel, WrongDkForLongGqa


def test_correct_kernel_needs_less_than_the_default_k():
    data = collect([RefKernel()], "quick", max_examples=8, seed=0)
    assert {out for _, out in data} >= {"o", "dq", "dk", "dv"}
    for (dtype, out), xs in data.items():
        assert max(xs) < DEFAULT_K[out], (dtype, out, max(xs))
    assert "float32" in table(data) and "p99" in table(data)


def test_wrong_kernel_needs_a_huge_k():
    data = collect([WrongDkForLongGqa()], "ci", max_examples=40, seed=0)
    worst = max(x for (dt, out), xs in data.items() if out == "dk" for x in xs)
    assert worst > 10 * DEFAULT_K["dk"]
    assert quantile([1, 2, 3, 4], 0.5) == 2 and quantile([5], 0.99) == 5
