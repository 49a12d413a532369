"""The FP8 tensor-core accumulator model (oracles/tensor_core.py) and the FP8 yardstick built on it:
cuDNN's FP8 LSE on the H200 is off the float32 yardstick by the hardware's accumulator, not a bug
(results/fp8.md), so a kernel that adds like Hopper's FP8 MMA must pass and the mutants must not."""

import pytest
import torch

from difftest.judge.runner import RunConfig, run_case
from difftest.kernels.variants import VARIANTS
from difftest.model.problem import Problem
from difftest.oracles import TENSOR_CORE_NOTE
from difftest.oracles import tensor_core as tc
from difftest.oracles.tensor_core import mma_matmul
from difftest.vocab import Status

F32, F64 = torch.float32, torch.float64


def fp8_operands(m, k, n, seed=0, scale=3.0):
    g = torch.Generator().manual_seed(seed)
    a = (torch.randn(m, k, generator=g) * scale).to(torch.float8_e4m3fn).float()
    b = (torch.randn(k, n, generator=g) * scale).to(torch.float8_e4m3fn).float()
    return a, b


def test_one_step_cuts_below_the_largest_terms_quantum():
    a = torch.tensor([[1.0, 2.0**-14, 2.0**-14]])
    b = torch.ones(3, 1)
    # 13 fraction bits below the leading 1: the quantum is 2^-13, each 2^-14 is cut to 0
    assert mma_matmul(a, b, group=32, frac_bits=13).item() == 1.0
    assert mma_matmul(a, b, group=32, frac_bits=14).item() == 1.0 + 2.0**-13
    # cut toward zero, not rounded: 3 x 0.75 quanta make 0, where a sum would round to 2
    a = torch.tensor([[1.0, 0.75 * 2.0**-13, 0.75 * 2.0**-13, 0.75 * 2.0**-13]])
    assert mma_matmul(a, torch.ones(4, 1), frac_bits=13).item() == 1.0


def test_the_accumulator_is_cut_again_at_every_step():
    # one step of 2 products per group: the second step aligns to the accumulator's 1.0
    a = torch.tensor([[1.0, 0.0, 2.0**-15, 2.0**-15]])
    assert mma_matmul(a, torch.ones(4, 1), group=2, frac_bits=13).item() == 1.0
    assert mma_matmul(a, torch.ones(4, 1), group=4, frac_bits=13).item() == 1.0
    assert mma_matmul(a, torch.ones(4, 1), group=4, frac_bits=16).item() == 1.0 + 2.0**-14


def test_enough_bits_is_the_exact_product():
    a, b = fp8_operands(24, 160, 40)
    assert torch.equal(mma_matmul(a.double(), b.double(), frac_bits=52), a.double() @ b.double())


def test_float32_and_float64_agree_and_chunks_change_nothing(monkeypatch):
    a, b = fp8_operands(3 * 40, 96, 24, seed=1)
    a = a.view(3, 40, 96)
    whole = mma_matmul(a, b)
    assert whole.dtype == F32 and torch.equal(whole.double(), mma_matmul(a.double(), b.double()))
    monkeypatch.setattr(tc, "MAX_ELEMS", 32 * 24 * 3 * 7)  # seven rows a chunk
    assert torch.equal(mma_matmul(a, b), whole)


def test_error_is_hopper_sized_and_truncation_shrinks_positive_sums():
    a, b = fp8_operands(64, 128, 64, seed=2)
    a, b = a.abs(), b.abs()
    exact = a.double() @ b.double()
    got = mma_matmul(a, b).double()
    rel = (exact - got) / exact
    assert (rel >= 0).all() and (rel > 0).any()  # never above a positive sum: cut toward zero
    # each of 4 steps cuts at most 33 terms by one quantum, 2^-13 of a term at most the sum
    assert rel.max() <= 4 * 33 * 2.0**-13 and rel.max() > 2.0**-20  # not float32's 2^-24


def test_tiny_values_stay_finite():
    a, b = fp8_operands(8, 64, 8, seed=3)
    got = mma_matmul(a * 2.0**-70, b * 2.0**-70)
    assert torch.isfinite(got).all()


@pytest.mark.parametrize("dtype", [torch.float8_e4m3fn, torch.float8_e5m2])
@pytest.mark.parametrize("wide", [F32, F64])
def test_the_integer_cut_is_truncs_bits(monkeypatch, dtype, wide):
    # the fast path converts aligned terms to integers; it must give torch.trunc's bits exactly,
    # over exponents from tiny to large, zeros, and K that ends mid-step
    g = torch.Generator().manual_seed(7)
    a = (torch.randn(3, 20, 77, generator=g) * 8).to(dtype).to(wide)
    b = (torch.randn(3, 77, 9, generator=g) * 8).to(dtype).to(wide)
    a = a * torch.ldexp(torch.ones(1, 20, 1, dtype=wide), torch.randint(-60, 60, (1, 20, 1), generator=g))
    a[:, 3] = 0
    b[:, 5:40] = 0
    fast = mma_matmul(a, b)
    monkeypatch.setattr(tc, "_cutter", lambda *args: torch.trunc)
    assert torch.equal(fast, mma_matmul(a, b))


def test_non_finite_operands_take_truncs_path():
    a, b = fp8_operands(4, 40, 3, seed=8)
    a[1, 7] = float("inf")
    b[2, 0] = float("nan")
    got = mma_matmul(a, b)
    assert torch.isinf(got[1, 0]) or torch.isnan(got[1, 0])
    assert torch.isnan(got[:, 0]).any() and torch.isfinite(got[0, 1:]).all()


# ------------------------------------------------------------------ the FP8 yardstick and the variant
SK1 = Problem(seqlen_q=2, seqlen_k=1, head_dim_qk=128, head_dim_v=128, dtype="float8_e4m3fn")


def test_a_kernel_adding_like_hoppers_fp8_mma_passes_and_says_why():
    # the cuDNN FP8 campaign's shrunk reproducer: LSE off 4.0e-4 and dK 9.8e-4 where the truth is 0,
    # as on the H200 (results/fp8.md); against the float32 yardstick alone it failed LSE at ratio ~30
    r = run_case(VARIANTS["fp8-tensor-core-accumulator"].factory(), SK1, RunConfig())
    assert r.status == Status.PASSED, [v.message for v in r.verdicts if not v.passed]
    assert TENSOR_CORE_NOTE in r.notes
    lse = next(v for v in r.verdicts if v.output == "lse" and v.gate == "budget")
    assert lse.numbers["ref_err"] > 1e-4  # the hardware-sized yardstick, not float32's ~1e-7


def test_the_second_yardstick_is_built_only_where_a_budget_fails():
    r = run_case(VARIANTS["fp8-current-scaling"].factory(), SK1, RunConfig())
    assert r.status == Status.PASSED and TENSOR_CORE_NOTE not in r.notes


@pytest.mark.parametrize(
    "p",
    [
        Problem(seqlen_q=40, seqlen_k=70, heads_q=4, heads_kv=2, causal=True, dtype="float8_e4m3fn", seed=4),
        Problem(batch=2, seqlen_q=(9, 30), seqlen_k=(17, 0), sinks=True, pad_tail=3, dtype="float8_e5m2", seed=5),
    ],
    ids=["causal-gqa", "e5m2-varlen-sinks"],
)
def test_the_tensor_core_variant_passes(p):
    r = run_case(VARIANTS["fp8-tensor-core-accumulator"].factory(), p, RunConfig())
    assert r.status == Status.PASSED, [v.message for v in r.verdicts if not v.passed]
